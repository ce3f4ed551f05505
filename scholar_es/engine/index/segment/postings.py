"""Postings: the doc -> terms matrix (CSR) of a text or keyword field and its term -> docs view (CSC).

Both directions are saved with a base (Lucene's postings format keeps term -> docs only; the
CSR serves doc values of keywords, fields and highlighting here). Saved term ids and frequencies
take the narrowest of :data:`POSTINGS_TYPES` that holds them (:func:`narrowed`). In memory the CSR
grows in place (:mod:`engine.index.segment.buffers`) and the term -> docs view is a big base plus
a small tail of the rows appended since (:class:`Postings`). The sparse query path reads these
arrays directly (``indptr``, ``indices``, ``data``, :meth:`Postings.postings`, :meth:`Postings.csc`).
"""

from __future__ import annotations

import copy
import itertools

import numpy as np

from scholar_es.engine.index.segment.buffers import (
    Splittable,
    copy_bufs,
    grow,
    length,
    since,
    slice_rows,
    take,
)
from scholar_es.engine.index.segment.saved import SavedArrays

#: the types a saved array of term ids or frequencies may have (issue 16, disk): the narrowest
#: that holds its values, chosen when it is saved (:func:`narrowed`). At 1M chunks the postings
#: are ~120M (doc, term) pairs in each direction: frequencies of one byte and term ids of two
#: instead of four bytes each save ~1 GB. In memory a narrow array is read as it is (mapped);
#: joined with wider values (appends, deltas, merges) the result has the wider type
#: (:func:`~engine.index.segment.buffers.grow`, a whole read of a split array, :func:`take`,
#: ``np.concatenate``), so a value is never cut.
POSTINGS_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int32))


def narrowed(arr: np.ndarray) -> np.ndarray:
    """``arr`` (term ids or frequencies, never negative) in the narrowest of
    :data:`POSTINGS_TYPES` that holds its largest value; unchanged when that is its own type."""
    if not len(arr) or arr.dtype.itemsize <= 1:
        return arr
    top = int(arr.max())
    if int(arr.min()) < 0:  # pragma: no cover - ids and frequencies are never negative
        return arr
    for dtype in POSTINGS_TYPES:
        if top <= np.iinfo(dtype).max:
            return arr if dtype.itemsize >= arr.dtype.itemsize else arr.astype(dtype)
    return arr


#: term -> docs view: (col_ptr, doc positions, freqs), docs ascending within each term
Csc = tuple[np.ndarray, np.ndarray, np.ndarray]


def _build_csc(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, row0: int, n_terms: int) -> Csc:
    """The term -> docs view of CSR rows numbered from ``row0`` (one stable argsort)."""
    rows = np.repeat(np.arange(row0, row0 + len(indptr) - 1, dtype=np.int32), np.diff(indptr))
    order = np.argsort(indices, kind="stable")  # stable keeps docs ascending
    col_counts = np.bincount(indices, minlength=n_terms)
    col_ptr = np.concatenate([[0], np.cumsum(col_counts)]).astype(np.int64)
    return col_ptr, rows[order], data[order]


def _concat_csc(a: Csc, b: Csc, n_terms: int) -> Csc:
    """One term -> docs view of two whose docs are all smaller in ``a`` than in ``b``: per term,
    ``a``'s docs then ``b``'s (a scatter in O(postings), no sort)."""
    aptr, adocs, afreq = a
    bptr, bdocs, bfreq = b
    ac = np.zeros(n_terms, dtype=np.int64)
    ac[: len(aptr) - 1] = np.diff(aptr)
    bc = np.zeros(n_terms, dtype=np.int64)
    bc[: len(bptr) - 1] = np.diff(bptr)
    ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(ac + bc, out=ptr[1:])
    docs = np.empty(len(adocs) + len(bdocs), dtype=np.int32)
    freqs = np.empty(len(docs), dtype=np.int32)
    na, nb = len(aptr) - 1, len(bptr) - 1
    dest_a = np.arange(len(adocs), dtype=np.int64) + np.repeat(ptr[:na] - aptr[:-1], ac[:na])
    dest_b = np.arange(len(bdocs), dtype=np.int64) + np.repeat(ptr[:nb] + ac[:nb] - bptr[:-1], bc[:nb])
    docs[dest_a], freqs[dest_a] = adocs, afreq
    docs[dest_b], freqs[dest_b] = bdocs, bfreq
    return ptr, docs, freqs


