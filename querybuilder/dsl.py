"""QueryPlan + query vector -> the pieces of an ``elasticsearch.dsl.Search``.

The pieces every strategy is built from; which pieces a strategy puts together is the strategy's
``build`` (:mod:`querybuilder.strategies`; :func:`querybuilder.strategies.build_search` builds a
plan with its strategy).

Every query is an ``elasticsearch.dsl`` object (``Search``, ``Q``, ``SF``); JSON exists only as
``to_dict()`` output. Builders return new objects and never change their inputs. The
Elasticsearch version each construct needs is noted where it is built (checked against the
reference pages named in the comments; "Basic" = the free default license):

* ``multi_match`` best_fields + ``tie_breaker`` and most_fields, ``bool``, ``term``/``terms``/``range``,
  ``match_none``: all 8.x/9.x.
* ``script_score`` query with the predefined Painless function ``saturation(value, k)`` =
  value / (k + value): 7.x+ (reference/query-dsl-script-score-query.html, "Predefined functions").
* ``knn`` query: 8.12+ (reference/8.12/query-dsl-knn-query.html); its ``k`` parameter 8.15+
  (elastic/elasticsearch#110233, closes #108473). Filters go INTO the knn clause (its ``filter``
  parameter) as well as into ``bool.filter``: Elasticsearch pre-filters a kNN search only with
  the clause's own filter; a ``bool.filter`` beside it post-filters the top k ("Pre-filtering only
  happens when the filter is part of the kNN clause itself", docs/solutions/search/vector/knn/
  filtered-knn-search; auto pre-filtering, elastic/elasticsearch#138989, covers semantic_text
  only), which would leave within-paper searches with no kNN hits at all.
* ``function_score`` with ``filter`` + ``weight`` functions, score_mode ``max``: 7.x+.
* ``rescore`` (query rescorer: ``window_size``, ``query_weight``, ``rescore_query_weight``):
  every version (reference/search/search-your-data/filter-search-results.html#rescore); with
  ``collapse`` 8.15+ (elastic/elasticsearch rest-api-spec ``112_field_collapsing_with_rescore``).
  Its ``script_score`` uses the Painless vector function ``cosineSimilarity(params.query_vector,
  'vector')`` on the dense_vector field (7.6+; reference/query-dsl-script-score-query.html,
  "Vector functions"; an int8_hnsw field keeps its float vectors, which the function reads).
* ``collapse`` on a keyword field with ``inner_hits``: 7.x+ (reference/collapse-search-results.html).
* ``retriever`` with ``rrf``/``standard``/``knn``: 8.14 technical preview, GA 8.16
  (docs/solutions/search/retrievers-overview); RRF needs an Enterprise license.
* ``linear`` retriever with per-retriever ``weight`` and ``normalizer: minmax``: 8.18 / 9.0
  (reference/8.18/retrievers-overview.html, docs/reference/elasticsearch/rest-apis/retrievers/
  linear-retriever); Enterprise license like RRF.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from elasticsearch.dsl import SF, Q, Search
from elasticsearch.dsl.query import Query

from querybuilder.plan import MAX_RESULT_WINDOW, QueryPlan
from scholar_es.errors import ConfigError

VECTOR_FIELD = "vector"
SOURCE_FIELDS = (
    "chunk_id",
    "paper_id",
    "title",
    "section_type",
    "section_heading",
    "chunk_text",
    "year",
    "venue",
    "position",
    "paragraph_ids",
)
INNER_HITS_NAME = "best_chunks"
#: The BM25 part of hybrid, bounded to [0, w): ``w * _score / (_score + k)``.
SATURATION_SCRIPT = "saturation(_score, params.k) * params.w"
#: The text part's weight in the first pass of a rescored hybrid (:func:`window_query`). That pass
#: only picks the rescore window, and with this weight it picks both signals' best: a kNN hit scores
#: at least ``knn_weight * (1 + cos) / 2`` there, a hit the text alone found less than this weight
#: (times the largest section multiplier), so the kNN top k come first (for any cos > -0.99999)
#: and the text-only hits follow in the order of their saturated BM25 score.
WINDOW_TEXT_WEIGHT = 1e-6
#: The vector part of hybrid for a rescored hit: ``w`` x the score a knn query gives a cosine
#: field, ``(1 + cos) / 2`` (reference/mapping-types/dense-vector.html, ``similarity: cosine``).
#: A chunk without a vector scores :data:`MISSING_VECTOR_SCORE` here, as it would outside kNN's
#: top k, instead of failing the whole search: vector functions throw on a document without a
#: value, and the guard is the one the reference gives (query-dsl-script-score-query.html,
#: "Vector functions": ``doc['my_vector'].size() == 0 ? 0 : cosineSimilarity(...)``).
VECTOR_SCRIPT = (
    f"doc['{VECTOR_FIELD}'].size() == 0 ? 0.0 : "
    f"(cosineSimilarity(params.query_vector, '{VECTOR_FIELD}') + 1.0) / 2.0 * params.w"
)
#: The vector part of a chunk that has no vector (see :data:`VECTOR_SCRIPT`).
MISSING_VECTOR_SCORE = 0.0


def as_query_vector(vector: Sequence[float] | np.ndarray) -> list[float]:
    """The vector as a JSON-ready list (shortest float32 spellings); must be 1-D, finite, non-zero."""
    arr = np.asarray(vector, dtype=np.float32)
    if arr.ndim != 1 or arr.size == 0:
        raise ConfigError(f"the query vector must be a flat list of numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ConfigError("the query vector holds NaN or infinite values; check the embedding model")
    if not np.any(arr):
        raise ConfigError(
            "the query vector is all zeros, which cosine similarity cannot score; check the embedding model"
        )
    return [float(str(x)) for x in arr]


def field_list(boosts: dict[str, float]) -> list[str]:
    """``{"title": 3, "chunk_text": 1}`` -> ``["title^3", "chunk_text"]``."""
    return [f if b == 1 else f"{f}^{b:g}" for f, b in boosts.items()]


def text_query(plan: QueryPlan) -> Query:
    """The BM25 part: multi_match on the plan's fields (``best_fields`` with the profile's
    tie_breaker; ``most_fields`` inside one paper, see :func:`querybuilder.plan.text_fields`),
    plus expansions as lower-weight should clauses (all their words in one field); match_none
    without text."""
    if not plan.has_text:
        return Q("match_none")

    def multi_match(query: str, **extra) -> Query:
        params = {"query": query, "fields": field_list(plan.field_boosts), "type": plan.match_type, **extra}
        if plan.match_type == "best_fields":  # most_fields sums; a tie_breaker would override that
            params["tie_breaker"] = plan.profile.tie_breaker
        return Q("multi_match", **params)

    main = multi_match(plan.text)
    if not plan.expansions:
        return main
    extra = [multi_match(e, operator="and", boost=plan.profile.expansion_weight) for e in plan.expansions]
    return Q("bool", should=[main, *extra])


def filter_clauses(plan: QueryPlan) -> list[Query]:
    f = plan.filters
    out: list[Query] = []
    if f.year_from is not None or f.year_to is not None:
        bounds = {k: v for k, v in (("gte", f.year_from), ("lte", f.year_to)) if v is not None}
        out.append(Q("range", year=bounds))
    for field, values in (("venue", f.venues), ("paper_id", f.paper_ids), ("section_type", f.section_types)):
        if values:
            out.append(Q("terms", **{field: list(values)}))
    return out


def _knn_sizes(plan: QueryPlan, k: int | None) -> tuple[int, int]:
    k = plan.knn_k if k is None else min(k, MAX_RESULT_WINDOW)
    return k, min(max(plan.num_candidates, k), MAX_RESULT_WINDOW)


def knn_clause(
    plan: QueryPlan,
    vector: list[float],
    *,
    boost: float | None = None,
    with_filter: bool = False,
    k: int | None = None,
) -> Query:
    """The knn query (8.12+; ``k`` 8.15+). ``with_filter``: its own pre-filter (when no enclosing
    bool carries the filters). ``k`` defaults to the plan's (at least the number of hits asked)."""
    k, candidates = _knn_sizes(plan, k)
    params: dict = {"field": VECTOR_FIELD, "query_vector": vector, "k": k, "num_candidates": candidates}
    filters = filter_clauses(plan) if with_filter else []
    if filters:
        params["filter"] = filters
    if boost is not None:
        params["boost"] = boost
    return Q("knn", **params)


