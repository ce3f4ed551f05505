"""Run strategies over a judged dataset and score them.

:func:`evaluate` is the whole loop: make sure the dataset is indexed (:func:`ensure_index`:
built once under a prefix of its own, e.g. ``qasper-validation-chunks``, and reused while the
aliases exist -- nothing is re-embedded), embed every question once through the cached
embedder, then for each strategy and query build the request with the strategy registry
(``querybuilder.registry``: ``Strategy.eval_searcher``, exactly what ``scholar-es search``
sends) and time the search calls alone: ``es.search`` for the one-request strategies, one
``es.msearch`` plus the client-side fusion for ``rrf-client``, the ``_msearch`` and the
re-scoring search for ``multisection``. Embedding, routing through heads and request building
are not in the latency.

Evaluation settings that differ from interactive search:

* ``size`` = 100 hits (Recall@100 needs them) and ``_source`` limited to the ids the
  scoring needs (``chunk_id``, ``paper_id``, ``paragraph_ids``);
* the profile's ``per_paper_cap`` is set to 0 (no cap): the cap is a presentation choice
  (at most N chunks of one paper on a results page) that would cut a ``--scope paper`` run
  to N hits and decide chunk-level metrics by itself. Everything that ranks (boosts,
  multipliers, weights, saturation, kNN sizes) is the profile's.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scholar_es.errors import ConfigError, ScholarEsError, choices
from scholar_es.evaluation.datasets import Dataset
from scholar_es.evaluation.metrics import (
    RUN_DEPTH,
    latency_percentiles,
    mean_scores,
    paper_ranking,
    paragraph_ranking,
    score_rankings,
)

SCOPES = {"corpus": "search every indexed chunk", "paper": "search only the question's own paper (QASPER)"}
#: what the scoring reads from each hit
ID_FIELDS = ["chunk_id", "paper_id", "paragraph_ids"]
#: questions embedded per model call
EMBED_BATCH = 64

#: ``(query, filters) -> (hits, seconds)``: a search under test, for callers that bring their own
#: (hits are dicts with ``chunk_id``, ``paper_id`` and optionally ``paragraph_ids``)
SearchFn = Callable[[str, dict | None], tuple[list[dict], float]]


@dataclass
class StrategyRun:
    """One strategy over the dataset's queries."""

    strategy: str
    rankings: dict[str, list[str]]  # query id -> judged-level ids, best first
    latencies_ms: list[float]
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> query id -> score
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class IndexInfo:
    prefix: str
    built: bool
    seconds: float
    chunks: int
    papers: int
    rejected: int = 0


@dataclass
class Evaluation:
    dataset: Dataset
    scope: str
    profile: str
    index: IndexInfo
    runs: dict[str, StrategyRun]
    seconds: float = 0.0

    @property
    def metrics(self) -> dict[str, dict[str, float]]:
        return {name: run.metrics for name, run in self.runs.items()}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the index ---------------------------------------------------------------------------------
def index_exists(es, prefix: str) -> bool:
    return all(es.indices.exists_alias(name=f"{prefix}{kind}") for kind in ("papers", "chunks"))


def _count(es, index: str) -> int:
    return int(es.count(index=index).body["count"])


def index_prefix(dataset: Dataset, chunking: str = "paragraph") -> str:
    """``qasper-validation-``, ``scifact-``; window chunking gets its own: ``qasper-validation-window-``."""
    return dataset.default_prefix + ("" if chunking == "paragraph" else f"{chunking}-")


