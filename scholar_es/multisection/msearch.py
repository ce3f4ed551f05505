"""Stage 2: the keyword query and every section title, searched in ONE ``_msearch``.

Every search is built by :mod:`querybuilder` (``make_plan`` + ``build_one``, so
``elasticsearch.dsl`` objects) on ``<prefix>chunks``:

* **keyword** -- the breakdown's keyword query, strategy ``bm25`` with the *keyword* field boosts
  (title 3, abstract 2, chunk_text 1 by default), at **paper level**: ``collapse`` on
  ``paper_id`` (no inner hits), ``size`` = ``keyword_size`` (50), so 50 papers, each
  represented by its best-matching chunk. The chunks index is searched rather than
  ``<prefix>papers`` because the papers index has no chunk text (the keyword boosts name
  ``chunk_text``) and because candidates must be chunks (the merge is by ``chunk_id`` and the
  re-scoring query filters on ``chunk_id``).
* **one per section** -- the section title, strategy ``sections`` (hybrid inside
  ``function_score``) with the *section* field boosts (the *survey* boosts for a survey section)
  and the section multipliers of the TITLE's own intent rule, ``size`` = ``per_section`` (50)
  passages, no per-paper cap. Each title is embedded (one embedding call for all titles).

:func:`run_msearch` sends them all in one ``es.msearch`` call and never raises for one failed
item: an item with ``{"error": ..., "status": N}`` becomes a :class:`SubResult` with ``error``
set, and the other items still count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from elasticsearch.dsl import Search

from querybuilder.plan import QueryPlan
from querybuilder.render import to_console
from querybuilder.request import SearchRequest
from querybuilder.run import check_model, index_meta
from querybuilder.strategies import build_one, make_plan
from scholar_es.errors import ConfigError
from scholar_es.multisection.decompose import Breakdown, Section

KEYWORD = "keyword"


@dataclass(frozen=True)
class SubSearch:
    """One search of the ``_msearch``: its name, what it searches and the built request."""

    name: str  # "keyword", "section 1", "section 2", ...
    kind: str  # keyword, or the section's kind
    title: str  # the text searched
    plan: QueryPlan
    search: Search

    @property
    def index(self) -> str:
        return self.plan.index

    def body(self) -> dict:
        return self.search.to_dict()

    def with_index(self, index: str) -> SubSearch:
        """The same search against another index (what a misconfigured section would do)."""
        return SubSearch(
            self.name,
            self.kind,
            self.title,
            self.plan.with_changes(index=index),
            self.search.index().index(index),
        )

    def console(self) -> str:
        """Kibana dev-console text of this search alone."""
        return to_console(self.search, self.index)


@dataclass
class SubResult:
    """What one search of the ``_msearch`` returned: raw hits, or the error of a failed item."""

    search: SubSearch
    hits: list[dict] = field(default_factory=list)
    error: str | None = None
    status: int | None = None
    took_ms: int = 0


def _sizes_ok(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise ConfigError(f"{name} must be an integer from 1 to 10000, got {value!r}")
    return value


def sub_plan(request: SearchRequest, text: str, *, strategy: str, size: int, search_type: str) -> QueryPlan:
    """The plan of one search of the ``_msearch``: ``text`` with ``strategy`` and ``search_type``
    under ``request``'s profile, prefix and filters, ``size`` hits and no per-paper cap."""
    sub = request.replace(question=text, size=size, papers=False, search_type=search_type)
    return make_plan(sub, strategy=strategy).with_changes(cap=0, collapse=False)


def keyword_search(breakdown: Breakdown, request: SearchRequest, *, size: int = 50) -> SubSearch:
    """BM25 on the keyword query with the keyword field boosts, one chunk per paper, ``size`` papers."""
    plan = sub_plan(
        request,
        breakdown.keywords,
        strategy="bm25",
        size=_sizes_ok("keyword_size", size),
        search_type="keyword",
    )
    # one hit per paper: collapse without inner hits
    search = build_one(plan).collapse("paper_id")
    return SubSearch(KEYWORD, KEYWORD, breakdown.keywords, plan, search)


