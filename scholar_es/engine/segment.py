"""The searchable, in-memory form of one index: postings, doc values and vectors.

Built from the documents in :mod:`engine.store` and saved as checksummed arrays
(:meth:`Segment.to_arrays`, written by :mod:`engine.commit`) so a new process opens a
100k-chunk index in well under a second. A published segment is an immutable snapshot:
:meth:`Segment.with_changes` returns a new one and leaves it untouched. Documents are kept in
``seq`` order (Lucene's doc-id order on a single shard); deletions are applied by
compacting, i.e. the engine always behaves like a force-merged index, so collection
statistics count live documents only (a cluster also counts deleted-but-unmerged ones).

Columns by field type:

* text   -- term -> postings (doc, tf) in CSC layout, token counts per doc, norms
* keyword -- value -> postings, first value per doc (collapse, sort)
* numeric/date/boolean -- all values flattened, min/max per doc
* dense_vector -- float32 matrix and a presence mask
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scholar_es.engine import similarity as sim
from scholar_es.engine.analysis import get_analyzer
from scholar_es.engine.errors import EsError
from scholar_es.engine.mapping import KEYWORD, TEXT, VECTOR, FieldSpec, Mapping, keyword_normalizer


@dataclass
class ParsedDoc:
    """A document turned into per-field values, ready to be appended to a segment."""

    seq: int
    id: str
    text: dict[str, list[str]] = field(default_factory=dict)  # field -> tokens
    keyword: dict[str, list[str]] = field(default_factory=dict)
    numeric: dict[str, list[float]] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)


def parse_document(
    mapping: Mapping,
    analysis: dict | None,
    seq: int,
    doc_id: str,
    source: dict,
    vectors: dict[str, np.ndarray] | None = None,
) -> ParsedDoc:
    """Analyze and validate one ``_source`` against the mapping (mapper errors raise)."""
    doc = ParsedDoc(seq=seq, id=doc_id)
    for name, values in mapping.flatten(source).items():
        fs = mapping.fields[name]
        if fs.type == TEXT:
            if fs.index and values:  # present even with no tokens ("" or stop words): Lucene writes norm 0
                analyzer = get_analyzer(fs.analyzer, analysis)
                tokens: list[str] = []
                for v in values:
                    tokens.extend(analyzer(v))
                doc.text[name] = tokens
        elif fs.type == KEYWORD:
            # ignore_above looks at the value as given, the normalizer runs after (KeywordFieldMapper)
            kept = [v for v in values if fs.ignore_above is None or len(v) <= fs.ignore_above]
            normalize = keyword_normalizer(fs, analysis)
            if normalize is not None:
                kept = [normalize(v) for v in kept]
            if kept:
                doc.keyword[name] = kept
        elif fs.type == VECTOR:
            doc.vectors[name] = _vector_value(fs, values[0])
        elif values:
            doc.numeric[name] = [float(v) for v in values]
    for name, vec in (vectors or {}).items():  # vectors excluded from _source live beside it
        spec = mapping.get(name)
        if spec is not None and spec.type == VECTOR and name not in doc.vectors:
            doc.vectors[name] = _vector_value(spec, vec)
    return doc


def _vector_value(fs: FieldSpec, value) -> np.ndarray:
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: not an array of numbers",
        ) from None
    if vec.ndim != 1:
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: expected a flat array of numbers",
        )
    if fs.dims is not None and vec.shape[0] != fs.dims:
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: "
            f"The [dense_vector] field [{fs.name}] in doc [document with id] has a different number of "
            f"dimensions [{vec.shape[0]}] than defined in the mapping [{fs.dims}]",
        )
    if not np.all(np.isfinite(vec)):
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: vector contains NaN or Infinity",
        )
    if fs.similarity == "cosine" and not np.any(vec):
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: "
            "The [cosine] similarity does not support vectors with zero magnitude.",
        )
    return vec


# --- columns ---------------------------------------------------------------------------


class _Postings:
    """Doc x term matrix in CSR (appendable) with a lazily built CSC view (term -> docs)."""

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.indptr = np.zeros(1, dtype=np.int64)
        self.indices = np.zeros(0, dtype=np.int32)
        self.data = np.zeros(0, dtype=np.int32)
        self._csc: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def copy(self) -> _Postings:
        """A copy that can be appended to without touching this one (arrays are shared)."""
        new = copy.copy(self)
        new.vocab = dict(self.vocab)
        return new

    def append(self, rows: list[list[str]]) -> None:
        vocab = self.vocab
        ind_parts, dat_parts, counts = [], [], []
        for tokens in rows:
            if tokens:
                ids = np.fromiter(
                    (vocab.setdefault(t, len(vocab)) for t in tokens), dtype=np.int32, count=len(tokens)
                )
                u, c = np.unique(ids, return_counts=True)
                ind_parts.append(u.astype(np.int32))
                dat_parts.append(c.astype(np.int32))
                counts.append(len(u))
            else:
                counts.append(0)
        if ind_parts:
            self.indices = np.concatenate([self.indices, *ind_parts])
            self.data = np.concatenate([self.data, *dat_parts])
        self.indptr = np.concatenate([self.indptr, self.indptr[-1] + np.cumsum(counts, dtype=np.int64)])
        self._csc = None

    def compact(self, keep: np.ndarray) -> None:
        starts, ends = self.indptr[:-1][keep], self.indptr[1:][keep]
        lens = ends - starts
        if len(lens):
            idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens) + np.arange(
                lens.sum()
            )
        else:
            idx = np.zeros(0, dtype=np.int64)
        self.indices, self.data = self.indices[idx], self.data[idx]
        self.indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self._csc = None

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(col_ptr, doc positions, freqs), docs ascending within each term."""
        if self._csc is None:
            n_docs = len(self.indptr) - 1
            rows = np.repeat(np.arange(n_docs, dtype=np.int32), np.diff(self.indptr))
            order = np.argsort(self.indices, kind="stable")  # stable keeps docs ascending
            col_counts = np.bincount(self.indices, minlength=len(self.vocab))
            col_ptr = np.concatenate([[0], np.cumsum(col_counts)]).astype(np.int64)
            self._csc = (col_ptr, rows[order], self.data[order])
        return self._csc

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        tid = self.vocab.get(term)
        if tid is None:
            return None
        ptr, docs, freqs = self.csc()
        return docs[ptr[tid] : ptr[tid + 1]], freqs[ptr[tid] : ptr[tid + 1]]

    def row_counts(self) -> np.ndarray:
        return np.diff(self.indptr)


