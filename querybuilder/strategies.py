"""The query builder's own strategies, and the Python API over the registry.

Each strategy here is a :class:`PlanStrategy`: its request is built from one
:class:`~querybuilder.plan.QueryPlan` (:meth:`PlanStrategy.build`, from the pieces of
:mod:`querybuilder.dsl`) and sent by a runner of :mod:`querybuilder.run`; importing this module
registers them (:mod:`querybuilder.registry`, which imports it on first use). Above the registry
and the builders, this module also holds what callers use by name:

* :func:`search` -- rank a question with any registered strategy (``scholar_es.search``);
* :func:`show_query` -- what ``scholar-es query`` prints;
* :func:`make_plan`, :func:`build_search`, :func:`build_one`, :func:`build_body`,
  :func:`template_script`, :func:`to_template` -- a plan, its search(es), bodies and stored
  template, by the name of a query-builder strategy (the plan's).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from elasticsearch.dsl import Search

from querybuilder.dsl import (
    SOURCE_FIELDS,
    as_query_vector,
    bm25_query,
    hybrid_query,
    hybrid_rescore,
    knn_clause,
    page,
    retriever_legs,
    window_query,
    with_section_multipliers,
)
from querybuilder.plan import QueryPlan, plan_for
from querybuilder.registry import EvalContext, Needs, Prepared, SearchFn, Strategy, get, register
from querybuilder.render import FORMATS, to_console, to_json
from querybuilder.render import template_script as render_template_script
from querybuilder.render import to_template as render_to_template
from querybuilder.request import SearchRequest
from querybuilder.results import SearchResult, page_of
from querybuilder.run import check_item, model_note, rrf_fuse, run_fused, run_single
from querybuilder.run import embed_noted as run_embed_noted
from scholar_es.errors import ConfigError, choices


def _sources(raw_hits: Sequence[dict]) -> list[dict]:
    out = []
    for h in raw_hits:
        src = dict(h.get("_source") or {})
        src.setdefault("chunk_id", h.get("_id"))
        out.append(src)
    return out


# --- the query builder's strategies: one QueryPlan, one request (two for rrf-client) ------------
@dataclass(frozen=True, kw_only=True)
class PlanStrategy(Strategy):
    """A strategy whose request is built from one :class:`~querybuilder.plan.QueryPlan`."""

    uses_text: bool = True
    sections: bool = False  # applies the intent's section multipliers
    expansion: bool = False  # always expands (otherwise: when the profile says so)
    collapse: bool = True  # per-paper cap by collapse in Elasticsearch (else applied client-side)
    templates: bool = True
    year_sort: bool = True  # Elasticsearch's sort on year (hybrid then leaves its rescore out)

    @property
    def summary(self) -> str:
        return self.description

    @property
    def uses_vector(self) -> bool:
        return self.needs.vector

    @property
    def requires(self) -> str:
        return self.needs.describe()

    def build(self, plan: QueryPlan, vector: list[float]) -> Search | tuple[Search, Search]:
        """The ``elasticsearch.dsl`` search(es) for ``plan`` (``vector``: checked, JSON-ready)."""
        raise NotImplementedError  # pragma: no cover - every PlanStrategy builds

    def searches(
        self, plan: QueryPlan, query_vector: Sequence[float] | np.ndarray | None = None
    ) -> Search | tuple[Search, Search]:
        """:meth:`build` with the query vector checked (strategies with a kNN part need one)."""
        vector: list[float] = []
        if self.uses_vector:
            if query_vector is None:
                raise ConfigError(f"strategy {plan.strategy!r} needs a query vector (embed the question)")
            vector = as_query_vector(query_vector)
        return self.build(plan, vector)

    def one_search(self, plan: QueryPlan, query_vector: Sequence[float] | np.ndarray | None = None) -> Search:
        """:meth:`searches` for a strategy that sends one search (every strategy but ``rrf-client``)."""
        search = self.searches(plan, query_vector)
        if isinstance(search, tuple):
            raise ConfigError(f"strategy {plan.strategy!r} sends two searches; this step needs one search")
        return search

    def make_plan(self, request: SearchRequest) -> QueryPlan:
        return plan_for(request, self)

    def prepare(self, es, request: SearchRequest) -> Prepared:
        plan = self.make_plan(request)
        vector = None
        if self.uses_vector:
            vector, notes = embed_noted(es, plan, request.embedder)
            if notes:
                plan = plan.with_changes(notes=plan.notes + notes)
        return Prepared(self, request, (plan, vector))

    def bodies(self, prepared: Prepared) -> dict | list[dict]:
        plan, vector = prepared.state
        return _to_bodies(self.searches(plan, vector))

    def template(self, prepared: Prepared) -> str:
        plan, vector = prepared.state
        return render_to_template(plan, self.searches, vector)

    def execute(self, es, prepared: Prepared) -> Any:  # a SearchResult (HeadsStrategy: its own)
        plan, vector = prepared.state
        return page_of(self.run(es, plan, vector, explain=prepared.request.explain), prepared.request.from_)

    def run(
        self, es, plan: QueryPlan, vector=None, *, explain: bool = False, strategy_name: str | None = None
    ) -> SearchResult:
        """Send the request for ``plan`` with an already made ``vector`` and shape the answer
        (``strategy_name``: what the result reports; default: this strategy's name)."""
        return run_single(
            es, plan, self.one_search(plan, vector), explain=explain, strategy_name=strategy_name or self.name
        )

    def fetch(self, es, plan: QueryPlan, vector, fields: Sequence[str]) -> tuple[list[dict], float]:
        """(the hits' ``_source`` restricted to ``fields``, seconds in the search call alone)."""
        body = self.one_search(plan, vector).source(list(fields)).to_dict()
        t0 = time.perf_counter()
        resp = es.search(index=plan.index, body=body).body
        seconds = time.perf_counter() - t0
        return _sources(resp["hits"]["hits"]), seconds

    def eval_searcher(self, ctx: EvalContext) -> SearchFn:
        return self.vector_searcher(ctx, ctx.vectors)

    def vector_searcher(self, ctx: EvalContext, vectors: dict) -> SearchFn:
        """The request for each question with its vector from ``vectors``, sent and timed."""
        request = SearchRequest("", profile=ctx.profile, size=ctx.size, prefix=ctx.prefix)

        def search(question: str, filters: dict | None) -> tuple[list[dict], float]:
            plan = plan_for(request.replace(question=question, filters=filters), self)
            return self.fetch(ctx.es, plan, vectors.get(plan.question), ctx.fields)

        return search


def embed(es, plan: QueryPlan, embedder=None):
    """The question's vector. With ``es``: by ``embedder`` (default: the index's model), checked
    against the index's model and dims; without: by ``embedder`` or the default model."""
    return embed_noted(es, plan, embedder)[0]


def embed_noted(es, plan: QueryPlan, embedder=None) -> tuple[Any, tuple[str, ...]]:
    """(:func:`embed`'s vector, :func:`querybuilder.run.model_note` of the question)."""
    if es is not None:
        return run_embed_noted(es, plan, embedder)
    if embedder is None:
        from indexer.embedder import Embedder

        embedder = Embedder()
    return embedder.encode([plan.question])[0], model_note(embedder, plan.question)


@dataclass(frozen=True, kw_only=True)
class Bm25(PlanStrategy):
    def build(self, plan, vector):
        return page(plan, Search(index=plan.index).query(bm25_query(plan)))


@dataclass(frozen=True, kw_only=True)
class Dense(PlanStrategy):
    def build(self, plan, vector):
        return page(plan, Search(index=plan.index).query(knn_clause(plan, vector, with_filter=True)))


@dataclass(frozen=True, kw_only=True)
class Hybrid(PlanStrategy):
    """hybrid, sections and expanded: the plan says whether multipliers and expansions apply."""

    def build(self, plan, vector):
        rescore = hybrid_rescore(plan, vector)
        if rescore is None:  # the first pass is the final score
            return page(
                plan,
                Search(index=plan.index).query(with_section_multipliers(plan, hybrid_query(plan, vector))),
            )
        return page(plan, Search(index=plan.index).query(window_query(plan, vector))).extra(rescore=rescore)


@dataclass(frozen=True, kw_only=True)
class Retriever(PlanStrategy):
    """An Elasticsearch retriever over a standard (BM25) and a knn retriever (:meth:`combine`)."""

    collapse: bool = False
    year_sort: bool = False  # the rank's order is the fusion's (rrf/linear take no sort)

    def combine(self, plan: QueryPlan, standard: dict, knn: dict) -> dict:
        raise NotImplementedError  # pragma: no cover - RrfRetriever, LinearRetriever

    def build(self, plan, vector):
        retriever = self.combine(plan, *retriever_legs(plan, vector))
        return page(plan, Search(index=plan.index).extra(retriever=retriever))


@dataclass(frozen=True, kw_only=True)
class RrfRetriever(Retriever):
    def combine(self, plan, standard, knn):
        return {
            "rrf": {
                "retrievers": [standard, knn],
                "rank_constant": plan.profile.rank_constant,
                "rank_window_size": plan.rank_window_size,
            }
        }


@dataclass(frozen=True, kw_only=True)
class LinearRetriever(Retriever):
    def combine(self, plan, standard, knn):
        return {
            "linear": {
                "retrievers": [
                    {"retriever": standard, "weight": plan.profile.bm25_weight, "normalizer": "minmax"},
                    {"retriever": knn, "weight": plan.profile.knn_weight, "normalizer": "minmax"},
                ],
                "rank_window_size": plan.rank_window_size,
            }
        }


@dataclass(frozen=True, kw_only=True)
class RrfClient(PlanStrategy):
    """A BM25 and a kNN search in one ``_msearch``, fused here (:func:`querybuilder.run.rrf_fuse`)."""

    collapse: bool = False
    year_sort: bool = False  # the order is the client-side fusion's

    def build(self, plan, vector):
        window = plan.rank_window_size
        base = Search(index=plan.index)
        lexical = base.query(bm25_query(plan)).extra(size=window).source(list(SOURCE_FIELDS))
        dense = (
            base.query(knn_clause(plan, vector, with_filter=True, k=window))
            .extra(size=window)
            .source(list(SOURCE_FIELDS))
        )
        return lexical, dense

    def legs(self, plan: QueryPlan, vector) -> tuple[Search, Search]:
        """(BM25 search, kNN search) for ``plan``: :meth:`searches`, typed as the pair it is."""
        built = self.searches(plan, vector)
        assert isinstance(built, tuple)  # noqa: S101 - build returns the pair
        return built

    def run(self, es, plan, vector=None, *, explain=False, strategy_name=None):
        return run_fused(
            es, plan, self.legs(plan, vector), explain=explain, strategy_name=strategy_name or self.name
        )

    def fetch(self, es, plan, vector, fields):
        bodies = [s.source(list(fields)).to_dict() for s in self.legs(plan, vector)]
        t0 = time.perf_counter()
        resp = es.msearch(index=plan.index, searches=[x for b in bodies for x in ({}, b)]).body
        legs = [check_item(item)["hits"]["hits"] for item in resp["responses"]]
        fused = rrf_fuse([[h["_id"] for h in leg] for leg in legs], k=plan.profile.rank_constant)
        seconds = time.perf_counter() - t0
        by_id = {h["_id"]: h for leg in legs for h in leg}
        return _sources([by_id[d] for d, _ in fused[: plan.size]]), seconds


_KNN = "knn query 8.12+, its k parameter 8.15+"
#: the query builder's own strategies, in the order --help and the README list them
BUILDER_STRATEGIES: dict[str, PlanStrategy] = {
    s.name: register(s, builtin=True)
    for s in (
        Bm25(
            name="bm25",
            description="multi_match (best_fields) only",
            needs=Needs(vector=False, min_version="8.0", note="any 8.x/9.x"),
        ),
        Dense(
            name="dense", description="knn query only", uses_text=False, needs=Needs(vector=True, note=_KNN)
        ),
        Hybrid(
            name="hybrid",
            description="bool.should of saturated BM25 (script_score) and a knn query, its top hits "
            "rescored with both signals",
            needs=Needs(vector=True),
        ),
        Hybrid(
            name="sections",
            description="hybrid inside function_score with the intent's section multipliers",
            sections=True,
            needs=Needs(vector=True),
        ),
        Hybrid(
            name="expanded",
            description="sections plus acronym/synonym should clauses",
            sections=True,
            expansion=True,
            needs=Needs(vector=True),
        ),
        RrfRetriever(
            name="rrf",
            description="rrf retriever over a standard (BM25) and a knn retriever (opt-in)",
            needs=Needs(
                vector=True,
                license="enterprise",
                min_version="8.16",
                note="retrievers GA; 8.14-8.15 technical preview",
            ),
        ),
        RrfClient(
            name="rrf-client",
            description="client-side RRF (k=60) over one _msearch of a BM25 and a knn search",
            needs=Needs(vector=True),
        ),
        LinearRetriever(
            name="linear",
            description="linear retriever, minmax-normalized weighted sum of BM25 and knn (opt-in)",
            needs=Needs(vector=True, license="enterprise", min_version="8.18", note="or 9.0+"),
        ),
    )
}


def plan_strategy(name: str) -> PlanStrategy:
    """The query-builder strategy ``name`` (one :class:`QueryPlan`): ConfigError for any other name,
    listing the registry's strategies (``querybuilder.registry``)."""
    strategy = get(name)
    if not isinstance(strategy, PlanStrategy) or name not in BUILDER_STRATEGIES:
        raise ConfigError(
            f"strategy {name!r} is not one query-builder plan ({strategy.description}); run it with "
            f"querybuilder.strategies.search or `scholar-es search`. Strategies with a plan: "
            f"{choices(BUILDER_STRATEGIES)}"
        )
    return strategy


def make_plan(question: str | SearchRequest, *, strategy: str = "hybrid", **options: Any) -> QueryPlan:
    """The plan of the query-builder strategy ``strategy`` for ``question`` with ``options`` (the
    fields of :class:`~querybuilder.request.SearchRequest`); see :func:`querybuilder.plan.plan_for`."""
    strat = plan_strategy(strategy)
    return plan_for(SearchRequest.of(question, **options), strat)


def build_search(
    plan: QueryPlan, query_vector: Sequence[float] | np.ndarray | None = None
) -> Search | tuple[Search, Search]:
    """The search for ``plan``, built by its strategy; for ``rrf-client`` the pair (BM25 search,
    kNN search)."""
    return plan_strategy(plan.strategy).searches(plan, query_vector)


def build_one(plan: QueryPlan, query_vector: Sequence[float] | np.ndarray | None = None) -> Search:
    """:func:`build_search` for a strategy that sends one search (every strategy but ``rrf-client``)."""
    return plan_strategy(plan.strategy).one_search(plan, query_vector)


def _to_bodies(search: Search | tuple[Search, ...]) -> dict | list[dict]:
    if isinstance(search, tuple):
        return [s.to_dict() for s in search]
    return search.to_dict()


def build_body(
    plan: QueryPlan, query_vector: Sequence[float] | np.ndarray | None = None
) -> dict | list[dict]:
    """``build_search(...).to_dict()``; for ``rrf-client`` the list of the two bodies."""
    return _to_bodies(build_search(plan, query_vector))


def template_script(plan: QueryPlan) -> dict | list[dict]:
    """:func:`querybuilder.render.template_script` of the searches of the plan's strategy."""
    return render_template_script(plan, plan_strategy(plan.strategy).searches)


def to_template(plan: QueryPlan, query_vector: Sequence[float] | None = None) -> str:
    """:func:`querybuilder.render.to_template` of the searches of the plan's strategy."""
    return render_to_template(plan, plan_strategy(plan.strategy).searches, query_vector)


# --- the Python API: any registered strategy, by name ----------------------------------------------
def search(es, question: str | SearchRequest, *, strategy: str = "hybrid", **options: Any) -> SearchResult:
    """Rank ``question`` with any registered ``strategy`` on ``<prefix>chunks`` through the client ``es``.

    ``question``: the question text, with ``options`` the fields of
    :class:`~querybuilder.request.SearchRequest` (``profile``, ``size``, ``from_``, ``papers``, ``filters``,
    ``prefix``, ``search_type``, ``embedder``, ``heads``, ``explain``, ``show_plan``,
    ``crossencoder``, ``sort``), or a whole request. ``from_``: paging (every strategy but
    ``multisection``); ``sort`` ``"year"``: the strategies whose ``year_sort`` says so (others:
    ConfigError). ``heads``: the heads of ``multihead``/
    ``multihead-hybrid`` (a name or a ``Heads``); ``show_plan``/``crossencoder``: ``multisection``
    only. An option given to a strategy that does not take it, and an empty or whitespace-only
    question, raise ConfigError.
    """
    return get(strategy).search(es, SearchRequest.of(question, **options))


def show_query(
    question: str | SearchRequest, *, strategy: str = "hybrid", fmt: str = "json", es=None, **options: Any
) -> str:
    """What ``scholar-es query`` prints: the DSL for ``question`` (with ``options``, as for
    :func:`search`) as json, console text or a template.

    Any strategy of the registry: one body, or for the strategies that send several
    (``rrf-client``, ``multisection``'s sub-searches) the list of the bodies of their ``_msearch``
    (console: one ``GET <index>/_msearch``). Strategies with a kNN part embed the question: with
    ``es`` given, with the index's model (and the ModelMismatchError checks of
    :func:`querybuilder.run.embed_question`); otherwise with the request's ``embedder`` or the
    default model. ``bm25`` needs neither; the multi-head strategies need ``es`` (their heads are
    stored there).
    """
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; valid formats: {choices(FORMATS)}")
    strat = get(strategy)
    request = SearchRequest.of(question, **options)
    strat.check(request)
    strat.check_format(fmt)  # before anything is embedded
    prepared = strat.prepare(es, request)
    if fmt == "template":
        return strat.template(prepared)
    bodies = prepared.bodies()
    return to_console(bodies, request.index) if fmt == "console" else to_json(bodies) + "\n"


__all__ = [
    "BUILDER_STRATEGIES",
    "PlanStrategy",
    "build_body",
    "build_one",
    "build_search",
    "make_plan",
    "plan_strategy",
    "search",
    "show_query",
    "template_script",
    "to_template",
]
