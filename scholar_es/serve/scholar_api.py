"""The search API for backends, under ``/_scholar/`` (an index name never starts with ``_``).

Every route calls the project's Python API: :func:`querybuilder.run.search`,
:func:`scholar_es.multisection.flow.multisection_search`, :func:`querybuilder.render.to_console`.
What this layer adds to a search answer: each hit's full chunk text and paragraph ids (one
``ids`` search for the hits of the answer, until the search result carries them itself) and
its score parts as the three numbers the page draws as a bar.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from querybuilder.plan import STRATEGIES, Filters
from querybuilder.profiles import PROFILES
from querybuilder.run import Hit, PaperHit, SearchResult
from scholar_es.client import display_target
from scholar_es.errors import ConfigError, choices
from scholar_es.multisection.flow import MultiSectionResult

MULTISECTION = "multisection"


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="The question, any text (never parsed as query syntax).")
    filters: Filters | None = None
    prefix: str = Field("", description="Prefix of the index aliases (<prefix>chunks).")
    profile: str | None = Field(
        None, description="A built-in profile name; default: the profile the server was started with."
    )


class SearchRequest(_Request):
    strategy: str = Field("hybrid", description="A strategy from GET /_scholar/strategies.")
    size: int = Field(10, ge=1, le=10_000, description="Hits (papers with `papers`).")
    papers: bool = Field(False, description="Paper view: the top papers, each with its best chunks.")
    explain: bool = Field(False, description="Take each hit's score apart (BM25, kNN, section multiplier).")


class QueryRequest(_Request):
    strategy: str = "hybrid"
    size: int = Field(10, ge=1, le=10_000)
    papers: bool = False


class MultisectionRequest(_Request):
    papers: int = Field(10, ge=1, le=1000, description="Papers to return.")
    show_plan: bool = Field(False, description="Fill each section's Kibana console text.")


class ScoreBar(BaseModel):
    """A hit's score as three additive parts: score = bm25 + knn + section."""

    bm25: float  # what the text (BM25) part adds
    knn: float  # what the kNN part adds
    section: float  # what the section multiplier adds on top of the two


class ServeHit(Hit):
    chunk_text: str = ""  # the whole chunk (``snippet`` is its first 300 characters)
    paragraph_ids: list[str] = []  # the paragraphs the chunk covers (<paper>#<section>.<paragraph>)
    score_bar: ScoreBar | None = None  # with ``explain``, for the strategies that explain


class ServePaperHit(PaperHit):
    chunks: list[ServeHit]


class ServeSearchResult(SearchResult):
    hits: list[ServeHit]
    papers: list[ServePaperHit] = []


class QueryResponse(BaseModel):
    strategy: str
    index: str
    request: dict | list  # the search body (rrf-client: the two bodies of its _msearch)
    console: str  # Kibana dev console text, runnable with `scholar-es console`


class StrategyInfo(BaseModel):
    name: str
    summary: str
    requires: str


class Health(BaseModel):
    status: Literal["green", "starting", "red"]
    engine: Literal["embedded", "cluster"]
    target: str
    model: str
    model_loaded: bool
    model_error: str | None = None
    version: str


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


def _profile(state, name: str | None):
    if name is None:
        return state.profile
    if name not in PROFILES:
        raise ConfigError(f"unknown profile {name!r}; built-in profiles: {choices(PROFILES)}")
    return PROFILES[name]


def _strategy(name: str) -> str:
    if name != MULTISECTION and name not in STRATEGIES:
        raise ConfigError(
            f"unknown strategy {name!r}; valid strategies: {choices([*STRATEGIES, MULTISECTION])}"
        )
    return name


def enrich(es, result: SearchResult) -> ServeSearchResult:
    """The result with full chunk texts, paragraph ids and score bars (one ``ids`` search)."""
    hits = [*result.hits, *(h for p in result.papers for h in p.chunks)]
    ids = list(dict.fromkeys(h.chunk_id for h in hits))
    sources: dict[str, dict] = {}
    if ids:
        resp = es.search(
            index=result.index,
            query={"ids": {"values": ids}},
            source=["chunk_text", "paragraph_ids"],
            size=len(ids),
        ).body
        sources = {h["_id"]: h.get("_source") or {} for h in resp["hits"]["hits"]}

    def one(h: Hit) -> dict:
        src = sources.get(h.chunk_id, {})
        return {
            **h.model_dump(),
            "chunk_text": src.get("chunk_text") or h.snippet,
            "paragraph_ids": list(src.get("paragraph_ids") or []),
            "score_bar": score_bar(h),
        }

    data = result.model_dump()
    data["hits"] = [one(h) for h in result.hits]
    data["papers"] = [{**p.model_dump(), "chunks": [one(h) for h in p.chunks]} for p in result.papers]
    return ServeSearchResult.model_validate(data)


