"""Durable storage of the embedded engine: one SQLite file per engine directory.

SQLite holds what must survive a crash: index definitions, aliases, stored scripts and
every document's ``_source`` (plus its vectors, which a mapping may exclude from
``_source``). Each write request is one transaction, fsynced before it returns unless its index
asks for ``index.translog.durability: async`` (:mod:`engine.index.durability`), like
Elasticsearch's translog. The analyzed, searchable form of an index is
derived from these rows and cached separately (see :mod:`engine.index.segment`).

Every document row gets a fresh, increasing ``seq`` when written, so an update appends a
new row and retires the old one, as Lucene does: the insertion order that breaks score
ties follows the last write, exactly as on a single-shard cluster.

A ``_source`` of ``SOURCE_COMPRESS_MIN`` characters or more is stored as a zlib stream (a BLOB; shorter
ones, and any that would not shrink, stay TEXT), and new databases use ``PAGE_SIZE`` pages: with
SQLite's default 4 KiB pages a chunk row (its ``_source`` plus 1.5 KiB per 384-d vector) filled a
page on its own, so the file was ~1.29x its rows' bytes; with both it is ~0.81x (bench/README.md,
"Disk"). zlib's Adler-32 also makes a damaged compressed ``_source`` an error, never other text.

A deleted document leaves a tombstone (its id and version) for ``GC_DELETES_SECONDS``, as
Elasticsearch keeps a deleted document's version for ``index.gc_deletes`` (60 s by default).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import orjson

from scholar_es.engine.diskfull import naming_full_disk, raise_if_full, rollback
from scholar_es.engine.errors import EsError, index_not_found
from scholar_es.engine.index import versioning
from scholar_es.engine.index.durability import REQUEST, Durability, WalSyncer
from scholar_es.engine.index.identity import StoreIdentity

try:  # ISA-L (python-isal): the same zlib format, ~7x faster than zlib at level 1 on _source JSON
    # to write, and ~1.8x faster to read (6.3 against 11 us for a 1.8 KB QASPER chunk's source)
    from isal import isal_zlib

    _compress, _decompress = isal_zlib.compress, isal_zlib.decompress
    #: what isal raises on a damaged stream (its IsalError is not zlib.error)
    _INFLATE_ERRORS: tuple[type[BaseException], ...] = (
        getattr(isal_zlib, "IsalError"),  # noqa: B009 (its stub types IsalError as an instance)
        zlib.error,
    )
except ImportError:  # pragma: no cover - a platform without isal's wheels: zlib, slower
    _compress, _decompress = zlib.compress, zlib.decompress
    _INFLATE_ERRORS = (zlib.error,)

log = logging.getLogger("scholar_es.engine")

GC_DELETES_SECONDS = 60.0  # index.gc_deletes' default (IndexSettings.DEFAULT_GC_DELETES)
#: page size of a new database (an existing one keeps its own: SQLite fixes it at creation in WAL
#: mode). 16 KiB: 0.86x the rows' bytes, 32 KiB: 0.81x, 64 KiB: 0.80x on the 100k bench corpus
PAGE_SIZE = 32768
#: a ``_source`` of this many characters or more is stored compressed when that is smaller
SOURCE_COMPRESS_MIN = 64

SCHEMA = """
CREATE TABLE IF NOT EXISTS indices (
    name TEXT PRIMARY KEY, settings TEXT NOT NULL, mappings TEXT NOT NULL,
    uuid TEXT NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS aliases (
    alias TEXT NOT NULL, index_name TEXT NOT NULL, is_write INTEGER,
    PRIMARY KEY (alias, index_name));
CREATE TABLE IF NOT EXISTS docs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, index_name TEXT NOT NULL, id TEXT NOT NULL,
    version INTEGER NOT NULL, source TEXT NOT NULL, vectors BLOB,
    UNIQUE (index_name, id));
