"""The columns of a segment, one class per kind of field, each saving and loading itself.

* text    -- term -> postings (doc, tf) in CSR and CSC layout, token counts per doc, norms
* keyword -- value -> postings, first value per doc (collapse, sort)
* numeric -- numbers, dates and booleans: all values flattened with their docs, min/max per doc
* vectors -- dense_vector: float32 matrix and a presence mask (+ the HNSW graph, :mod:`engine.index.hnsw`)

A column appends rows of new documents (:meth:`Column.append`), appends the rows of a column of
newer documents (:meth:`Column.extend`, in place, :mod:`engine.index.segment.buffers`), drops
deleted rows (:meth:`Column.compact`), and writes / reads its arrays (:meth:`Column.to_arrays`,
:meth:`Column.from_arrays`). A new field type is one new class here, registered in
:data:`COLUMN_TYPES` (and the :class:`~engine.index.segment.document.ParsedDoc` values it reads).
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, TypeVar

import numpy as np

from scholar_es.engine.index.hnsw import HnswGraph
from scholar_es.engine.index.mapping import KEYWORD, TEXT, VECTOR, FieldSpec
from scholar_es.engine.index.segment.buffers import Splittable, copy_bufs, grow, length, pieces, since, take
from scholar_es.engine.index.segment.document import ParsedDoc
from scholar_es.engine.index.segment.postings import Postings
from scholar_es.engine.index.segment.runs import Runs, find_runs
from scholar_es.engine.index.segment.saved import ArrayWriter, SavedArrays
from scholar_es.engine.query import similarity as sim

C = TypeVar("C", bound="Column")
P = TypeVar("P", bound="_PostingsColumn")


class Column(ABC):
    """What every column does. ``kind`` names it three times over: the attribute of
    :class:`~engine.index.segment.segment.Segment` holding the columns of this kind by field,
    the :class:`~engine.index.segment.document.ParsedDoc` values it takes, and the key of its
    entries in a saved segment's description."""

    kind: ClassVar[str]

    @classmethod
    @abstractmethod
    def takes(cls, fs: FieldSpec) -> bool:
        """Whether a field of this mapping holds its values in a column of this class."""

    @classmethod
    def for_field(cls: type[C], fs: FieldSpec) -> C:
        """An empty column for the field ``fs``."""
        return cls()

    def empty_like(self: C) -> C:
        """An empty column of the same kind (and shape) as this one."""
        return type(self)()

    @abstractmethod
    def rows_of(self, docs: Sequence[ParsedDoc], name: str) -> list:
        """The values of field ``name`` in each of ``docs`` (None: none), the rows :meth:`append` takes."""

    def copy(self: C) -> C:
        """A copy that can be appended to without touching this one (arrays are shared)."""
        new = copy.copy(self)  # every change rebinds its arrays (a vector column's graph is shared)
        copy_bufs(new, self)
        return new

    @abstractmethod
    def append(self, rows: list) -> None:
        """Append one row per new document (None: no value)."""

    @abstractmethod
    def extend(self: C, other: C) -> None:
        """Append the rows of ``other`` (a column of new documents)."""

    @abstractmethod
    def compact(self, keep: np.ndarray) -> None:
        """Keep the rows where ``keep`` is true."""

    @abstractmethod
    def to_arrays(self, out: ArrayWriter, name: str, start: int) -> list:
        """Put the arrays of rows ``start..n`` into ``out``; returns the entry describing them
        (the whole column when ``start`` is 0, a base; else only those rows, a delta)."""

    @classmethod
    @abstractmethod
    def from_arrays(cls: type[C], entry: list, saved: SavedArrays, n: int) -> tuple[str, C]:
        """(field name, column) of an entry :meth:`to_arrays` wrote, for ``n`` documents;
        ValueError when its arrays do not fit together."""


def _cached(col: object, name: str, source: np.ndarray, compute: Callable[[], int]) -> int:
    """A per-field statistic (an O(N) pass) computed once per version of its source array: every
    change to a column rebinds its arrays, so the cache is keyed on the array's identity."""
    cache: dict = col.__dict__.setdefault("_stat_cache", {})
    hit = cache.get(name)
    if hit is None or hit[0] is not source:
        hit = (source, compute())
        cache[name] = hit
    return hit[1]


