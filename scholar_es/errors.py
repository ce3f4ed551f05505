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
