"""Runs of consecutive documents whose text field holds the same terms (issue 29).

A chunk index repeats each paper's title and abstract in every chunk of the paper, and the chunks
of a paper are indexed one after the other: the ``abstract`` postings of a term are ~12-50x longer
than the papers they describe. BM25 scores a term in a document from two numbers only, the term's
frequency there and the field's norm (its length), so two documents whose rows hold the same term
ids with the same frequencies and whose fields have the same length score alike for *every* term
of that field. A *run* is a maximal stretch of consecutive documents whose rows are equal in that
sense; its first document, the *head*, stands for all of them: a term of the field is scored once
per run (its postings over run heads, :attr:`Runs.view`) and the run's score is copied to its
documents (``np.repeat``), with the same float operations, so the scores are the same numbers
(engine/query/sparse.py; tests/engine/query/test_engine_sparse.py checks it).

Runs cover the documents ``[0, covered)`` found when they were computed: rows appended since are
scored from the ordinary postings (the rows a run covers never change; a compaction drops the
runs). They are worth it where documents repeat: :func:`find_runs` keeps the heads' term -> runs
view only when there are at least :data:`MIN_RUN_LENGTH` documents per run on average.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scholar_es.engine.index.segment.buffers import slice_rows, take
from scholar_es.engine.index.segment.postings import POSTINGS_TYPES, kept_csc, narrowed
from scholar_es.engine.index.segment.saved import SavedArrays

#: the runs' term -> runs view is built when the documents are at least this many times the runs
#: (else: every term scored per document, as without runs)
MIN_RUN_LENGTH = 4

#: postings compared per step when looking for equal rows: temporaries that stay in the caches
#: (4M postings per step took 9x as long: 0.50 s against 0.055 s for 100k QASPER abstracts)
_BLOCK = 1 << 16


@dataclass(frozen=True)
class Runs:
    """The runs of one text field over documents ``[0, covered)``.

    ``starts``: the first document of each run, then ``covered`` (int64, ascending). ``view``: term
    id -> (run numbers ascending, int32; frequencies), over the run heads; None where the runs are
    too short to be worth it (:data:`MIN_RUN_LENGTH`), and then ``starts`` is just
    ``[0, covered]`` (the rows looked at; the runs themselves are not kept)."""

    starts: np.ndarray
    view: tuple[np.ndarray, np.ndarray, np.ndarray] | None

    def to_save(self, n_terms: int) -> list[np.ndarray]:
        """The arrays a base saves: ``starts`` (``[0, covered]`` where the runs are not worth it),
        then the view's offsets (one per term of the vocabulary's ``n_terms``, and one more: the
        terms added since the runs were found have no run postings), run numbers and frequencies
        where they are."""
        if self.view is None:
            return [self.starts]
        ptr, runs, freqs = self.view
        if len(ptr) < n_terms + 1:
            ptr = np.concatenate([ptr, np.full(n_terms + 1 - len(ptr), ptr[-1], dtype=ptr.dtype)])
        return [self.starts, ptr, runs, narrowed(freqs)]

    @classmethod
    def load(
        cls, saved: SavedArrays, refs: list[int], indptr: np.ndarray, lengths: np.ndarray, n_terms: int
    ) -> Runs:
        """The runs a base saved (:meth:`to_save`) for the rows ``indptr`` and field ``lengths``
        describe, checked: shapes and ranges, and against those rows, cheaply (O(documents + runs)):
        every document of a run has its head's field length, and the view holds as many postings
        as the heads' rows."""
        n = len(lengths)
        starts = saved.check(refs[0], np.int64, 1)
        if len(starts) < 2 or starts[0] != 0 or starts[-1] != n:
            raise ValueError("runs of equal rows are inconsistent")
        if len(refs) == 1:
            if len(starts) != 2:
                raise ValueError("runs of equal rows are inconsistent")
            return cls(starts, None)
        if len(refs) != 4 or not saved.facts(refs[0]).increasing:
            raise ValueError("runs of equal rows are inconsistent")
        ptr = saved.check(refs[1], np.int64, 1, n_terms + 1)
        runs = saved.check(refs[2], np.int32, 1)
        freqs = saved[refs[3]]
        if freqs.dtype not in POSTINGS_TYPES or freqs.ndim != 1 or len(freqs) != len(runs):
            raise ValueError("runs of equal rows: frequencies of another layout")
        if ptr[0] != 0 or not saved.facts(refs[1]).nondecreasing or ptr[-1] != len(runs):
            raise ValueError("runs of equal rows: term offsets are inconsistent")
        if len(runs) and (saved.facts(refs[2]).min < 0 or saved.facts(refs[2]).max >= len(starts) - 1):
            raise ValueError("runs of equal rows: run numbers out of range")
        heads = starts[:-1]
        if not np.array_equal(np.repeat(lengths[heads], np.diff(starts)), lengths) or int(
            (indptr[heads + 1] - indptr[heads]).sum()
        ) != len(runs):
            raise ValueError("runs of equal rows do not match the rows they describe")
        return cls(starts, (ptr, runs, freqs))

    @property
    def covered(self) -> int:
        return int(self.starts[-1])

    @property
    def count(self) -> int:
        return len(self.starts) - 1

    @property
    def lengths(self) -> np.ndarray:
        """The number of documents of each run."""
        return np.diff(self.starts)

    def compacted(self, keep: np.ndarray) -> Runs:
        """These runs after the rows where ``keep`` is false are dropped (a compaction): a run
        keeps its remaining documents, now consecutive, and is dropped with its postings when none
        remains (a run whose head went keeps its frequencies: every document of a run has them).
        O(documents + the heads' postings), no sort."""
        covered = self.covered
        below = int(np.count_nonzero(keep[:covered]))
        if self.view is None:
            return Runs(np.array([0, below], dtype=np.int64), None)
        kept = (
            np.add.reduceat(keep[:covered].astype(np.int64), self.starts[:-1]) if covered else self.starts[:0]
        )
        alive = kept > 0
        if not alive.any():  # no run left: nothing to keep a view of
            return Runs(np.array([0, 0], dtype=np.int64), None)
        starts = np.zeros(int(alive.sum()) + 1, dtype=np.int64)
        np.cumsum(kept[alive], out=starts[1:])
        return Runs(starts, kept_csc(self.view, alive, len(self.view[0]) - 1))

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(run numbers, frequencies) of term id ``tid`` among the run heads (none for a term first
        seen after the runs were computed: it can only occur past ``covered``)."""
        assert self.view is not None
        ptr, runs, freqs = self.view
        if tid + 1 >= len(ptr):
            return runs[:0], freqs[:0]
        a, b = int(ptr[tid]), int(ptr[tid + 1])
        return runs[a:b], freqs[a:b]


def same_as_previous(postings: object, indptr: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per row: whether it holds the same term ids with the same frequencies, in the same order,
    and has the same field length as the row before it (row 0: False).

    ``postings`` has the CSR's ``indices`` and ``data`` (read in blocks, never joined)."""
    n = len(indptr) - 1
    same = np.zeros(n, dtype=bool)
    if n < 2:
        return same
    rowlen = np.diff(indptr)
    same[1:] = (rowlen[1:] == rowlen[:-1]) & (lengths[1:n] == lengths[: n - 1])
    r0 = 1
    while r0 < n:
        # rows r0..r1 and the row before them, about _BLOCK postings at a time
        r1 = int(np.searchsorted(indptr, indptr[r0] + _BLOCK, side="right")) - 1
        r1 = min(n, max(r1, r0 + 1))
        lens = rowlen[r0:r1]
        p_lo, p_hi = int(indptr[r0 - 1]), int(indptr[r1])
        if p_hi > p_lo:
            ind = slice_rows(postings, "indices", p_lo, p_hi)
            dat = slice_rows(postings, "data", p_lo, p_hi)
            own = np.arange(int(indptr[r0]) - p_lo, p_hi - p_lo, dtype=np.int64)
            # the same place in the row before (rows of equal length: exactly one row back);
            # a row of another length is not equal anyway, its comparisons are clipped and ignored
            prev = np.maximum(own - np.repeat(lens, lens), 0)
            differs = (ind[own] != ind[prev]) | (dat[own] != dat[prev])
            rows = np.repeat(np.arange(r1 - r0, dtype=np.int64), lens)
            same[r0:r1] &= np.bincount(rows[differs], minlength=r1 - r0) == 0
        r0 = r1
    return same