class _PostingsColumn(Column):
    """A column over :class:`~engine.index.segment.postings.Postings` (text, keyword)."""

    postings: Postings

    def copy(self: P) -> P:
        new = super().copy()
        new.postings = self.postings.copy()
        return new


class TextColumn(_PostingsColumn):
    """An analyzed text field with BM25 statistics."""

    kind = "text"

    def __init__(self) -> None:
        self.postings = Postings()
        self.lengths = np.zeros(0, dtype=np.int32)
        # docs holding the field, even with no tokens: Lucene writes a zero norm for an indexed
        # empty value, so FieldExistsQuery (exists) matches it
        self.present = np.zeros(0, dtype=bool)
        self._norms: np.ndarray | None = None
        #: runs of equal rows (engine/index/segment/runs.py): None until computed; appends keep them
        #: (they cover rows that do not change), a compaction remaps them (``Runs.compacted``)
        self._runs: Runs | None = None

    @classmethod
    def takes(cls, fs: FieldSpec) -> bool:
        return fs.type == TEXT

    def rows_of(self, docs: Sequence[ParsedDoc], name: str) -> list[list[str] | None]:
        return [d.text.get(name) for d in docs]

    def extend(self, other: TextColumn) -> None:
        self.postings.extend(other.postings)
        grow(self, "lengths", other.lengths)
        grow(self, "present", other.present)
        self._norms = None

    def append(self, rows: list[list[str] | None]) -> None:
        self.postings.append([r or [] for r in rows])
        self.lengths = np.concatenate([self.lengths, np.array([len(r or []) for r in rows], dtype=np.int32)])
        self.present = np.concatenate([self.present, np.array([r is not None for r in rows], dtype=bool)])
        self._norms = None

    def compact(self, keep: np.ndarray) -> None:
        self.postings.compact(keep)
        self.lengths = self.lengths[keep]
        self.present = self.present[keep]
        self._norms = None
        self._runs = None if self._runs is None else self._runs.compacted(keep)

    @property
    def doc_count(self) -> int:
        """Docs with at least one indexed term (Lucene's Terms#getDocCount)."""
        return _cached(self, "doc_count", self.lengths, lambda: int(np.count_nonzero(self.lengths)))

    @property
    def sum_total_term_freq(self) -> int:
        return _cached(self, "sttf", self.lengths, lambda: int(self.lengths.sum(dtype=np.int64)))

    def norms(self) -> np.ndarray:
        if self._norms is None:
            self._norms = sim.encode_lengths(self.lengths)
        return self._norms

    def runs(self) -> Runs:
        """The runs of equal rows (:mod:`engine.index.segment.runs`), computed again when the rows
        appended since they were found outnumber those they cover."""
        runs = self._runs
        if runs is None or 2 * runs.covered < len(self.lengths):
            runs = self.all_runs()
        return runs

    def all_runs(self) -> Runs:
        """The runs covering every row (found again if rows were appended since)."""
        runs = self._runs
        if runs is None or runs.covered < len(self.lengths):
            p = self.postings
            runs = self._runs = find_runs(p, p.indptr, self.lengths, len(p.vocab))
        return runs

    def to_arrays(self, out: ArrayWriter, name: str, start: int) -> list:
        # [name, vocabulary, [indptr, term ids, freqs, lengths, present, (term -> docs view)]];
        # the vocabulary is put after the other arrays (the keyword column puts it first)
        # a base also saves its runs of equal rows (found now if they do not cover every row)
        vocab, csr, _ = self.postings.rows_to_save(start)
        view = (
            self.postings.view_to_save() + self.all_runs().to_save(len(self.postings.vocab))
            if not start
            else []
        )
        refs = out.put(*csr, self.lengths[start:], self.present[start:], *view)
        return [name, out.json_array(vocab), refs]

    @classmethod
    def from_arrays(cls, entry: list, saved: SavedArrays, n: int) -> tuple[str, TextColumn]:
        name, vocab, refs = entry
        vocab = saved.json_list(vocab)
        col = cls()
        # 8: with the term -> docs view (saved since issue 16); 9 or 12: and the runs of equal rows
        # (issue 29: their starts, and their term -> runs view where they are worth it)
        if len(refs) not in (5, 8, 9, 12):
            raise ValueError("text column of another layout")
        col.postings.load(vocab, saved, refs[:3], n)
        col.postings.load_view(saved, refs[5:8], refs[2], n)
        col.lengths = saved.check(refs[3], np.int32, 1, n)
        col.present = saved.check(refs[4], np.bool_, 1, n)
        if len(refs) > 8:
            col._runs = Runs.load(saved, refs[8:], col.postings.indptr, col.lengths, len(vocab))
        return name, col