def bm25_query(plan: QueryPlan) -> Query:
    filters = filter_clauses(plan)
    text = text_query(plan)
    return Q("bool", must=[text], filter=filters) if filters else text


def saturated_text(plan: QueryPlan, weight: float | None = None, k: float | None = None) -> Query:
    """The text part of hybrid: ``bm25_weight * s / (s + saturation_k)`` of the text query
    (``weight`` and ``k`` replace ``bm25_weight`` and ``saturation_k``)."""
    return Q(
        "script_score",
        query=text_query(plan),
        script={
            "source": SATURATION_SCRIPT,
            "params": {
                "k": plan.saturation_k if k is None else k,
                "w": plan.bm25_weight if weight is None else weight,
            },
        },
    )


def hybrid_query(plan: QueryPlan, vector: list[float], *, text_weight: float | None = None) -> Query:
    """``bool.should = [saturated BM25, knn]``; filters in ``bool.filter`` (for the text part) and
    in the knn clause (its pre-filter). minimum_should_match 1 is explicit: with a filter clause
    Elasticsearch's default would be 0 (every filtered doc would match with score 0).
    ``text_weight`` replaces the profile's ``bm25_weight`` (:func:`window_query`)."""
    should: list[Query] = []
    if plan.has_text:
        should.append(saturated_text(plan, text_weight))
    should.append(knn_clause(plan, vector, boost=plan.profile.knn_weight, with_filter=True))
    filters = filter_clauses(plan)
    return (
        Q("bool", should=should, filter=filters, minimum_should_match=1)
        if filters
        else Q("bool", should=should, minimum_should_match=1)
    )


