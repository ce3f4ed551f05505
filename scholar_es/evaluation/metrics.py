"""Ranking metrics (trec_eval's own code, through ``ir-measures``' pytrec_eval) and latency percentiles.

Metric names (:data:`METRICS`, :data:`LATENCY_METRICS`) are the keys of every result dict and
of the JSON report: ``ndcg@10, mrr@10, p@1, p@3, p@10, recall@10, recall@100, latency_p50_ms,
latency_p95_ms``. Definitions (trec_eval's; ranx's are the same):

* ``ndcg@10``: DCG@10 / ideal DCG@10 with gain = relevance and discount log2(rank + 1)
  (Järvelin & Kekäläinen; trec_eval's and BEIR's ``ndcg_cut_10``);
* ``mrr@10``: 1 / rank of the first relevant hit in the top 10 (0 if none; MS MARCO's
  evaluation code, as trec_eval's recip_rank has no cut-off);
* ``p@k``: relevant hits in the top k / k (k, not the number of hits returned);
* ``recall@k``: relevant hits in the top k / relevant documents judged.

Every judged query counts in every mean: a query whose search returned nothing scores 0 on all
metrics (trec_eval itself would leave the query out of the run's mean).

Why trec_eval and not ranx: ranx's metrics are numba functions compiled on first use (about
40-60 s of CPU in every fresh environment); pytrec_eval is compiled C. Both give bit-identical
values on our runs (scores strictly decreasing, so neither breaks ties its own way): checked on
10,500 per-query values, binary and graded (``bench/metrics_trec_eval_vs_ranx.py``).

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
#: our names -> ir-measures' (trec_eval's ndcg_cut_10, recip_rank over the top 10, P_k, recall_k)
TREC_NAMES: dict[str, str] = {
    "ndcg@10": "nDCG@10",
    "mrr@10": "RR@10",
    "p@1": "P@1",
    "p@3": "P@3",
    "p@10": "P@10",
    "recall@10": "R@10",
    "recall@100": "R@100",
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
    import ir_measures

    unknown = [m for m in metrics if m not in TREC_NAMES]
    if unknown:
        raise ConfigError(f"unknown metric {unknown[0]!r}; valid metrics: {', '.join(TREC_NAMES)}")
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
    # strictly decreasing scores keep our rank order (trec_eval breaks ties by doc id)
    run = {q: {d: float(len(ranked[q]) - i) for i, d in enumerate(ranked[q])} for q in scored}
    ours = {ir_measures.parse_measure(TREC_NAMES[m]): m for m in metrics}
    qrels_scored = {q: judged[q] for q in scored}
    # pytrec_eval has no cut-off for recip_rank: RR@10 is MS MARCO's own evaluation code's
    trec = [m for m in ours if ir_measures.pytrec_eval.supports(m)]
    marco = [m for m in ours if m not in trec]
    for provider, measures in ((ir_measures.pytrec_eval, trec), (ir_measures.msmarco, marco)):
        if measures:
            for found in provider.evaluator(measures, qrels_scored).iter_calc(run):
                out[ours[found.measure]][found.query_id] = float(found.value)
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
