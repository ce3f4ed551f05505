"""The embedded engine: indices, aliases and documents in one directory.

:class:`Engine` owns the store and one :class:`IndexHandle` per index. A handle publishes
immutable :class:`~engine.index.segment.Segment` snapshots: a search pins one read transaction of
SQLite and the snapshot that reflects exactly that state (the index's write generation), so
its hits and their ``_source`` come from one point in time; a write (serialized per handle)
commits to SQLite and queues its parsed documents, and the next reader publishes a new
snapshot from them -- or, when another process wrote in between, from SQLite itself. Refresh
and exit commit the snapshot (:mod:`engine.index.commit`): a small delta file with the documents
added and deleted since the last commit point, or a whole new base when the merge policy says
so; a new process starts from the newest commit point that verifies (base + deltas). See
docs/storage.md.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scholar_es.engine.diskfull import SAVE_NOTE, naming_full_disk
from scholar_es.engine.errors import EsError, illegal_argument, index_not_found
from scholar_es.engine.index import durability, hnsw, versioning
from scholar_es.engine.index import writes as writes_mod
from scholar_es.engine.index.commit import Commit, StaleCommit, fault, open_commit, peek_meta, write_commit
from scholar_es.engine.index.definitions import bm25_similarities, flat_index_settings, merge_properties
from scholar_es.engine.index.mapping import (
    Mapping,
    keyword_normalizer,
)
from scholar_es.engine.index.segment import ParsedDoc, Segment, parse_document
from scholar_es.engine.index.store import Reader, Store, merge_mappings, unpack_vectors

log = logging.getLogger("scholar_es.engine")

#: queued parsed documents that make a writer publish a snapshot itself (their token lists are
#: larger than the arrays they become)
PUBLISH_EVERY = 5_000
#: what PUT _settings may change (the engine applies no other setting to an existing index)
_DYNAMIC_SETTINGS = ("index.translog.durability", "index.translog.sync_interval")


#: merge policy of the saved files (a save writes a delta unless one of these says "merge"):
#: at most this many delta files per commit point,
MAX_DELTAS = 10
#: and documents added plus deleted in the deltas at most this fraction of the base (or
#: ``MIN_MERGE_DOCS``, below which a merge would not save any work at open)
MERGE_RATIO = 0.15
MIN_MERGE_DOCS = 1_000
#: set to a non-empty value, every save writes a whole new base (the pre-issue-16 behaviour;
#: bench/append_latency.py measures it as the baseline)
FULL_SAVE_ENV = "SCHOLAR_ES_FULL_SAVE"


@dataclass
class _OnDisk:
    """The newest commit point this process wrote or read, and what a delta against it needs."""

    gen: int  # its generation
    files: list[dict]  # the files it lists (kept by a delta commit)
    meta: dict
    seqs: np.ndarray  # the live seqs it reflects
    n_arrays: int  # arrays in its files: a delta's array references start here

    @property
    def base_docs(self) -> int:
        return int(self.meta["segment"]["n"])

    @property
    def deltas(self) -> list[dict]:
        return list(self.meta.get("deltas") or [])


class IndexHandle:
    def __init__(self, engine: Engine, name: str, meta: dict) -> None:
        self.engine, self.store, self.name = engine, engine.store, name
        self.uuid = meta["uuid"]
        self.created = meta["created"]
        self.settings = meta["settings"]
        self.analysis = self.settings.get("analysis")
        self.mapping = Mapping(meta["mappings"], check_limits=False)  # stored: reopen as it is
        #: per-field BM25 parameters; follow put_mapping (dynamic fields name no similarity)
        self.similarities = bm25_similarities(self.settings, self.mapping)
        #: the published snapshot: immutable once published, replaced by newer ones
        self._snapshot: Segment | None = None
        #: parsed documents of this process's writes not yet in a snapshot: (write gen, adds, deleted seqs)
        self._pending: list[tuple[int, list[ParsedDoc], list[int]]] = []
        self._lock = threading.RLock()  # writers and publishing; searches on a snapshot take none
        self._save_lock = threading.Lock()
        self._saved_gen = -1  # write generation of the newest commit point this process wrote or read
        self._disk: _OnDisk | None = None  # that commit point, when the snapshot descends from it
        #: how this index's write requests commit (index.translog.durability)
        self.durability = durability.of_settings(self.settings)
        #: Store.history_resets of this index when the snapshot was last trusted
        self._resets_seen = self.store.history_resets.get(self.name, 0)
        self._guard_history()

    def _guard_history(self) -> None:
        """Before this process writes or loads anything of the index: when SQLite is behind
        what the newest commit point says it reflects (a lost unsynced tail, a restored copy of
        engine.sqlite3), move SQLite's seqs and write generation past it and give the index a
        new epoch, so no seq is handed out twice and that commit point is never loaded
        (``Store.guard_history``)."""
        meta = peek_meta(self.cache_dir)
        if meta is None or meta.get("index_uuid") != self.uuid:
            return
        gen, max_seq = meta.get("write_gen"), meta.get("max_seq")
        if isinstance(gen, int) and isinstance(max_seq, int):
            self.store.guard_history(self.name, gen, max_seq)

    @property
    def cache_dir(self) -> Path:
        """Derived files of this index: named by the index's uuid, never by its name."""
        return self.engine.root / "segments" / self.uuid

    # --- snapshots ----------------------------------------------------------------------
    @contextlib.contextmanager
    def reading(self):
        """``(segment, reader)``: a snapshot and an open SQLite read transaction of the same state.

        Everything a search reads -- postings, doc values, ``_source`` -- comes from these two,
        so concurrent writes (threads or processes) never show through half-way.
        """
        with self.store.reading() as rd:
            yield self.snapshot_of(rd), rd

    def snapshot_of(self, rd: Reader) -> Segment:
        """The snapshot of ``rd``'s state (its transaction restarted while a newer one is published)."""
        for attempt in range(10_000):
            seg = self._snapshot_at(rd, attempt)
            if seg is not None:
                return seg
            rd.restart()  # a newer snapshot is already published: read the newer state
        # pragma: no cover - needs a writer committing faster than a read can start
        raise EsError(503, "search_phase_execution_exception", "no consistent snapshot could be taken")

    def segment(self) -> Segment:
        """The current snapshot (a consistent, immutable view of the index)."""
        with self.reading() as (seg, _):
            return seg

    def _snapshot_at(self, rd: Reader, attempt: int = 0) -> Segment | None:
        """The snapshot of exactly ``rd``'s state, published if new; None when a newer one is
        already published (the caller restarts its read transaction)."""
        want = rd.gen(self.name)
        snap = self._snapshot
        if snap is not None and snap.gen == want:
            return snap  # lock-free: snapshots are immutable
        with self._lock:
            snap = self._snapshot
            if snap is None:
                snap = self._open_cache(want, wait_for_newer=attempt < 3)
                if snap is None:
                    return None
            elif snap.gen > want:
                if attempt < 3:
                    return None
                # SQLite went back (a restored file): never serve the newer snapshot, rebuild; and
                # as at open, move SQLite's seqs and generation past the snapshot's with a new epoch,
                # so neither it nor a commit point of it can ever be taken for SQLite's state again
                log.warning("index [%s] is older in SQLite than in memory; rebuilding from SQLite", self.name)
                self.store.guard_history(self.name, snap.gen, int(snap.seqs.max()) if len(snap.seqs) else 0)
                snap, self._pending, self._disk = Segment(self.mapping), [], None
                self._saved_gen = -1
            if snap.gen != want:
                snap = self._advance(snap, want, rd)
            self._snapshot = snap
            return snap

    def _open_cache(self, want: int, wait_for_newer: bool) -> Segment | None:
        """The segment of the newest commit point that verifies, or an empty one; None when the
        commit point is newer than the caller's read transaction (another process committed
        and saved since it began) and ``wait_for_newer``: the caller reads again."""
        found = open_commit(self.cache_dir)
        if found is not None:
            meta = found.meta
            if wait_for_newer and isinstance(meta.get("write_gen"), int) and meta["write_gen"] > want:
                return None
            try:
                if meta.get("index_uuid") != self.uuid or not 0 <= int(meta["write_gen"]) <= want:
                    raise ValueError(
                        f"it reflects write generation {meta.get('write_gen')}, SQLite has {want}"
                    )
                if meta.get("epoch") != self.store.epoch(self.name):
                    raise ValueError(
                        "it was written before SQLite went back to an older state (epoch "
                        f"{meta.get('epoch')}, SQLite's is {self.store.epoch(self.name)})"
                    )
                seg = self._load(found)
                seg.gen = self._saved_gen = int(meta["write_gen"])
                self._disk = _OnDisk(found.gen, found.files, meta, seg.seqs, len(found.arrays))
                return seg
            except (ValueError, KeyError, TypeError) as e:
                log.warning(
                    "segment cache of index [%s] is unusable (%s); rebuilding from SQLite", self.name, e
                )
        return Segment(self.mapping)

    def _load(self, found: Commit) -> Segment:
        """The segment of a verified commit point: its base, then each delta's deletions and
        documents in order; raises ValueError when they do not fit together."""
        arrays, meta, stats = found.arrays, found.meta, found.stats
        seg = Segment.from_arrays(arrays, meta["segment"], self.mapping, stats)
        for delta in meta.get("deltas") or []:
            added = Segment.from_arrays(arrays, delta["segment"], self.mapping, stats)
            deleted = arrays[delta["deleted"]]
            if deleted.dtype != np.int64 or deleted.ndim != 1:
                raise ValueError("a delta's deleted seqs have the wrong type")
            at = np.minimum(np.searchsorted(seg.seqs, deleted), max(len(seg.seqs) - 1, 0))
            if len(deleted) and (not len(seg.seqs) or not np.array_equal(seg.seqs[at], deleted)):
                raise ValueError("a delta deletes documents its base does not have")
            seg = seg.with_changes([], deleted.tolist(), added=added)
        if len(seg.seqs) != meta["docs"]:
            raise ValueError(f"{len(seg.seqs)} documents where the commit point says {meta['docs']}")
        return seg

    def _advance(self, seg: Segment, want: int, rd: Reader) -> Segment:
        """``seg`` brought to write generation ``want``: from this process's queued writes when
        they cover every generation in between, else from SQLite (another process wrote)."""
        adds: list[ParsedDoc] = []
        deletes: list[int] = []
        gen = seg.gen
        for g, a, d in self._pending:
            if g == gen + 1 and g <= want:
                adds.extend(a)
                deletes.extend(d)
                gen = g
        new = seg.with_changes(adds, deletes) if gen == want else self._catch_up(seg, rd)
        new.gen = want
        self._pending = [p for p in self._pending if p[0] > want]
        return new

    def _catch_up(self, seg: Segment, rd: Reader) -> Segment:
        """Apply the deletes and new documents that SQLite (as ``rd`` sees it) has and ``seg``
        lacks. Documents this process wrote are taken from its queue, already parsed; only the
        others are read and parsed. Starts from an empty segment when rows older than ``seg``'s
        newest are missing, since a segment keeps seq order (the score tie-break)."""
        live = rd.live_seqs(self.name)
        dead = seg.seqs[~np.isin(seg.seqs, live)]
        missing = live[~np.isin(live, seg.seqs)]
        if len(missing) and len(seg.seqs) and int(missing.min()) < int(seg.seqs.max()):
            seg, dead, missing = Segment(self.mapping), seg.seqs[:0], live
        mine = {d.seq: d for _, adds, _ in self._pending for d in adds}
        foreign = {
            seq: parse_document(
                self.mapping, self.analysis, seq, doc_id, json.loads(source), unpack_vectors(vectors)
            )
            for seq, doc_id, source, vectors in rd.rows([s for s in missing.tolist() if s not in mine])
        }
        adds = [mine.get(s) or foreign[s] for s in missing.tolist()]
        new = seg.with_changes(adds, [int(s) for s in dead])
        if not np.array_equal(new.seqs, live):  # pragma: no cover - a bug, never an answer
            raise EsError(500, "exception", f"snapshot of index [{self.name}] does not match its store")
        return new

    def save(self) -> None:
        """Commit the current snapshot (a Lucene commit): a small delta file with the documents
        added and the seqs deleted since the last commit point, or a whole new base when the
        merge policy says so (``MAX_DELTAS``, ``MERGE_RATIO``) or no usable commit point is known.
        A full disk is a :class:`~engine.diskfull.DiskFull` naming the folder; the save's partial
        files are removed (``commit.write_commit``) and the next save writes them again."""
        with (
            self._save_lock,
            naming_full_disk(f"the segment files of index [{self.name}]", self.cache_dir, SAVE_NOTE),
        ):
            self.store.identity.check()  # files of a deleted engine directory would be orphans
            # async durability: the rows a commit point describes are fsynced before it is written
            # (Elasticsearch's flush syncs the translog with the Lucene commit)
            self.store.flush()
            seg = self.segment()
            missing = self._graph_missing(seg)
            if seg.gen == self._saved_gen and not missing:
                return  # nothing changed
            meta = {
                "index_uuid": self.uuid,
                "write_gen": seg.gen,
                "docs": len(seg.seqs),
                "max_seq": int(seg.seqs.max()) if len(seg.seqs) else 0,
                "epoch": self.store.epoch(self.name),  # verified at open (_open_cache)
            }
            # a field that should have a graph and has none (a base written before it crossed the
            # threshold, an older commit point) is worth a new base: written with its graph
            disk, plan = self._disk, None if missing else self._delta_plan(seg)
            if disk is not None and plan is not None:
                start, deleted = plan
                arrays, desc = seg.to_arrays(start=start, first_ref=disk.n_arrays)
                arrays.append(deleted)
                entry = {"segment": desc, "deleted": disk.n_arrays + len(arrays) - 1, "deletes": len(deleted)}
                meta.update(segment=disk.meta["segment"], deltas=[*disk.deltas, entry])
                try:
                    gen, files = write_commit(
                        self.cache_dir, arrays, meta, keep=disk.files, based_on=disk.gen
                    )
                    self._disk = _OnDisk(gen, files, meta, seg.seqs, disk.n_arrays + len(arrays))
                    self._saved_gen = seg.gen
                    return
                except StaleCommit as e:  # another process committed since: write it whole
                    log.info("index [%s]: %s; writing a full generation", self.name, e)
            self._graphs_for_base(seg)
            arrays, desc = seg.to_arrays()
            meta.update(segment=desc, deltas=[])
            gen, files = write_commit(self.cache_dir, arrays, meta)
            self._disk = _OnDisk(gen, files, meta, seg.seqs, len(arrays))
            self._saved_gen = seg.gen

    @staticmethod
    def _graph_missing(seg: Segment) -> bool:
        """Whether a vector column that a base would give a graph has no usable one."""
        return any(
            hnsw.wants_graph(col, params) and not hnsw.fits(col, params)
            for _, col, params in seg.graph_candidates()
        )

    def _graphs_for_base(self, seg: Segment) -> None:
        """Build or extend the HNSW graph of every vector column of ``seg`` about to be written
        as a base (Lucene builds a segment's graph when it writes the segment, never at query
        time): on every core, outside the handle's lock (writes go on), before the commit point
        names the files. The new graph replaces the old one in ``seg`` and in the newest snapshot
        that still has the old one (a search holding the old graph keeps it: graphs are never
        changed once built)."""
        for name, col, params in seg.graph_candidates():
            old = col.graph
            new = hnsw.graph_for_base(name, col, params, seg.seqs)
            if new is old:
                continue
            fault("graph")  # tests: a crash after a build, before anything of this save is written
            with self._lock:  # no snapshot is published from a column still holding the old one
                col.graph = new
                snap = self._snapshot
                cur = snap.vectors.get(name) if snap is not None and snap is not seg else None
                if cur is not None and cur.graph is old:
                    cur.graph = new

    def _delta_plan(self, seg: Segment) -> tuple[int, np.ndarray] | None:
        """(position of the first document added since the last commit point, seqs deleted
        since) when a delta can express ``seg`` against it and the merge policy allows one."""
        disk = self._disk
        if disk is None or os.environ.get(FULL_SAVE_ENV):
            return None
        saved, seqs = disk.seqs, seg.seqs
        start = int(np.searchsorted(seqs, saved[-1], side="right")) if len(saved) else 0
        kept = seqs[:start]
        if start == len(saved) and np.array_equal(kept, saved):
            deleted = saved[:0]
        else:  # the documents before ``start`` must be saved ones (else: rebuilt in between)
            pos = np.searchsorted(saved, kept)
            if np.any(pos >= len(saved)) or not np.array_equal(saved[np.minimum(pos, len(saved) - 1)], kept):
                return None
            gone = np.ones(len(saved), dtype=bool)
            gone[pos] = False
            deleted = saved[gone]
        deltas = disk.deltas
        churn = sum(int(d["segment"]["n"]) + int(d.get("deletes", 0)) for d in deltas)
        churn += len(seqs) - start + len(deleted)
        if len(deltas) >= MAX_DELTAS or churn > max(MERGE_RATIO * disk.base_docs, MIN_MERGE_DOCS):
            return None  # merge: the next commit point lists one new base
        return start, np.ascontiguousarray(deleted, dtype=np.int64)

    # --- writes ---------------------------------------------------------------------------
    def write(self, ops: list[tuple]) -> list[dict]:
        """Apply ("index", id, source_dict, condition) / ("delete", id, condition) ops (a
        :class:`~engine.index.versioning.Condition`; ``versioning.CREATE`` for ``op_type=create``);
        one result per op.

        Documents are parsed against the mapping first; a document the mapping rejects
        gets its error item and the others are still written (bulk semantics). The conditions
        and the mapping's dynamic additions are checked and stored in the documents' transaction
        (:meth:`Store.write`); a failed condition is that op's 409 item.
        """
        with self._lock:  # writers are serialized; searches go on, on their snapshots
            return self._write(ops)

    def _write(self, ops: list[tuple]) -> list[dict]:
        mapping_before = json.dumps(self.mapping.to_body(), sort_keys=True)
        results, writes, parsed = writes_mod.parse_ops(self.mapping, self.analysis, ops, self._stored_source)
        # dynamic fields or vector dims the documents added go in with them, in one transaction:
        # only additions, so a parameter another process changed meanwhile (a PUT _mapping of an
        # object's dynamic, say) is kept, not overwritten by this process's older value
        additions = None
        if json.dumps(self.mapping.to_body(), sort_keys=True) != mapping_before:
            additions = self.mapping.to_body()
        outcome: list = []
        gen = 0
        wrote = bool(writes) or additions is not None
        if wrote:
            try:
                outcome, gen, stored = self.store.write(
                    self.name, [w for _, w in writes], additions, self.durability
                )
            except BaseException:
                if additions is not None:  # nothing was stored: neither are the fields
                    self._restore_mapping(json.loads(mapping_before))
                raise
            if stored is not None:
                self.sync_mapping(stored)
        pdocs = dict(parsed)
        adds: list[ParsedDoc] = []
        deletes: list[int] = []
        for (i, w), applied in zip(writes, outcome, strict=True):
            doc_id = w[1]
            if isinstance(applied, str):  # its condition failed
                results[i] = writes_mod.item_error(
                    versioning.conflict_error(doc_id, applied, self.name, self.uuid)
                )
                continue
            seq, version, previous = applied
            if previous is not None:
                deletes.append(previous)
            if w[0] == "delete":
                results[i] = {
                    "_index": self.name,
                    "_id": doc_id,
                    "_version": version,
                    "result": "deleted" if previous is not None else "not_found",
                    "status": 200 if previous is not None else 404,
                }
            else:
                pdoc = pdocs[i]
                pdoc.seq = seq
                adds.append(pdoc)
                results[i] = {
                    "_index": self.name,
                    "_id": doc_id,
                    "_version": version,
                    "result": "updated" if previous is not None else "created",
                    "status": 200 if previous is not None else 201,
                }
            item = results[i]
            assert item is not None  # both branches above set it
            item.update(
                {
                    "_shards": {"total": 1, "successful": 1, "failed": 0},
                    "_seq_no": versioning.seq_no(seq),
                    "_primary_term": versioning.PRIMARY_TERM,
                }
            )
        if wrote and self.store.history_resets.get(self.name, 0) != self._resets_seen:
            # this write found SQLite gone back under the process (Store.write gave the index a new
            # epoch): the snapshot, the queued writes and the commit point describe a lost timeline;
            # the next snapshot is rebuilt from SQLite, which holds this write too
            self._resets_seen = self.store.history_resets.get(self.name, 0)
            self._snapshot, self._pending, self._disk, self._saved_gen = None, [], None, -1
        elif wrote:
            self._pending.append((gen, adds, deletes))
            if sum(len(a) for _, a, _ in self._pending) >= PUBLISH_EVERY:
                self.segment()  # bound the memory of parsed documents waiting for a reader
        # Elasticsearch's order: _index and _id first (failed items included)
        done: list[dict] = []
        for op, res in zip(ops, results, strict=True):
            assert res is not None  # every op has its result or its error
            done.append({"_index": self.name, "_id": op[1], **res})
        return done

    def _stored_source(self, source: dict) -> dict:
        if not self.mapping.source_excludes:
            return source
        from scholar_es.engine.search.hits import filter_source

        return filter_source(source, {"excludes": self.mapping.source_excludes}) or {}

    def get(self, doc_id: str) -> dict | None:
        row = self.store.get(self.name, doc_id)
        if row is None:
            return None
        seq, source, version = row
        return {
            "_index": self.name,
            "_id": doc_id,
            "_version": version,
            "_seq_no": versioning.seq_no(seq),
            "_primary_term": versioning.PRIMARY_TERM,
            "found": True,
            "_source": json.loads(source),
        }

    def count(self) -> int:
        return len(self.segment().seqs)

    def put_mapping(self, body: dict) -> None:
        merged = self.mapping.to_body()
        merged["properties"] = merge_properties(merged["properties"], body.get("properties", {}), "")
        if "dynamic" in body:
            merged["dynamic"] = body["dynamic"]
        if "_meta" in body:
            merged["_meta"] = body["_meta"]
        mapping = Mapping(merged)
        similarities = bm25_similarities(self.settings, mapping)  # fails before anything changes
        for fs in mapping.fields.values():
            keyword_normalizer(fs, self.analysis)
        with self._lock:
            self.mapping, self.similarities = mapping, similarities
            self.sync_mapping(self.store.update_mappings(self.name, mapping.to_body()))

    def _restore_mapping(self, body: dict) -> None:
        """Back to the mapping ``body`` (a write that added fields to it in memory failed)."""
        with self._lock:
            mapping = Mapping(body, check_limits=False)
            self.similarities = bm25_similarities(self.settings, mapping)
            self.mapping = mapping
            if self._snapshot is not None:
                self._snapshot.mapping = mapping

    def sync_settings(self, stored: dict) -> None:
        """Take the stored settings (a PUT _settings of this or another process); only the
        translog group can change on an existing index."""
        with self._lock:
            self.settings = stored
            self.durability = durability.of_settings(stored)

    def sync_mapping(self, stored: dict) -> None:
        """Add the fields of the stored mapping that ours lacks (another process added them), so
        documents it wrote are analyzed as its mapping says. Never drops a field: ``stored`` may
        be older than what this process just added."""
        with self._lock:
            own = self.mapping.to_body()
            # the stored values win where both have a key (a PUT _mapping is written to the
            # store before it is synced); keys only this process has (fields it just added) stay
            merged = merge_mappings(own, stored)
            if json.dumps(merged, sort_keys=True) != json.dumps(own, sort_keys=True):
                mapping = Mapping(merged, check_limits=False)  # stored state: reopen as it is
                self.similarities = bm25_similarities(self.settings, mapping)
                self.mapping = mapping
            if self._snapshot is not None:
                self._snapshot.mapping = self.mapping

    def describe(self) -> dict:
        return {
            "aliases": {a: {} for a, i, _ in self.store.aliases() if i == self.name},
            "mappings": self.mapping.to_body(),
            "settings": {
                "index": {
                    **{k: v for k, v in self.settings.items()},
                    "number_of_shards": str(self.settings.get("number_of_shards", 1)),
                    "number_of_replicas": str(self.settings.get("number_of_replicas", 1)),
                    "uuid": self.uuid,
                    "provided_name": self.name,
                    "creation_date": str(self.created),
                }
            },
        }


