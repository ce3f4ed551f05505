"""Ranking metrics (via ``ranx``) and latency percentiles.

Metric names (:data:`METRICS`, :data:`LATENCY_METRICS`) are the keys of every result dict and
of the JSON report: ``ndcg@10, mrr@10, p@1, p@3, p@10, recall@10, recall@100, latency_p50_ms,
latency_p95_ms``. Definitions (ranx's, which are trec_eval's):

* ``ndcg@10``: DCG@10 / ideal DCG@10 with gain = relevance and discount log2(rank + 1)
  (Järvelin & Kekäläinen; trec_eval's and BEIR's ``ndcg_cut_10``);
* ``mrr@10``: 1 / rank of the first relevant hit in the top 10 (0 if none);
* ``p@k``: relevant hits in the top k / k (k, not the number of hits returned);
* ``recall@k``: relevant hits in the top k / relevant documents judged.

Every judged query counts in every mean: a query whose search returned nothing scores 0 on all
metrics (ranx itself would refuse such a run, or drop the query with ``make_comparable``).

A ranking handed to :func:`score_rankings` is a list of document ids, best first. How hits
become those ids depends on the dataset's level:

* paper level (BEIR): :func:`paper_ranking`, the paper of each chunk, first occurrence kept;
* paragraph level (QASPER): :func:`paragraph_ranking`. In paragraph chunking a chunk IS a
  paragraph (chunk id = paragraph id). In window chunking a chunk covers several paragraphs:
  a chunk counts as relevant when it covers a judged paragraph that no higher-ranked chunk
  has already been credited with, and it then stands for that paragraph (the first such one
  in reading order); otherwise it stands for itself (its chunk id, never judged). So each
  rank holds one id, a judged paragraph is credited at most once (overlapping windows do not
  count it twice), and a window covering two judged paragraphs is one relevant hit.

Latency: :func:`latency_percentiles`, p50 and p95 in milliseconds with linear interpolation
between order statistics (numpy's default ``percentile``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np

from scholar_es.errors import ConfigError

METRICS: tuple[str, ...] = ("ndcg@10", "mrr@10", "p@1", "p@3", "p@10", "recall@10", "recall@100")
LATENCY_METRICS: tuple[str, ...] = ("latency_p50_ms", "latency_p95_ms")
ALL_METRICS: tuple[str, ...] = METRICS + LATENCY_METRICS
#: our names -> ranx's
RANX_NAMES: dict[str, str] = {
    "ndcg@10": "ndcg@10",
    "mrr@10": "mrr@10",
    "p@1": "precision@1",
    "p@3": "precision@3",
    "p@10": "precision@10",
    "recall@10": "recall@10",
    "recall@100": "recall@100",
}
#: hits retrieved per query: the deepest cut-off of :data:`METRICS`
RUN_DEPTH = 100


def paper_ranking(paper_ids: Iterable[str]) -> list[str]:
    """Papers in hit order, each at its best rank."""
    return list(dict.fromkeys(paper_ids))


def paragraph_ranking(hits: Iterable[tuple[str, Sequence[str]]], judged: Collection[str]) -> list[str]:
    """``(chunk id, paragraph ids)`` hits -> one id per rank (see the module doc)."""
    credited: set[str] = set()
    out: list[str] = []
    for chunk_id, paragraphs in hits:
        new = next((p for p in paragraphs if p in judged and p not in credited), None)
        if new is not None:
            credited.add(new)
            out.append(new)
        else:
            out.append(chunk_id)
    return list(dict.fromkeys(out))  # a chunk id met twice (a duplicate hit) counts once


def score_rankings(
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[str, Sequence[str]],
    metrics: Sequence[str] = METRICS,
    depth: int = RUN_DEPTH,
) -> dict[str, dict[str, float]]:
    """Per-query scores ``{metric: {query id: score}}`` for every query of ``qrels``.

    ``rankings`` maps query ids to document ids, best first (cut at ``depth``); a query of
    ``qrels`` missing from ``rankings`` or with an empty ranking scores 0. Queries of
    ``rankings`` without judgments are ignored (they have no relevant documents to find).
    """
    from ranx import Qrels, Run, evaluate

    unknown = [m for m in metrics if m not in RANX_NAMES]
    if unknown:
        raise ConfigError(f"unknown metric {unknown[0]!r}; valid metrics: {', '.join(RANX_NAMES)}")
    judged = {q: {d: int(r) for d, r in docs.items() if r > 0} for q, docs in qrels.items()}
    empty = [q for q, docs in judged.items() if not docs]
    if empty:
        raise ConfigError(
            f"query {empty[0]!r} has no relevant judgment; skip such queries before scoring "
            f"({len(empty)} in all)"
        )
    out: dict[str, dict[str, float]] = {m: dict.fromkeys(judged, 0.0) for m in metrics}
    ranked = {q: list(dict.fromkeys(rankings.get(q) or ()))[:depth] for q in judged}
    scored = [q for q, docs in ranked.items() if docs]
    if not scored:
        return out
    # strictly decreasing scores keep our rank order whatever ranx does with ties
    run = Run({q: {d: float(len(ranked[q]) - i) for i, d in enumerate(ranked[q])} for q in scored})
    qr = Qrels({q: judged[q] for q in scored})
    evaluate(qr, run, [RANX_NAMES[m] for m in metrics], threads=1, save_results_in_run=True)
    for m in metrics:
        for q, v in run.scores[RANX_NAMES[m]].items():
            out[m][q] = float(v)
    return out


def mean_scores(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over all its queries."""
    return {m: float(np.mean(list(v.values()))) if v else 0.0 for m, v in per_query.items()}


def latency_percentiles(latencies_ms: Sequence[float]) -> dict[str, float]:
    if len(latencies_ms) == 0:
        return {"latency_p50_ms": 0.0, "latency_p95_ms": 0.0}
    p50, p95 = np.percentile(np.asarray(latencies_ms, dtype=float), [50, 95])
    return {"latency_p50_ms": float(p50), "latency_p95_ms": float(p95)}


def evaluate_rankings(
    qrels: Mapping[str, Mapping[str, int]],
    rankings: Mapping[str, Sequence[str]],
    latencies_ms: Sequence[float] = (),
) -> dict[str, float]:
    """All of :data:`ALL_METRICS`: means over the judged queries plus latency percentiles."""
    return {**mean_scores(score_rankings(qrels, rankings)), **latency_percentiles(latencies_ms)}