CREATE TABLE IF NOT EXISTS tombstones (
    index_name TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, deleted_at REAL NOT NULL,
    PRIMARY KEY (index_name, id));
CREATE TABLE IF NOT EXISTS scripts (id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS write_gen (index_name TEXT PRIMARY KEY, gen INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta_gen (id INTEGER PRIMARY KEY CHECK (id = 0), gen INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS history (index_name TEXT PRIMARY KEY, epoch TEXT NOT NULL);
"""


class DamagedSource(EsError):
    """A stored ``_source`` that does not decompress: the database file was damaged. A 500
    ``corrupt_index_exception``, as Elasticsearch answers when Lucene finds a file damaged."""

    def __init__(self, reason: str) -> None:
        super().__init__(500, "corrupt_index_exception", reason)


def pack_source(source: str) -> str | bytes:
    """How ``source`` (JSON text) is stored: a zlib stream when that is shorter, else the text."""
    if len(source) < SOURCE_COMPRESS_MIN:  # characters <= UTF-8 bytes: surely too short
        return source
    # a write refuses strings with surrogates first (core); surrogatepass keeps this total anyway
    raw = source.encode("utf-8", "surrogatepass")
    packed = _compress(raw, 1)
    return packed if len(packed) < len(raw) else source


def unpack_source(value: str | bytes, doc_id: str | None = None) -> str:
    """The JSON text of a stored ``_source`` (TEXT as written, or a BLOB made by :func:`pack_source`)."""
    if isinstance(value, str):
        return value
    try:
        raw = _decompress(value)
    except _INFLATE_ERRORS:  # damaged: inflated again by zlib, whose words the message gives
        raw = None
    try:
        return (zlib.decompress(value) if raw is None else raw).decode("utf-8", "surrogatepass")
    except (zlib.error, UnicodeDecodeError) as e:
        raise DamagedSource(
            f"the stored _source of document [{doc_id}] is damaged ({e}); the engine's SQLite file "
            "needs restoring from a backup, or the document indexing again"
        ) from e


def pack_vectors(vectors: dict[str, np.ndarray]) -> bytes | None:
    """Vectors of one document as bytes: a JSON header line, then float32 data."""
    if not vectors:
        return None
    header = orjson.dumps({k: int(v.shape[0]) for k, v in vectors.items()})
    return header + b"\n" + b"".join(np.asarray(v, dtype="<f4").tobytes() for v in vectors.values())


def unpack_vectors(blob: bytes | None) -> dict[str, np.ndarray]:
    if not blob:
        return {}
    header, _, data = blob.partition(b"\n")
    out, offset = {}, 0
    for name, dims in json.loads(header).items():
        out[name] = np.frombuffer(data, dtype="<f4", count=dims, offset=offset)
        offset += 4 * dims
    return out


class Reader:
    """Reads inside one SQLite read transaction: every call sees the same committed state."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def restart(self) -> None:
        """End the transaction and start a new one (to see later commits)."""
        self._db.execute("COMMIT")
        self._db.execute("BEGIN")

    def gen(self, index: str) -> int:
        return _gen(self._db, index)

    def close(self) -> None:
        """End the transaction and close the connection (a pinned reader only)."""
        with contextlib.suppress(sqlite3.Error):
            self._db.execute("COMMIT")
        self._db.close()

    def live_seqs(self, index: str) -> np.ndarray:
        rows = self._db.execute("SELECT seq FROM docs WHERE index_name = ? ORDER BY seq", (index,)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def docs_after(self, index: str, seq: int) -> list[tuple[int, str, str, bytes | None]]:
        """(seq, id, source, vectors) of the documents written after ``seq``, in order."""
        rows = self._db.execute(
            "SELECT seq, id, source, vectors FROM docs WHERE index_name = ? AND seq > ? ORDER BY seq",
            (index, seq),
        ).fetchall()  # every row read before any is unpacked: see rows()
        return [(q, i, unpack_source(src, i), v) for q, i, src, v in rows]

    def rows(self, seqs: Sequence[int]) -> list[tuple[int, str, str, bytes | None]]:
        """(seq, id, source, vectors) of the given rows that exist, in seq order."""
        out: list[tuple[int, str, str, bytes | None]] = []
        seqs = [int(s) for s in seqs]
        for start in range(0, len(seqs), 500):
            part = seqs[start : start + 500]
            q = "SELECT seq, id, source, vectors FROM docs WHERE seq IN ({})".format(
                ",".join("?" * len(part))
            )
            # fetched whole before unpacking: a cursor left half-read by a DamagedSource would keep
            # this thread's read snapshot open (found by a review probe: later reads saw old data)
            rows = self._db.execute(q, part).fetchall()
            out.extend((s, i, unpack_source(src, i), v) for s, i, src, v in rows)
        return sorted(out)

    def sources(self, seqs: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """seq -> (id, source json, version) for the given rows."""
        out: dict[int, tuple[str, str, int]] = {}
        seqs = [int(s) for s in seqs]
        for start in range(0, len(seqs), 500):
            part = seqs[start : start + 500]
            q = "SELECT seq, id, source, version FROM docs WHERE seq IN ({})".format(
                ",".join("?" * len(part))
            )
            for seq, id_, src, ver in self._db.execute(q, part).fetchall():  # whole first: see rows()
                out[seq] = (id_, unpack_source(src, id_), ver)
        return out

    def get(self, index: str, doc_id: str) -> tuple[int, str, int] | None:
        row = self._db.execute(
            "SELECT seq, source, version FROM docs WHERE index_name = ? AND id = ?", (index, doc_id)
        ).fetchone()
        return None if row is None else (row[0], unpack_source(row[1], doc_id), row[2])


def merge_mappings(base: dict, over: dict) -> dict:
    """``base`` with ``over`` laid over it, recursively: keys only one side has are kept, and
    ``over``'s value wins where both have one."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_mappings(out[key], value)
        else:
            out[key] = value
    return out


def _lookup(db: sqlite3.Connection, sql: str, index: str, ids: list[str]) -> dict[str, tuple]:
    """id -> the rest of its row, for ``sql`` ending in ``id IN`` (asked 500 ids at a time)."""
    found: dict[str, tuple] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        for row in db.execute(f"{sql} ({','.join('?' * len(part))})", (index, *part)):
            found[row[0]] = row[1:]
    return found


def _gen(db: sqlite3.Connection, index: str) -> int:
    row = db.execute("SELECT gen FROM write_gen WHERE index_name = ?", (index,)).fetchone()
    return int(row[0]) if row else 0


def _last_seq(db: sqlite3.Connection) -> int:
    """The highest seq handed out: AUTOINCREMENT's counter, or a row's seq if one is higher."""
    row = db.execute(
        "SELECT max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'docs'), 0), "
        "coalesce((SELECT max(seq) FROM docs), 0))"
    ).fetchone()
    return int(row[0])


def _connect(path: Path) -> sqlite3.Connection:
    # several processes may write one engine: wait for the lock rather than fail at once
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=60)
    db.execute("PRAGMA busy_timeout = 60000")
    # FULL in WAL mode: the WAL is fsynced at every commit (a write lowers it per request for an
    # index with ``index.translog.durability: async``, see _begin)
    db.execute("PRAGMA synchronous=FULL")
    return db


class Store:
    """Thread-safe access to one engine directory's SQLite database."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / "engine.sqlite3"
        from scholar_es.engine.index.commit import write_lock

        # processes opening a fresh directory together: one sets WAL mode and creates the
        # schema while the others wait (switching the journal mode does not wait on a busy lock)
        with naming_full_disk("the engine's store", self.path), write_lock(root, "init.lock"):
            self._db = _connect(self.path)
            self._db.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before WAL: a no-op once created
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(SCHEMA)
        self._lock = threading.RLock()
        self._local = threading.local()
        self._synchronous = "FULL"  # the write connection's PRAGMA synchronous
        self._syncer = WalSyncer(self.path.with_name(self.path.name + "-wal"))
        #: the files this process opened: a write is refused once the paths name others
        self.identity = StoreIdentity(root, self.path)
        #: no seq at or below this is handed out by this process: the highest it wrote or saw in a
        #: commit point (SQLite's own counter goes back with a restored or rolled-back file)
        self._seq_floor = 0
        #: per index, the highest write generation this process committed (a lower one in SQLite
        #: means the file went back under it)
        self._gen_floor: dict[str, int] = {}
        #: per index, how often a write found SQLite gone back (IndexHandle drops its snapshot)
        self.history_resets: dict[str, int] = {}

    def _begin(self, durability: Durability = REQUEST) -> sqlite3.Connection:
        """Start a write transaction on the write connection (held under ``self._lock``), with
        the fsync policy of ``durability``."""
        self._sync_policy(durability)
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def _sync_policy(self, durability: Durability) -> None:
        """Set the write connection's PRAGMA synchronous for ``durability`` (outside a transaction:
        SQLite does not change it inside one)."""
        mode = "FULL" if durability.request else "NORMAL"
        if mode != self._synchronous:
            self._db.execute(f"PRAGMA synchronous={mode}")
            self._synchronous = mode

    def _commit(self, durability: Durability = REQUEST) -> None:
        """Commit the write transaction, unless the engine's files were deleted or replaced
        underneath (the commit would go to an unlinked file): then StoreChanged, rolled back by
        the caller. ``async`` durability: the WAL is fsynced within its sync_interval."""
        self.identity.check()
        self._db.execute("COMMIT")
        if durability.sync_interval is not None:
            self._syncer.dirty(durability.sync_interval)

    def close(self) -> None:
        """Close the write connection and this thread's read connection (other threads' read
        connections close when their thread ends: they live in thread-local storage only)."""
        with self._lock:
            self._syncer.flush()
            self._db.close()
            self.identity.close()
            db = getattr(self._local, "db", None)
            if db is not None:
                self._local.db = None
                with contextlib.suppress(sqlite3.Error):
                    db.close()

    def flush(self) -> None:
        """Fsync commits of ``async`` indices not yet synced (what ``_flush`` and exit do)."""
        self._syncer.flush()

    def meta_gen(self) -> int:
        """Bumped by every change of index definitions or aliases (by any process)."""
        rows = self._query("SELECT gen FROM meta_gen WHERE id = 0")
        return int(rows[0][0]) if rows else 0

    @contextlib.contextmanager
    def _meta_write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction that changes index definitions or aliases."""
        with self._lock:
            self._begin()
            try:
                yield self._db
                self._db.execute(
                    "INSERT INTO meta_gen VALUES (0, 1) ON CONFLICT(id) DO UPDATE SET gen = gen + 1"
                )
                self._commit()
            except BaseException as e:
                rollback(self._db)  # a failed COMMIT may have ended the transaction already
                raise_if_full(e, "the engine's store", self.path)
                raise

    @contextlib.contextmanager
    def reading(self) -> Iterator[Reader]:
        """One read transaction on this thread's own connection; nested uses share it."""
        local = self._local
        if getattr(local, "depth", 0):
            local.depth += 1
            try:
                yield local.reader
            finally:
                local.depth -= 1
            return
        db = getattr(local, "db", None)
        if db is None:
            # a new connection opens the path: refused when it names another file than the one
            # this process opened (connections opened before keep reading their file)
            self.identity.check()
            db = local.db = _connect(self.path)
        if db.in_transaction:  # a COMMIT that failed earlier must not make every later read fail
            db.rollback()
        db.execute("BEGIN")
        local.reader, local.depth = Reader(db), 1
        try:
            yield local.reader
        finally:
            local.depth = 0
            with contextlib.suppress(sqlite3.Error):
                db.execute("COMMIT")

    def pinned_reader(self) -> Reader:
        """A read transaction on a connection of its own, held until its caller closes
        ``reader.close()``: what a scroll or point in time keeps (engine/search/contexts.py)."""
        self.identity.check()
        db = _connect(self.path)
        db.execute("BEGIN")
        return Reader(db)

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self.reading() as rd:
            return rd._db.execute(sql, args).fetchall()

    # --- indices -------------------------------------------------------------------
    def indices(self) -> dict[str, dict]:
        rows = self._query("SELECT name, settings, mappings, uuid, created FROM indices")
        return {
            r[0]: {"settings": json.loads(r[1]), "mappings": json.loads(r[2]), "uuid": r[3], "created": r[4]}
            for r in rows
        }

    def create_index(self, name: str, settings: dict, mappings: dict, uuid: str, created: int) -> None:
        with self._meta_write() as db:
            db.execute(
                "INSERT INTO indices VALUES (?, ?, ?, ?, ?)",
                (name, json.dumps(settings), json.dumps(mappings), uuid, created),
            )

    def update_mappings(self, name: str, mappings: dict) -> dict:
        """Merge ``mappings`` into the stored mapping (in one transaction, so fields that another
        process added meanwhile are kept; ``mappings`` wins where both have a key: a PUT
        _mapping) and return the result. A writer's dynamic fields go in with its documents
        (:meth:`write`)."""
        with self._meta_write() as db:
            row = db.execute("SELECT mappings FROM indices WHERE name = ?", (name,)).fetchone()
            merged = mappings if row is None else merge_mappings(json.loads(row[0]), mappings)
            db.execute("UPDATE indices SET mappings = ? WHERE name = ?", (json.dumps(merged), name))
        return merged

    def update_settings(self, name: str, settings: dict) -> None:
        """Replace the stored settings of index ``name`` (a PUT _settings, validated by the caller)."""
        with self._meta_write() as db:
            db.execute("UPDATE indices SET settings = ? WHERE name = ?", (json.dumps(settings), name))

    def delete_index(self, name: str) -> None:
        with self._meta_write() as db:
            db.execute("DELETE FROM docs WHERE index_name = ?", (name,))
            db.execute("DELETE FROM tombstones WHERE index_name = ?", (name,))
            db.execute("DELETE FROM aliases WHERE index_name = ?", (name,))
            db.execute("DELETE FROM indices WHERE name = ?", (name,))
            db.execute("DELETE FROM history WHERE index_name = ?", (name,))

    def index_names(self) -> list[str]:
        """The names of the indices (without reading their settings and mappings)."""
        return [r[0] for r in self._query("SELECT name FROM indices")]

    # --- aliases -------------------------------------------------------------------
    def aliases(self) -> list[tuple[str, str, bool | None]]:
        rows = self._query("SELECT alias, index_name, is_write FROM aliases ORDER BY alias, index_name")
        return [(a, i, None if w is None else bool(w)) for a, i, w in rows]

    def apply_alias_actions(
        self,
        adds: Sequence[tuple[str, str, bool | None]],
        removes: Sequence[tuple[str, str]],
        remove_indices: Sequence[str],
    ) -> None:
        """All alias changes of one ``_aliases`` request in one transaction (atomic swap)."""
        with self._meta_write() as db:
            for alias, index in removes:
                db.execute("DELETE FROM aliases WHERE alias = ? AND index_name = ?", (alias, index))
            for alias, index, is_write in adds:
                db.execute(
                    "INSERT OR REPLACE INTO aliases VALUES (?, ?, ?)",
                    (alias, index, None if is_write is None else int(is_write)),
                )
            for index in remove_indices:
                db.execute("DELETE FROM docs WHERE index_name = ?", (index,))
                db.execute("DELETE FROM tombstones WHERE index_name = ?", (index,))
                db.execute("DELETE FROM aliases WHERE index_name = ?", (index,))
                db.execute("DELETE FROM indices WHERE name = ?", (index,))
                db.execute("DELETE FROM history WHERE index_name = ?", (index,))

    # --- documents -----------------------------------------------------------------
    def write(
        self,
        index: str,
        ops: Sequence[tuple],
        mappings: dict | None = None,
        durability: Durability = REQUEST,
    ) -> tuple[list[tuple[int, int, int | None] | str], int, dict | None]:
        """Apply ("index", id, source_json, vectors_blob, condition) and ("delete", id, condition)
        ops in one transaction, with the index's mapping grown by ``mappings``' additions (the
        dynamic fields the documents added; only keys the stored mapping lacks are taken, its own
        values stay). Returns, per op, (its new seq, version, seq of the live row it replaced or
        None: a delete found its document when that is set) or, when its
        :class:`~engine.index.versioning.Condition` failed, the conflict's explanation; the
        index's write generation after the transaction (the one before is that minus one); and
        the stored mapping after it when ``mappings`` was given. Raises ``index_not_found`` when the index is gone (deleted by
        another process since the caller looked), writing nothing.

        Each condition is checked here, against the state of this transaction and the earlier ops
        of the same request, so two writers (threads or processes) can never both create one id or
        both replace one ``if_seq_no``. Versions follow Elasticsearch's versioning
        (:func:`~engine.index.versioning.next_version`): internally every write of an id, deletes
        included, takes the version after the current one, and a deleted id's version is kept for
        ``GC_DELETES_SECONDS`` (``index.gc_deletes``) so a delete of a missing id gets version 1
        and a document written again soon after its delete goes on from its version.

        The whole request is planned in Python from one look-up of its ids, then written with
        one ``executemany`` per statement: rows replaced or deleted, new rows (with the seqs
        AUTOINCREMENT would have given them, one per applied op in order -- a delete takes one too,
        its ``_seq_no`` -- kept in ``sqlite_sequence`` even when a later op of the same request
        replaced the row) and tombstones.

        The transaction is fsynced before this returns (``durability`` ``request``), or within its
        ``sync_interval`` (``async``). No seq at or below ``_seq_floor`` is handed out (see
        :meth:`guard_history`), and nothing is committed once the engine's files were deleted or
        replaced underneath (``StoreIdentity``)."""
        out: list[tuple[int, int, int | None] | str] = []
        with self._lock:
            db = self._begin(durability)
            try:
                stored = self._grow_mapping(db, index, mappings)
                now = time.time()
                ids = list(dict.fromkeys(op[1] for op in ops))
                live = _lookup(
                    db, "SELECT id, version, seq FROM docs WHERE index_name = ? AND id IN", index, ids
                )
                dead: dict[str, tuple] = {}
                if (
                    any(op[0] == "delete" for op in ops)
                    or db.execute("SELECT 1 FROM tombstones LIMIT 1").fetchone()
                ):
                    db.execute("DELETE FROM tombstones WHERE deleted_at < ?", (now - GC_DELETES_SECONDS,))
                    dead = _lookup(
                        db, "SELECT id, version FROM tombstones WHERE index_name = ? AND id IN", index, ids
                    )
                db_gen, floor_gen = _gen(db, index), self._gen_floor.get(index, 0)
                # SQLite went back under this running process (a copy of engine.sqlite3 put back in
                # place: same inode, so StoreIdentity sees nothing): seqs or this index's write
                # generation are below ones this process handed out. As at open (guard_history):
                # a new epoch, so no commit point of the lost timeline is ever loaded, and seqs and
                # the generation go on past every number this process has seen.
                db_last, seq_floor = _last_seq(db), self._seq_floor
                went_back = db_last < seq_floor or db_gen < floor_gen
                if went_back:
                    db.execute("INSERT OR REPLACE INTO history VALUES (?, ?)", (index, uuid.uuid4().hex))
                last_seq = max(db_last, seq_floor)
                # id -> (version or None: never written, live seq or None, index op or None)
                state: dict[str, tuple[int | None, int | None, tuple | None]] = {}
                for doc_id in ids:
                    if doc_id in live:
                        state[doc_id] = (live[doc_id][0], live[doc_id][1], None)
                    elif doc_id in dead:
                        state[doc_id] = (dead[doc_id][0], None, None)
                touched: set[str] = set()  # ids an applied op changed
                for op in ops:
                    version, seq, _ = state.get(op[1], (None, None, None))
                    cond = op[2] if op[0] == "delete" else op[4]
                    reason = versioning.conflict(cond, version, seq)
                    if reason is not None:
                        out.append(reason)
                        continue
                    version_after = versioning.next_version(cond, version)
                    last_seq += 1
                    touched.add(op[1])
                    if op[0] == "delete":
                        state[op[1]] = (version_after, None, None)
                    else:
                        state[op[1]] = (version_after, last_seq, op)
                    out.append((last_seq, version_after, seq))
                changed = [i for i in ids if i in touched]  # in request order: rows deleted in seq order
                retired = [(live[i][1],) for i in changed if i in live]  # every applied op retires the row
                if retired:
                    db.executemany("DELETE FROM docs WHERE seq = ?", retired)
                rows = [
                    (seq, index, op[1], version, pack_source(op[2]), op[3])
                    for version, seq, op in state.values()
                    if op is not None
                ]
                if rows:
                    db.executemany(
                        "INSERT INTO docs (seq, index_name, id, version, source, vectors) VALUES (?, ?, ?, ?, ?, ?)",
                        rows,
                    )
                if not db.execute(
                    "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'docs'", (last_seq,)
                ).rowcount:
                    db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('docs', ?)", (last_seq,))
                tombs = [(index, i, state[i][0], now) for i in changed if state[i][1] is None]
                if tombs:
                    db.executemany("INSERT OR REPLACE INTO tombstones VALUES (?, ?, ?, ?)", tombs)
                gone = [(index, i) for i in changed if state[i][1] is not None and i in dead]
                if gone:
                    db.executemany("DELETE FROM tombstones WHERE index_name = ? AND id = ?", gone)
                gen = max(db_gen, floor_gen) + 1
                db.execute("INSERT OR REPLACE INTO write_gen VALUES (?, ?)", (index, gen))
                self._commit(durability)
            except BaseException as e:
                rollback(db)  # a failed COMMIT may have ended the transaction already
                raise_if_full(e, "the engine's store", self.path)
                raise
            self._seq_floor = max(self._seq_floor, last_seq)
            self._gen_floor[index] = gen
            if went_back:
                self.history_resets[index] = self.history_resets.get(index, 0) + 1
                log.warning(
                    "index [%s]: SQLite went back under this process (last seq %d < %d or write "
                    "generation %d < %d: a copy of the file was put back); the index is rebuilt from "
                    "SQLite and new documents get seqs after %d",
                    index,
                    db_last,
                    seq_floor,
                    db_gen,
                    floor_gen,
                    seq_floor,
                )
        return out, gen, stored

    @staticmethod
    def _grow_mapping(db: sqlite3.Connection, index: str, mappings: dict | None) -> dict | None:
        """Inside a write transaction: the stored mapping of ``index`` with the keys of ``mappings``
        it lacks added (and ``meta_gen`` bumped, so other processes see them); None without
        ``mappings``. Raises ``index_not_found`` when ``index`` is not (or no longer) stored."""
        row = db.execute("SELECT mappings FROM indices WHERE name = ?", (index,)).fetchone()
        if row is None:
            raise index_not_found(index)
        if mappings is None:
            return None
        stored = json.loads(row[0])
        merged = merge_mappings(mappings, stored)
        if merged != stored:
            db.execute("UPDATE indices SET mappings = ? WHERE name = ?", (json.dumps(merged), index))
            db.execute("INSERT INTO meta_gen VALUES (0, 1) ON CONFLICT(id) DO UPDATE SET gen = gen + 1")
        return merged

    # --- history: what a commit point may describe ------------------------------------
    def epoch(self, index: str) -> str | None:
        """The history id of ``index``'s rows: None until a rollback of the database was found,
        then a new random id per rollback. A segment commit point records it, and one that
        records another is not loaded (docs/storage.md, section 3)."""
        rows = self._query("SELECT epoch FROM history WHERE index_name = ?", (index,))
        return rows[0][0] if rows else None

    def guard_history(self, index: str, gen: int, max_seq: int) -> bool:
        """A commit point of ``index`` says it reflects write generation ``gen`` with seqs up to
        ``max_seq``; when SQLite is behind either (its unsynced tail was lost, or an older copy
        of the file was put back), the commit point describes documents SQLite no longer has:
        in one transaction seqs are moved past ``max_seq`` (AUTOINCREMENT's counter went back with
        the file, and a seq must never name two documents), the write generation past ``gen``
        (so no state of SQLite ever matches the commit point's number), and the index gets a new
        epoch (so the commit point is never loaded). Returns whether that happened."""
        with self._lock:
            self._seq_floor = max(self._seq_floor, max_seq)
            with self.reading() as rd:
                behind = rd.gen(index) < gen or _last_seq(rd._db) < max_seq
            if not behind:
                return False
            db = self._begin()
            try:
                have_gen, have_seq = _gen(db, index), _last_seq(db)
                behind = have_gen < gen or have_seq < max_seq
                if behind:
                    if not db.execute(
                        "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'docs'", (max_seq,)
                    ).rowcount:
                        db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('docs', ?)", (max_seq,))
                    db.execute(
                        "INSERT OR REPLACE INTO write_gen VALUES (?, ?)", (index, max(have_gen, gen) + 1)
                    )
                    db.execute("INSERT OR REPLACE INTO history VALUES (?, ?)", (index, uuid.uuid4().hex))
                self._commit()
            except BaseException as e:
                rollback(db)  # a failed COMMIT may have ended the transaction already
                raise_if_full(e, "the engine's store", self.path)
                raise
        if behind:
            log.warning(
                "index [%s]: SQLite is older than the segment cache (write generation %d < %d or last seq "
                "%d < %d: a lost unsynced tail or a restored copy of the file); the cache is rebuilt "
                "from SQLite and new documents get seqs after %d",
                index,
                have_gen,
                gen,
                have_seq,
                max_seq,
                max_seq,
            )
        return behind

    def get(self, index: str, doc_id: str) -> tuple[int, str, int] | None:
        """(seq, source json, version) of one document, or None."""
        with self.reading() as rd:
            return rd.get(index, doc_id)

    # --- stored scripts ------------------------------------------------------------
    def put_script(self, script_id: str, body: dict) -> None:
        with self._lock, naming_full_disk("the engine's store", self.path):
            self.identity.check()
            self._sync_policy(REQUEST)
            self._db.execute("INSERT OR REPLACE INTO scripts VALUES (?, ?)", (script_id, json.dumps(body)))

    def get_script(self, script_id: str) -> dict | None:
        rows = self._query("SELECT body FROM scripts WHERE id = ?", (script_id,))
        row = rows[0] if rows else None
        return json.loads(row[0]) if row else None

    def delete_script(self, script_id: str) -> bool:
        with self._lock, naming_full_disk("the engine's store", self.path):
            self.identity.check()
            self._sync_policy(REQUEST)
            return self._db.execute("DELETE FROM scripts WHERE id = ?", (script_id,)).rowcount > 0