def ensure_index(
    es,
    dataset: Dataset,
    embedder,
    *,
    prefix: str | None = None,
    chunking: str = "paragraph",
    progress: bool = True,
) -> IndexInfo:
    """Index the dataset's corpus under ``prefix`` unless its aliases exist (then reuse it)."""
    from indexer.chunker import CHUNKING_MODES
    from indexer.pipeline import IndexRun

    if chunking not in CHUNKING_MODES:
        raise ConfigError(f"unknown chunking {chunking!r}; use one of {choices(CHUNKING_MODES)}")
    prefix = index_prefix(dataset, chunking) if prefix is None else prefix
    start = time.perf_counter()
    if index_exists(es, prefix):
        from querybuilder.run import check_model, index_meta

        meta = index_meta(es, f"{prefix}chunks")
        check_model(meta, model=embedder.name)
        if meta.get("chunking") not in (None, chunking):
            raise ConfigError(
                f"index {prefix}chunks was built with {meta['chunking']!r} chunking, not "
                f"{chunking!r}; use another prefix or the same chunking"
            )
        info = IndexInfo(
            prefix=prefix,
            built=False,
            seconds=time.perf_counter() - start,
            chunks=_count(es, f"{prefix}chunks"),
            papers=_count(es, f"{prefix}papers"),
        )
        if progress:
            _log(f"reusing index {prefix}chunks ({info.chunks} chunks, {info.papers} papers)")
        if (
            dataset.format == "beir"
            and dataset.corpus_size is not None
            and info.papers != dataset.corpus_size
        ):
            _log(
                f"warning: {prefix}papers holds {info.papers} papers but {dataset.corpus} has "
                f"{dataset.corpus_size}; delete the index (or use another prefix) to rebuild it"
            )
        return info
    from tqdm import tqdm

    from indexer.pipeline import count_records

    if progress:
        _log(f"indexing {dataset.corpus} into {prefix}papers / {prefix}chunks (embedding once; cached)")
        _log(f"loading the embedding model {embedder.name} (up to a minute the first time) ...")
    embedder.dims  # noqa: B018 - loads the model now, so the bar below measures indexing alone
    bar = tqdm(
        total=count_records([dataset.corpus]),
        unit=" papers",
        file=sys.stderr,
        disable=None if progress else True,
        dynamic_ncols=True,
    )
    run = None

    def on_progress(papers: int, chunks: int) -> None:
        bar.update(papers + (run.summary.rejected if run else 0) - bar.n)
        bar.set_postfix(chunks=chunks, refresh=False)

    def on_error(message: str) -> None:
        bar.clear()
        _log(f"rejected: {message}")

    run = IndexRun(es, embedder, prefix=prefix, chunking=chunking, on_progress=on_progress, on_error=on_error)
    summary = run.run([dataset.corpus], dataset.format)
    bar.close()
    if progress:
        _log(summary.line())
    return IndexInfo(
        prefix=prefix,
        built=True,
        seconds=summary.seconds,
        chunks=summary.chunks,
        papers=summary.papers,
        rejected=summary.rejected,
    )


# --- running strategies ------------------------------------------------------------------------
def _filters(dataset: Dataset, query, scope: str) -> dict | None:
    return {"paper_ids": [query.paper_id]} if scope == "paper" else None


def _ranking(dataset: Dataset, hits: list[dict], judged) -> list[str]:
    if dataset.level == "paper":
        return paper_ranking(str(h.get("paper_id")) for h in hits)
    return paragraph_ranking(
        ((str(h.get("chunk_id")), h.get("paragraph_ids") or [str(h.get("chunk_id"))]) for h in hits), judged
    )


def make_searcher(
    es,
    strategy: str,
    profile,
    prefix: str,
    vectors: dict[str, np.ndarray],
    size: int = RUN_DEPTH,
    *,
    embedder=None,
    heads=None,
) -> SearchFn:
    """The registry's timed search for ``strategy`` (``Strategy.eval_searcher``): the request
    ``scholar-es search`` sends, with ``_source`` cut to :data:`ID_FIELDS`, through ``es``."""
    from querybuilder.registry import EvalContext, get

    ctx = EvalContext(
        es=es,
        profile=profile,
        prefix=prefix,
        vectors=vectors,
        embedder=embedder,
        heads=heads,
        size=size,
        fields=tuple(ID_FIELDS),
    )
    return get(strategy).eval_searcher(ctx)


def run_queries(
    dataset: Dataset, search: SearchFn, *, scope: str = "corpus", label: str = "", progress: bool = True
) -> StrategyRun:
    """Every query of ``dataset`` through ``search``; rankings at the dataset's level, scored."""
    from tqdm import tqdm

    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    for q in tqdm(
        dataset.queries,
        desc=label or "queries",
        unit=" q",
        file=sys.stderr,
        disable=None if progress else True,
        dynamic_ncols=True,
        leave=False,
    ):
        try:
            hits, seconds = search(q.text, _filters(dataset, q, scope))
        except ScholarEsError as e:
            raise type(e)(f"{label or 'search'} failed on query {q.id!r}: {e}") from None
        latencies.append(seconds * 1000.0)
        rankings[q.id] = _ranking(dataset, hits, dataset.qrels.get(q.id, {}))
    run = StrategyRun(strategy=label, rankings=rankings, latencies_ms=latencies)
    run.per_query = score_rankings(dataset.qrels, rankings)
    run.metrics = {**mean_scores(run.per_query), **latency_percentiles(latencies)}
    return run


