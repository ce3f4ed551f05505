"""The strategy registry: every search strategy is ONE object, found by name.

A :class:`Strategy` says what it needs (:class:`Needs`: a query vector, trained heads, the
Elasticsearch license and version) and which per-strategy options it takes (``explain``,
``show_plan``, ``crossencoder``, ``heads``), and it does everything its name stands for:

* :meth:`Strategy.prepare` -- plan, embed, route: everything decided before searching, nothing sent;
* :meth:`Strategy.bodies` -- the request body (or the bodies of one ``_msearch``) it will send,
  built with ``elasticsearch.dsl`` (``scholar-es query --format json|console``);
* :meth:`Strategy.execute` / :meth:`Strategy.search` -- send it and shape the answer
  (``scholar-es search``, :func:`search` for Python);
* :meth:`Strategy.eval_searcher` -- the timed search ``scholar-es eval`` runs per judged query.

The query builder's own strategies (one :class:`~querybuilder.plan.QueryPlan` each, built by
:meth:`PlanStrategy.build`) are defined here; strategies defined elsewhere register themselves
when their module is imported: :data:`ENTRIES` names the modules of the bundled ones
(``direct``, ``multihead``, ``multihead-hybrid``: ``scholar_es.projection.search``;
``multisection``: ``scholar_es.multisection.strategy``), imported on first use, so this module
imports neither at import time (they import the query builder). The model is elasticsearch-py's
``helpers.vectorstore`` retrieval strategies: one object per strategy that knows its needs and
builds its own request. The commands, the evaluation harness and the Python API look strategies
up here and nowhere else: error messages list :func:`names`.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from scholar_es.errors import ConfigError, choices

if TYPE_CHECKING:
    from elasticsearch.dsl import Search

    from querybuilder.plan import QueryPlan
    from querybuilder.run import SearchResult

License = Literal["basic", "enterprise"]

#: options that apply to some strategies only: keyword -> command-line flag
OPTIONS: dict[str, str] = {
    "explain": "--explain",
    "show_plan": "--show-plan",
    "crossencoder": "--crossencoder",
    "heads": "--heads",
}

#: ``(question, filters) -> (hits, seconds)``: one timed search of the evaluation harness (hits are
#: dicts with ``chunk_id``, ``paper_id`` and optionally ``paragraph_ids``)
SearchFn = Callable[[str, "dict | None"], "tuple[list[dict], float]"]


@dataclass(frozen=True)
class Needs:
    """What a strategy needs from the caller and the cluster."""

    vector: bool  # the question's embedding
    heads: bool = False  # heads trained with `scholar-es heads train`
    license: License = "basic"
    min_version: str = "8.15"  # the oldest Elasticsearch that runs it
    note: str = ""  # where the version comes from

    def describe(self) -> str:
        version = f"{self.min_version}+" + (f" ({self.note})" if self.note else "")
        return f"{version}, {self.license.capitalize()} license"


@dataclass(frozen=True)
class SearchRequest:
    """One question and the options of one search (what ``search``/``query`` take)."""

    question: str
    profile: Any = None  # Profile, a built-in name, a JSON file, or None (default)
    size: int = 10
    papers: bool = False
    filters: Any = None  # Filters, a dict, or None
    prefix: str = ""
    search_type: str | None = None
    embedder: Any = None  # indexer.embedder.Embedder or anything with .name and .encode
    heads: Any = None  # a projection Heads or the name of stored heads (strategies that need heads)
    explain: bool = False
    show_plan: bool = False
    crossencoder: Any = None

    @property
    def index(self) -> str:
        return f"{self.prefix}chunks"


@dataclass
class Prepared:
    """Everything a strategy decided for one request before searching (``state`` is its own)."""

    strategy: Strategy
    request: SearchRequest
    state: Any

    def bodies(self) -> dict | list[dict]:
        return self.strategy.bodies(self)


@dataclass
class EvalContext:
    """What the evaluation harness gives a strategy to build its per-query search."""

    es: Any
    profile: Any  # the evaluation profile (per-paper cap off)
    prefix: str
    vectors: dict  # cleaned question -> its embedding (every judged question, embedded once)
    embedder: Any = None
    heads: Any = None
    size: int = 100
    fields: tuple[str, ...] = ("chunk_id", "paper_id", "paragraph_ids")


def check_question(question: str) -> None:
    """Refuse an empty or whitespace-only question (it would rank arbitrary chunks)."""
    from querybuilder.plan import clean_question

    if not clean_question(question)[0]:
        raise ConfigError(
            f"the question {question!r} is empty; give the words to search for, e.g. "
            '"How is the named entity tagger trained?"'
        )


def _sources(raw_hits: Sequence[dict]) -> list[dict]:
    out = []
    for h in raw_hits:
        src = dict(h.get("_source") or {})
        src.setdefault("chunk_id", h.get("_id"))
        out.append(src)
    return out


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """One search strategy (see the module doc). Subclasses implement prepare/bodies/execute."""

    name: str
    description: str
    needs: Needs
    #: per-strategy options (keys of OPTIONS) this strategy takes
    takes: frozenset[str] = frozenset({"explain"})
    #: ``scholar-es query --format template`` can store it as a mustache search template
    templates: bool = False

    # --- options ------------------------------------------------------------------------------
    def check_options(self, **given: Any) -> None:
        """ConfigError for an option given (not None, False or "") that this strategy does not take."""
        for key, value in given.items():
            if key not in OPTIONS:
                raise ConfigError(f"unknown option {key!r}; valid options: {choices(OPTIONS)}")
            given_here = (
                value is not None and value is not False and not (isinstance(value, str) and not value)
            )
            if given_here and key not in self.takes:
                takers = [s.name for s in all_strategies() if key in s.takes]
                raise ConfigError(
                    f"{OPTIONS[key]} applies only to the strategies {', '.join(takers)}, not to "
                    f"{self.name!r}; leave it out or pick one of those"
                )

    def check(self, request: SearchRequest) -> None:
        """The request's question and per-strategy options, before anything is embedded or sent."""
        check_question(request.question)
        self.check_options(
            explain=request.explain,
            show_plan=request.show_plan,
            crossencoder=request.crossencoder,
            heads=request.heads,
        )

    # --- what subclasses do -------------------------------------------------------------------
    def prepare(self, es, request: SearchRequest) -> Prepared:  # pragma: no cover - abstract
        """Plan, embed, route (``es`` may be None where the strategy can do without a target)."""
        raise NotImplementedError

    def bodies(self, prepared: Prepared) -> dict | list[dict]:  # pragma: no cover - abstract
        """The body it sends, or a list of bodies (the items of one ``_msearch``)."""
        raise NotImplementedError

    def execute(self, es, prepared: Prepared) -> Any:  # pragma: no cover - abstract
        """Send the prepared request(s); the strategy's own result object."""
        raise NotImplementedError

    def eval_searcher(self, ctx: EvalContext) -> SearchFn:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_format(self, fmt: str) -> None:
        """ConfigError for ``--format template`` where the strategy has no stored template."""
        if fmt == "template" and not self.templates:
            takers = [s.name for s in all_strategies() if s.templates]
            raise ConfigError(
                f"--format template applies only to the strategies {', '.join(takers)}, not to "
                f"{self.name!r}; use --format json or console"
            )

    def template(self, prepared: Prepared) -> str:
        """Console text of a stored mustache search template (strategies with ``templates``)."""
        self.check_format("template")
        raise NotImplementedError  # pragma: no cover - a strategy with templates implements this

    # --- results --------------------------------------------------------------------------------
    def result(self, native: Any, request: SearchRequest) -> SearchResult:
        """The strategy's result as a :class:`~querybuilder.run.SearchResult`."""
        return native

    def render(self, native: Any, request: SearchRequest) -> str:
        """What ``scholar-es search`` prints."""
        from querybuilder.render import format_results

        return format_results(self.result(native, request), explain=request.explain)

    def as_dict(self, native: Any, request: SearchRequest) -> dict:
        """What ``scholar-es search --json`` prints."""
        return self.result(native, request).model_dump(mode="json")

    def search(self, es, request: SearchRequest) -> SearchResult:
        self.check(request)
        return self.result(self.execute(es, self.prepare(es, request)), request)