class TextColumn:
    """An analyzed text field with BM25 statistics."""

    def __init__(self) -> None:
        self.postings = _Postings()
        self.lengths = np.zeros(0, dtype=np.int32)
        # docs holding the field, even with no tokens: Lucene writes a zero norm for an indexed
        # empty value, so FieldExistsQuery (exists) matches it
        self.present = np.zeros(0, dtype=bool)
        self._norms: np.ndarray | None = None

    def copy(self) -> TextColumn:
        new = copy.copy(self)
        new.postings = self.postings.copy()
        return new

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


class KeywordColumn:
    """Exact values; scored as Lucene scores a DOCS-only field without norms."""

    def __init__(self) -> None:
        self.postings = _Postings()
        self.first = np.zeros(0, dtype=np.int32)  # value id of the first value, -1 if none
        self._terms: list[str] | None = None

    def copy(self) -> KeywordColumn:
        new = copy.copy(self)
        new.postings = self.postings.copy()
        return new

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
        return len(self.postings.indices)


class NumericColumn:
    """Numbers (dates as epoch millis, booleans as 0/1), possibly several per doc."""

    def __init__(self) -> None:
        self.doc = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0, dtype=np.float64)
        self.n = 0
        self._stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def copy(self) -> NumericColumn:
        return copy.copy(self)  # every change rebinds its arrays

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


