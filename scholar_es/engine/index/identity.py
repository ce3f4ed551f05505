"""Notice an engine directory deleted or replaced under a running process.

SQLite keeps writing into the files it opened: after ``rm -rf ENGINE/*`` (or a restore that
moves another ``engine.sqlite3`` into place) every later write would be acknowledged into an
unlinked file and be gone at the next start. Lucene checks before a commit that its
``write.lock`` is still the file it locked (``NativeFSLockFactory.NativeFSLock.ensureValid``:
``AlreadyClosedException("Underlying file changed by an external force ...")``), and
Elasticsearch does the same for its data path's ``node.lock`` (``NodeEnvironment``); PostgreSQL
shuts down when its ``postmaster.pid`` disappears. Here a process opens ``node.lock`` in the
engine directory and keeps it open, and records the device and inode of it and of
``engine.sqlite3``; :meth:`StoreIdentity.check` (two ``os.stat`` calls, run once per write
request before it commits) refuses the write when either path is gone or names another file.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

from scholar_es.engine.errors import EsError

log = logging.getLogger("scholar_es.engine")

LOCK_NAME = "node.lock"


def _key(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class StoreChanged(EsError):
    """A write refused because the engine's files were deleted or replaced underneath: a 500
    ``already_closed_exception``, Lucene's ``AlreadyClosedException`` for a lock whose file
    changed (NativeFSLockFactory.java)."""

    def __init__(self, reason: str) -> None:
        super().__init__(500, "already_closed_exception", reason)


class StoreIdentity:
    """The files this process opened in an engine directory, to compare with what the paths
    name now."""

    def __init__(self, root: Path, db_path: Path) -> None:
        self.root, self.db_path, self.lock_path = root, db_path, root / LOCK_NAME
        self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)  # held open: see module doc
        self._lock_key = _key(os.fstat(self._fd))
        self._db_key = _key(os.stat(db_path))
        self._logged = threading.Event()

    def problem(self) -> str | None:
        """What changed (None: both paths still name the files this process opened)."""
        for path, key in ((self.lock_path, self._lock_key), (self.db_path, self._db_key)):
            try:
                if _key(os.stat(path)) != key:
                    return f"[{path}] was replaced by another file"
            except FileNotFoundError:
                return f"[{path}] was deleted"
            except OSError as e:
                return f"[{path}] cannot be checked ({e.strerror or e})"
        return None

    def valid(self) -> bool:
        return self.problem() is None

    def check(self) -> None:
        """Raise :class:`StoreChanged` (and log it, once) when the engine's files changed."""
        problem = self.problem()
        if problem is None:
            return
        reason = (
            f"Underlying file changed by an external force: {problem} while this process had the engine "
            f"[{self.root}] open; writes are refused, since they would go to a file no longer in the "
            "directory and be lost. Restart the process (or reopen the engine) to use what the directory "
            "holds now"
        )
        if not self._logged.is_set():
            self._logged.set()
            log.error("engine [%s]: %s; refusing writes", self.root, problem)
        raise StoreChanged(reason)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


__all__ = ["LOCK_NAME", "StoreChanged", "StoreIdentity"]
