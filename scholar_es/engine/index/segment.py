"""The searchable, in-memory form of one index: postings, doc values and vectors.

Built from the documents in :mod:`engine.index.store` and saved as checksummed arrays
(:meth:`Segment.to_arrays`: the whole segment as a base, or the newest documents as a delta;
written by :mod:`engine.index.commit`) so a new process opens a 100k-chunk index in well under a
second. A published segment is an immutable snapshot: :meth:`Segment.with_changes` returns a
new one and leaves it untouched (appends go to spare capacity past the rows it sees,
:func:`_grow`). Documents are kept in
``seq`` order (Lucene's doc-id order on a single shard); deletions are applied by
compacting, i.e. the engine always behaves like a force-merged index, so collection
statistics count live documents only (a cluster also counts deleted-but-unmerged ones).

Columns by field type:

* text   -- term -> postings (doc, tf) in CSC layout, token counts per doc, norms
* keyword -- value -> postings, first value per doc (collapse, sort)
* numeric/date/boolean -- all values flattened, min/max per doc
* dense_vector -- float32 matrix and a presence mask (+ the HNSW graph, :mod:`engine.index.hnsw`)
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import orjson

from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.errors import EsError
from scholar_es.engine.index.array_stats import ArrayStats
from scholar_es.engine.index.hnsw import HnswGraph, graph_params
from scholar_es.engine.index.mapping import KEYWORD, TEXT, VECTOR, FieldSpec, Mapping, keyword_normalizer
from scholar_es.engine.query import similarity as sim


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


class _Buf:
    """A growable array's storage: ``arr`` has spare capacity past ``used`` rows."""

    __slots__ = ("arr", "used")

    def __init__(self, arr: np.ndarray, used: int) -> None:
        self.arr, self.used = arr, used


#: a read-only (mapped) array at least this long is not copied to append to it: the rows
#: appended after it go to a tail of their own (:class:`_Split`); for the attributes declared
#: with :class:`_Splittable` only (the vector matrix and the postings, the big ones)
SPLIT_MIN_ROWS = 1 << 16


class _Split:
    """A column array held in two parts: ``base`` (a read-only view of a mapped file, never
    copied) and ``tail`` (the rows appended since, a growable buffer's prefix).

    Opening a base with deltas, or appending to a freshly opened base, used to copy the whole
    mapped array into a growable buffer first (4 s and 2.5 GB of memory at 1M chunks). Hot paths
    read the parts (:func:`_pieces`, :func:`_take`, :func:`_since`); a read of the whole array
    through the attribute joins them once (:class:`_Splittable`)."""

    __slots__ = ("base", "tail")

    def __init__(self, base: np.ndarray, tail: np.ndarray) -> None:
        self.base, self.tail = base, tail

    def __len__(self) -> int:
        return len(self.base) + len(self.tail)