def find_runs(postings: object, indptr: np.ndarray, lengths: np.ndarray, n_terms: int) -> Runs:
    """The runs of the rows ``indptr`` describes (all of them), with the heads' term -> runs view
    when the runs are worth it."""
    n = len(indptr) - 1
    same = same_as_previous(postings, indptr, lengths)
    heads = np.flatnonzero(~same)
    if not n or len(heads) * MIN_RUN_LENGTH > n:
        return Runs(np.array([0, n], dtype=np.int64), None)
    starts = np.append(heads, n).astype(np.int64)
    # the heads' rows, then term -> runs (one stable sort of the heads' postings only)
    lo, hi = indptr[heads], indptr[heads + 1]
    lens = hi - lo
    total = int(lens.sum())
    ptr = np.zeros(len(heads) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    pos = np.repeat(lo - ptr[:-1], lens) + np.arange(total, dtype=np.int64)
    ind = take(postings, "indices", pos).astype(np.int64)
    dat = take(postings, "data", pos)
    runs = np.repeat(np.arange(len(heads), dtype=np.int32), lens)
    order = np.argsort(ind, kind="stable")  # stable: runs ascending within each term
    col_ptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(np.bincount(ind, minlength=n_terms), out=col_ptr[1:])
    return Runs(starts, (col_ptr, runs[order], dat[order]))
