"""The search API for backends, under ``/_scholar/`` (an index name never starts with ``_``).

Every search goes through the strategy registry (:mod:`querybuilder.registry`): a strategy
is found by name (:func:`~querybuilder.registry.get`; an unknown one is a 400 listing
:func:`~querybuilder.registry.names`), its per-strategy options are refused where it does not
take them (as ``scholar-es search`` refuses ``--explain`` for ``multisection``), the API request
becomes one :class:`~querybuilder.request.SearchRequest` (:func:`search_request`), then it plans,
sends and shapes its answer as for the command line and the Python API. Every hit already
carries its full chunk text and paragraph ids; what this layer adds is each hit's score parts
as the three numbers the page draws as a bar (:func:`score_bar`) and, for the strategies that
route the vector through heads, how it was routed.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from querybuilder import registry
from querybuilder.plan import Filters
from querybuilder.profiles import PROFILES, Profile
from querybuilder.results import Hit, SearchResult
from scholar_es.errors import ConfigError, choices
from scholar_es.multisection.flow import MultiSectionResult
from scholar_es.serve.health import Health, health
from scholar_es.serve.state import ServerState

#: the per-strategy options (``querybuilder.registry.OPTIONS``) a search request can carry;
#: multisection's ``show_plan`` is POST /_scholar/multisection's, ``crossencoder`` is not served
#: (a model load per request)
API_OPTIONS = ("explain", "heads")


class _Question(BaseModel):
    """What every API request carries: the question, where to search and with which profile."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="The question, any text (never parsed as query syntax).")
    filters: Filters | None = None
    prefix: str = Field("", description="Prefix of the index aliases (<prefix>chunks).")
    profile: str | None = Field(
        None, description="A built-in profile name; default: the profile the server was started with."
    )


class _Request(_Question):
    strategy: str = Field("hybrid", description="A strategy from GET /_scholar/strategies.")
    size: int = Field(10, ge=1, le=10_000, description="Hits (papers with `papers`; multisection: papers).")
    papers: bool = Field(False, description="Paper view: the top papers, each with its best chunks.")
    sort: Literal["relevance", "year"] = Field(
        "relevance",
        description="`relevance` (score) or `year`: an Elasticsearch sort on the year field, newest "
        "first, papers without a year last, score breaking ties (bm25, dense, hybrid, sections, expanded; "
        "hybrid's rescore is left out, as Elasticsearch refuses sort with rescore).",
    )
    heads: str | None = Field(
        None,
        description="Stored heads for the strategies that take them (multihead, multihead-hybrid; "
        "default: 'default'); see `options` in GET /_scholar/strategies.",
    )


class SearchRequest(_Request):
    from_: int = Field(
        0,
        alias="from",
        ge=0,
        description="Hits (papers with `papers`) to skip: the page starts there; from + size at most "
        "10000 (index.max_result_window). Not for multisection.",
    )
    explain: bool = Field(
        False,
        description="Take each hit's score apart (BM25, kNN, section multiplier); for the strategies "
        "whose `options` list it.",
    )


class QueryRequest(_Request):
    pass


class MultisectionRequest(_Question):
    papers: int = Field(10, ge=1, le=1000, description="Papers to return.")
    show_plan: bool = Field(False, description="Fill each section's Kibana console text.")


class ScoreBar(BaseModel):
    """A hit's score as three additive parts: score = bm25 + knn + section."""

    bm25: float  # what the text (BM25) part adds
    knn: float  # what the kNN part adds
    section: float  # what the section multiplier adds on top of the two


class ServeHit(Hit):
    """A hit of ``querybuilder.results`` (full ``chunk_text``, ``paragraph_ids``) and its score bar."""

    model_config = ConfigDict(extra="forbid")
    score_bar: ScoreBar | None = None  # with ``explain``, for the strategies that explain


class ServePaperHit(BaseModel):
    """``querybuilder.results.PaperHit`` with :class:`ServeHit` chunks and the paper's metadata
    from the ``<prefix>papers`` index (:func:`paper_metadata`; empty where a paper is not there)."""

    model_config = ConfigDict(extra="forbid")
    paper_id: str
    title: str = ""
    score: float
    chunks: list[ServeHit]
    authors: list[str] = []
    year: int | None = None
    venue: str | None = None
    abstract: str = ""


#: the fields of a paper's document the paper view adds (see :class:`ServePaperHit`)
PAPER_FIELDS = ("authors", "year", "venue", "abstract")


class Routing(BaseModel):
    """How a heads strategy routed the question's vector."""

    heads: str | None
    max_similarity: float  # the best centroid similarity
    fallback: bool  # below the heads' threshold: the fallback vector was searched
    top_heads: list[list[float]]  # [head row, weight] of the heads the vector was routed through