class VectorColumn:
    def __init__(self, dims: int | None) -> None:
        self.dims = dims
        self.matrix = np.zeros((0, dims or 0), dtype=np.float32)
        self.present = np.zeros(0, dtype=bool)
        self._norms: np.ndarray | None = None

    def copy(self) -> VectorColumn:
        return copy.copy(self)  # every change rebinds its arrays

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
            self.matrix = self.matrix[keep]
        self.present = self.present[keep]
        self._norms = None

    def norms(self) -> np.ndarray:
        if self._norms is None:
            self._norms = np.linalg.norm(self.matrix, axis=1).astype(np.float32)
        return self._norms


#: any column; a variable declared with it narrows to the kind assigned
Column = TextColumn | KeywordColumn | NumericColumn | VectorColumn


# --- the segment -------------------------------------------------------------------


class Segment:
    """All columns of one index, kept in seq order."""

    def __init__(self, mapping: Mapping) -> None:
        self.mapping = mapping
        self.seqs = np.zeros(0, dtype=np.int64)
        self.ids: list[str] = []
        self.text: dict[str, TextColumn] = {}
        self.keyword: dict[str, KeywordColumn] = {}
        self.numeric: dict[str, NumericColumn] = {}
        self.vectors: dict[str, VectorColumn] = {}
        self._pending: list[ParsedDoc] = []
        self._deleted: set[int] = set()
        self._id_pos: dict[str, int] | None = None
        #: the SQLite write generation of the index that this segment reflects (-1: none yet,
        #: so a new segment is always brought up to date, even from a database whose index has
        #: documents but no recorded generation)
        self.gen = -1

    @property
    def n(self) -> int:
        self.ensure_built()
        return len(self.seqs)

    def add(self, doc: ParsedDoc) -> None:
        self._pending.append(doc)

    def delete(self, seq: int) -> None:
        self._deleted.add(seq)

    @property
    def dirty(self) -> bool:
        return bool(self._pending or self._deleted)

    def ensure_built(self) -> None:
        if self._deleted:
            keep = ~np.isin(self.seqs, np.fromiter(self._deleted, dtype=np.int64))
            self._pending = [d for d in self._pending if d.seq not in self._deleted]
            self._deleted.clear()
            if not keep.all():
                self.seqs = self.seqs[keep]
                self.ids = [i for i, k in zip(self.ids, keep, strict=True) if k]
                for col in self._columns():
                    col.compact(keep)
                self._id_pos = None
        if self._pending:
            docs, self._pending = self._pending, []
            self._append(docs)
            self._id_pos = None

    def _columns(self):
        yield from self.text.values()
        yield from self.keyword.values()
        yield from self.numeric.values()
        yield from self.vectors.values()

    def _append(self, docs: list[ParsedDoc]) -> None:
        n_before = len(self.seqs)
        self.seqs = np.concatenate([self.seqs, np.array([d.seq for d in docs], dtype=np.int64)])
        self.ids.extend(d.id for d in docs)
        for name, fs in self.mapping.fields.items():
            if fs.type == TEXT:
                col = self.text.get(name) or self._new(self.text, name, TextColumn(), n_before)
                col.append([d.text.get(name) for d in docs])
            elif fs.type == KEYWORD:
                col = self.keyword.get(name) or self._new(self.keyword, name, KeywordColumn(), n_before)
                col.append([d.keyword.get(name) for d in docs])
            elif fs.type == VECTOR:
                col = self.vectors.get(name) or self._new(self.vectors, name, VectorColumn(fs.dims), n_before)
                col.append([d.vectors.get(name) for d in docs])
            elif fs.is_numeric:
                col = self.numeric.get(name) or self._new(self.numeric, name, NumericColumn(), n_before)
                col.append([d.numeric.get(name) for d in docs])

    @staticmethod
    def _new(registry: dict, name: str, col, n_before: int):
        """A column for a field first seen now: earlier docs have no value in it."""
        if n_before:
            col.append([None] * n_before)
        registry[name] = col
        return col

    def built_seq_of(self, doc_id: str) -> int | None:
        """The seq of a built (not pending) document with this id, without building."""
        if self._id_pos is None:
            self._id_pos = {d: i for i, d in enumerate(self.ids)}
        pos = self._id_pos.get(doc_id)
        return None if pos is None else int(self.seqs[pos])

    def position_of(self, doc_id: str) -> int | None:
        self.ensure_built()
        if self._id_pos is None:
            self._id_pos = {d: i for i, d in enumerate(self.ids)}
        return self._id_pos.get(doc_id)

    # --- snapshots -------------------------------------------------------------------
    def with_changes(self, adds: list[ParsedDoc], deletes) -> Segment:
        """A new, built segment: this one minus ``deletes`` (seqs) plus ``adds``.

        ``self`` is not modified (it may be a published snapshot that searches are reading):
        the copy shares the numpy arrays, which are never written in place, and copies the
        containers that appending mutates (ids, vocabularies, column registries).
        """
        new = Segment(self.mapping)
        new.seqs, new.ids, new.gen = self.seqs, list(self.ids), self.gen
        new.text = {name: col.copy() for name, col in self.text.items()}
        new.keyword = {name: col.copy() for name, col in self.keyword.items()}
        new.numeric = {name: col.copy() for name, col in self.numeric.items()}
        new.vectors = {name: col.copy() for name, col in self.vectors.items()}
        new._pending = list(self._pending) + list(adds)
        new._deleted = set(self._deleted) | {int(s) for s in deletes}
        new.ensure_built()
        return new

    # --- persistence ---------------------------------------------------------------
    def to_arrays(self) -> tuple[list[np.ndarray], dict]:
        """All columns as a list of arrays plus a JSON description naming them by position
        (file names are positions, never field names; see :mod:`engine.commit`)."""
        self.ensure_built()
        arrays: list[np.ndarray] = [self.seqs]
        desc: dict = {
            "ids": self.ids,
            "n": len(self.seqs),
            "text": [],
            "keyword": [],
            "numeric": [],
            "vectors": [],
        }

        def put(*arrs: np.ndarray) -> list[int]:
            arrays.extend(arrs)
            return list(range(len(arrays) - len(arrs), len(arrays)))

        col: Column
        for name, col in self.text.items():
            p = col.postings
            desc["text"].append(
                [name, list(p.vocab), put(p.indptr, p.indices, p.data, col.lengths, col.present, *p.csc())]
            )
        for name, col in self.keyword.items():
            p = col.postings
            desc["keyword"].append(
                [name, list(p.vocab), put(p.indptr, p.indices, p.data, col.first, *p.csc())]
            )
        for name, col in self.numeric.items():
            desc["numeric"].append([name, put(col.doc, col.values)])
        for name, col in self.vectors.items():
            desc["vectors"].append([name, col.dims, put(col.matrix, col.present)])
        return arrays, desc

    @classmethod
    def from_arrays(cls, arrays: list[np.ndarray], desc: dict, mapping: Mapping) -> Segment:
        """The segment ``to_arrays`` described; raises ValueError when the arrays do not fit
        together (a check beyond the checksums: wrong shapes or out-of-range ids never load)."""
        try:
            seg = cls(mapping)
            col: Column
            seg.seqs = _check(arrays[0], np.int64, 1)
            n = len(seg.seqs)
            seg.ids = [str(i) for i in desc["ids"]]
            if len(seg.ids) != n or desc["n"] != n or (n and np.any(np.diff(seg.seqs) <= 0)):
                raise ValueError("ids and seqs do not match")
            for name, vocab, refs in desc["text"]:
                col = TextColumn()
                if len(refs) not in (5, 8):  # 8: with the term -> docs view (saved since issue 16)
                    raise ValueError("text column of another layout")
                _load_postings(col.postings, vocab, [arrays[i] for i in refs[:3]], n)
                _load_csc(col.postings, [arrays[i] for i in refs[5:]], n)
                col.lengths = _check(arrays[refs[3]], np.int32, 1, n)
                col.present = _check(arrays[refs[4]], np.bool_, 1, n)
                seg.text[name] = col
            for name, vocab, refs in desc["keyword"]:
                col = KeywordColumn()
                if len(refs) not in (4, 7):
                    raise ValueError("keyword column of another layout")
                _load_postings(col.postings, vocab, [arrays[i] for i in refs[:3]], n)
                _load_csc(col.postings, [arrays[i] for i in refs[4:]], n)
                col.first = _check(arrays[refs[3]], np.int32, 1, n)
                if n and (col.first.max() >= len(vocab) or col.first.min() < -1):
                    raise ValueError("keyword values out of range")
                seg.keyword[name] = col
            for name, refs in desc["numeric"]:
                col = NumericColumn()
                col.doc, col.values = (
                    _check(arrays[refs[0]], np.int64, 1),
                    _check(arrays[refs[1]], np.float64, 1),
                )
                col.n = n
                if len(col.doc) != len(col.values) or (
                    len(col.doc) and (col.doc.min() < 0 or col.doc.max() >= n)
                ):
                    raise ValueError("numeric doc ids out of range")
                seg.numeric[name] = col
            for name, dims, refs in desc["vectors"]:
                col = VectorColumn(dims)
                col.matrix, col.present = arrays[refs[0]], _check(arrays[refs[1]], np.bool_, 1, n)
                if col.matrix.dtype != np.float32 or col.matrix.ndim != 2:
                    raise ValueError("vector matrix has the wrong type")
                if dims is not None and col.matrix.shape != (n, dims):
                    raise ValueError("vector matrix has the wrong shape")
                seg.vectors[name] = col
        except (IndexError, KeyError, TypeError) as e:
            raise ValueError(f"segment description does not match its files: {e}") from None
        return seg