class _Splittable:
    """Declares a column attribute that may hold a :class:`_Split`; reading it whole joins the
    parts into one growable buffer (kept, so later appends are in place again)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, obj: object, owner: type | None = None) -> np.ndarray:
        if obj is None:
            return self  # type: ignore[return-value]
        value = obj.__dict__[self.key]
        if type(value) is _Split:
            value = _join(obj, self.key, value)
        return value

    def __set__(self, obj: object, value: np.ndarray) -> None:
        obj.__dict__[self.key] = value


def _raw(obj: object, attr: str) -> np.ndarray | _Split:
    return obj.__dict__[attr]


def _pieces(obj: object, attr: str) -> list[np.ndarray]:
    """The parts of ``obj.<attr>`` in row order, without joining them."""
    value = _raw(obj, attr)
    return [value.base, value.tail] if type(value) is _Split else [value]  # type: ignore[list-item]


def _length(obj: object, attr: str) -> int:
    return len(_raw(obj, attr))


def _take(obj: object, attr: str, pos: np.ndarray) -> np.ndarray:
    """``obj.<attr>[pos]`` gathered from the parts (no join)."""
    value = _raw(obj, attr)
    if type(value) is not _Split:
        return value[pos]  # type: ignore[index]
    base, tail = value.base, value.tail
    pos = np.asarray(pos, dtype=np.int64)
    out = np.empty((len(pos), *base.shape[1:]), dtype=np.result_type(base, tail))
    low = pos < len(base)
    out[low] = base[pos[low]]
    out[~low] = tail[pos[~low] - len(base)]
    return out


def _slice(obj: object, attr: str, lo: int, hi: int) -> np.ndarray:
    """``obj.<attr>[lo:hi]`` from the parts (no join)."""
    value = _raw(obj, attr)
    if type(value) is not _Split:
        return value[lo:hi]  # type: ignore[index]
    nb = len(value.base)
    if hi <= nb:
        return value.base[lo:hi]
    if lo >= nb:
        return value.tail[lo - nb : hi - nb]
    return np.concatenate([value.base[lo:], value.tail[: hi - nb]])


def _since(obj: object, attr: str, start: int) -> np.ndarray:
    """``obj.<attr>[start:]``, without joining when ``start`` lies in the tail."""
    value = _raw(obj, attr)
    if type(value) is _Split and start >= len(value.base):
        return value.tail[start - len(value.base) :]
    return getattr(obj, attr)[start:]


def _join(obj: object, attr: str, split: _Split) -> np.ndarray:
    """One array of both parts, in a growable buffer registered for later appends."""
    bufs: dict[str, _Buf] = obj.__dict__.setdefault("_bufs", {})
    n = len(split)
    arr = np.empty((n + max(n // 2, 16), *split.base.shape[1:]), dtype=np.result_type(split.base, split.tail))
    arr[: len(split.base)] = split.base
    arr[len(split.base) : n] = split.tail
    bufs[attr] = _Buf(arr, n)
    out = arr[:n]
    out.flags.writeable = False
    obj.__dict__[attr] = out
    return out


def _grown(bufs: dict[str, _Buf], key: str, view: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """``view`` followed by ``extra``: in place in the spare capacity of the buffer ``view`` is a
    prefix of, when no other version has written past that prefix yet (``used`` equals its
    length) and ``extra``'s type fits the buffer's, else copied into a new buffer with 50% spare
    capacity, of the wider of the two types."""
    buf = bufs.get(key)
    n, m = len(view), len(extra)
    if (
        buf is not None
        and view.base is buf.arr
        and buf.used == n
        and len(buf.arr) >= n + m
        and np.can_cast(extra.dtype, buf.arr.dtype, "safe")
    ):
        buf.arr[n : n + m] = extra
    else:
        # the wider of the two types: a narrowed saved array (see _narrowed) followed by wider
        # values is widened, never truncated
        arr = np.empty((n + m + max((n + m) // 2, 16), *view.shape[1:]), dtype=np.result_type(view, extra))
        arr[:n] = view
        arr[n : n + m] = extra
        buf = bufs[key] = _Buf(arr, n)
    buf.used = n + m
    out = buf.arr[: n + m]
    out.flags.writeable = False  # a snapshot's arrays are never written
    return out


def _grow(obj: object, attr: str, extra: np.ndarray) -> None:
    """Rebind ``obj.<attr>`` to its rows followed by ``extra``, in amortized O(len(extra)).

    The rows go into the spare capacity of the buffer the current array is a prefix of, when
    no other version has written past that prefix yet: every snapshot that shares the buffer
    sees only its own prefix, which is never written again. Otherwise (a compacted array, or a
    second version branching from the same snapshot) the rows are copied into a new buffer with
    50% spare capacity; a big read-only array of a :class:`_Splittable` attribute (a mapped
    base) is not copied but kept as the base of a :class:`_Split`, the rows going to its tail.
    """
    if len(extra) == 0:
        return
    bufs: dict[str, _Buf] = obj.__dict__.setdefault("_bufs", {})
    view = _raw(obj, attr)
    if type(view) is _Split:
        obj.__dict__[attr] = _Split(view.base, _grown(bufs, attr + "#tail", view.tail, extra))
        return
    buf = bufs.get(attr)
    owned = buf is not None and view.base is buf.arr
    if not owned and isinstance(type(obj).__dict__.get(attr), _Splittable) and len(view) >= SPLIT_MIN_ROWS:
        tail = _grown(bufs, attr + "#tail", extra[:0], extra)
        obj.__dict__[attr] = _Split(view, tail)  # type: ignore[arg-type]
        return
    obj.__dict__[attr] = _grown(bufs, attr, view, extra)  # type: ignore[arg-type]


def _copy_bufs(new: object, old: object) -> None:
    """Give a copied column its own registry of buffers (the buffers themselves are shared)."""
    new.__dict__["_bufs"] = dict(old.__dict__.get("_bufs", {}))


#: the types a saved array of term ids or frequencies may have (issue 16, disk): the narrowest
#: that holds its values, chosen when it is saved (:func:`_narrowed`). At 1M chunks the postings
#: are ~120M (doc, term) pairs in each direction: frequencies of one byte and term ids of two
#: instead of four bytes each save ~1 GB. In memory a narrow array is read as it is (mapped);
#: joined with wider values (appends, deltas, merges) the result has the wider type
#: (:func:`_grown`, :func:`_join`, :func:`_take`, ``np.concatenate``), so a value is never cut.
POSTINGS_TYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int32))


def _narrowed(arr: np.ndarray) -> np.ndarray:
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


#: a tail of the term -> docs view is folded into the base one when it holds more than this
#: fraction of the base's postings (amortized O(1) per appended posting)
TAIL_FRACTION = 8
#: ... and never below this many postings (small indices: a tail this small costs nothing)
TAIL_MIN_POSTINGS = 1 << 16


class _Postings:
    """Doc x term matrix in CSR (grown in place, see :func:`_grow`) with a term -> docs view.

    The term -> docs view is a big *base* (rows appended up to some point; saved, or read from
    a file) plus a small *tail* for the rows appended since: an append sorts only its own
    postings and joins them to the tail; the tail is folded into the base when it grows past
    ``1/TAIL_FRACTION`` of it. ``postings(term)`` returns the base slice followed by the tail
    slice, so documents stay ascending.
    """

    indices = _Splittable()
    data = _Splittable()

    def __init__(self) -> None:
        self.vocab: dict[str, int] = {}
        self.indptr = np.zeros(1, dtype=np.int64)
        self.indices = np.zeros(0, dtype=np.int32)
        self.data = np.zeros(0, dtype=np.int32)
        #: (base view, tail view or None): one attribute, so a reader never sees half an update
        self._views: tuple[Csc, Csc | None] | None = None

    @property
    def _csc(self) -> Csc | None:
        """The base term -> docs view (None: not built yet)."""
        return None if self._views is None else self._views[0]

    @_csc.setter
    def _csc(self, value: Csc | None) -> None:
        self._views = None if value is None else (value, None)

    def copy(self) -> _Postings:
        """A copy that can be appended to without touching this one (arrays are shared)."""
        new = copy.copy(self)
        new.vocab = dict(self.vocab)
        _copy_bufs(new, self)
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

    def extend(self, other: _Postings) -> np.ndarray:
        """Append the rows of ``other`` (its own vocabulary); returns its term ids in this one."""
        vocab = self.vocab
        remap = np.fromiter(
            (vocab.setdefault(t, len(vocab)) for t in other.vocab), dtype=np.int32, count=len(other.vocab)
        )
        n0 = len(self.indptr) - 1
        ind = remap[other.indices] if len(other.indices) else np.zeros(0, dtype=np.int32)
        views = self._views
        _grow(self, "indices", ind)
        _grow(self, "data", other.data)
        _grow(self, "indptr", other.indptr[1:] + self.indptr[-1])
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
        self.indices, self.data = _take(self, "indices", idx), _take(self, "data", idx)
        self.indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        self._views = None
        if views is not None:  # filter the term -> docs view too: O(postings), no sort
            base, tail = views
            ptr, docs, freqs = base if tail is None else _concat_csc(base, tail, len(self.vocab))
            kept = keep[docs]
            at = np.zeros(len(kept) + 1, dtype=np.int64)
            np.cumsum(kept, out=at[1:])
            new_ptr = np.zeros(len(self.vocab) + 1, dtype=np.int64)
            new_ptr[: len(ptr)] = at[ptr]
            new_ptr[len(ptr) :] = new_ptr[len(ptr) - 1]
            new_pos = (np.cumsum(keep) - 1).astype(np.int32)
            self._views = ((new_ptr, new_pos[docs[kept]], freqs[kept]), None)

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
        return _slice(self, "indices", int(self.indptr[pos]), int(self.indptr[pos + 1]))

    def postings_count(self) -> int:
        """Number of (doc, term) postings."""
        return _length(self, "indices")


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
        _copy_bufs(new, self)
        return new

    def extend(self, other: TextColumn) -> None:
        """Append the rows of ``other`` (a column of new documents)."""
        self.postings.extend(other.postings)
        _grow(self, "lengths", other.lengths)
        _grow(self, "present", other.present)
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
        _copy_bufs(new, self)
        return new

    def extend(self, other: KeywordColumn) -> None:
        """Append the rows of ``other`` (a column of new documents)."""
        remap = self.postings.extend(other.postings)
        first = np.full(len(other.first), -1, dtype=np.int32)
        has = other.first >= 0
        first[has] = remap[other.first[has]]
        _grow(self, "first", first)
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


class NumericColumn:
    """Numbers (dates as epoch millis, booleans as 0/1), possibly several per doc."""

    def __init__(self) -> None:
        self.doc = np.zeros(0, dtype=np.int64)
        self.values = np.zeros(0, dtype=np.float64)
        self.n = 0
        self._stats: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def copy(self) -> NumericColumn:
        new = copy.copy(self)  # every change rebinds its arrays
        _copy_bufs(new, self)
        return new

    def extend(self, other: NumericColumn) -> None:
        """Append the rows of ``other`` (a column of new documents)."""
        _grow(self, "doc", other.doc + self.n)
        _grow(self, "values", other.values)
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


class VectorColumn:
    matrix = _Splittable()

    def __init__(self, dims: int | None) -> None:
        self.dims = dims
        self.matrix = np.zeros((0, dims or 0), dtype=np.float32)
        self.present = np.zeros(0, dtype=bool)
        self._norms: np.ndarray | None = None
        #: the HNSW graph (engine.index.hnsw.HnswGraph) of the rows of the last base, built when that
        #: base was written; keyed by seq, so every snapshot (copies, compactions, appends) shares it
        self.graph: HnswGraph | None = None

    def copy(self) -> VectorColumn:
        new = copy.copy(self)  # every change rebinds its arrays; the graph is shared
        _copy_bufs(new, self)
        return new

    def extend(self, other: VectorColumn) -> None:
        """Append the rows of ``other`` (a column of new documents)."""
        m = len(other.present)
        if self.dims is None and other.dims is not None and other.present.any():
            self.dims = other.dims
            self.matrix = np.zeros((len(self.present), self.dims), dtype=np.float32)
        if self.dims is not None:
            block = other.matrix if other.dims == self.dims and len(other.matrix) == m else None
            _grow(self, "matrix", block if block is not None else np.zeros((m, self.dims), np.float32))
        _grow(self, "present", other.present)
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
            self.matrix = _take(self, "matrix", np.flatnonzero(keep))
        self.present = self.present[keep]
        self._norms = None

    def rows(self, pos: np.ndarray) -> np.ndarray:
        """The vectors at positions ``pos`` (``matrix[pos]`` without joining a split matrix)."""
        return _take(self, "matrix", pos)

    def norms(self) -> np.ndarray:
        """L2 norm per row; after an append only the new rows are computed."""
        have, n = self._norms, _length(self, "matrix")
        if have is None or len(have) > n:
            have = np.concatenate(
                [np.linalg.norm(p, axis=1).astype(np.float32) for p in _pieces(self, "matrix")]
            )
        elif len(have) < n:
            new = np.linalg.norm(_since(self, "matrix", len(have)), axis=1).astype(np.float32)
            have = np.concatenate([have, new])
        self._norms = have
        return have


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
            mini = Segment(self.mapping)
            mini._append(docs)
            self._extend(mini)

    def _columns(self):
        yield from self.text.values()
        yield from self.keyword.values()
        yield from self.numeric.values()
        yield from self.vectors.values()

    def _extend(self, other: Segment) -> None:
        """Append the documents of ``other`` (all newer than ours): each column grows in place
        (:func:`_grow`) and its term -> docs view sorts only the new postings."""
        n_before, m = len(self.seqs), len(other.seqs)
        if not m:
            return
        _grow(self, "seqs", other.seqs)
        self.ids.extend(other.ids)
        self._id_pos = None
        kinds: list[tuple[dict, dict, Callable[[Column], Column]]] = [
            (self.text, other.text, lambda c: TextColumn()),
            (self.keyword, other.keyword, lambda c: KeywordColumn()),
            (self.numeric, other.numeric, lambda c: NumericColumn()),
            (self.vectors, other.vectors, lambda c: VectorColumn(c.dims)),  # type: ignore[union-attr]
        ]
        for mine, theirs, make in kinds:
            for name, col in mine.items():
                if name not in theirs:
                    empty = make(col)
                    empty.append([None] * m)
                    col.extend(empty)
            for name, col in theirs.items():
                if name in mine:
                    mine[name].extend(col)
                else:  # a field first seen now: earlier docs have no value in it
                    new = make(col)
                    new.append([None] * n_before)
                    new.extend(col)
                    mine[name] = new

    def _append(self, docs: list[ParsedDoc]) -> None:
        """Build columns from parsed documents (used on an empty segment of new documents)."""
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
    def with_changes(self, adds: list[ParsedDoc], deletes, added: Segment | None = None) -> Segment:
        """A new, built segment: this one minus ``deletes`` (seqs) plus ``adds`` (parsed
        documents) or the documents of ``added`` (a segment read from a delta file).

        ``self`` is not modified (it may be a published snapshot that searches are reading):
        the copy shares the numpy arrays, whose visible rows are never written (appends go to
        spare capacity past them, :func:`_grow`), and copies the containers that appending
        mutates (ids, vocabularies, column registries). Deletions compact every column (O(index
        size), no sort: the term -> docs view is filtered, not rebuilt).
        """
        new = Segment(self.mapping)
        _copy_bufs(new, self)
        new.seqs, new.ids, new.gen = self.seqs, list(self.ids), self.gen
        new.text = {name: col.copy() for name, col in self.text.items()}
        new.keyword = {name: col.copy() for name, col in self.keyword.items()}
        new.numeric = {name: col.copy() for name, col in self.numeric.items()}
        new.vectors = {name: col.copy() for name, col in self.vectors.items()}
        new._pending = list(self._pending) + list(adds)
        new._deleted = set(self._deleted) | {int(s) for s in deletes}
        new.ensure_built()
        if added is not None:
            if len(new.seqs) and len(added.seqs) and added.seqs[0] <= new.seqs[-1]:
                raise ValueError("added documents are not newer than the segment's")
            new._extend(added)
        return new

    # --- persistence ---------------------------------------------------------------
    def graph_candidates(self) -> Iterator[tuple[str, VectorColumn, dict | None]]:
        """(field name, column, graph parameters or None) of every vector column."""
        for name, col in self.vectors.items():
            fs = self.mapping.get(name)
            yield name, col, (graph_params(fs) if fs is not None else None)

    def to_arrays(self, start: int = 0, first_ref: int = 0) -> tuple[list[np.ndarray], dict]:
        """The columns of documents ``start..n`` as a list of arrays plus a JSON description
        naming them by position, numbered from ``first_ref`` (file names are positions, never
        field names; see :mod:`engine.index.commit`). ``start`` 0 is the whole segment with its term
        -> docs views (a base); otherwise the newer documents with their own vocabularies and
        no term -> docs view (a delta, a few arrays as small as the documents it holds).
        Identifiers and vocabularies are arrays too (UTF-8 JSON), so the commit point stays small.
        """
        self.ensure_built()
        arrays: list[np.ndarray] = []

        def put(*arrs: np.ndarray) -> list[int]:
            arrays.extend(arrs)
            return list(range(first_ref + len(arrays) - len(arrs), first_ref + len(arrays)))

        def json_array(value: list) -> int:
            return put(np.frombuffer(json.dumps(value, ensure_ascii=False).encode(), dtype=np.uint8))[0]

        n = len(self.seqs)
        desc: dict = {
            "seqs": put(self.seqs[start:])[0],
            "ids": json_array(self.ids[start:]),
            "n": n - start,
            "text": [],
            "keyword": [],
            "numeric": [],
            "vectors": [],
        }

        def rows(p: _Postings) -> tuple[list[str], list[np.ndarray], np.ndarray]:
            """(vocabulary, CSR arrays, global -> local term ids) of rows ``start..n``."""
            if not start:
                whole = [p.indptr, _narrowed(p.indices), _narrowed(p.data)]
                return list(p.vocab), whole, np.arange(len(p.vocab), dtype=np.int32)
            lo = int(p.indptr[start])
            used, local = np.unique(_since(p, "indices", lo), return_inverse=True)
            terms = list(p.vocab)
            remap = np.full(len(terms), -1, dtype=np.int32)
            remap[used] = np.arange(len(used), dtype=np.int32)
            csr: list[np.ndarray] = [
                p.indptr[start:] - lo,
                _narrowed(local.astype(np.int32).reshape(-1)),
                _narrowed(_since(p, "data", lo)),
            ]
            return [terms[t] for t in used.tolist()], csr, remap

        col: Column
        for name, col in self.text.items():
            vocab, csr, _ = rows(col.postings)
            view = _csc_to_save(col.postings) if not start else []
            refs = put(*csr, col.lengths[start:], col.present[start:], *view)
            desc["text"].append([name, json_array(vocab), refs])
        for name, col in self.keyword.items():
            vocab, csr, remap = rows(col.postings)
            first = col.first[start:]
            if start:
                local_first = np.full(len(first), -1, dtype=np.int32)
                has = first >= 0
                local_first[has] = remap[first[has]]
                first = local_first
            view = _csc_to_save(col.postings) if not start else []
            desc["keyword"].append([name, json_array(vocab), put(*csr, first, *view)])
        for name, col in self.numeric.items():
            lo = int(np.searchsorted(col.doc, start)) if start else 0  # doc is ascending
            desc["numeric"].append([name, put(col.doc[lo:] - start, col.values[lo:])])
        for name, col in self.vectors.items():
            matrix = _since(col, "matrix", start) if _length(col, "matrix") else col.matrix
            # the HNSW graph (engine.index.hnsw) is saved with a base only (IndexHandle.save builds or
            # extends it first); the rows of a delta are scored exactly beside it (engine.query.knn)
            graph = [col.graph.to_array()] if col.graph is not None and not start else []
            desc["vectors"].append([name, col.dims, put(matrix, col.present[start:], *graph)])
        return arrays, desc

    @classmethod
    def from_arrays(
        cls,
        arrays: list[np.ndarray],
        desc: dict,
        mapping: Mapping,
        stats: Sequence[ArrayStats | None] | None = None,
    ) -> Segment:
        """The segment ``to_arrays`` described; raises ValueError when the arrays do not fit
        together (a check beyond the checksums: wrong shapes or out-of-range ids never load).
        ``stats``: per array, the facts its commit point recorded (engine/index/array_stats.py), so the
        range checks do not read the postings again; computed here where absent."""

        def facts(i: int) -> ArrayStats:
            found = stats[i] if stats is not None and i < len(stats) else None
            got = found if found is not None else ArrayStats.of(arrays[i])
            if got is None:
                raise ValueError(f"array {i} is not a 1-D integer array")
            return got

        try:
            seg = cls(mapping)
            col: Column
            seqs_at = desc.get("seqs", 0)
            seg.seqs = _check(arrays[seqs_at], np.int64, 1)
            n = len(seg.seqs)
            seg.ids = _json_list(arrays, desc["ids"])
            if len(seg.ids) != n or desc["n"] != n or (n and not facts(seqs_at).increasing):
                raise ValueError("ids and seqs do not match")
            for name, vocab, refs in desc["text"]:
                vocab = _json_list(arrays, vocab)
                col = TextColumn()
                if len(refs) not in (5, 8):  # 8: with the term -> docs view (saved since issue 16)
                    raise ValueError("text column of another layout")
                _load_postings(col.postings, vocab, arrays, refs[:3], n, facts)
                _load_csc(col.postings, arrays, refs[5:], refs[2], n, facts)
                col.lengths = _check(arrays[refs[3]], np.int32, 1, n)
                col.present = _check(arrays[refs[4]], np.bool_, 1, n)
                seg.text[name] = col
            for name, vocab, refs in desc["keyword"]:
                vocab = _json_list(arrays, vocab)
                col = KeywordColumn()
                if len(refs) not in (4, 7):
                    raise ValueError("keyword column of another layout")
                _load_postings(col.postings, vocab, arrays, refs[:3], n, facts)
                _load_csc(col.postings, arrays, refs[4:], refs[2], n, facts)
                col.first = _check(arrays[refs[3]], np.int32, 1, n)
                if n and (facts(refs[3]).max >= len(vocab) or facts(refs[3]).min < -1):
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
                    len(col.doc) and (facts(refs[0]).min < 0 or facts(refs[0]).max >= n)
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
                if len(refs) > 2:  # the HNSW graph (engine.index.hnsw), restored on first use
                    col.graph = HnswGraph.from_array(arrays[refs[2]], dims)
                seg.vectors[name] = col
        except (IndexError, KeyError, TypeError) as e:
            raise ValueError(f"segment description does not match its files: {e}") from None
        return seg


def _csc_to_save(p: _Postings) -> list[np.ndarray]:
    """The term -> docs view as a base saves it: offsets, doc positions, narrowed frequencies."""
    col_ptr, docs, freqs = p.csc()
    return [col_ptr, docs, _narrowed(freqs)]


def _cached(col: object, name: str, source: np.ndarray, compute: Callable[[], int]) -> int:
    """A per-field statistic (an O(N) pass) computed once per version of its source array: every
    change to a column rebinds its arrays, so the cache is keyed on the array's identity."""
    cache: dict = col.__dict__.setdefault("_stat_cache", {})
    hit = cache.get(name)
    if hit is None or hit[0] is not source:
        hit = (source, compute())
        cache[name] = hit
    return hit[1]