class Engine:
    """All indices of one directory. Use :func:`open_engine` to share one per directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = Store(root)
        self._handles: dict[str, IndexHandle] = {}
        self._meta_gen = self.store.meta_gen()
        self._lock = threading.RLock()
        #: (meta generation, index names, aliases) as :meth:`resolve` last read them
        self._names: tuple[int, frozenset[str], list[tuple[str, str, bool | None]]] | None = None

    def changed_elsewhere(self) -> bool:
        """Whether index definitions or aliases changed since the last look (any process)."""
        v = self.store.meta_gen()
        if v != self._meta_gen:
            self._meta_gen = v
            return True
        return False

    def close(self) -> None:
        try:
            for h in list(self._handles.values()):
                h.save()
        finally:
            self.store.flush()  # commits of async indices not yet fsynced

    # --- indices --------------------------------------------------------------------------
    def index_names(self) -> list[str]:
        return sorted(self.store.indices())

    def handle(self, name: str) -> IndexHandle:
        with self._lock:
            metas = self.store.indices() if (name not in self._handles or self.changed_elsewhere()) else None
            if metas is not None:
                self._forget_gone(metas)
                if name not in metas:
                    raise index_not_found(name)
                h = self._handles.get(name)
                if h is None or h.uuid != metas[name]["uuid"]:
                    self._handles[name] = IndexHandle(self, name, metas[name])
                else:
                    h.sync_settings(metas[name]["settings"])
                    h.sync_mapping(metas[name]["mappings"])
            return self._handles[name]

    def _forget_gone(self, metas: dict[str, dict]) -> None:
        """Drop the handles (and so the snapshots and files) of indices deleted or recreated,
        by this or another process: a long-running process does not keep dead versions."""
        for old_name, h in list(self._handles.items()):
            meta = metas.get(old_name)
            if meta is None or meta["uuid"] != h.uuid:
                del self._handles[old_name]
                _remove_tree(h.cache_dir)

    def create_index(self, name: str, body: dict) -> dict:
        _validate_index_name(name)
        if name in self.store.indices() or any(a == name for a, _, _ in self.store.aliases()):
            raise EsError(
                400,
                "resource_already_exists_exception",
                f"index [{name}/{uuid.uuid4().hex[:22]}] already exists",
                index=name,
            )
        body = body or {}
        unknown = set(body) - {"settings", "mappings", "aliases"}
        if unknown:
            raise EsError(400, "parse_exception", f"unknown key [{next(iter(unknown))}] for create index")
        settings = flat_index_settings(body.get("settings") or {})
        translog = {k: v for k, v in (settings.pop("translog", None) or {}).items() if v is not None}
        if translog:  # a null there is the default
            settings["translog"] = translog
        if settings.get("analysis"):
            from scholar_es.engine.analysis.analyzers import get_analyzer

            for an in settings["analysis"].get("analyzer") or {}:
                get_analyzer(an, settings["analysis"])  # fail now, not at the first document
        mapping = Mapping(body.get("mappings") or {})
        bm25_similarities(settings, mapping)  # an unknown or unsupported similarity fails now
        for fs in mapping.fields.values():
            if fs.type == "text":
                from scholar_es.engine.analysis.analyzers import get_analyzer

                get_analyzer(fs.analyzer, settings.get("analysis"))
                get_analyzer(fs.query_analyzer, settings.get("analysis"))
            keyword_normalizer(fs, settings.get("analysis"))  # an unknown normalizer fails now
        try:
            self.store.create_index(
                name, settings, mapping.to_body(), uuid.uuid4().hex, int(time.time() * 1000)
            )
        except sqlite3.IntegrityError:  # another process created it since the check above
            raise EsError(
                400,
                "resource_already_exists_exception",
                f"index [{name}/{uuid.uuid4().hex[:22]}] already exists",
                index=name,
            ) from None
        aliases = body.get("aliases") or {}
        if aliases:
            self.store.apply_alias_actions(
                [(a, name, (v or {}).get("is_write_index")) for a, v in aliases.items()], [], []
            )
        return {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def put_settings(self, expr: str, body: dict) -> None:
        """PUT _settings: the dynamic settings the engine implements (``_DYNAMIC_SETTINGS``);
        any other is refused by name. A null value resets a setting to its default."""
        if set(body) == {"settings"} and isinstance(body["settings"], dict):  # RestUpdateSettingsAction
            body = body["settings"]
        flat = flat_index_settings(body)  # unknown names and bad values fail here
        for key in flat:
            if key != "translog":
                raise illegal_argument(
                    f"updating [index.{key}] is not supported by the embedded engine; PUT _settings "
                    f"applies [{', '.join(_DYNAMIC_SETTINGS)}]"
                )
        names = self.resolve(expr)
        for name in names:
            h = self.handle(name)
            translog = {**(h.settings.get("translog") or {}), **flat.get("translog", {})}
            translog = {k: v for k, v in translog.items() if v is not None}
            settings = {k: v for k, v in h.settings.items() if k != "translog"}
            if translog:
                settings["translog"] = translog
            self.store.update_settings(name, settings)
            h.sync_settings(settings)

    def delete_index(self, expr: str) -> None:
        names = self.resolve(expr, allow_aliases=False)
        for name in names:
            h = self._handles.pop(name, None)
            self.store.delete_index(name)
            if h is not None:
                _remove_tree(h.cache_dir)

    def resolve(self, expr: str, allow_aliases: bool = True, must_exist: bool = True) -> list[str]:
        """Concrete index names for a comma list of names, aliases and wildcards."""
        indices, aliases = self._names_and_aliases()
        out: list[str] = []
        for part in [p.strip() for p in str(expr).split(",") if p.strip()]:
            if part in ("_all", "*"):
                out.extend(sorted(indices))
                continue
            if any(c in part for c in "*?"):
                out.extend(sorted(n for n in indices if fnmatch.fnmatchcase(n, part)))
                if allow_aliases:
                    out.extend(i for a, i, _ in aliases if fnmatch.fnmatchcase(a, part))
                continue
            if part in indices:
                out.append(part)
                continue
            targets = [i for a, i, _ in aliases if a == part]
            if targets and allow_aliases:
                out.extend(targets)
                continue
            if must_exist:
                raise index_not_found(part)
        return list(dict.fromkeys(out))

    def _names_and_aliases(self) -> tuple[frozenset[str], list[tuple[str, str, bool | None]]]:
        """The index names and the aliases, read from SQLite again only when index definitions or
        aliases changed (any process bumps the meta generation): one read transaction for the
        generation and both lists, so they agree."""
        with self.store.reading():
            gen = self.store.meta_gen()
            kept = self._names
            if kept is not None and kept[0] == gen:
                return kept[1], kept[2]
            names, aliases = frozenset(self.store.index_names()), self.store.aliases()
        self._names = (gen, names, aliases)
        return names, aliases

    def write_index(self, name: str, create: bool = True) -> str:
        """The index a write to ``name`` goes to (through a single or write alias)."""
        indices = self.store.indices()
        if name in indices:
            return name
        targets = [(i, w) for a, i, w in self.store.aliases() if a == name]
        if targets:
            if len(targets) == 1:
                return targets[0][0]
            writes = [i for i, w in targets if w]
            if len(writes) == 1:
                return writes[0]
            raise illegal_argument(
                f"no write index is defined for alias [{name}]. The write index may be explicitly "
                "disabled using is_write_index=false or the alias points to multiple indices "
                "without one being designated as a write index"
            )
        if not create:
            raise index_not_found(name)
        try:
            self.create_index(name, {})  # auto-create, as action.auto_create_index allows by default
        except EsError as e:
            if e.type != "resource_already_exists_exception":  # another process created it just now
                raise
        return name

    def update_aliases(self, actions: list) -> None:
        adds, removes, remove_indices = [], [], []
        indices = self.store.indices()
        for action in actions or []:
            if not isinstance(action, dict) or len(action) != 1:
                raise illegal_argument("[aliases] each action must be an object with one key")
            kind, spec = next(iter(action.items()))
            if kind not in ("add", "remove", "remove_index"):
                raise illegal_argument(f"[aliases] unknown action [{kind}]")
            idx = _as_names(spec.get("index") or spec.get("indices"))
            als = _as_names(spec.get("alias") or spec.get("aliases"))
            concrete = [n for pat in idx for n in (self.resolve(pat, allow_aliases=False))]
            if kind == "remove_index":
                remove_indices.extend(concrete)
                continue
            if not als:
                raise illegal_argument("[alias] is missing")
            for index in concrete:
                if index not in indices:
                    raise index_not_found(index)
                for alias in als:
                    if alias in indices:
                        raise illegal_argument(
                            f"an index or data stream exists with the same name as the alias [{alias}]"
                        )
                    if kind == "add":
                        adds.append((alias, index, spec.get("is_write_index")))
                    else:
                        if not any(a == alias and i == index for a, i, _ in self.store.aliases()):
                            raise EsError(
                                404,
                                "aliases_not_found_exception",
                                f"aliases [{alias}] missing",
                                **{"resource.type": "aliases", "resource.id": alias},
                            )
                        removes.append((alias, index))
        self.store.apply_alias_actions(adds, removes, remove_indices)
        for name in remove_indices:
            h = self._handles.pop(name, None)
            if h is not None:
                _remove_tree(h.cache_dir)


def _as_names(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


def _validate_index_name(name: str) -> None:
    bad = set('\\/*?"<>| ,#:')
    if (
        not name
        or name != name.lower()
        or name[0] in "-_+"
        or any(c in bad for c in name)
        or name in (".", "..")
    ):
        raise EsError(
            400,
            "invalid_index_name_exception",
            f"Invalid index name [{name}], must be lowercase, must not start with '_', '-' or '+', and must "
            "not contain \\, /, *, ?, \", <, >, |, ' ', ',', #, :",
            index=name,
        )


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def open_engine(path: str | Path) -> Engine:
    """The process-wide engine for a directory (created on first use)."""
    root = Path(path).expanduser().resolve()
    with _ENGINES_LOCK:
        eng = _ENGINES.get(str(root))
        if eng is None or not eng.store.identity.valid():
            # a directory deleted or replaced since: the old engine refuses writes to it (its
            # holders learn so); whoever opens the path now gets what the path holds now
            eng = Engine(root)
            _ENGINES[str(root)] = eng
        return eng


@atexit.register
def _save_all() -> None:
    for eng in list(_ENGINES.values()):
        # exiting: the store is already durable, a failed cache write only costs a rebuild
        with contextlib.suppress(Exception):
            eng.close()


__all__ = ["Engine", "IndexHandle", "open_engine"]
