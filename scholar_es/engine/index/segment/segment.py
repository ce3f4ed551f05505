"""The searchable, in-memory form of one index: its columns, in ``seq`` order.

Built from the documents in :mod:`engine.index.store` (parsed by
:mod:`engine.index.segment.document`) and saved as checksummed arrays (:meth:`Segment.to_arrays`:
the whole segment as a base, or the newest documents as a delta; written by
:mod:`engine.index.commit`) so a new process opens a 100k-chunk index in well under a second. A
published segment is an immutable snapshot: :meth:`Segment.with_changes` returns a new one and
leaves it untouched (appends go to spare capacity past the rows it sees,
:func:`engine.index.segment.buffers.grow`). Documents are kept in ``seq`` order (Lucene's doc-id
order on a single shard); deletions are applied by compacting, i.e. the engine always behaves like
a force-merged index, so collection statistics count live documents only (a cluster also counts
deleted-but-unmerged ones).

The columns, one class per kind of field, save and load themselves
(:mod:`engine.index.segment.columns`, on :mod:`engine.index.segment.postings` for text and
keywords); the segment holds them by kind (``text``, ``keyword``, ``numeric``, ``vectors``) and
field name.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from scholar_es.engine.index.array_stats import ArrayStats
from scholar_es.engine.index.hnsw import graph_params
from scholar_es.engine.index.mapping import Mapping
from scholar_es.engine.index.segment.buffers import copy_bufs, grow
from scholar_es.engine.index.segment.columns import (
    COLUMN_TYPES,
    Column,
    KeywordColumn,
    NumericColumn,
    TextColumn,
    VectorColumn,
    column_type,
)
from scholar_es.engine.index.segment.document import ParsedDoc
from scholar_es.engine.index.segment.saved import ArrayWriter, SavedArrays


class Segment:
    """All columns of one index, kept in seq order."""

    # the columns by kind (a column class's ``kind``, one attribute per class of COLUMN_TYPES),
    # each by field name
    text: dict[str, TextColumn]
    keyword: dict[str, KeywordColumn]
    numeric: dict[str, NumericColumn]
    vectors: dict[str, VectorColumn]

    def __init__(self, mapping: Mapping) -> None:
        self.mapping = mapping
        self.seqs = np.zeros(0, dtype=np.int64)
        self.ids: list[str] = []
        for cls in COLUMN_TYPES:
            setattr(self, cls.kind, {})
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

    def columns_of(self, cls: type[Column]) -> dict[str, Column]:
        """The columns of class ``cls`` by field name (``self.text`` for TextColumn, ...)."""
        return getattr(self, cls.kind)

    def _columns(self) -> Iterator[Column]:
        for cls in COLUMN_TYPES:
            yield from self.columns_of(cls).values()

    def _extend(self, other: Segment) -> None:
        """Append the documents of ``other`` (all newer than ours): each column grows in place
        (:func:`~engine.index.segment.buffers.grow`) and its term -> docs view sorts only the new
        postings."""
        n_before, m = len(self.seqs), len(other.seqs)
        if not m:
            return
        grow(self, "seqs", other.seqs)
        self.ids.extend(other.ids)
        self._id_pos = None
        for cls in COLUMN_TYPES:
            mine, theirs = self.columns_of(cls), other.columns_of(cls)
            for name, col in mine.items():
                if name not in theirs:
                    empty = col.empty_like()
                    empty.append([None] * m)
                    col.extend(empty)
            for name, col in theirs.items():
                if name in mine:
                    mine[name].extend(col)
                else:  # a field first seen now: earlier docs have no value in it
                    new = col.empty_like()
                    new.append([None] * n_before)
                    new.extend(col)
                    mine[name] = new

    def _append(self, docs: list[ParsedDoc]) -> None:
        """Build columns from parsed documents (used on an empty segment of new documents)."""
        n_before = len(self.seqs)
        self.seqs = np.concatenate([self.seqs, np.array([d.seq for d in docs], dtype=np.int64)])
        self.ids.extend(d.id for d in docs)
        for name, fs in self.mapping.fields.items():
            cls = column_type(fs)
            if cls is None:
                continue
            columns = self.columns_of(cls)
            col = columns.get(name)
            if col is None:  # a field first seen now: earlier docs have no value in it
                col = columns[name] = cls.for_field(fs)
                if n_before:
                    col.append([None] * n_before)
            col.append(col.rows_of(docs, name))

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
        spare capacity past them, :func:`~engine.index.segment.buffers.grow`), and copies the
        containers that appending mutates (ids, vocabularies, column registries). Deletions
        compact every column (O(index size), no sort: the term -> docs view is filtered, not
        rebuilt).
        """
        new = Segment(self.mapping)
        copy_bufs(new, self)
        new.seqs, new.ids, new.gen = self.seqs, list(self.ids), self.gen
        for cls in COLUMN_TYPES:
            setattr(new, cls.kind, {name: col.copy() for name, col in self.columns_of(cls).items()})
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
        Each column writes its own arrays and entry (:meth:`Column.to_arrays`), under its kind.
        """
        self.ensure_built()
        out = ArrayWriter(first_ref)
        desc: dict = {
            "seqs": out.put(self.seqs[start:])[0],
            "ids": out.json_array(self.ids[start:]),
            "n": len(self.seqs) - start,
        }
        for cls in COLUMN_TYPES:
            desc[cls.kind] = [col.to_arrays(out, name, start) for name, col in self.columns_of(cls).items()]
        return out.arrays, desc

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
        saved = SavedArrays(arrays, stats)
        try:
            seg = cls(mapping)
            seqs_at = desc.get("seqs", 0)
            seg.seqs = saved.check(seqs_at, np.int64, 1)
            n = len(seg.seqs)
            seg.ids = saved.json_list(desc["ids"])
            if len(seg.ids) != n or desc["n"] != n or (n and not saved.facts(seqs_at).increasing):
                raise ValueError("ids and seqs do not match")
            for kind in COLUMN_TYPES:
                columns = seg.columns_of(kind)
                for entry in desc[kind.kind]:
                    name, col = kind.from_arrays(entry, saved, n)
                    columns[name] = col
        except (IndexError, KeyError, TypeError) as e:
            raise ValueError(f"segment description does not match its files: {e}") from None
        return seg