def _json_list(arrays: list[np.ndarray], ref) -> list[str]:
    """A list of strings stored inline (a list: files written before issue 16) or as the
    UTF-8 JSON bytes of an array (``ref``: its position)."""
    if isinstance(ref, list):
        value = ref
    else:
        raw = _check(arrays[ref], np.uint8, 1).tobytes()
        try:
            value = orjson.loads(raw)  # ~3x json's speed on the 1M ids of a base
        except orjson.JSONDecodeError:  # e.g. an escaped lone surrogate, which json reads
            try:
                value = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                raise ValueError(f"a list of names is not valid JSON: {e!r:.200}") from None
    # one C-level pass over the element types (a generator of isinstance calls cost ~1 s at 1M)
    if not isinstance(value, list) or not set(map(type, value)) <= {str}:
        raise ValueError("a list of names holds something else than strings")
    return value


def _check(arr: np.ndarray, dtype, ndim: int, length: int | None = None) -> np.ndarray:
    if arr.dtype != dtype or arr.ndim != ndim or (length is not None and len(arr) != length):
        raise ValueError(
            f"array of dtype {arr.dtype} and shape {arr.shape} where {np.dtype(dtype)} was expected"
        )
    return arr


def _check_postings(arr: np.ndarray, length: int | None = None) -> np.ndarray:
    """A saved array of term ids or frequencies: 1-D, of one of :data:`POSTINGS_TYPES`."""
    if arr.dtype not in POSTINGS_TYPES or arr.ndim != 1 or (length is not None and len(arr) != length):
        raise ValueError(
            f"array of dtype {arr.dtype} and shape {arr.shape} where term ids or frequencies "
            f"({', '.join(map(str, POSTINGS_TYPES))}) were expected"
        )
    return arr