class KeywordColumn(_PostingsColumn):
    """Exact values; scored as Lucene scores a DOCS-only field without norms."""

    kind = "keyword"

    def __init__(self) -> None:
        self.postings = Postings()
        self.first = np.zeros(0, dtype=np.int32)  # value id of the first value, -1 if none
        self._terms: list[str] | None = None

    @classmethod
    def takes(cls, fs: FieldSpec) -> bool:
        return fs.type == KEYWORD

    def rows_of(self, docs: Sequence[ParsedDoc], name: str) -> list[list[str] | None]:
        return [d.keyword.get(name) for d in docs]

    def extend(self, other: KeywordColumn) -> None:
        remap = self.postings.extend(other.postings)
        first = np.full(len(other.first), -1, dtype=np.int32)
        has = other.first >= 0
        first[has] = remap[other.first[has]]
        grow(self, "first", first)
        self._terms = None

    def append(self, rows: list[list[str] | None]) -> None:
        self.postings.append([list(dict.fromkeys(r)) if r else [] for r in rows])
        vocab = self.postings.vocab
        self.first = np.concatenate(
            [self.first, np.array([vocab[r[0]] if r else -1 for r in rows], dtype=np.int32)]
        )
        self._terms = None

    def compact(self, keep: np.ndarray) -> None:
        self.postings.compact(keep)
        self.first = self.first[keep]

    def terms(self) -> list[str]:
        if self._terms is None or len(self._terms) != len(self.postings.vocab):
            self._terms = list(self.postings.vocab)
        return self._terms

    def first_values(self) -> list[str | None]:
        terms = self.terms()
        return [terms[i] if i >= 0 else None for i in self.first]

    @property
    def doc_count(self) -> int:
        indptr = self.postings.indptr
        return _cached(self, "doc_count", indptr, lambda: int(np.count_nonzero(np.diff(indptr))))

    @property
    def sum_doc_freq(self) -> int:
        return self.postings.postings_count()

    def to_arrays(self, out: ArrayWriter, name: str, start: int) -> list:
        # [name, vocabulary, [indptr, term ids, freqs, first value, (term -> docs view)]]
        vocab, csr, remap = self.postings.rows_to_save(start)
        first = self.first[start:]
        if start:  # a delta numbers its values anew
            local_first = np.full(len(first), -1, dtype=np.int32)
            has = first >= 0
            local_first[has] = remap[first[has]]
            first = local_first
        view = self.postings.view_to_save() if not start else []
        vocab_ref = out.json_array(vocab)
        return [name, vocab_ref, out.put(*csr, first, *view)]

    @classmethod
    def from_arrays(cls, entry: list, saved: SavedArrays, n: int) -> tuple[str, KeywordColumn]:
        name, vocab, refs = entry
        vocab = saved.json_list(vocab)
        col = cls()
        if len(refs) not in (4, 7):
            raise ValueError("keyword column of another layout")
        col.postings.load(vocab, saved, refs[:3], n)
        col.postings.load_view(saved, refs[4:], refs[2], n)
        col.first = saved.check(refs[3], np.int32, 1, n)
        if n and (saved.facts(refs[3]).max >= len(vocab) or saved.facts(refs[3]).min < -1):
            raise ValueError("keyword values out of range")
        return name, col