# --- the query builder's strategies: one QueryPlan, one request (two for rrf-client) ------------
@dataclass(frozen=True, kw_only=True)
class PlanStrategy(Strategy):
    """A strategy whose request is built from one :class:`~querybuilder.plan.QueryPlan`."""

    uses_text: bool = True
    sections: bool = False  # applies the intent's section multipliers
    expansion: bool = False  # always expands (otherwise: when the profile says so)
    collapse: bool = True  # per-paper cap by collapse in Elasticsearch (else applied client-side)
    templates: bool = True

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

    def make_plan(self, request: SearchRequest) -> QueryPlan:
        from querybuilder.plan import make_plan

        return make_plan(
            request.question,
            strategy=self.name,
            profile=request.profile,
            size=request.size,
            papers=request.papers,
            filters=request.filters,
            prefix=request.prefix,
            search_type=request.search_type,
        )

    def prepare(self, es, request: SearchRequest) -> Prepared:
        plan = self.make_plan(request)
        return Prepared(
            self, request, (plan, embed(es, plan, request.embedder) if self.uses_vector else None)
        )

    def bodies(self, prepared: Prepared) -> dict | list[dict]:
        from querybuilder.dsl import build_body

        plan, vector = prepared.state
        return build_body(plan, vector)

    def template(self, prepared: Prepared) -> str:
        from querybuilder.render import to_template

        plan, vector = prepared.state
        return to_template(plan, vector)

    def execute(self, es, prepared: Prepared) -> Any:  # a SearchResult (HeadsStrategy: its own)
        plan, vector = prepared.state
        return self.run(es, plan, vector, explain=prepared.request.explain)

    def run(
        self, es, plan: QueryPlan, vector=None, *, explain: bool = False, strategy_name: str | None = None
    ) -> SearchResult:
        """Send the request for ``plan`` with an already made ``vector`` and shape the answer."""
        from querybuilder.run import run_single

        return run_single(es, plan, vector, explain=explain, strategy_name=strategy_name or self.name)

    def fetch(self, es, plan: QueryPlan, vector, fields: Sequence[str]) -> tuple[list[dict], float]:
        """(the hits' ``_source`` restricted to ``fields``, seconds in the search call alone)."""
        from querybuilder.dsl import build_one

        body = build_one(plan, vector).source(list(fields)).to_dict()
        t0 = time.perf_counter()
        resp = es.search(index=plan.index, body=body).body
        seconds = time.perf_counter() - t0
        return _sources(resp["hits"]["hits"]), seconds

    def eval_searcher(self, ctx: EvalContext) -> SearchFn:
        return self.vector_searcher(ctx, ctx.vectors)

    def vector_searcher(self, ctx: EvalContext, vectors: dict) -> SearchFn:
        """The request for each question with its vector from ``vectors``, sent and timed."""
        from querybuilder.plan import make_plan

        def search(question: str, filters: dict | None) -> tuple[list[dict], float]:
            plan = make_plan(
                question,
                strategy=self.name,
                profile=ctx.profile,
                size=ctx.size,
                filters=filters,
                prefix=ctx.prefix,
            )
            return self.fetch(ctx.es, plan, vectors.get(plan.question), ctx.fields)

        return search