def _load_postings(
    p: _Postings,
    vocab: list[str],
    arrays: list[np.ndarray],
    refs: list[int],
    n: int,
    facts: Callable[[int], ArrayStats],
) -> None:
    p.vocab = dict(zip(vocab, range(len(vocab)), strict=True))  # strings (checked by _json_list)
    if len(p.vocab) != len(vocab):  # term ids are positions: a repeated term would shadow one
        raise ValueError("a vocabulary holds a term twice")
    p.indptr = _check(arrays[refs[0]], np.int64, 1, n + 1)
    p.indices, p.data = _check_postings(arrays[refs[1]]), _check_postings(arrays[refs[2]])
    if p.indptr[0] != 0 or not facts(refs[0]).nondecreasing or p.indptr[-1] != len(p.indices):
        raise ValueError("postings offsets are inconsistent")
    if len(p.data) != len(p.indices) or (
        len(p.indices) and (facts(refs[1]).min < 0 or facts(refs[1]).max >= len(vocab))
    ):
        raise ValueError("postings term ids out of range")


def _load_csc(
    p: _Postings,
    arrays: list[np.ndarray],
    refs: list[int],
    data_ref: int,
    n: int,
    facts: Callable[[int], ArrayStats],
) -> None:
    """The saved term -> docs view (col_ptr, docs, freqs at ``refs``), checked against the CSR
    it mirrors (its frequencies at ``data_ref``); absent (a segment saved before it was stored):
    built lazily on the first search, as before."""
    if not refs:
        return
    col_ptr = _check(arrays[refs[0]], np.int64, 1, len(p.vocab) + 1)
    docs = _check(arrays[refs[1]], np.int32, 1, len(p.indices))
    freqs = _check_postings(arrays[refs[2]], len(p.indices))
    if col_ptr[0] != 0 or not facts(refs[0]).nondecreasing or col_ptr[-1] != len(p.indices):
        raise ValueError("term -> docs offsets are inconsistent")
    if len(docs) and (facts(refs[1]).min < 0 or facts(refs[1]).max >= n):
        raise ValueError("term -> docs positions out of range")
    if facts(refs[2]).total != facts(data_ref).total:
        raise ValueError("term -> docs frequencies do not match the postings")
    p._csc = (col_ptr, docs, freqs)