def run_search(state, req: SearchRequest) -> ServeSearchResult:
    from querybuilder.run import search

    strategy = _strategy(req.strategy)
    profile = _profile(state, req.profile)
    if strategy == MULTISECTION:
        from scholar_es.multisection.flow import multisection_search, to_search_result

        ms = multisection_search(
            state.es,
            req.question,
            embedder=state.embedder,
            profile=profile,
            prefix=req.prefix,
            filters=req.filters,
            papers=req.size,
        )
        result = to_search_result(ms, size=req.size)
        if not req.papers:
            result = result.model_copy(update={"papers": []})
    else:
        result = search(
            state.es,
            req.question,
            strategy=strategy,
            profile=profile,
            embedder=state.embedder,
            size=req.size,
            papers=req.papers,
            filters=req.filters,
            explain=req.explain,
            prefix=req.prefix,
        )
    return enrich(state.es, result)


def _json(model: BaseModel) -> Response:
    """The model as JSON, serialized once by pydantic (FastAPI's response_model path would
    validate and encode it a second time: milliseconds on a large answer)."""
    return Response(model.model_dump_json(), media_type="application/json")


def router(state) -> APIRouter:
    from scholar_es import __version__

    r = APIRouter(prefix="/_scholar", tags=["search"])

    @r.get("/health", response_model=Health)
    def health() -> Health:
        """Liveness and readiness: green once the model is loaded."""
        ready = state.model_ready.is_set()
        status = "red" if state.model_error else ("green" if ready else "starting")
        return Health(
            status=status,
            engine="embedded" if state.embedded else "cluster",
            target=display_target(state.target),
            model=state.embedder.name,
            model_loaded=ready and not state.model_error,
            model_error=state.model_error,
            version=__version__,
        )

    @r.get("/strategies", response_model=list[StrategyInfo])
    def strategies() -> list[StrategyInfo]:
        """The strategies /_scholar/search accepts, with what each needs from a cluster."""
        out = [StrategyInfo(name=s.name, summary=s.summary, requires=s.requires) for s in STRATEGIES.values()]
        out.append(
            StrategyInfo(
                name=MULTISECTION,
                summary="the question split into focused sections, one _msearch, re-scored, per paper",
                requires="8.15+, Basic license",
            )
        )
        return out

    @r.post("/search", response_model=ServeSearchResult)
    def search_route(req: SearchRequest) -> ServeSearchResult:
        """Rank the question: hits with full chunk text, paragraph ids, section type, scores and
        (with ``explain``) score parts; ``papers`` adds the paper view."""
        return _json(run_search(state, req))

    @r.post("/query", response_model=QueryResponse)
    def query_route(req: QueryRequest) -> QueryResponse:
        """The Elasticsearch DSL the search would send, as JSON and as Kibana console text."""
        from querybuilder.dsl import build_search
        from querybuilder.plan import make_plan
        from querybuilder.render import to_console
        from querybuilder.run import embed_question

        strategy = _strategy(req.strategy)
        if strategy == MULTISECTION:
            raise ConfigError(
                "multisection sends several searches; POST /_scholar/multisection with show_plan"
            )
        plan = make_plan(
            req.question,
            strategy=strategy,
            profile=_profile(state, req.profile),
            size=req.size,
            papers=req.papers,
            filters=req.filters,
            prefix=req.prefix,
        )
        vector = embed_question(state.es, plan, state.embedder) if STRATEGIES[strategy].uses_vector else None
        built = build_search(plan, vector)
        body = [s.to_dict() for s in built] if isinstance(built, tuple) else built.to_dict()
        return QueryResponse(
            strategy=strategy, index=plan.index, request=body, console=to_console(built, plan.index)
        )

    @r.post("/multisection", response_model=MultiSectionResult)
    def multisection_route(req: MultisectionRequest):
        """The question split into 1-5 sections, one _msearch, re-scored, aggregated to papers."""
        from scholar_es.multisection.flow import multisection_search

        return _json(
            multisection_search(
                state.es,
                req.question,
                embedder=state.embedder,
                profile=_profile(state, req.profile),
                prefix=req.prefix,
                filters=req.filters,
                papers=req.papers,
                show_plan=req.show_plan,
            )
        )

    return r