def embed(es, plan: QueryPlan, embedder=None):
    """The question's vector. With ``es``: by ``embedder`` (default: the index's model), checked
    against the index's model and dims; without: by ``embedder`` or the default model."""
    from querybuilder.run import embed_question

    if es is not None:
        return embed_question(es, plan, embedder)
    if embedder is None:
        from indexer.embedder import Embedder

        embedder = Embedder()
    return embedder.encode([plan.question])[0]


@dataclass(frozen=True, kw_only=True)
class Bm25(PlanStrategy):
    def build(self, plan, vector):
        from elasticsearch.dsl import Search

        from querybuilder.dsl import bm25_query, page

        return page(plan, Search(index=plan.index).query(bm25_query(plan)))


@dataclass(frozen=True, kw_only=True)
class Dense(PlanStrategy):
    def build(self, plan, vector):
        from elasticsearch.dsl import Search

        from querybuilder.dsl import knn_clause, page

        return page(plan, Search(index=plan.index).query(knn_clause(plan, vector, with_filter=True)))


@dataclass(frozen=True, kw_only=True)
class Hybrid(PlanStrategy):
    """hybrid, sections and expanded: the plan says whether multipliers and expansions apply."""

    def build(self, plan, vector):
        from elasticsearch.dsl import Search

        from querybuilder.dsl import hybrid_query, hybrid_rescore, page, with_section_multipliers

        query = with_section_multipliers(plan, hybrid_query(plan, vector))
        search = page(plan, Search(index=plan.index).query(query))
        rescore = hybrid_rescore(plan, vector)
        return search.extra(rescore=rescore) if rescore is not None else search


