"""Field collapsing (``collapse`` + ``inner_hits``) in time proportional to the hits.

Elasticsearch collapses on a single-valued keyword or numeric doc value: the hits are ordered as
the search orders them, each group is represented by its first document in that order (its head),
and paging (``from``/``size``) runs over the groups. ``inner_hits`` expand each shown group with
the group's own matching documents. Sources: the reference's "Collapse search results" page and
``CollapsingTopDocsCollector`` (a document without a value collapses into the one ``null`` group).

Instead of one Python key per document (a list of N values, then a scan of all N per group), the
keys are integer codes over the doc values (the keyword column's value ids, the numeric column's
distinct first values), computed once per version of the field's column and shared by the
searches that read it: heads are the first occurrences of each code in an ordered prefix, and a
group's documents come from the keyword postings of its value (or one vectorized pass over the
codes for numbers and for documents without a value).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scholar_es.engine.errors import EsError
from scholar_es.engine.search.hits import order_by_score

NO_VALUE = -1  # the code of documents without a value: they collapse into one group


@dataclass
class CollapseKeys:
    """Per-document group codes of one collapse field, and what each code shows as. Kept per
    version of the field's column (:func:`collapse_keys`): read-only, shared by searches."""

    codes: np.ndarray  # int64 per document, NO_VALUE where the document has none
    labels: list  # code -> the value shown in ``fields`` (str, int or float)
    #: code -> documents whose first value is that code, ascending (keyword: from the postings)
    _members: Callable[[int], np.ndarray | None] | None = field(default=None, repr=False)

    def label(self, code: int):
        return None if code == NO_VALUE else self.labels[code]

    def members(self, code: int) -> np.ndarray:
        """Every document of the group ``code``, ascending: the postings of its keyword value
        (the group's size), else one pass over the codes (a number, or no value)."""
        if code != NO_VALUE and self._members is not None:
            docs = self._members(code)
            if docs is not None:
                return docs[self.codes[docs] == code]
        return np.flatnonzero(self.codes == code)

    def group(self, code: int, mask: np.ndarray) -> np.ndarray:
        """Matching documents (``mask``) of the group ``code``, ascending."""
        docs = self.members(code)
        return docs[mask[docs]]

    @functools.cached_property
    def runs(self) -> np.ndarray:
        """Per document, the number of the run of equal codes it is in (documents in index order):
        a range of documents holds one group alone when its first and last run numbers agree."""
        change = np.zeros(len(self.codes), dtype=np.int64)
        change[1:] = self.codes[1:] != self.codes[:-1]
        return np.cumsum(change)


def collapse_keys(seg, field_name: str) -> CollapseKeys:
    """The collapse codes of ``field_name``; the errors Elasticsearch gives for other field types.
    Computed once per version of the field's column (every change rebinds its arrays)."""
    n = len(seg.seqs)
    fs = seg.mapping.get(field_name)
    if fs is None:
        raise EsError(
            400, "illegal_argument_exception", f"no mapping found for `{field_name}` in order to collapse on"
        )
    if fs.type == "keyword":
        col = seg.keyword.get(field_name)
        if col is None:
            return CollapseKeys(np.full(n, NO_VALUE, dtype=np.int64), [])
        return _kept(col, (col.first, col.postings), lambda: _keyword_keys(col))
    if fs.is_numeric:
        ncol = seg.numeric.get(field_name)
        if ncol is None:
            return CollapseKeys(np.full(n, NO_VALUE, dtype=np.int64), [])
        first = ncol.stats()[0]
        return _kept(ncol, (first,), lambda: _numeric_keys(first))
    raise EsError(
        400,
        "illegal_argument_exception",
        f"unknown type for collapse field `{field_name}`, only keywords and numbers are accepted",
    )


def _kept(col: object, sources: tuple, make: Callable[[], CollapseKeys]) -> CollapseKeys:
    """``make()``, kept on the column while ``sources`` (its arrays) are the same objects."""
    hit = col.__dict__.get("_collapse_keys")
    if (
        hit is None
        or len(hit[0]) != len(sources)
        or any(a is not b for a, b in zip(hit[0], sources, strict=True))
    ):
        keys = make()
        keys.codes.setflags(write=False)  # shared by every search of this version
        hit = (sources, keys)
        col.__dict__["_collapse_keys"] = hit  # a copy of the column keeps it until it changes
    return hit[1]


def _keyword_keys(col) -> CollapseKeys:
    postings, terms = col.postings, col.terms()

    def members(code: int) -> np.ndarray | None:
        found = postings.postings(terms[code])
        return None if found is None else found[0]

    return CollapseKeys(col.first.astype(np.int64), terms, members)


def _numeric_keys(first: np.ndarray) -> CollapseKeys:
    has = ~np.isnan(first)
    uniq, inverse = np.unique(first[has], return_inverse=True)
    codes = np.full(len(first), NO_VALUE, dtype=np.int64)
    codes[has] = inverse
    labels = [int(v) if float(v).is_integer() else float(v) for v in uniq.tolist()]
    return CollapseKeys(codes, labels)


def first_of_each_group(ordered: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Indexes into ``ordered`` of the first document of each group, in ``ordered``'s order."""
    if not len(ordered):
        return np.zeros(0, dtype=np.int64)
    _, first = np.unique(codes[ordered], return_index=True)
    first.sort()
    return first.astype(np.int64)


def heads_in_order(ordered: np.ndarray, codes: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(heads, their indexes in ``ordered``): the first ``limit`` groups of an ordered hit list."""
    idx = first_of_each_group(ordered, codes)[: max(limit, 0)]
    return ordered[idx], idx


def heads_by_score(
    cand: np.ndarray, scores: np.ndarray, codes: np.ndarray, limit: int, cand_scores: np.ndarray | None = None
) -> np.ndarray:
    """The first ``limit`` group heads in (score desc, position asc) order, ordering only as many
    top candidates as the groups need: a prefix of the total order holds the same heads, in the
    same order, as the whole order does for every group that starts inside it. ``cand_scores``:
    ``scores[cand]``, where the caller has the candidates' scores alone."""
    if limit <= 0 or not len(cand):
        return cand[:0]
    window = max(4 * limit, 64)
    while True:
        whole = window >= len(cand)
        ordered = order_by_score(cand, scores, None if whole else window, cand_scores)
        heads, _ = heads_in_order(ordered, codes, limit)
        if len(heads) >= limit or whole:
            return heads
        window *= 4


__all__ = ["CollapseKeys", "NO_VALUE", "collapse_keys", "heads_by_score", "heads_in_order"]