def embed_questions(dataset: Dataset, embedder, progress: bool = True) -> dict[str, np.ndarray]:
    """cleaned question -> vector, for every query (served from the embedder's cache when warm)."""
    from tqdm import tqdm

    from querybuilder.plan import clean_question

    texts = list(dict.fromkeys(clean_question(q.text)[0] for q in dataset.queries))
    vectors: dict[str, np.ndarray] = {}
    with tqdm(
        total=len(texts),
        desc="embedding questions",
        unit=" q",
        file=sys.stderr,
        disable=None if progress else True,
        dynamic_ncols=True,
        leave=False,
    ) as bar:
        for start in range(0, len(texts), EMBED_BATCH):
            part = texts[start : start + EMBED_BATCH]
            vectors.update(zip(part, embedder.encode(part), strict=True))
            bar.update(len(part))
    return vectors


def check_options(dataset: Dataset, strategies: Sequence[str], scope: str, heads=None) -> list[str]:
    """The strategy names (each looked up in the registry, once), after checking the scope and
    that ``heads`` goes with a strategy that uses heads."""
    from querybuilder.registry import get

    if scope not in SCOPES:
        raise ConfigError(f"unknown --scope {scope!r}; use one of {choices(SCOPES)}")
    if scope == "paper" and any(q.paper_id is None for q in dataset.queries):
        raise ConfigError(
            f"--scope paper needs queries that name their paper (qasper); {dataset.name} is "
            f"{dataset.format}: use --scope corpus"
        )
    names = list(dict.fromkeys(s.strip() for s in strategies if s.strip()))
    if not names:
        raise ConfigError("no strategy given; pass e.g. --strategy bm25,dense,hybrid")
    found = [get(s) for s in names]
    if heads and not any("heads" in s.takes for s in found):
        found[0].check_options(heads=heads)  # names the strategies that take --heads
    return names


def eval_profile(profile):
    """The profile used for evaluation: the given one with the per-paper cap off (module doc)."""
    from querybuilder.profiles import Profile, load_profile

    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    return prof if prof.per_paper_cap == 0 else prof.with_changes(per_paper_cap=0)


def run_evaluation(
    dataset: Dataset,
    strategies: Sequence[str],
    es,
    embedder,
    *,
    scope: str = "corpus",
    limit: int | None = None,
    profile=None,
    prefix: str | None = None,
    progress: bool = True,
    chunking: str = "paragraph",
    vectors: dict[str, np.ndarray] | None = None,
    heads=None,
) -> Evaluation:
    """:func:`evaluate` with everything kept: per-query scores, rankings, latencies, index info.

    ``heads``: the heads (a name or a ``Heads``) of the strategies that use them
    (``multihead``, ``multihead-hybrid``; default: the heads named ``default``)."""
    from querybuilder.registry import get

    start = time.perf_counter()
    names = check_options(dataset, strategies, scope, heads)
    data = dataset.limited(limit)
    prof = eval_profile(profile)
    info = ensure_index(es, data, embedder, prefix=prefix, chunking=chunking, progress=progress)
    if vectors is None and any(get(s).needs.vector for s in names):
        vectors = embed_questions(data, embedder, progress=progress)
    # every searcher first: missing heads fail before any strategy has run
    searchers = {
        name: make_searcher(es, name, prof, info.prefix, vectors or {}, embedder=embedder, heads=heads)
        for name in names
    }
    runs: dict[str, StrategyRun] = {}
    for name, search in searchers.items():
        runs[name] = run_queries(data, search, scope=scope, label=name, progress=progress)
        runs[name].strategy = name
        m = runs[name].metrics
        if progress:
            _log(
                f"{name}: nDCG@10 {m['ndcg@10']:.4f}  MRR@10 {m['mrr@10']:.4f}  P@3 {m['p@3']:.4f}  "
                f"R@100 {m['recall@100']:.4f}  p50 {m['latency_p50_ms']:.1f} ms"
            )
    return Evaluation(
        dataset=data,
        scope=scope,
        profile=prof.name,
        index=info,
        runs=runs,
        seconds=time.perf_counter() - start,
    )


def evaluate(
    dataset: Dataset, strategies: Sequence[str], es, embedder, **options: Any
) -> dict[str, dict[str, float]]:
    """``{strategy: {metric: value}}`` for ``strategies`` on ``dataset`` (see the module doc);
    ``options``: the keywords of :func:`run_evaluation`.

    ``profile``: a :class:`~querybuilder.profiles.Profile`, a built-in name or a JSON file
    (None: default). ``prefix``: the index alias prefix (None: the dataset's own, e.g.
    ``qasper-validation-``). ``limit``: the first N judged queries only.
    """
    return run_evaluation(dataset, strategies, es, embedder, **options).metrics