class ServeSearchResult(SearchResult):
    """``querybuilder.results.SearchResult`` with serve's hits and the heads' routing (``extra="forbid"``:
    what the API answers is exactly these fields)."""

    model_config = ConfigDict(extra="forbid")
    hits: list[ServeHit]  # type: ignore[assignment]  # ServeHit is a Hit with its score bar
    papers: list[ServePaperHit] = []  # type: ignore[assignment]
    routing: Routing | None = None  # the heads strategies (multihead, multihead-hybrid)


class QueryResponse(BaseModel):
    strategy: str
    index: str
    request: dict | list  # the search body (rrf-client, multisection: the bodies of its _msearch)
    console: str  # Kibana dev console text, runnable with `scholar-es console`


class NeedsInfo(BaseModel):
    """``querybuilder.registry.Needs``: what a strategy needs from the caller and the cluster."""

    vector: bool  # the question's embedding
    heads: bool  # heads trained with `scholar-es heads train`
    license: Literal["basic", "enterprise"]
    min_version: str  # the oldest Elasticsearch that runs it
    note: str  # where the version comes from
    summary: str  # e.g. "8.15+, Basic license"


class StrategyInfo(BaseModel):
    name: str
    description: str
    needs: NeedsInfo
    options: list[str]  # per-strategy options /_scholar/search takes for it (explain, heads)
    heads: list[str] | None = None  # strategies that need heads: the heads stored under the prefix
    available: bool  # False: it needs heads and none are stored under the prefix


def score_bar(hit: Hit) -> ScoreBar | None:
    """Split a hit's explained score into what BM25, kNN and the section multiplier add."""
    e = hit.explanation
    if e is None or e.ranks:  # no explanation, or rank fusion (ranks, not additive parts)
        return None
    mult = e.section_multiplier if e.section_multiplier else 1.0
    base = e.total / mult
    knn = e.knn or 0.0
    text = e.text if e.text is not None else max(base - knn, 0.0)
    return ScoreBar(bm25=text, knn=knn, section=e.total - base)


def _profile(state: ServerState, name: str | None) -> Profile:
    if name is None:
        return state.profile
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r}; built-in profiles: {choices(PROFILES)}")
    return PROFILES[name]


def check_options(strategy: registry.Strategy, **given: Any) -> None:
    """ConfigError for a per-strategy option given (true, a name) to a strategy that does not take
    it, named as the request names it (``Strategy.check_options`` names the command-line flags)."""
    for key, value in given.items():
        if value and key not in strategy.takes:
            takers = [s.name for s in registry.all_strategies() if key in s.takes]
            raise ConfigError(
                f"{key!r} applies only to the strategies {', '.join(takers)}, not to {strategy.name!r}; "
                "leave it out or pick one of those"
            )


def search_request(state: ServerState, req: _Question, **fields: Any) -> registry.SearchRequest:
    """The registry's request for an API request: its question, filters, prefix and profile (default:
    the server's), the server's embedder, and ``fields`` (the others the API request carries)."""
    return registry.SearchRequest(
        question=req.question,
        profile=_profile(state, req.profile),
        filters=req.filters,
        prefix=req.prefix,
        embedder=state.embedder,
        **fields,
    )


def _registry_request(
    state: ServerState, req: _Request, *, explain: bool = False, from_: int = 0
) -> tuple[registry.Strategy, registry.SearchRequest]:
    """The registry's strategy and request for ``req``, checked before anything is embedded or sent."""
    strategy = registry.get(req.strategy)
    check_options(strategy, explain=explain, heads=req.heads)
    request = search_request(
        state,
        req,
        size=req.size,
        from_=from_,
        papers=req.papers,
        heads=req.heads,
        explain=explain,
        sort=req.sort,
    )
    strategy.check(request)
    return strategy, request


def _serve_hit(hit: Hit) -> ServeHit:
    return ServeHit(**dict(hit), score_bar=score_bar(hit))  # nested models passed as they are


def paper_metadata(es, prefix: str, paper_ids: list[str]) -> dict[str, dict]:
    """paper id -> its :data:`PAPER_FIELDS` from ``<prefix>papers`` (one ``_mget``; a paper the
    index does not hold is left out)."""
    if not paper_ids:
        return {}
    resp = es.mget(index=f"{prefix}papers", ids=list(dict.fromkeys(paper_ids)), source=list(PAPER_FIELDS))
    return {d["_id"]: d.get("_source") or {} for d in resp["docs"] if d.get("found")}


def to_serve_result(
    result: SearchResult,
    *,
    papers: bool,
    routing: dict | None = None,
    metadata: dict[str, dict] | None = None,
) -> ServeSearchResult:
    """``result`` in the API's shape; ``metadata`` (:func:`paper_metadata`) fills each paper's fields."""
    fields = {k: v for k, v in result if k not in ("hits", "papers")}
    meta = metadata or {}
    return ServeSearchResult(
        **fields,
        hits=[_serve_hit(h) for h in result.hits],
        papers=[
            ServePaperHit(
                paper_id=p.paper_id,
                title=p.title,
                score=p.score,
                chunks=[_serve_hit(h) for h in p.chunks],
                **{k: v for k, v in meta.get(p.paper_id, {}).items() if k in PAPER_FIELDS and v is not None},
            )
            for p in result.papers
        ]
        if papers
        else [],
        routing=Routing.model_validate(routing) if routing else None,
    )


