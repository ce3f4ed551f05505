"""A full disk, named: what the engine answers when a write finds no space left.

SQLite says ``database or disk is full`` (``SQLITE_FULL``) and the segment writer gets ``OSError``
``ENOSPC`` (``No space left on device``) or ``EDQUOT`` (``Disk quota exceeded``). Each is answered
as Elasticsearch answers an ``IOException`` that reaches the REST layer: status 500, type
``i_o_exception``, the operating system's message first -- ``Translog#add`` rethrows the
``IOException`` of a write that found the disk full (``catch (AlreadyClosedException | IOException
ex) { closeOnTragicEvent(ex); throw ex; }``, elastic/elasticsearch
``server/src/main/java/org/elasticsearch/index/translog/Translog.java``) and ``ExceptionsHelper.status``
makes any exception that is not an ``ElasticsearchException`` a 500
(``server/src/main/java/org/elasticsearch/ExceptionsHelper.java``). The reason goes on to name the
file or folder and what to do.

Why not the 429 ``cluster_block_exception`` of the flood-stage watermark (``index [x] blocked by:
[TOO_MANY_REQUESTS/12/disk usage exceeded flood-stage watermark, index has read-only-allow-delete
block];``, ``IndexMetadata.INDEX_READ_ONLY_ALLOW_DELETE_BLOCK``): Elasticsearch sets that block
while space is still left, from its disk monitor; the engine has no monitor and meets the full
disk itself, and a 429 is what clients retry (``elasticsearch-py`` and scholar-es's own client
retry 429, not 500), so a full disk would look like load. A 500 is answered once, and the
message names the disk.

The engine stays up: the failed transaction is rolled back whole (nothing of the request is
written), reads go on, and once space is freed the next write succeeds without a restart. A
failed segment save removes what it had written (:func:`engine.index.commit.write_commit`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from scholar_es.engine.errors import EsError

#: the operating system's "no space" errors: the filesystem is full, or the user's quota is
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def _no_space_left(path: str | Path | None) -> bool:
    """Whether the filesystem holding ``path`` (or its nearest existing parent) has no block left
    for this process: SQLite reports a write that failed for lack of space in some places as a
    plain ``disk I/O error`` (a quota, the shared-memory file), which only the filesystem tells apart."""
    if path is None:
        return False
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        st = os.statvfs(p)
    except OSError:
        return False
    return st.f_bavail == 0 if os.geteuid() != 0 else st.f_bfree == 0


def full_detail(exc: BaseException, path: str | Path | None = None) -> str | None:
    """The operating system's or SQLite's words for ``exc`` when it is a write that found no space
    left (``path``: where it wrote, for SQLite's I/O errors), else None."""
    if isinstance(exc, OSError) and exc.errno in FULL_ERRNOS:
        return exc.strerror or os.strerror(exc.errno)
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
        if code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and _no_space_left(path)):
            return f"{os.strerror(errno.ENOSPC)} (SQLite: {exc})"
    return None


#: what a failed write request leaves: its transaction is rolled back whole
NOT_WRITTEN = "nothing of this request was written; reads go on"
#: what a failed segment save leaves: the documents are in SQLite, the segment files a cache
SAVE_NOTE = "the documents are stored and searchable; a later refresh writes the segment files"


class DiskFull(EsError):
    """A write that found the disk (or the quota) full: 500 ``i_o_exception``, the system's message
    first, then what could not be written and what to do (see the module's docstring)."""

    def __init__(self, detail: str, what: str, path: str | Path | None, note: str = NOT_WRITTEN) -> None:
        where = f" [{path}]" if path is not None else ""
        super().__init__(
            500,
            "i_o_exception",
            f"{detail}: could not write {what}{where}; free space on that filesystem, then retry ({note})",
        )


def disk_full(
    exc: BaseException, what: str, path: str | Path | None = None, note: str = NOT_WRITTEN
) -> DiskFull | None:
    """The :class:`DiskFull` that names ``exc``, when ``exc`` is a write that found no space left."""
    detail = full_detail(exc, path)
    return None if detail is None else DiskFull(detail, what, path, note)


def raise_if_full(
    exc: BaseException, what: str, path: str | Path | None = None, note: str = NOT_WRITTEN
) -> None:
    """Raise the :class:`DiskFull` naming ``exc`` (chained to it) when ``exc`` found the disk full;
    return otherwise (the caller re-raises ``exc``)."""
    err = disk_full(exc, what, path, note)
    if err is not None:
        raise err from exc


@contextlib.contextmanager
def naming_full_disk(what: str, path: str | Path | None = None, note: str = NOT_WRITTEN) -> Iterator[None]:
    """Turn a write inside the block that finds the disk full into a :class:`DiskFull`."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        raise_if_full(exc, what, path, note)
        raise


def rollback(db: sqlite3.Connection) -> None:
    """Roll back ``db``'s transaction, if it still has one, without masking the error that made
    the caller roll back: a COMMIT that failed (a full disk) may already have rolled the
    transaction back, and a ROLLBACK then raises ``cannot rollback - no transaction is active``."""
    if db.in_transaction:
        with contextlib.suppress(sqlite3.Error):  # the caller's error is the one to report
            db.execute("ROLLBACK")


__all__ = [
    "FULL_ERRNOS",
    "NOT_WRITTEN",
    "SAVE_NOTE",
    "DiskFull",
    "disk_full",
    "full_detail",
    "naming_full_disk",
    "raise_if_full",
    "rollback",
]