def window_query(plan: QueryPlan, vector: list[float]) -> Query:
    """The first pass of a rescored hybrid, which only chooses the hits the rescore scores: the
    :func:`hybrid_query` with the text part's weight :data:`WINDOW_TEXT_WEIGHT`, so it ranks the
    kNN top k first and the hits only the text found after them, by their BM25 score. The window
    of :func:`hybrid_rescore` (``knn_k + text_candidates``) then holds both signals' best: the
    kNN top k and at least the ``text_candidates`` best hits of the text query (with
    ``collapse``: groups). With the profile's own weights instead, a hit only BM25 found scores
    at most ``bm25_weight`` x s/(s + k), below the (1 + cos)/2 of nearly every kNN hit, and the
    window would hold the kNN top k alone. Section multipliers apply as in the final score."""
    return with_section_multipliers(plan, hybrid_query(plan, vector, text_weight=WINDOW_TEXT_WEIGHT))


def both_signals_query(
    plan: QueryPlan, vector: list[float], text_weights: tuple[float, float] | None = None
) -> Query:
    """The rescore query of hybrid: the same formula as :func:`hybrid_query`, but with the vector
    part computed for EVERY hit (``script_score`` over ``match_all``) instead of only for the kNN
    top k, so a chunk BM25 found gets its vector similarity and a chunk kNN found gets its BM25
    score (0 where it does not match the text). A bool of two should clauses: the second always
    matches, so every rescored hit matches."""
    vector_part = Q(
        "script_score",
        query=Q("match_all"),
        script={
            "source": VECTOR_SCRIPT,
            "params": {"query_vector": vector, "w": plan.profile.knn_weight},
        },
    )
    text = saturated_text(plan) if text_weights is None else saturated_text(plan, *text_weights)
    return Q("bool", should=[text, vector_part])


def rescore_window(plan: QueryPlan) -> int:
    """How many first-pass hits (groups with ``collapse``) the hybrid rescores: the kNN top k plus
    the profile's ``text_candidates``, at least its ``rescore_window`` and the hits asked for."""
    window = max(plan.profile.rescore_window, plan.knn_k + plan.profile.text_candidates, plan.fetch_size)
    return min(window, MAX_RESULT_WINDOW)


def top_window(plan: QueryPlan) -> int:
    """How many hits of the window the second rescore phase orders by the main formula: the
    profile's ``top_window``, at least the hits asked for (every returned hit has its score)."""
    return min(max(plan.profile.top_window, plan.fetch_size), rescore_window(plan))


def recall_phase(plan: QueryPlan) -> tuple[tuple[float, float], int] | None:
    """(the recall formula's weights, :func:`top_window`) of a two-phase rescore (corpus-wide);
    None where one phase, the main formula, orders the window (inside one paper, ``top_window`` 0)."""
    if plan.recall_weights is None or plan.profile.top_window == 0:
        return None
    return plan.recall_weights, top_window(plan)


