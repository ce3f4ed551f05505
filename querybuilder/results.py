"""What a search returns: typed hits, papers and results, and the pieces that make them.

:class:`SearchResult` is what every strategy's answer becomes (``scholar-es search --json``,
:func:`querybuilder.strategies.search`); its hits are :class:`Hit` (a chunk, its source fields,
its score and, with ``explain``, its :class:`ScoreParts`), its paper view :class:`PaperHit`.
:func:`to_hit` makes a hit of a raw Elasticsearch hit, :func:`parse_explanation` takes an
``_explanation`` apart, :func:`cap_hits`/:func:`group_papers` apply the per-paper cap and the
paper view where Elasticsearch did not (``querybuilder.run``).
"""

from __future__ import annotations

import re

from pydantic import BaseModel

SNIPPET_CHARS = 300


class ScoreParts(BaseModel):
    """A hit's score taken apart from Elasticsearch's ``_explanation``."""

    total: float
    #: BM25 per field: the sum of the field's term scores (field boost included, before
    #: dis_max tie-breaking and saturation)
    bm25: dict[str, float] = {}
    #: what the text part adds to the score (hybrid: bm25_weight * saturation(BM25, k))
    text: float | None = None
    #: what the kNN part adds (similarity score x knn weight)
    knn: float | None = None
    #: the section multiplier applied (1.0 when no function matched)
    section_multiplier: float | None = None
    #: rrf-client: the hit's 1-based rank in each leg it appears in
    ranks: dict[str, int] = {}


class Hit(BaseModel):
    chunk_id: str
    paper_id: str
    section_type: str = ""
    section_heading: str = ""
    title: str = ""
    year: int | None = None
    venue: str | None = None
    score: float
    snippet: str = ""
    #: the whole chunk text (``snippet`` is its first ~300 characters)
    chunk_text: str = ""
    #: the source paragraphs the chunk covers (``<paper>#<section>.<paragraph>``, ``<paper>#abs``)
    paragraph_ids: list[str] = []
    explanation: ScoreParts | None = None


class PaperHit(BaseModel):
    paper_id: str
    title: str = ""
    score: float
    chunks: list[Hit]


class SearchResult(BaseModel):
    question: str
    strategy: str
    intent_rule: str
    search_type: str
    index: str
    total: int | None
    took_ms: int
    hits: list[Hit]
    papers: list[PaperHit] = []
    request: dict | list
    #: how the question was shortened, if it was: the text query bounded by Elasticsearch's
    #: clause limit, the question longer than the embedding model reads
    notes: list[str] = []


def page_of(result: SearchResult, start: int) -> SearchResult:
    """``result`` without its first ``start`` hits and papers: the page a request's ``from_``
    asks for (the plan ranked ``from_ + size`` of them, :func:`querybuilder.plan.plan_for`)."""
    if not start:
        return result
    return result.model_copy(update={"hits": result.hits[start:], "papers": result.papers[start:]})


# --- explanations ---------------------------------------------------------------------------
_WEIGHT = re.compile(r"^weight\((?:Synonym\()?([^:\s()]+):")


def parse_explanation(expl: dict) -> ScoreParts:
    """Score parts from an ``_explanation`` tree (Elasticsearch's and the engine's wording)."""
    parts = ScoreParts(total=float(expl.get("value", 0.0)))
    bm25: dict[str, float] = {}

    def walk(node: dict, factor: float = 1.0) -> None:
        desc, value = str(node.get("description", "")), float(node.get("value", 0.0))
        details = node.get("details") or []
        m = _WEIGHT.match(desc)
        if m:
            bm25[m[1]] = bm25.get(m[1], 0.0) + value * factor
            return
        boosts = [d for d in details if d.get("description") == "boost"]
        if desc.startswith("product of") and len(boosts) == 1:
            # a query boost shown as its own factor (the engine's style; Elasticsearch folds field
            # boosts into each term's BM25 "boost" node instead)
            for d in details:
                if d is not boosts[0]:
                    walk(d, factor * float(boosts[0].get("value", 1.0)))
            return
        if desc.startswith("within top k"):
            parts.knn = (parts.knn or 0.0) + value
            return
        if any(d.get("description") == "primaryWeight" and not d.get("value") for d in details):
            return  # a rescored hit's first pass, weighted 0 (hybrid's rescore replaces it)
        if desc.startswith("script score function") and "cosineSimilarity" in desc:
            parts.knn = (parts.knn or 0.0) + value  # the rescore's vector part
            rescored.append(True)
            return
        if desc.startswith("script score function") and parts.text is None:
            parts.text = value
        if desc.startswith("min of") and any(str(d.get("description")) == "maxBoost" for d in details):
            parts.section_multiplier = value
        for d in details:
            walk(d, factor)

    rescored: list[bool] = []
    walk(expl)
    parts.bm25 = bm25
    if rescored and parts.text is None:
        parts.text = 0.0  # rescored with both signals, the text part matched nothing: it adds 0
    return parts


# --- hits -----------------------------------------------------------------------------------
def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return (cut[: cut.rfind(" ")] if " " in cut[limit // 2 :] else cut) + " …"


def to_hit(raw: dict, score: float | None = None) -> Hit:
    src = raw.get("_source") or {}
    return Hit(
        chunk_id=str(src.get("chunk_id") or raw.get("_id")),
        paper_id=str(src.get("paper_id", "")),
        section_type=src.get("section_type") or "",
        section_heading=src.get("section_heading") or "",
        title=src.get("title") or "",
        year=src.get("year"),
        venue=src.get("venue"),
        score=float(score if score is not None else (raw.get("_score") or 0.0)),
        snippet=snippet(src.get("chunk_text", "")),
        chunk_text=src.get("chunk_text") or "",
        paragraph_ids=[str(p) for p in src.get("paragraph_ids") or []],
        explanation=parse_explanation(raw["_explanation"]) if "_explanation" in raw else None,
    )


def group_papers(hits: list[Hit], n: int, cap: int) -> list[PaperHit]:
    """The first ``n`` papers in hit order, each with at most ``cap`` chunks (0 = all)."""
    papers: dict[str, PaperHit] = {}
    for h in hits:
        p = papers.get(h.paper_id)
        if p is None:
            if len(papers) >= n:
                continue
            p = papers[h.paper_id] = PaperHit(paper_id=h.paper_id, title=h.title, score=h.score, chunks=[])
        if cap == 0 or len(p.chunks) < cap:
            p.chunks.append(h)
    return list(papers.values())


def cap_hits(hits: list[Hit], size: int, cap: int) -> list[Hit]:
    counts: dict[str, int] = {}
    out = []
    for h in hits:
        if cap and counts.get(h.paper_id, 0) >= cap:
            continue
        counts[h.paper_id] = counts.get(h.paper_id, 0) + 1
        out.append(h)
        if len(out) >= size:
            break
    return out
