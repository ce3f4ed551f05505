"""Stage 5: the re-scored chunks grouped into papers, each with quotes.

Papers are ranked by their best chunk's score (the chunks arrive best first, so a paper's
rank is the rank of its first chunk); the top ``papers`` (20) are kept, each with its best
``per_paper`` (3) chunks: section type, heading, text, score and the searches that found it.

Quotes. A chunk whose text is empty or shorter than :data:`MIN_QUOTE_CHARS` (20) characters
(whitespace collapsed) is no usable quote: it quotes the paper's abstract instead, or when that
is unusable too, the paper's first paragraph (its first chunk by position that is not the
abstract and has a usable text). The paper's own ``quote`` is its best chunk with a usable text,
else the same fallback. The abstracts and first paragraphs are fetched only for the papers that
need them, with ONE more search (:func:`fallback_search`: ``collapse`` on ``paper_id`` with inner
hits sorted by ``position``).
"""

from __future__ import annotations

from collections.abc import Sequence

from elasticsearch.dsl import Q, Search
from pydantic import BaseModel

from querybuilder.results import snippet
from scholar_es.multisection.rescore import Scored

MIN_QUOTE_CHARS = 20
PER_PAPER = 3
#: Chunks per paper read to find its first usable paragraph.
FIRST_PARAGRAPH_DEPTH = 10
QUOTE_SOURCES = ("chunk", "abstract", "first_paragraph", "none")
_FIRST = "first_chunks"


class SupportingChunk(BaseModel):
    chunk_id: str
    section_type: str = ""
    section_heading: str = ""
    score: float
    text: str = ""
    #: what to show: the chunk's text (cut to a snippet), or the paper's fallback quote
    quote: str = ""
    quote_source: str = "chunk"  # one of QUOTE_SOURCES
    #: search name -> the chunk's rank in that search ("keyword", "section 1", ...)
    found_by: dict[str, int] = {}
    hybrid_score: float | None = None
    crossencoder_score: float | None = None


class PaperResult(BaseModel):
    paper_id: str
    title: str = ""
    year: int | None = None
    venue: str | None = None
    score: float  # the best chunk's score
    chunks: list[SupportingChunk]
    quote: str = ""
    quote_source: str = "chunk"


def usable(text: str | None) -> bool:
    """A quote must hold at least MIN_QUOTE_CHARS characters (whitespace collapsed)."""
    return len(" ".join((text or "").split())) >= MIN_QUOTE_CHARS


def group_papers(scored: Sequence[Scored], papers: int = 20, per_paper: int = PER_PAPER) -> list[PaperResult]:
    """The top ``papers`` papers by best chunk, each with up to ``per_paper`` chunks (quotes from
    the chunks themselves; see :func:`apply_fallback` for the rest)."""
    out: dict[str, PaperResult] = {}
    for s in scored:
        p = out.get(s.paper_id)
        if p is None:
            if len(out) >= papers:
                continue
            src = s.source
            p = out[s.paper_id] = PaperResult(
                paper_id=s.paper_id,
                title=src.get("title") or "",
                year=src.get("year"),
                venue=src.get("venue"),
                score=s.score,
                chunks=[],
            )
        if len(p.chunks) >= per_paper:
            continue
        ok = usable(s.text)
        p.chunks.append(
            SupportingChunk(
                chunk_id=s.chunk_id,
                section_type=s.source.get("section_type") or "",
                section_heading=s.source.get("section_heading") or "",
                score=s.score,
                text=s.text,
                quote=snippet(s.text) if ok else "",
                quote_source="chunk" if ok else "none",
                found_by=dict(s.found_by),
                hybrid_score=s.hybrid_score,
                crossencoder_score=s.crossencoder_score,
            )
        )
    for p in out.values():
        best = next((c for c in p.chunks if c.quote_source == "chunk"), None)
        p.quote, p.quote_source = (best.quote, "chunk") if best else ("", "none")
    return list(out.values())


def needs_fallback(papers: Sequence[PaperResult]) -> list[str]:
    """Ids of the papers with at least one chunk without a usable quote."""
    return [
        p.paper_id
        for p in papers
        if any(c.quote_source != "chunk" for c in p.chunks) or p.quote_source != "chunk"
    ]


def fallback_search(paper_ids: Sequence[str], depth: int = FIRST_PARAGRAPH_DEPTH) -> Search:
    """One hit per paper (its abstract in ``_source``) with its first ``depth`` chunks by position."""
    fields = ["chunk_id", "paper_id", "section_type", "chunk_text", "position"]
    return (
        Search()
        .query(Q("bool", filter=[Q("terms", paper_id=list(paper_ids))]))
        .extra(size=len(paper_ids))
        .source(["paper_id", "abstract"])
        .collapse(
            "paper_id",
            inner_hits={"name": _FIRST, "size": depth, "sort": [{"position": "asc"}], "_source": fields},
        )
    )


def fallback_quotes(response: dict) -> dict[str, tuple[str, str]]:
    """paper id -> (quote, source) from the response of :func:`fallback_search`."""
    out: dict[str, tuple[str, str]] = {}
    for hit in response.get("hits", {}).get("hits", []):
        src = hit.get("_source") or {}
        paper_id = str(src.get("paper_id", ""))
        abstract = str(src.get("abstract") or "")
        if usable(abstract):
            out[paper_id] = (snippet(abstract), "abstract")
            continue
        inner = hit.get("inner_hits", {}).get(_FIRST, {}).get("hits", {}).get("hits", [])
        first = next(
            (
                h["_source"]
                for h in inner
                if (h.get("_source") or {}).get("section_type") != "abstract"
                and usable((h.get("_source") or {}).get("chunk_text"))
            ),
            None,
        )
        out[paper_id] = (snippet(first["chunk_text"]), "first_paragraph") if first else ("", "none")
    return out


def apply_fallback(papers: Sequence[PaperResult], quotes: dict[str, tuple[str, str]]) -> list[PaperResult]:
    """Copies of ``papers`` whose unusable chunk quotes (and paper quote) take the fallback."""
    out = []
    for p in papers:
        quote, source = quotes.get(p.paper_id, ("", "none"))
        chunks = [
            c if c.quote_source == "chunk" else c.model_copy(update={"quote": quote, "quote_source": source})
            for c in p.chunks
        ]
        update: dict = {"chunks": chunks}
        if p.quote_source != "chunk":
            update.update(quote=quote, quote_source=source)
        out.append(p.model_copy(update=update))
    return out