@dataclass(frozen=True, kw_only=True)
class Retriever(PlanStrategy):
    """An Elasticsearch retriever over a standard (BM25) and a knn retriever (:meth:`combine`)."""

    collapse: bool = False

    def combine(self, plan: QueryPlan, standard: dict, knn: dict) -> dict:
        raise NotImplementedError  # pragma: no cover - RrfRetriever, LinearRetriever

    def build(self, plan, vector):
        from elasticsearch.dsl import Search

        from querybuilder.dsl import page, retriever_legs

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

    def build(self, plan, vector):
        from elasticsearch.dsl import Search

        from querybuilder.dsl import SOURCE_FIELDS, bm25_query, knn_clause

        window = plan.rank_window_size
        base = Search(index=plan.index)
        lexical = base.query(bm25_query(plan)).extra(size=window).source(list(SOURCE_FIELDS))
        dense = (
            base.query(knn_clause(plan, vector, with_filter=True, k=window))
            .extra(size=window)
            .source(list(SOURCE_FIELDS))
        )
        return lexical, dense

    def run(self, es, plan, vector=None, *, explain=False, strategy_name=None):
        from querybuilder.run import run_fused

        return run_fused(es, plan, vector, explain=explain, strategy_name=strategy_name or self.name)

    def fetch(self, es, plan, vector, fields):
        from querybuilder.dsl import build_search
        from querybuilder.run import check_item, rrf_fuse

        bodies = [s.source(list(fields)).to_dict() for s in build_search(plan, vector)]
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
    s.name: s
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

#: strategies defined outside the query builder: name -> the module that registers it on import
ENTRIES: dict[str, str] = {
    "direct": "scholar_es.projection.search",
    "multihead": "scholar_es.projection.search",
    "multihead-hybrid": "scholar_es.projection.search",
    "multisection": "scholar_es.multisection.strategy",
}
_REGISTERED: dict[str, Strategy] = {}


_S = TypeVar("_S", bound="Strategy")


def register(strategy: _S) -> _S:
    """Add ``strategy`` to the registry (modules call this at import; registering again replaces)."""
    if not isinstance(strategy, Strategy):
        raise ConfigError(
            f"a strategy must be a querybuilder.strategies.Strategy, got {type(strategy).__name__}"
        )
    if strategy.name in BUILDER_STRATEGIES:
        raise ConfigError(f"strategy {strategy.name!r} is one of the query builder's own; pick another name")
    _REGISTERED[strategy.name] = strategy
    return strategy


def names() -> list[str]:
    """Every strategy's name: the query builder's, the bundled entries, then any registered later."""
    return list(dict.fromkeys([*BUILDER_STRATEGIES, *ENTRIES, *_REGISTERED]))


def get(name: str) -> Strategy:
    """The strategy called ``name``; ConfigError listing :func:`names` for any other."""
    if not isinstance(name, str):
        raise ConfigError(f"the strategy must be a name, got {type(name).__name__}")
    if name in BUILDER_STRATEGIES:
        return BUILDER_STRATEGIES[name]
    if name not in _REGISTERED and name in ENTRIES:
        importlib.import_module(ENTRIES[name])
    if name not in _REGISTERED:
        raise ConfigError(f"unknown strategy {name!r}; valid strategies: {choices(names())}")
    return _REGISTERED[name]


def all_strategies() -> list[Strategy]:
    return [get(n) for n in names()]


def search(
    es,
    question: str,
    *,
    strategy: str = "hybrid",
    profile=None,
    embedder=None,
    size: int = 10,
    papers: bool = False,
    filters=None,
    explain: bool = False,
    prefix: str = "",
    search_type: str | None = None,
    heads=None,
    show_plan: bool = False,
    crossencoder=None,
) -> SearchResult:
    """Rank ``question`` with any registered ``strategy`` on ``<prefix>chunks`` through ``es``.

    Options that apply to some strategies only (``explain``, ``show_plan``, ``crossencoder``,
    ``heads``) raise ConfigError with the others; so does an empty question.
    """
    request = SearchRequest(
        question=question,
        profile=profile,
        size=size,
        papers=papers,
        filters=filters,
        prefix=prefix,
        search_type=search_type,
        embedder=embedder,
        heads=heads,
        explain=explain,
        show_plan=show_plan,
        crossencoder=crossencoder,
    )
    return get(strategy).search(es, request)


__all__ = [
    "BUILDER_STRATEGIES",
    "ENTRIES",
    "OPTIONS",
    "EvalContext",
    "Needs",
    "PlanStrategy",
    "Prepared",
    "SearchFn",
    "SearchRequest",
    "Strategy",
    "all_strategies",
    "check_question",
    "get",
    "names",
    "register",
    "search",
]