def run_search(state: ServerState, req: SearchRequest) -> ServeSearchResult:
    """``req`` ranked by its strategy from the registry, in the API's answer shape."""
    from scholar_es.projection.search import HeadsStrategy

    strategy, request = _registry_request(state, req, explain=req.explain, from_=req.from_)
    native = strategy.execute(state.es, strategy.prepare(state.es, request))
    routing = strategy.routing(native) if isinstance(strategy, HeadsStrategy) else None
    # multisection always returns its papers: the paper view only when asked for, as for the others
    result = strategy.result(native, request)
    metadata = paper_metadata(state.es, req.prefix, [p.paper_id for p in result.papers]) if req.papers else {}
    return to_serve_result(result, papers=req.papers, routing=routing, metadata=metadata)


def run_query(state: ServerState, req: QueryRequest) -> QueryResponse:
    """What ``req``'s strategy would send (``scholar-es query``'s json and console forms)."""
    from querybuilder.render import to_console

    strategy, request = _registry_request(state, req)
    bodies = strategy.prepare(state.es, request).bodies()
    return QueryResponse(
        strategy=strategy.name, index=request.index, request=bodies, console=to_console(bodies, request.index)
    )


def strategy_infos(state: ServerState, prefix: str = "") -> list[StrategyInfo]:
    """Every strategy of the registry, and whether heads are stored for those that need them."""
    stored: list[str] | None = None
    out = []
    for s in registry.all_strategies():
        heads = None
        if s.needs.heads:
            if stored is None:
                from scholar_es.projection.store import list_heads

                stored = list_heads(state.es, prefix)
            heads = stored
        n = s.needs
        out.append(
            StrategyInfo(
                name=s.name,
                description=s.description,
                needs=NeedsInfo(
                    vector=n.vector,
                    heads=n.heads,
                    license=n.license,
                    min_version=n.min_version,
                    note=n.note,
                    summary=n.describe(),
                ),
                options=[o for o in API_OPTIONS if o in s.takes],
                heads=heads,
                available=heads is None or bool(heads),
            )
        )
    return out


def _json(model: BaseModel) -> Response:
    """The model as JSON, serialized once by pydantic (FastAPI's response_model path would
    validate and encode it a second time: milliseconds on a large answer)."""
    return Response(model.model_dump_json(), media_type="application/json")


def router(state: ServerState) -> APIRouter:
    from scholar_es import __version__

    r = APIRouter(prefix="/_scholar", tags=["search"])

    @r.get("/health", response_model=Health, responses={503: {"model": Health, "description": "Not green"}})
    def health_route(prefix: str = "") -> Response:
        """Green (200) only when the target answers, ``<prefix>chunks`` exists with the ``_meta``
        ``scholar-es index`` records and the model is loaded; otherwise yellow or red with the
        reasons, answered 503 (so a load balancer routes no traffic here)."""
        h = health(state, __version__, prefix)
        return Response(
            h.model_dump_json(),
            status_code=200 if h.status == "green" else 503,
            media_type="application/json",
        )

    @r.get("/strategies", response_model=list[StrategyInfo])
    def strategies_route(prefix: str = "") -> list[StrategyInfo]:
        """The strategies /_scholar/search accepts (the registry's), what each needs, the options
        it takes, and for those that need heads the heads stored under ``prefix``."""
        return strategy_infos(state, prefix)

    @r.post("/search", response_model=ServeSearchResult)
    def search_route(req: SearchRequest) -> Response:
        """Rank the question with any strategy of GET /_scholar/strategies: hits with full chunk
        text, paragraph ids, section type, scores and (with ``explain``) score parts; ``papers``
        adds the paper view; the heads strategies say how the vector was routed."""
        return _json(run_search(state, req))

    @r.post("/query", response_model=QueryResponse)
    def query_route(req: QueryRequest) -> QueryResponse:
        """The Elasticsearch DSL the search would send, as JSON and as Kibana console text
        (multisection: the _msearch of its sections; its re-scoring search depends on their hits)."""
        return run_query(state, req)

    @r.post("/multisection", response_model=MultiSectionResult)
    def multisection_route(req: MultisectionRequest) -> Response:
        """The question split into 1-5 sections, one _msearch, re-scored, aggregated to papers."""
        strategy = registry.get("multisection")
        request = search_request(state, req, size=req.papers, show_plan=req.show_plan)
        strategy.check(request)
        native: MultiSectionResult = strategy.execute(state.es, strategy.prepare(state.es, request))
        return _json(native)

    return r