def _cached(col: object, name: str, source: np.ndarray, compute: Callable[[], int]) -> int:
    """A per-field statistic (an O(N) pass) computed once per version of its source array: every
    change to a column rebinds its arrays, so the cache is keyed on the array's identity."""
    cache: dict = col.__dict__.setdefault("_stat_cache", {})
    hit = cache.get(name)
    if hit is None or hit[0] is not source:
        hit = (source, compute())
        cache[name] = hit
    return hit[1]


def _check(arr: np.ndarray, dtype, ndim: int, length: int | None = None) -> np.ndarray:
    if arr.dtype != dtype or arr.ndim != ndim or (length is not None and len(arr) != length):
        raise ValueError(
            f"array of dtype {arr.dtype} and shape {arr.shape} where {np.dtype(dtype)} was expected"
        )
    return arr


def _load_postings(p: _Postings, vocab: list[str], arrs: list[np.ndarray], n: int) -> None:
    p.vocab = {str(t): i for i, t in enumerate(vocab)}
    p.indptr = _check(arrs[0], np.int64, 1, n + 1)
    p.indices, p.data = _check(arrs[1], np.int32, 1), _check(arrs[2], np.int32, 1)
    if p.indptr[0] != 0 or np.any(np.diff(p.indptr) < 0) or p.indptr[-1] != len(p.indices):
        raise ValueError("postings offsets are inconsistent")
    if len(p.data) != len(p.indices) or (
        len(p.indices) and (p.indices.min() < 0 or p.indices.max() >= len(vocab))
    ):
        raise ValueError("postings term ids out of range")


def _load_csc(p: _Postings, arrs: list[np.ndarray], n: int) -> None:
    """The saved term -> docs view (col_ptr, docs, freqs), checked against the CSR it mirrors;
    absent (a segment saved before it was stored): built lazily on the first search, as before."""
    if not arrs:
        return
    col_ptr = _check(arrs[0], np.int64, 1, len(p.vocab) + 1)
    docs = _check(arrs[1], np.int32, 1, len(p.indices))
    freqs = _check(arrs[2], np.int32, 1, len(p.indices))
    if col_ptr[0] != 0 or np.any(np.diff(col_ptr) < 0) or col_ptr[-1] != len(p.indices):
        raise ValueError("term -> docs offsets are inconsistent")
    if len(docs) and (docs.min() < 0 or docs.max() >= n):
        raise ValueError("term -> docs positions out of range")
    if int(freqs.sum(dtype=np.int64)) != int(p.data.sum(dtype=np.int64)):
        raise ValueError("term -> docs frequencies do not match the postings")
    p._csc = (col_ptr, docs, freqs)