class NumericColumn(Column):
    """Numbers (dates as epoch millis, booleans as 0/1), possibly several per doc."""

    kind = "numeric"

    def __init__(self) -> None:
        self.doc = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0, dtype=np.float64)
        self.n = 0
        self._stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @classmethod
    def takes(cls, fs: FieldSpec) -> bool:
        return fs.is_numeric

    def rows_of(self, docs: Sequence[ParsedDoc], name: str) -> list[list[float] | None]:
        return [d.numeric.get(name) for d in docs]

    def extend(self, other: NumericColumn) -> None:
        grow(self, "doc", other.doc + self.n)
        grow(self, "values", other.values)
        self.n += other.n
        self._stats = None

    def append(self, rows: list[list[float] | None]) -> None:
        docs, vals = [], []
        for i, r in enumerate(rows):
            for v in r or []:
                docs.append(self.n + i)
                vals.append(v)
        self.doc = np.concatenate([self.doc, np.array(docs, dtype=np.int64)])
        self.values = np.concatenate([self.values, np.array(vals, dtype=np.float64)])
        self.n += len(rows)
        self._stats = None

    def compact(self, keep: np.ndarray) -> None:
        new_pos = np.cumsum(keep) - 1
        m = keep[self.doc]
        self.doc, self.values = new_pos[self.doc[m]], self.values[m]
        self.n = int(keep.sum())
        self._stats = None

    def stats(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first value, min, max) per doc, NaN where the doc has none."""
        if self._stats is None:
            first = np.full(self.n, np.nan)
            lo = np.full(self.n, np.inf)
            hi = np.full(self.n, -np.inf)
            first[self.doc[::-1]] = self.values[::-1]  # reversed so the first value wins
            np.minimum.at(lo, self.doc, self.values)
            np.maximum.at(hi, self.doc, self.values)
            lo[np.isinf(lo)] = np.nan
            hi[np.isinf(hi)] = np.nan
            self._stats = (first, lo, hi)
        return self._stats

    def count(self) -> np.ndarray:
        return np.bincount(self.doc, minlength=self.n)

    def to_arrays(self, out: ArrayWriter, name: str, start: int) -> list:
        # [name, [doc of each value, value]]
        lo = int(np.searchsorted(self.doc, start)) if start else 0  # doc is ascending
        return [name, out.put(self.doc[lo:] - start, self.values[lo:])]

    @classmethod
    def from_arrays(cls, entry: list, saved: SavedArrays, n: int) -> tuple[str, NumericColumn]:
        name, refs = entry
        col = cls()
        col.doc, col.values = saved.check(refs[0], np.int64, 1), saved.check(refs[1], np.float64, 1)
        col.n = n
        if len(col.doc) != len(col.values) or (
            len(col.doc) and (saved.facts(refs[0]).min < 0 or saved.facts(refs[0]).max >= n)
        ):
            raise ValueError("numeric doc ids out of range")
        return name, col


class VectorColumn(Column):
    """A dense_vector field: one float32 row per document (zeros where it has none)."""

    kind = "vectors"
    matrix = Splittable()

    def __init__(self, dims: int | None) -> None:
        self.dims = dims
        self.matrix = np.zeros((0, dims or 0), dtype=np.float32)
        self.present = np.zeros(0, dtype=bool)
        self._norms: np.ndarray | None = None
        #: the HNSW graph (engine.index.hnsw.HnswGraph) of the rows of the last base, built when that
        #: base was written; keyed by seq, so every snapshot (copies, compactions, appends) shares it
        self.graph: HnswGraph | None = None

    @classmethod
    def takes(cls, fs: FieldSpec) -> bool:
        return fs.type == VECTOR

    @classmethod
    def for_field(cls, fs: FieldSpec) -> VectorColumn:
        return cls(fs.dims)

    def empty_like(self) -> VectorColumn:
        return VectorColumn(self.dims)

    def rows_of(self, docs: Sequence[ParsedDoc], name: str) -> list[np.ndarray | None]:
        return [d.vectors.get(name) for d in docs]

    def extend(self, other: VectorColumn) -> None:
        m = len(other.present)
        if self.dims is None and other.dims is not None and other.present.any():
            self.dims = other.dims
            self.matrix = np.zeros((len(self.present), self.dims), dtype=np.float32)
        if self.dims is not None:
            block = other.matrix if other.dims == self.dims and len(other.matrix) == m else None
            grow(self, "matrix", block if block is not None else np.zeros((m, self.dims), np.float32))
        grow(self, "present", other.present)
        # the norms of the rows already there stay valid: rows are never rewritten (norms())

    def append(self, rows: list[np.ndarray | None]) -> None:
        if self.dims is None:
            first = next((r for r in rows if r is not None), None)
            if first is None:
                self.present = np.concatenate([self.present, np.zeros(len(rows), dtype=bool)])
                return
            self.dims = int(first.shape[0])
            self.matrix = np.zeros((len(self.present), self.dims), dtype=np.float32)
        block = np.zeros((len(rows), self.dims), dtype=np.float32)
        present = np.zeros(len(rows), dtype=bool)
        for i, r in enumerate(rows):
            if r is not None:
                block[i] = r
                present[i] = True
        self.matrix = np.concatenate([self.matrix, block]) if len(self.matrix) else block
        self.present = np.concatenate([self.present, present])
        self._norms = None

    def compact(self, keep: np.ndarray) -> None:
        if self.dims is not None:
            self.matrix = take(self, "matrix", np.flatnonzero(keep))
        self.present = self.present[keep]
        self._norms = None

    def rows(self, pos: np.ndarray) -> np.ndarray:
        """The vectors at positions ``pos`` (``matrix[pos]`` without joining a split matrix)."""
        return take(self, "matrix", pos)

    def norms(self) -> np.ndarray:
        """L2 norm per row; after an append only the new rows are computed."""
        have, n = self._norms, length(self, "matrix")
        if have is None or len(have) > n:
            have = np.concatenate(
                [np.linalg.norm(p, axis=1).astype(np.float32) for p in pieces(self, "matrix")]
            )
        elif len(have) < n:
            new = np.linalg.norm(since(self, "matrix", len(have)), axis=1).astype(np.float32)
            have = np.concatenate([have, new])
        self._norms = have
        return have

    def to_arrays(self, out: ArrayWriter, name: str, start: int) -> list:
        # [name, dims, [matrix, present, (HNSW graph)]]
        matrix = since(self, "matrix", start) if length(self, "matrix") else self.matrix
        # the HNSW graph (engine.index.hnsw) is saved with a base only (IndexHandle.save builds or
        # extends it first); the rows of a delta are scored exactly beside it (engine.query.knn)
        graph = [self.graph.to_array()] if self.graph is not None and not start else []
        return [name, self.dims, out.put(matrix, self.present[start:], *graph)]

    @classmethod
    def from_arrays(cls, entry: list, saved: SavedArrays, n: int) -> tuple[str, VectorColumn]:
        name, dims, refs = entry
        col = cls(dims)
        col.matrix, col.present = saved[refs[0]], saved.check(refs[1], np.bool_, 1, n)
        if col.matrix.dtype != np.float32 or col.matrix.ndim != 2:
            raise ValueError("vector matrix has the wrong type")
        if dims is not None and col.matrix.shape != (n, dims):
            raise ValueError("vector matrix has the wrong shape")
        if len(refs) > 2:  # the HNSW graph (engine.index.hnsw), restored on first use
            col.graph = HnswGraph.from_array(saved[refs[2]], dims)
        return name, col


#: the column classes, in the order their entries are saved (a saved segment's description lists
#: the columns of each kind under its ``kind``); a new field type is one class added here
COLUMN_TYPES: tuple[type[Column], ...] = (TextColumn, KeywordColumn, NumericColumn, VectorColumn)


def column_type(fs: FieldSpec) -> type[Column] | None:
    """The class of the column holding the values of field ``fs`` (None: not indexed in one)."""
    return next((cls for cls in COLUMN_TYPES if cls.takes(fs)), None)
