"""Multi-section search, end to end: the Python API for backend services.

:func:`multisection_search` runs the five stages (see ``docs/multisection.md``)::

    breakdown (decompose)  ->  ONE _msearch of 1 + N searches (msearch)  ->  de-duplication by
    chunk (merge)  ->  ONE re-scoring search with the original question's hybrid query over the
    candidate ids (rescore; optional cross-encoder)  ->  top papers with up to 3 chunks each and
    quote fallback (aggregate; one more search only when a quote is missing)

It is also available in two steps, :func:`prepare` (breakdown, embeddings, built searches:
nothing searched yet) and :func:`execute`, so a service can inspect or adjust the searches
before they run. The result carries a :class:`Plan`: the sections, each search as Kibana
console text (with ``show_plan``), how many candidates each contributed, the errors of failed
sub-searches, and the time of each stage.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel

from querybuilder.intent import analyze
from querybuilder.plan import MAX_RESULT_WINDOW, Filters
from querybuilder.profiles import Profile, load_profile
from querybuilder.render import to_console
from querybuilder.request import SearchRequest
from querybuilder.results import Hit, PaperHit, SearchResult, to_hit
from scholar_es.errors import ConfigError, ScholarEsError
from scholar_es.multisection.aggregate import (
    PER_PAPER,
    PaperResult,
    apply_fallback,
    fallback_quotes,
    fallback_search,
    group_papers,
    needs_fallback,
)
from scholar_es.multisection.decompose import (
    DEFAULT_LLM_TIMEOUT,
    LLM,
    Breakdown,
    Section,
    breakdown,
    survey_section,
)
from scholar_es.multisection.merge import merge
from scholar_es.multisection.msearch import (
    SubResult,
    SubSearch,
    build_searches,
    embed_texts,
    msearch_console,
    run_msearch,
)
from scholar_es.multisection.rescore import (
    Scored,
    crossencoder_rerank,
    load_crossencoder,
    question_plan,
    rescore_search,
    run_rescore,
)

STRATEGY = "multisection"


class SectionReport(BaseModel):
    """One search of the ``_msearch`` and what it brought."""

    name: str  # keyword, section 1, section 2, ...
    kind: str  # keyword, question, overview, facet, evaluation, survey
    title: str  # the text searched
    strategy: str  # bm25 (keyword) or sections
    search_type: str  # whose field boosts
    intent_rule: str  # whose section multipliers (sections only)
    index: str
    size: int
    hits: int = 0  # hits it returned
    new: int = 0  # candidates no earlier search had found
    unique: int = 0  # candidates no other search found
    in_results: int = 0  # supporting chunks of the returned papers that it found
    error: str | None = None
    status: int | None = None
    took_ms: int = 0
    console: str = ""  # Kibana console text (filled with show_plan)


class RescoreReport(BaseModel):
    strategy: str = "hybrid"
    search_type: str = ""
    candidates: int = 0
    scored: int = 0
    crossencoder: str | None = None
    took_ms: int = 0
    console: str = ""


class Plan(BaseModel):
    question: str
    rewritten: str
    keywords: str
    decomposer: str  # offline, llm, or fallback (the LLM failed: offline used)
    note: str = ""
    intent_rule: str
    survey: bool  # the question asks for surveys or overviews
    sections: list[SectionReport]  # the keyword search first, then one per section
    msearch_calls: int = 0
    candidates: int = 0
    rescore: RescoreReport = RescoreReport()
    quote_fallback: list[str] = []  # papers whose quotes came from the abstract or first paragraph
    errors: list[str] = []
    timings_ms: dict[str, float] = {}
    msearch_console: str = ""  # the whole _msearch as console text (filled with show_plan)


class MultiSectionResult(BaseModel):
    question: str
    papers: list[PaperResult]
    #: every candidate, best first, as re-scored (the chunk-level ranking)
    hits: list[Hit]
    plan: Plan
    took_ms: float


@dataclass
class Prepared:
    """Everything decided before searching: breakdown, sections, vectors and the built searches."""

    breakdown: Breakdown
    sections: tuple[Section, ...]
    question_vector: np.ndarray
    searches: list[SubSearch]
    #: the question's request, its profile loaded and its filters parsed
    request: SearchRequest
    timings_ms: dict[str, float] = field(default_factory=dict)


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def _check_size(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RESULT_WINDOW:
        raise ConfigError(f"{name} must be an integer from 1 to {MAX_RESULT_WINDOW}, got {value!r}")
    return value


def prepare(
    es,
    question: str | SearchRequest,
    *,
    llm: LLM | None = None,
    per_section: int = 50,
    keyword_size: int = 50,
    llm_timeout: float = DEFAULT_LLM_TIMEOUT,
    **options: Any,
) -> Prepared:
    """Stage 1 and the searches of stage 2, built but not run: for a
    :class:`~querybuilder.request.SearchRequest` (its question, ``embedder``, ``profile``,
    ``prefix`` and ``filters``), or the question with those as ``options``."""
    request = SearchRequest.of(question, **options)
    prof = request.profile if isinstance(request.profile, Profile) else load_profile(request.profile)
    request = request.replace(profile=prof, filters=Filters.parse(request.filters))
    _check_size("per_section", per_section)
    _check_size("keyword_size", keyword_size)
    t0 = time.perf_counter()
    b = breakdown(request.question, llm, timeout=llm_timeout)
    sections = list(b.sections)
    if analyze(b.question).survey and not any(s.kind == "survey" for s in sections):
        extra = survey_section(b.question)
        if extra is not None:
            sections.insert(0, extra)
    t1 = time.perf_counter()
    vectors = embed_texts(
        es, [b.question, *(s.title for s in sections)], index=request.index, embedder=request.embedder
    )
    t2 = time.perf_counter()
    searches = build_searches(
        b, sections, vectors[1:], request, keyword_size=keyword_size, per_section=per_section
    )
    return Prepared(
        b,
        tuple(sections),
        vectors[0],
        searches,
        request,
        {"breakdown": _ms(t1 - t0), "embed": _ms(t2 - t1)},
    )


def _report(res: SubResult, contrib, show_plan: bool) -> SectionReport:
    s = res.search
    c = contrib.get(s.name)
    return SectionReport(
        name=s.name,
        kind=s.kind,
        title=s.title,
        strategy=s.plan.strategy,
        search_type=s.plan.search_type,
        intent_rule=s.plan.intent.rule if s.plan.section_multipliers else "",
        index=s.index,
        size=s.plan.size,
        hits=c.hits if c else 0,
        new=c.new if c else 0,
        unique=c.unique if c else 0,
        error=res.error,
        status=res.status,
        took_ms=res.took_ms,
        console=s.console() if show_plan else "",
    )


def execute(
    es, prepared: Prepared, *, papers: int = 20, show_plan: bool = False, crossencoder=None
) -> MultiSectionResult:
    """Stages 2-5 for a prepared question."""
    _check_size("papers", papers)
    model = load_crossencoder(crossencoder) if crossencoder is not None else None  # fail before searching
    start = time.perf_counter()
    timings = dict(prepared.timings_ms)
    b = prepared.breakdown
    results, msearch_s = run_msearch(es, prepared.searches)
    timings["msearch"] = _ms(msearch_s)
    errors = [
        f"{r.search.name} ({r.search.title!r}) failed with status {r.status}: {r.error}"
        for r in results
        if r.error is not None
    ]
    if results and len(errors) == len(results):
        raise ScholarEsError("every search of the _msearch failed: " + "; ".join(errors))
    candidates, contrib = merge(results)
    reports = [_report(r, contrib, show_plan) for r in results]
    qplan = question_plan(prepared.request.replace(question=b.question), len(candidates))
    rescore = RescoreReport(search_type=qplan.search_type, candidates=len(candidates))
    scored: list[Scored] = []
    if candidates:
        t = time.perf_counter()
        search = rescore_search(qplan, prepared.question_vector, [c.chunk_id for c in candidates])
        scored, took = run_rescore(es, qplan.index, search, {c.chunk_id: c.found_by for c in candidates})
        timings["rescore"] = _ms(time.perf_counter() - t)
        rescore.scored, rescore.took_ms = len(scored), took
        if show_plan:
            rescore.console = to_console(search, qplan.index)
        if model is not None:
            rescore.crossencoder = (
                crossencoder if isinstance(crossencoder, str) else type(crossencoder).__name__
            )
            scored, ce_s = crossencoder_rerank(model, b.question, scored)
            timings["crossencoder"] = _ms(ce_s)
    paper_results = group_papers(scored, papers, PER_PAPER)
    fallback = needs_fallback(paper_results)
    if fallback:
        t = time.perf_counter()
        resp = es.search(index=qplan.index, body=fallback_search(fallback).to_dict())
        paper_results = apply_fallback(
            paper_results, fallback_quotes(resp.body if hasattr(resp, "body") else resp)
        )
        timings["quote_fallback"] = _ms(time.perf_counter() - t)
    for r in reports:
        r.in_results = sum(1 for p in paper_results for c in p.chunks if r.name in c.found_by)
    timings["total"] = round(sum(timings.values()), 1)
    plan = Plan(
        question=b.question,
        rewritten=b.rewritten,
        keywords=b.keywords,
        decomposer=b.source,
        note=b.note,
        intent_rule=analyze(b.question).rule,
        survey=analyze(b.question).survey,
        sections=reports,
        msearch_calls=1 if prepared.searches else 0,
        candidates=len(candidates),
        rescore=rescore,
        quote_fallback=fallback,
        errors=errors,
        timings_ms=timings,
        msearch_console=msearch_console(prepared.searches) if show_plan else "",
    )
    hits = [to_hit({"_id": s.chunk_id, "_source": s.source}, score=s.score) for s in scored]
    total_ms = (
        prepared.timings_ms.get("breakdown", 0.0)
        + prepared.timings_ms.get("embed", 0.0)
        + _ms(time.perf_counter() - start)
    )
    return MultiSectionResult(
        question=b.question, papers=paper_results, hits=hits, plan=plan, took_ms=round(total_ms, 1)
    )


def multisection_search(
    es,
    question: str | SearchRequest,
    *,
    papers: int = 20,
    llm: LLM | None = None,
    per_section: int = 50,
    keyword_size: int = 50,
    llm_timeout: float = DEFAULT_LLM_TIMEOUT,
    **options: Any,
) -> MultiSectionResult:
    """One broad question -> the top ``papers`` papers, each with up to 3 supporting chunks.

    ``question``: the text, with ``options`` the fields of
    :class:`~querybuilder.request.SearchRequest` that apply (``embedder``, ``profile``,
    ``prefix``, ``filters``, ``show_plan``, ``crossencoder``), or a whole request.
    ``llm``: a callable prompt -> text for the breakdown (offline decomposer when None or when it
    fails or takes longer than ``llm_timeout`` s). ``embedder``: an ``indexer.embedder.Embedder``
    (default: the index's model). ``crossencoder``: a sentence-transformers CrossEncoder name or
    directory, or an object with ``predict(pairs)``; None (the default) keeps the hybrid order.
    ``show_plan``: fill the plan's console texts. Raises ConfigError for bad options or a missing
    index, ScholarEsError when every sub-search fails; a failed sub-search alone is reported in
    ``result.plan.errors`` and its section's ``error``.
    """
    request = SearchRequest.of(question, **options)
    prepared = prepare(
        es, request, llm=llm, per_section=per_section, keyword_size=keyword_size, llm_timeout=llm_timeout
    )
    return execute(
        es, prepared, papers=papers, show_plan=request.show_plan, crossencoder=request.crossencoder
    )


# --- for the CLI and the evaluation harness -----------------------------------------------------
def to_search_result(result: MultiSectionResult, size: int = 10) -> SearchResult:
    """The result in ``querybuilder.results.SearchResult`` form: ``hits`` = the best ``size`` chunks
    (re-scored order), ``papers`` = the ranked papers with their supporting chunks."""
    by_id = {h.chunk_id: h for h in result.hits}
    papers = [
        PaperHit(
            paper_id=p.paper_id,
            title=p.title,
            score=p.score,
            chunks=[by_id[c.chunk_id] for c in p.chunks if c.chunk_id in by_id],
        )
        for p in result.papers
    ]
    plan = result.plan
    return SearchResult(
        question=result.question,
        strategy=STRATEGY,
        intent_rule=plan.intent_rule,
        search_type=plan.rescore.search_type,
        index=next((s.index for s in plan.sections), ""),
        total=len(result.hits),
        took_ms=int(result.took_ms),
        hits=result.hits[:size],
        papers=papers,
        request={"sections": [s.title for s in plan.sections]},
    )


def render_plan(plan: Plan, consoles: bool = True) -> str:
    """The plan as text (what ``--show-plan`` prints)."""
    lines = [
        f"question:   {plan.question}",
        f"rewritten:  {plan.rewritten}",
        f"keywords:   {plan.keywords}",
        f"breakdown:  {plan.decomposer}" + (f" ({plan.note})" if plan.note else ""),
        f"intent:     {plan.intent_rule}" + (" (survey)" if plan.survey else ""),
        f"searches:   {len(plan.sections)} in {plan.msearch_calls} _msearch; {plan.candidates} candidates "
        f"after de-duplication by chunk",
        "",
    ]
    for s in plan.sections:
        head = f"[{s.name}] {s.kind}: {s.title!r}  ({s.strategy}, {s.search_type} boosts"
        head += f", {s.intent_rule} multipliers)" if s.intent_rule else ")"
        lines.append(head)
        if s.error:
            lines.append(f"    FAILED (status {s.status}): {s.error}")
        else:
            lines.append(
                f"    {s.hits} hits, {s.new} new candidates, {s.unique} found by no other search, "
                f"{s.in_results} in the results"
            )
        if consoles and s.console:
            lines += ["    " + x for x in s.console.rstrip("\n").split("\n")]
    r = plan.rescore
    lines += [
        "",
        f"[rescore] original question, {r.strategy} ({r.search_type} boosts) over {r.candidates} candidate "
        f"ids: {r.scored} scored" + (f"; cross-encoder {r.crossencoder}" if r.crossencoder else ""),
    ]
    if consoles and r.console:
        lines += ["    " + x for x in r.console.rstrip("\n").split("\n")]
    if plan.quote_fallback:
        lines.append(f"[quotes] fallback to abstract / first paragraph for {', '.join(plan.quote_fallback)}")
    for e in plan.errors:
        lines.append(f"[error] {e}")
    lines.append("[time ms] " + ", ".join(f"{k} {v:g}" for k, v in plan.timings_ms.items()))
    return "\n".join(lines) + "\n"


def render_result(result: MultiSectionResult, show_plan: bool = False) -> str:
    """Papers with their supporting chunks as text (the plan first with ``show_plan``)."""
    lines = [render_plan(result.plan)] if show_plan else []
    for rank, p in enumerate(result.papers, start=1):
        meta = ", ".join(str(x) for x in (p.year, p.venue) if x)
        lines.append(
            f"{rank:>2}. {p.score:.4f}  {p.title or p.paper_id}  [{p.paper_id}]"
            + (f" ({meta})" if meta else "")
        )
        for c in p.chunks:
            where = c.section_type + (f" / {c.section_heading}" if c.section_heading else "")
            via = "" if c.quote_source == "chunk" else f" [quote from {c.quote_source.replace('_', ' ')}]"
            lines.append(f"      {c.score:.4f}  {where}{via}: {c.quote}")
    if not result.papers:
        lines.append("no results")
    return "\n".join(lines) + "\n"


def eval_searcher(
    es,
    *,
    prefix: str = "",
    embedder=None,
    profile: Profile | str | None = None,
    size: int = 100,
    wall_times_ms: list[float] | None = None,
    plans: list[Plan] | None = None,
    **options,
):
    """A ``(question, filters) -> (hits, seconds)`` search for ``evaluation.runner.run_queries``
    (its ``SearchFn``): the best ``size`` chunks as ``{"chunk_id", "paper_id"}`` dicts, and the
    seconds spent in Elasticsearch calls (the ``_msearch``, the re-scoring search and the quote
    fallback if any), which is what the harness times for the other strategies. The whole call's
    wall time (breakdown and embedding included) is appended to ``wall_times_ms`` and each plan
    to ``plans`` when given. ``options``: more keywords of :func:`multisection_search`."""

    def search(question: str, filters: dict | None) -> tuple[list[dict], float]:
        start = time.perf_counter()
        r = multisection_search(
            es, question, embedder=embedder, profile=profile, prefix=prefix, filters=filters, **options
        )
        if wall_times_ms is not None:
            wall_times_ms.append((time.perf_counter() - start) * 1000.0)
        if plans is not None:
            plans.append(r.plan)
        t = r.plan.timings_ms
        seconds = (t.get("msearch", 0.0) + t.get("rescore", 0.0) + t.get("quote_fallback", 0.0)) / 1000.0
        return [{"chunk_id": h.chunk_id, "paper_id": h.paper_id} for h in r.hits[:size]], seconds

    return search