def kept_csc(view: Csc, keep: np.ndarray, n_terms: int) -> Csc:
    """``view`` (term -> ids) with only the ids where ``keep`` is true, each renumbered to the
    number of kept ids before it, and offsets for ``n_terms`` terms (a term the view does not
    reach has none): what a compaction makes of a term -> docs (or term -> runs) view. O(postings),
    no sort."""
    ptr, ids, freqs = view
    live = keep[ids]
    at = np.zeros(len(live) + 1, dtype=np.int64)
    np.cumsum(live, out=at[1:])
    new_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    new_ptr[: len(ptr)] = at[ptr]
    new_ptr[len(ptr) :] = new_ptr[len(ptr) - 1]
    renumber = (np.cumsum(keep) - 1).astype(np.int32)
    return new_ptr, renumber[ids[live]], freqs[live]


#: a tail of the term -> docs view is folded into the base one when it holds more than this
#: fraction of the base's postings (amortized O(1) per appended posting)
TAIL_FRACTION = 8
#: ... and never below this many postings (small indices: a tail this small costs nothing)
TAIL_MIN_POSTINGS = 1 << 16


class Postings:
    """Doc x term matrix in CSR (grown in place, see :func:`grow`) with a term -> docs view.

    The term -> docs view is a big *base* (rows appended up to some point; saved, or read from
    a file) plus a small *tail* for the rows appended since: an append sorts only its own
    postings and joins them to the tail; the tail is folded into the base when it grows past
    ``1/TAIL_FRACTION`` of it. ``postings(term)`` returns the base slice followed by the tail
    slice, so documents stay ascending.
    """

    indices = Splittable()
    data = Splittable()

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.indptr = np.zeros(1, dtype=np.int64)
        self.indices = np.zeros(0, dtype=np.int32)
        self.data = np.zeros(0, dtype=np.int32)
        #: (base view, tail view or None): one attribute, so a reader never sees half an update
        self._views: tuple[Csc, Csc | None] | None = None

    @property
    def base_view(self) -> Csc | None:
        """The base term -> docs view (None: not built yet)."""
        return None if self._views is None else self._views[0]

    @base_view.setter
    def base_view(self, value: Csc | None) -> None:
        self._views = None if value is None else (value, None)

    def copy(self) -> Postings:
        """A copy that can be appended to without touching this one (arrays are shared)."""
        new = copy.copy(self)
        new.vocab = dict(self.vocab)
        copy_bufs(new, self)
        return new

    def append(self, rows: list[list[str]]) -> None:
        """Append rows given as token lists (building a small segment of new documents): the
        distinct terms of each row ascending with their counts, from one sort of all tokens."""
        vocab = self.vocab
        lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = list(itertools.chain.from_iterable(rows))
        # new terms get the next ids in order of first occurrence, then one C-level look-up per token
        new = [t for t in dict.fromkeys(flat) if t not in vocab]
        vocab.update(zip(new, range(len(vocab), len(vocab) + len(new)), strict=True))
        ids = np.fromiter(map(vocab.__getitem__, flat), dtype=np.int64, count=len(flat))
        if len(ids):
            width = len(vocab)
            keys = np.sort(np.repeat(np.arange(len(rows), dtype=np.int64), lens) * width + ids)
            first = np.empty(len(keys), dtype=bool)
            first[0] = True
            np.not_equal(keys[1:], keys[:-1], out=first[1:])
            starts = np.flatnonzero(first)
            counts = np.diff(np.append(starts, len(keys))).astype(np.int32)
            distinct = keys[starts]
            per_row = np.bincount(distinct // width, minlength=len(rows))
            self.indices = np.concatenate([self.indices, (distinct % width).astype(np.int32)])
            self.data = np.concatenate([self.data, counts])
        else:
            per_row = np.zeros(len(rows), dtype=np.int64)
        self.indptr = np.concatenate([self.indptr, self.indptr[-1] + np.cumsum(per_row, dtype=np.int64)])
        self._views = None

    def extend(self, other: Postings) -> np.ndarray:
        """Append the rows of ``other`` (its own vocabulary); returns its term ids in this one."""
        vocab = self.vocab
        remap = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in other.vocab), dtype=np.int32, count=len(other.vocab)
        )
        n0 = len(self.indptr) - 1
        ind = remap[other.indices] if len(other.indices) else np.zeros(0, dtype=np.int32)
        views = self._views
        grow(self, "indices", ind)
        grow(self, "data", other.data)
        grow(self, "indptr", other.indptr[1:] + self.indptr[-1])
        if views is not None:  # keep the view current: sort only the new postings
            base, tail = views
            new = _build_csc(other.indptr, ind, other.data, n0, len(vocab))
            tail = new if tail is None else _concat_csc(tail, new, len(vocab))
            if len(tail[1]) * TAIL_FRACTION > max(len(base[1]), TAIL_MIN_POSTINGS):
                base, tail = _concat_csc(base, tail, len(vocab)), None
            self._views = (base, tail)
        return remap

    def compact(self, keep: np.ndarray) -> None:
        views = self._views
        starts, ends = self.indptr[:-1][keep], self.indptr[1:][keep]
        lens = ends - starts
        if len(lens):
            idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(
                lens.sum()
            )
        else:
            idx = np.zeros(0, dtype=np.int64)
        self.indices, self.data = take(self, "indices", idx), take(self, "data", idx)
        self.indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self._views = None
        if views is not None:  # filter the term -> docs view too: O(postings), no sort
            base, tail = views
            merged = base if tail is None else _concat_csc(base, tail, len(self.vocab))
            self._views = (kept_csc(merged, keep, len(self.vocab)), None)

    def _current(self) -> tuple[Csc, Csc | None]:
        views = self._views
        if views is None:
            views = self._views = (
                _build_csc(self.indptr, self.indices, self.data, 0, len(self.vocab)),
                None,
            )
        return views

    def csc(self) -> Csc:
        """(col_ptr, doc positions, freqs) of every row, docs ascending within each term."""
        base, tail = self._current()
        if tail is None:
            return base
        merged = _concat_csc(base, tail, len(self.vocab))
        self._views = (merged, None)
        return merged

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        tid = self.vocab.get(term)
        if tid is None:
            return None
        base, tail = self._current()
        ptr, docs, freqs = base
        if tid + 1 < len(ptr):
            d, f = docs[ptr[tid] : ptr[tid + 1]], freqs[ptr[tid] : ptr[tid + 1]]
        else:  # a term first seen after the base view was built
            d, f = docs[:0], freqs[:0]
        if tail is not None and tid + 1 < len(tail[0]):
            tptr, tdocs, tfreqs = tail
            td, tf = tdocs[tptr[tid] : tptr[tid + 1]], tfreqs[tptr[tid] : tptr[tid + 1]]
            if len(td):
                d, f = (np.concatenate([d, td]), np.concatenate([f, tf])) if len(d) else (td, tf)
        return d, f

    def row_counts(self) -> np.ndarray:
        return np.diff(self.indptr)

    def row_terms(self, pos: int) -> np.ndarray:
        """The term ids of row ``pos`` (without joining a split array)."""
        return slice_rows(self, "indices", int(self.indptr[pos]), int(self.indptr[pos + 1]))

    def postings_count(self) -> int:
        """Number of (doc, term) postings."""
        return length(self, "indices")

    # --- saving and loading ---------------------------------------------------------------
    def rows_to_save(self, start: int) -> tuple[list[str], list[np.ndarray], np.ndarray]:
        """(vocabulary, CSR arrays, global -> local term ids) of rows ``start..n``: a base (0)
        saves the whole vocabulary, a delta only the terms its rows use, numbered anew."""
        if not start:
            whole = [self.indptr, narrowed(self.indices), narrowed(self.data)]
            return list(self.vocab), whole, np.arange(len(self.vocab), dtype=np.int32)
        lo = int(self.indptr[start])
        used, local = np.unique(since(self, "indices", lo), return_inverse=True)
        terms = list(self.vocab)
        remap = np.full(len(terms), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        csr: list[np.ndarray] = [
            self.indptr[start:] - lo,
            narrowed(local.astype(np.int32).reshape(-1)),
            narrowed(since(self, "data", lo)),
        ]
        return [terms[t] for t in used.tolist()], csr, remap

    def view_to_save(self) -> list[np.ndarray]:
        """The term -> docs view as a base saves it: offsets, doc positions, narrowed frequencies."""
        col_ptr, docs, freqs = self.csc()
        return [col_ptr, docs, narrowed(freqs)]

    def load(self, vocab: list[str], saved: SavedArrays, refs: list[int], n: int) -> None:
        """Take the saved CSR of ``n`` rows (indptr, term ids, frequencies at ``refs``), checked."""
        self.vocab = dict(zip(vocab, range(len(vocab)), strict=True))  # strings (SavedArrays.json_list)
        if len(self.vocab) != len(vocab):  # term ids are positions: a repeated term would shadow one
            raise ValueError("a vocabulary holds a term twice")
        self.indptr = saved.check(refs[0], np.int64, 1, n + 1)
        self.indices, self.data = _check_postings(saved[refs[1]]), _check_postings(saved[refs[2]])
        if (
            self.indptr[0] != 0
            or not saved.facts(refs[0]).nondecreasing
            or self.indptr[-1] != len(self.indices)
        ):
            raise ValueError("postings offsets are inconsistent")
        if len(self.data) != len(self.indices) or (
            len(self.indices) and (saved.facts(refs[1]).min < 0 or saved.facts(refs[1]).max >= len(vocab))
        ):
            raise ValueError("postings term ids out of range")

    def load_view(self, saved: SavedArrays, refs: list[int], data_ref: int, n: int) -> None:
        """Take the saved term -> docs view (col_ptr, docs, freqs at ``refs``), checked against the
        CSR it mirrors (its frequencies at ``data_ref``); absent (a segment saved before it was
        stored): built lazily on the first search, as before."""
        if not refs:
            return
        col_ptr = saved.check(refs[0], np.int64, 1, len(self.vocab) + 1)
        docs = saved.check(refs[1], np.int32, 1, len(self.indices))
        freqs = _check_postings(saved[refs[2]], len(self.indices))
        if col_ptr[0] != 0 or not saved.facts(refs[0]).nondecreasing or col_ptr[-1] != len(self.indices):
            raise ValueError("term -> docs offsets are inconsistent")
        if len(docs) and (saved.facts(refs[1]).min < 0 or saved.facts(refs[1]).max >= n):
            raise ValueError("term -> docs positions out of range")
        if saved.facts(refs[2]).total != saved.facts(data_ref).total:
            raise ValueError("term -> docs frequencies do not match the postings")
        self.base_view = (col_ptr, docs, freqs)


def _check_postings(arr: np.ndarray, length: int | None = None) -> np.ndarray:
    """A saved array of term ids or frequencies: 1-D, of one of :data:`POSTINGS_TYPES`."""
    if arr.dtype not in POSTINGS_TYPES or arr.ndim != 1 or (length is not None and len(arr) != length):
        raise ValueError(
            f"array of dtype {arr.dtype} and shape {arr.shape} where term ids or frequencies "
            f"({', '.join(map(str, POSTINGS_TYPES))}) were expected"
        )
    return arr
