"""One error hierarchy for scholar-es.

Every error a user can cause says what was wrong, the offending value, and the fix.
Lists of valid choices are passed in by the caller from the registry that owns them
(never typed by hand in a message), see :func:`choices`.
"""

from __future__ import annotations

from collections.abc import Iterable


def choices(values: Iterable[object]) -> str:
    """Render a registry's valid values for an error message, sorted and quoted."""
    return ", ".join(repr(v) for v in sorted(map(str, values)))


class ScholarEsError(Exception):
    """Base class of every error scholar-es raises on purpose."""


class ConfigError(ScholarEsError):
    """A bad option, profile, target or model setting."""


class InputError(ScholarEsError):
    """A bad input record; carries its location so it can be reported and counted.

    ``source`` is a file name (or other origin), ``line`` is 1-based, ``field`` the JSON
    field at fault if any.
    """

    def __init__(
        self, reason: str, *, source: str = "", line: int | None = None, field: str | None = None
    ) -> None:
        self.reason = reason
        self.source = source
        self.line = line
        self.field = field
        super().__init__(self.location_text() + reason)

    def location_text(self) -> str:
        """``file:line: field 'x': `` -- the prefix of the message, empty parts left out."""
        where = str(self.source or "")
        if self.line is not None:
            where = f"{where}:{self.line}" if where else f"line {self.line}"
        parts = [where] if where else []
        if self.field:
            parts.append(f"field {self.field!r}")
        return "".join(p + ": " for p in parts)


class ModelMismatchError(ConfigError):
    """A query vector or heads made with another model or dimension than the index."""


class DiskFullError(ScholarEsError):
    """The target refused a write for lack of disk space: every later write would fail the same
    way, so a run stops with one line instead of rejecting record after record."""


#: how a write that found no space left is worded: the operating system (ENOSPC, EDQUOT), SQLite,
#: and Elasticsearch's flood-stage block (``IndexMetadata.INDEX_READ_ONLY_ALLOW_DELETE_BLOCK``)
DISK_FULL_WORDS = (
    "No space left on device",
    "Disk quota exceeded",
    "database or disk is full",
    "disk usage exceeded flood-stage watermark",
)


def is_disk_full(error: object) -> bool:
    """Whether an Elasticsearch error (a bulk item's ``error`` object, or its reason) says the disk
    is full (:data:`DISK_FULL_WORDS`)."""
    reason = error.get("reason", "") if isinstance(error, dict) else error
    return isinstance(reason, str) and any(w in reason for w in DISK_FULL_WORDS)


def disk_full_message(exc: BaseException) -> str | None:
    """One line naming the full disk when ``exc`` (or an error it was raised from) is a write that
    found no space left -- the embedded engine's ``i_o_exception``, an ``OSError`` ``ENOSPC`` /
    ``EDQUOT``, SQLite's ``database or disk is full`` -- else None. The command line prints it
    instead of a traceback (an error answered over HTTP is already one line: an ``ApiError``)."""
    from scholar_es.engine.diskfull import DiskFull, disk_full

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, DiskFull):
            return cur.reason
        named = disk_full(cur, "the engine's files", getattr(cur, "filename", None))
        if named is not None:
            return named.reason
        cur = cur.__cause__ or cur.__context__
    return None
