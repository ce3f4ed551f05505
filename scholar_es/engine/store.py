"""Durable storage of the embedded engine: one SQLite file per engine directory.

SQLite holds what must survive a crash: index definitions, aliases, stored scripts and
every document's ``_source`` (plus its vectors, which a mapping may exclude from
``_source``). Each write request is one transaction, so a bulk request is durable when
it returns, like Elasticsearch's translog. The analyzed, searchable form of an index is
derived from these rows and cached separately (see :mod:`engine.segment`).

Every document row gets a fresh, increasing ``seq`` when written, so an update appends a
new row and retires the old one, as Lucene does: the insertion order that breaks score
ties follows the last write, exactly as on a single-shard cluster.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

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
CREATE TABLE IF NOT EXISTS scripts (id TEXT PRIMARY KEY, body TEXT NOT NULL);
"""


def pack_vectors(vectors: dict[str, np.ndarray]) -> bytes | None:
    """Vectors of one document as bytes: a JSON header line, then float32 data."""
    if not vectors:
        return None
    header = json.dumps({k: int(v.shape[0]) for k, v in vectors.items()}).encode()
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


class Store:
    """Thread-safe access to one engine directory's SQLite database."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.path = root / "engine.sqlite3"
        # several processes may write one engine: wait for the lock rather than fail at once
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        self._db.close()

    def data_version(self) -> int:
        """Changes when another connection commits (PRAGMA data_version)."""
        return self._db.execute("PRAGMA data_version").fetchone()[0]

    # --- indices -------------------------------------------------------------------
    def indices(self) -> dict[str, dict]:
        rows = self._db.execute("SELECT name, settings, mappings, uuid, created FROM indices").fetchall()
        return {
            r[0]: {"settings": json.loads(r[1]), "mappings": json.loads(r[2]), "uuid": r[3], "created": r[4]}
            for r in rows
        }

    def create_index(self, name: str, settings: dict, mappings: dict, uuid: str, created: int) -> None:
        with self._lock:
            self._db.execute(
                "INSERT INTO indices VALUES (?, ?, ?, ?, ?)",
                (name, json.dumps(settings), json.dumps(mappings), uuid, created),
            )

    def update_mappings(self, name: str, mappings: dict) -> None:
        with self._lock:
            self._db.execute("UPDATE indices SET mappings = ? WHERE name = ?", (json.dumps(mappings), name))

    def delete_index(self, name: str) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM docs WHERE index_name = ?", (name,))
            self._db.execute("DELETE FROM aliases WHERE index_name = ?", (name,))
            self._db.execute("DELETE FROM indices WHERE name = ?", (name,))
            self._db.execute("COMMIT")

    # --- aliases -------------------------------------------------------------------
    def aliases(self) -> list[tuple[str, str, bool | None]]:
        rows = self._db.execute("SELECT alias, index_name, is_write FROM aliases ORDER BY alias, index_name")
        return [(a, i, None if w is None else bool(w)) for a, i, w in rows]

    def apply_alias_actions(
        self,
        adds: Sequence[tuple[str, str, bool | None]],
        removes: Sequence[tuple[str, str]],
        remove_indices: Sequence[str],
    ) -> None:
        """All alias changes of one ``_aliases`` request in one transaction (atomic swap)."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for alias, index in removes:
                    self._db.execute("DELETE FROM aliases WHERE alias = ? AND index_name = ?", (alias, index))
                for alias, index, is_write in adds:
                    self._db.execute(
                        "INSERT OR REPLACE INTO aliases VALUES (?, ?, ?)",
                        (alias, index, None if is_write is None else int(is_write)),
                    )
                for index in remove_indices:
                    self._db.execute("DELETE FROM docs WHERE index_name = ?", (index,))
                    self._db.execute("DELETE FROM aliases WHERE index_name = ?", (index,))
                    self._db.execute("DELETE FROM indices WHERE name = ?", (index,))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # --- documents -----------------------------------------------------------------
    def write(self, index: str, ops: Sequence[tuple]) -> list[tuple[int | None, int]]:
        """Apply ("index", id, source_json, vectors_blob) and ("delete", id) ops in one
        transaction; returns (new seq or None, version) per op (version 0: not found)."""
        out: list[tuple[int | None, int]] = []
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for op in ops:
                    row = self._db.execute(
                        "SELECT version FROM docs WHERE index_name = ? AND id = ?", (index, op[1])
                    ).fetchone()
                    if op[0] == "delete":
                        if row:
                            self._db.execute(
                                "DELETE FROM docs WHERE index_name = ? AND id = ?", (index, op[1])
                            )
                        out.append((None, row[0] + 1 if row else 0))
                        continue
                    version = row[0] + 1 if row else 1
                    if row:
                        self._db.execute("DELETE FROM docs WHERE index_name = ? AND id = ?", (index, op[1]))
                    cur = self._db.execute(
                        "INSERT INTO docs (index_name, id, version, source, vectors) VALUES (?, ?, ?, ?, ?)",
                        (index, op[1], version, op[2], op[3]),
                    )
                    out.append((cur.lastrowid, version))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return out

    def live_seqs(self, index: str) -> np.ndarray:
        rows = self._db.execute("SELECT seq FROM docs WHERE index_name = ? ORDER BY seq", (index,)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def docs_after(self, index: str, seq: int) -> Iterator[tuple[int, str, str, bytes | None]]:
        """(seq, id, source, vectors) of the documents written after ``seq``, in order."""
        yield from self._db.execute(
            "SELECT seq, id, source, vectors FROM docs WHERE index_name = ? AND seq > ? ORDER BY seq",
            (index, seq),
        )

    def sources(self, seqs: Sequence[int]) -> dict[int, tuple[str, str, int]]:
        """seq -> (id, source json, version) for the given rows."""
        out: dict[int, tuple[str, str, int]] = {}
        seqs = [int(s) for s in seqs]
        for start in range(0, len(seqs), 500):
            part = seqs[start : start + 500]
            q = "SELECT seq, id, source, version FROM docs WHERE seq IN ({})".format(
                ",".join("?" * len(part))
            )
            for seq, id_, src, ver in self._db.execute(q, part):
                out[seq] = (id_, src, ver)
        return out

    def get(self, index: str, doc_id: str) -> tuple[int, str, int] | None:
        """(seq, source json, version) of one document, or None."""
        return self._db.execute(
            "SELECT seq, source, version FROM docs WHERE index_name = ? AND id = ?", (index, doc_id)
        ).fetchone()

    # --- stored scripts ------------------------------------------------------------
    def put_script(self, script_id: str, body: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO scripts VALUES (?, ?)", (script_id, json.dumps(body)))

    def get_script(self, script_id: str) -> dict | None:
        row = self._db.execute("SELECT body FROM scripts WHERE id = ?", (script_id,)).fetchone()
        return json.loads(row[0]) if row else None

    def delete_script(self, script_id: str) -> bool:
        with self._lock:
            return self._db.execute("DELETE FROM scripts WHERE id = ?", (script_id,)).rowcount > 0
