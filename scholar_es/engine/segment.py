"""The searchable, in-memory form of one index: postings, doc values and vectors.

Built from the documents in :mod:`engine.store` and cached on disk as ``.npy`` files so a
new process opens a 100k-chunk index in well under a second. Documents are kept in
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

import json
from dataclasses import dataclass, field
from pathlib import Path

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
            if fs.index:
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
        self._norms: np.ndarray | None = None

    def append(self, rows: list[list[str] | None]) -> None:
        self.postings.append([r or [] for r in rows])
        self.lengths = np.concatenate([self.lengths, np.array([len(r or []) for r in rows], dtype=np.int32)])
        self._norms = None

    def compact(self, keep: np.ndarray) -> None:
        self.postings.compact(keep)
        self.lengths = self.lengths[keep]
        self._norms = None

    @property
    def doc_count(self) -> int:
        """Docs with at least one indexed term (Lucene's Terms#getDocCount)."""
        return int(np.count_nonzero(self.lengths))

    @property
    def sum_total_term_freq(self) -> int:
        return int(self.lengths.sum(dtype=np.int64))

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
        return int(np.count_nonzero(self.postings.row_counts()))

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

    # --- persistence ---------------------------------------------------------------
    def save(self, folder: Path) -> None:
        """Write all columns as .npy files plus a manifest (written last, atomically)."""
        self.ensure_built()
        folder.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, np.ndarray] = {"seqs": self.seqs}
        manifest: dict = {"ids": self.ids, "text": {}, "keyword": {}, "numeric": [], "vectors": {}}
        col: TextColumn | KeywordColumn | NumericColumn | VectorColumn  # one loop per column type
        for name, col in self.text.items():
            p = col.postings
            arrays.update(
                {
                    f"t.{name}.indptr": p.indptr,
                    f"t.{name}.indices": p.indices,
                    f"t.{name}.data": p.data,
                    f"t.{name}.lengths": col.lengths,
                }
            )
            manifest["text"][name] = list(p.vocab)
        for name, col in self.keyword.items():
            p = col.postings
            arrays.update(
                {
                    f"k.{name}.indptr": p.indptr,
                    f"k.{name}.indices": p.indices,
                    f"k.{name}.data": p.data,
                    f"k.{name}.first": col.first,
                }
            )
            manifest["keyword"][name] = list(p.vocab)
        for name, col in self.numeric.items():
            arrays.update({f"n.{name}.doc": col.doc, f"n.{name}.values": col.values})
            manifest["numeric"].append(name)
        for name, col in self.vectors.items():
            arrays.update({f"v.{name}.matrix": col.matrix, f"v.{name}.present": col.present})
            manifest["vectors"][name] = col.dims
        for key, arr in arrays.items():
            np.save(folder / f"{key}.npy", arr, allow_pickle=False)
        tmp = folder / "manifest.json.tmp"
        tmp.write_text(json.dumps(manifest))
        tmp.replace(folder / "manifest.json")

    @classmethod
    def load(cls, folder: Path, mapping: Mapping) -> Segment | None:
        """The cached segment, or None when there is none (or it is unreadable)."""
        try:
            manifest = json.loads((folder / "manifest.json").read_text())

            def arr(key: str) -> np.ndarray:
                return np.load(folder / f"{key}.npy", allow_pickle=False)

            seg = cls(mapping)
            col: TextColumn | KeywordColumn | NumericColumn | VectorColumn  # one loop per column type
            seg.seqs = arr("seqs")
            seg.ids = manifest["ids"]
            for name, vocab in manifest["text"].items():
                col = TextColumn()
                _load_postings(col.postings, vocab, arr, f"t.{name}")
                col.lengths = arr(f"t.{name}.lengths")
                seg.text[name] = col
            for name, vocab in manifest["keyword"].items():
                col = KeywordColumn()
                _load_postings(col.postings, vocab, arr, f"k.{name}")
                col.first = arr(f"k.{name}.first")
                seg.keyword[name] = col
            for name in manifest["numeric"]:
                col = NumericColumn()
                col.doc, col.values, col.n = arr(f"n.{name}.doc"), arr(f"n.{name}.values"), len(seg.seqs)
                seg.numeric[name] = col
            for name, dims in manifest["vectors"].items():
                col = VectorColumn(dims)
                col.matrix, col.present = arr(f"v.{name}.matrix"), arr(f"v.{name}.present")
                seg.vectors[name] = col
        except (OSError, ValueError, KeyError):
            return None
        if len(seg.ids) != len(seg.seqs):
            return None
        return seg


def _load_postings(p: _Postings, vocab: list[str], arr, prefix: str) -> None:
    p.vocab = {t: i for i, t in enumerate(vocab)}
    p.indptr, p.indices, p.data = arr(f"{prefix}.indptr"), arr(f"{prefix}.indices"), arr(f"{prefix}.data")
