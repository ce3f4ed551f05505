"""Stage 3: the candidates of all searches, de-duplicated by chunk.

A chunk found by several searches is one candidate that remembers every search that found it
(and its rank in each). Candidates keep the order in which they are first met, going through
the searches in ``_msearch`` order (keyword first) and each search's hits in rank order; the
final order is decided by the re-scoring query, not here. Failed searches contribute nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from scholar_es.multisection.msearch import SubResult


@dataclass
class Candidate:
    chunk_id: str
    paper_id: str
    #: search name -> 1-based rank of the chunk in that search's hits
    found_by: dict[str, int] = field(default_factory=dict)


@dataclass
class Contribution:
    """What one search brought: its hits, the chunks no earlier search had found (``new``) and
    the chunks no other search found (``unique``)."""

    hits: int = 0
    new: int = 0
    unique: int = 0


def chunk_key(raw: dict) -> tuple[str, str]:
    """(chunk id, paper id) of a raw hit (``_id`` when the source lacks ``chunk_id``)."""
    src = raw.get("_source") or {}
    return str(src.get("chunk_id") or raw.get("_id")), str(src.get("paper_id", ""))


def merge(results: Sequence[SubResult]) -> tuple[list[Candidate], dict[str, Contribution]]:
    """(candidates de-duplicated by chunk id, contribution per search name)."""
    by_id: dict[str, Candidate] = {}
    contrib: dict[str, Contribution] = {}
    for res in results:
        c = contrib.setdefault(res.search.name, Contribution())
        if res.error is not None:
            continue
        for rank, raw in enumerate(res.hits, start=1):
            chunk_id, paper_id = chunk_key(raw)
            cand = by_id.get(chunk_id)
            if cand is None:
                cand = by_id[chunk_id] = Candidate(chunk_id, paper_id)
                c.new += 1
            if res.search.name not in cand.found_by:
                cand.found_by[res.search.name] = rank
                c.hits += 1
    for cand in by_id.values():
        if len(cand.found_by) == 1:
            contrib[next(iter(cand.found_by))].unique += 1
    return list(by_id.values()), contrib