def _rescorer(window: int, query: Query) -> dict:
    return {
        "window_size": window,
        "query": {"rescore_query": query, "query_weight": 0, "rescore_query_weight": 1},
    }


def hybrid_rescore(plan: QueryPlan, vector: list[float]) -> dict | list[dict] | None:
    """The ``rescore`` section of hybrid: the first pass's top hits (:func:`window_query`,
    :func:`rescore_window`: the kNN top k and the text query's best) are scored again by both
    signals,
    ``m(section) * (bm25_weight * s/(s + k) + knn_weight * (1 + cos)/2)``, which replaces their
    first-pass score (``query_weight`` 0). None when the profile's ``rescore_window`` is 0 or the
    question has no text (kNN alone already scores every candidate by its similarity), and with
    ``sort`` ``year`` (Elasticsearch refuses ``sort`` with ``rescore``; sorted by year, every hit
    the query matches is ordered by its year, and a rescore would change its score alone).

    The window bounds the cost: Elasticsearch runs the rescore query on the window's hits only
    (per shard). A window at least as large as the page keeps every returned hit rescored: hits
    beyond the window would keep ``query_weight`` x their first-pass score, here 0."""
    if plan.profile.rescore_window == 0 or not plan.has_text or plan.sort == "year":
        return None
    main = _rescorer(rescore_window(plan), with_section_multipliers(plan, both_signals_query(plan, vector)))
    phases = recall_phase(plan)
    if phases is None:
        return main
    # corpus-wide: two phases (Elasticsearch applies a list of rescorers in order, each on the top
    # window_size hits of the one before; reference/search/search-your-data/filter-search-results.html
    # #multiple-rescores). The recall formula orders the window, its top top_window hits are then
    # scored by the main formula; query_weight 0 in both, so every returned hit (at most
    # top_window: it is at least the hits asked for) carries the main formula's score alone.
    weights, top = phases
    recall = both_signals_query(plan, vector, weights)
    return [
        _rescorer(rescore_window(plan), with_section_multipliers(plan, recall)),
        {**main, "window_size": top},
    ]


def with_section_multipliers(plan: QueryPlan, query: Query) -> Query:
    """``function_score`` lifting the intent's section types: the factor is the largest matching
    weight (score_mode max; 1 when no function matches), multiplied into the score."""
    if not plan.section_multipliers:
        return query
    functions = [
        SF({"filter": Q("term", section_type=s), "weight": m}) for s, m in plan.section_multipliers.items()
    ]
    return Q("function_score", query=query, functions=functions, score_mode="max", boost_mode="multiply")


#: ``sort`` ``year``: newest first, papers without a year last, the score breaking ties (kept on
#: every hit by ``track_scores``)
YEAR_SORT = ({"year": {"order": "desc", "missing": "_last"}}, "_score")


def page(plan: QueryPlan, search: Search) -> Search:
    """``size`` (the plan's fetch size: a request's ``from`` + ``size``, the page is cut after the
    search, :func:`querybuilder.results.page_of`), the ``year`` sort, ``_source`` and the per-paper
    cap by ``collapse``."""
    search = search.extra(size=plan.fetch_size).source(list(SOURCE_FIELDS))
    if plan.sort == "year":
        search = search.sort(*YEAR_SORT).extra(track_scores=True)
    if plan.collapse and plan.cap > 0:
        search = search.collapse(
            "paper_id", inner_hits={"name": INNER_HITS_NAME, "size": plan.cap, "_source": list(SOURCE_FIELDS)}
        )
    return search


def retriever_legs(plan: QueryPlan, vector: list[float]) -> tuple[dict, dict]:
    """(standard retriever, knn retriever) as dicts of dsl-built queries; filters on both legs."""
    filters = [f.to_dict() for f in filter_clauses(plan)]
    standard: dict = {"query": text_query(plan).to_dict()}
    k, candidates = _knn_sizes(plan, plan.rank_window_size)
    knn: dict = {"field": VECTOR_FIELD, "query_vector": vector, "k": k, "num_candidates": candidates}
    if filters:
        standard["filter"] = filters
        knn["filter"] = filters
    return {"standard": standard}, {"knn": knn}