def section_search(
    section: Section,
    vector: Sequence[float] | np.ndarray,
    request: SearchRequest,
    *,
    name: str,
    size: int = 50,
) -> SubSearch:
    """Hybrid with the section multipliers of the title's own intent, ``size`` passages (no cap)."""
    search_type = "survey" if section.kind == "survey" else "section"
    plan = sub_plan(
        request,
        section.title,
        strategy="sections",
        size=_sizes_ok("per_section", size),
        search_type=search_type,
    )
    return SubSearch(name, section.kind, section.title, plan, build_one(plan, vector))


def embed_texts(es, texts: list[str], *, index: str, embedder=None) -> np.ndarray:
    """The texts' vectors in one embedding call, checked against the index's model and dims
    (``es`` None: nothing to check against, ``embedder`` or the default model; for printing the
    searches without a target)."""
    meta = index_meta(es, index) if es is not None else {}
    if embedder is None:
        from indexer.embedder import DEFAULT_MODEL, Embedder

        embedder = Embedder(meta.get("embedding_model") or DEFAULT_MODEL)
    check_model(meta, model=getattr(embedder, "name", None))
    vectors = np.asarray(embedder.encode(list(texts)), dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(texts):
        raise ConfigError(f"the embedder returned an array of shape {vectors.shape} for {len(texts)} texts")
    check_model(meta, dims=int(vectors.shape[1]))
    return vectors


def build_searches(
    breakdown: Breakdown,
    sections: Sequence[Section],
    vectors: np.ndarray,
    request: SearchRequest,
    *,
    keyword_size: int = 50,
    per_section: int = 50,
) -> list[SubSearch]:
    """[keyword search, one search per section] (``vectors[i]`` embeds ``sections[i].title``)
    under ``request``'s profile, prefix and filters."""
    if len(vectors) != len(sections):
        raise ConfigError(f"{len(sections)} sections but {len(vectors)} vectors")
    out = [keyword_search(breakdown, request, size=keyword_size)]
    for i, (section, vector) in enumerate(zip(sections, vectors, strict=True), start=1):
        out.append(section_search(section, vector, request, name=f"section {i}", size=per_section))
    return out


def msearch_lines(searches: Sequence[SubSearch]) -> list[dict]:
    """The ``_msearch`` body: a header ``{"index": ...}`` and the search body, per search."""
    return [x for s in searches for x in ({"index": s.index}, s.body())]


def msearch_console(searches: Sequence[SubSearch]) -> str:
    """The whole ``_msearch`` as Kibana dev-console text (NDJSON lines)."""
    lines = ["GET _msearch"]
    for header, body in zip(*[iter(msearch_lines(searches))] * 2, strict=True):
        lines += [
            json.dumps(header, ensure_ascii=False, separators=(",", ":")),
            json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        ]
    return "\n".join(lines) + "\n"


def _reason(err: object) -> str:
    if isinstance(err, dict):
        kind, reason = err.get("type"), err.get("reason")
        root = err.get("root_cause") or []
        if not reason and root and isinstance(root[0], dict):
            kind, reason = root[0].get("type"), root[0].get("reason")
        return f"{kind}: {reason}" if kind else str(reason or err)
    return str(err)


def run_msearch(es, searches: Sequence[SubSearch]) -> tuple[list[SubResult], float]:
    """All ``searches`` in ONE ``es.msearch`` call: (one SubResult per search, wall seconds)."""
    if not searches:
        return [], 0.0
    start = time.perf_counter()
    resp = es.msearch(searches=msearch_lines(searches))
    seconds = time.perf_counter() - start
    body = resp.body if hasattr(resp, "body") else resp
    items = body.get("responses") or []
    if len(items) != len(searches):
        raise ConfigError(f"_msearch answered {len(items)} responses for {len(searches)} searches")
    out = []
    for search, item in zip(searches, items, strict=True):
        if "error" in item:
            out.append(SubResult(search, error=_reason(item["error"]), status=item.get("status")))
        else:
            out.append(
                SubResult(
                    search,
                    hits=list(item.get("hits", {}).get("hits", [])),
                    status=item.get("status", 200),
                    took_ms=int(item.get("took", 0)),
                )
            )
    return out, seconds
