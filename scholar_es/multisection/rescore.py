"""Stage 4: re-score the candidates against the ORIGINAL question, inside Elasticsearch.

One more search on ``<prefix>chunks``: the original question's ``hybrid`` query (built by
``querybuilder.dsl.hybrid_query`` from ``make_plan(question, strategy="hybrid")``: saturated
BM25 with the question's own search type, plus kNN), with one more filter,
``terms: {chunk_id: [candidates]}``, both in the knn clause's own ``filter`` (Elasticsearch
pre-filters a kNN search only with the clause's own filter; a ``bool.filter`` beside it
post-filters the top k) and in the bool's filters (for the text part). With the ids as
pre-filter and ``k`` at least the number of candidates, EVERY candidate gets its vector
similarity (a smaller ``k``, or a post-filter, would leave some without a kNN score). Filters do not change BM25
statistics, so each candidate's score is exactly the score the question's hybrid query gives
it over the whole index (with a ``k`` that reaches it); the final order is the hybrid order of
the candidates. ``size`` = the number of candidates: all come back, best first.

Optional: a sentence-transformers ``CrossEncoder`` named by the user re-orders the candidates
by its score for (question, section heading + chunk text); its scores replace the hybrid
scores. No cross-encoder is ever loaded unless one is named.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from elasticsearch.dsl import Q, Search
from elasticsearch.dsl.query import Query

from querybuilder.dsl import SOURCE_FIELDS, as_query_vector, hybrid_query
from querybuilder.plan import MAX_RESULT_WINDOW, QueryPlan
from querybuilder.request import SearchRequest
from querybuilder.strategies import make_plan
from scholar_es.errors import ConfigError


@dataclass
class Scored:
    """A candidate after re-scoring: its source fields and its final score."""

    chunk_id: str
    paper_id: str
    score: float
    source: dict
    hybrid_score: float
    crossencoder_score: float | None = None
    found_by: dict[str, int] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return str(self.source.get("chunk_text") or "")


def question_plan(request: SearchRequest, n: int) -> QueryPlan:
    """The hybrid plan of ``request``'s question (under its profile, prefix and filters), sized for
    ``n`` candidates (no per-paper cap)."""
    size = min(max(n, 1), MAX_RESULT_WINDOW)
    sub = request.replace(size=size, papers=False, search_type=None)
    return make_plan(sub, strategy="hybrid").with_changes(cap=0, collapse=False)


def restricted_query(
    plan: QueryPlan, vector: Sequence[float] | np.ndarray, chunk_ids: Sequence[str]
) -> Query:
    """The question's hybrid query with ``terms: {chunk_id: ids}`` added to the knn clause's own
    ``filter`` (its pre-filter) and to the bool's filters (for the text part)."""
    hybrid = hybrid_query(plan, as_query_vector(vector)).to_dict()["bool"]
    ids = {"terms": {"chunk_id": list(chunk_ids)}}
    should = []
    for clause in hybrid["should"]:
        if "knn" in clause:
            knn = dict(clause["knn"])
            own = knn.get("filter") or []
            knn["filter"] = [*(own if isinstance(own, list) else [own]), ids]
            clause = {"knn": knn}
        should.append(Q(clause))
    return Q(
        "bool",
        should=should,
        filter=[*(Q(f) for f in hybrid.get("filter", [])), Q(ids)],
        minimum_should_match=1,
    )


def rescore_search(plan: QueryPlan, vector: Sequence[float] | np.ndarray, chunk_ids: Sequence[str]) -> Search:
    if len(chunk_ids) > MAX_RESULT_WINDOW:
        raise ConfigError(
            f"{len(chunk_ids)} candidates exceed the result window of {MAX_RESULT_WINDOW}; lower "
            "per_section or keyword_size"
        )
    return (
        Search(index=plan.index)
        .query(restricted_query(plan, vector, chunk_ids))
        .extra(size=max(len(chunk_ids), 1))
        .source(list(SOURCE_FIELDS))
    )


def run_rescore(
    es, index: str, search: Search, found_by: dict[str, dict[str, int]] | None = None
) -> tuple[list[Scored], int]:
    """(candidates in the engine's order with their hybrid scores, took ms)."""
    resp = es.search(index=index, body=search.to_dict())
    body = resp.body if hasattr(resp, "body") else resp
    out = []
    for raw in body["hits"]["hits"]:
        src = raw.get("_source") or {}
        chunk_id = str(src.get("chunk_id") or raw.get("_id"))
        score = float(raw.get("_score") or 0.0)
        out.append(
            Scored(
                chunk_id,
                str(src.get("paper_id", "")),
                score,
                src,
                score,
                found_by=dict((found_by or {}).get(chunk_id, {})),
            )
        )
    return out, int(body.get("took", 0))


# --- optional cross-encoder ---------------------------------------------------------------------
def load_crossencoder(spec):
    """A model with ``predict(pairs)``: ``spec`` itself when it has one, else
    ``sentence_transformers.CrossEncoder(spec)`` (a model name or a local directory)."""
    if hasattr(spec, "predict"):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"crossencoder must be a model name, a local model directory or an object with "
            f"predict(pairs), got {spec!r}"
        )
    return _load_named(spec)


@functools.lru_cache(maxsize=2)
def _load_named(spec: str):
    """A named cross-encoder, loaded once per process (a service calls the flow many times)."""
    try:
        from sentence_transformers import CrossEncoder

        return CrossEncoder(spec, device="cpu")
    except (OSError, ValueError, RuntimeError) as e:
        raise ConfigError(
            f"cannot load cross-encoder {spec!r}: {e}. Name a local model directory or a model "
            "that is in the local Hugging Face cache (no network is used when offline)"
        ) from None


def pair_text(s: Scored) -> str:
    heading = str(s.source.get("section_heading") or "")
    return f"{heading}\n{s.text}" if heading else s.text


def crossencoder_rerank(model, question: str, scored: list[Scored]) -> tuple[list[Scored], float]:
    """``scored`` ordered by the cross-encoder's score (ties: the hybrid order); (list, seconds)."""
    if not scored:
        return scored, 0.0
    start = time.perf_counter()
    raw = model.predict([(question, pair_text(s)) for s in scored])
    scores = np.asarray(raw, dtype=np.float64).reshape(len(scored), -1)
    if scores.shape[1] != 1:
        raise ConfigError(
            f"the cross-encoder gives {scores.shape[1]} scores per pair; use a model with one "
            "relevance score (num_labels=1)"
        )
    for s, v in zip(scored, scores[:, 0], strict=True):
        s.crossencoder_score = float(v)
        s.score = float(v)
    order = sorted(range(len(scored)), key=lambda i: (-scored[i].score, i))
    return [scored[i] for i in order], time.perf_counter() - start
