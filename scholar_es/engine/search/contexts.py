"""Search contexts: what a scroll or a point in time keeps between requests.

A context pins one index's state: an immutable :class:`~engine.index.segment.Segment` snapshot and
a SQLite read transaction on a connection of its own (:meth:`Store.pinned_reader`) that sees
exactly that state, so later pages (and their ``_source``) come from the moment the context
opened, whatever is written since -- as Elasticsearch keeps a Lucene reader open. It costs what
a held reader costs there: the snapshot's arrays stay in memory and SQLite's WAL cannot be
checkpointed past the oldest open transaction until the context is freed.

Contexts live in the process that opened them, in one :class:`Registry` per engine; their ids
name the registry (a random token) and the context, so an id from another process, a restarted
server or a freed context is answered 404 ``search_context_missing_exception``, never another
context. ``scholar-es serve --workers N`` (N > 1) refuses to open them (:func:`refuse`): a
follow-up request would land on any worker.

Bounds, as Elasticsearch's settings (SearchService):

* a keep-alive longer than ``search.max_keep_alive`` (24h) is refused with its message;
* at most ``search.max_open_scroll_context`` (500) scroll contexts, then 429
  ``too_many_scroll_contexts_exception`` (TooManyScrollContextsException); point-in-time
  contexts, which Elasticsearch does not count, are bounded by the engine at
  ``MAX_OPEN_PIT_CONTEXT`` (429 ``es_rejected_execution_exception``, naming the bound);
* an expired context is freed by a reaper thread (every ``REAP_EVERY_S``, as
  ``search.keep_alive_interval``) and on every registry access.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scholar_es.engine.errors import EsError, illegal_argument

MAX_KEEP_ALIVE_MS = 24 * 3600 * 1000  # search.max_keep_alive
MAX_OPEN_SCROLL_CONTEXT = 500  # search.max_open_scroll_context
MAX_OPEN_PIT_CONTEXT = 500  # the engine's own bound (a snapshot and a SQLite connection each)
REAP_EVERY_S = 5.0

#: set by ``serve --workers N``: why contexts cannot be opened in this process (None: they can)
_refused: str | None = None


def refuse(reason: str | None) -> None:
    """Refuse scroll and point in time in this process from now on (None: allow them again)."""
    global _refused
    _refused = reason


# --- time values --------------------------------------------------------------------------

_UNITS = {"nanos": 1e-6, "micros": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_TIME = re.compile(r"^(-?\d+(?:\.\d+)?)(nanos|micros|ms|s|m|h|d)$")


def parse_time(value: Any, setting: str) -> int:
    """``TimeValue.parseTimeValue``: a duration in milliseconds (``1m``, ``30s``, ``500ms``...)."""
    text = str(value).strip().lower()
    m = _TIME.match(text)
    if m is None:
        raise EsError(
            400,
            "parse_exception",
            f"failed to parse setting [{setting}] with value [{value}] as a time value: unit is missing or "
            "unrecognized",
        )
    number = float(m[1])
    if number < 0:
        raise EsError(
            400,
            "parse_exception",
            f"failed to parse setting [{setting}] with value [{value}] as a time value: negative durations "
            "are not supported",
        )
    return int(number * _UNITS[m[2]])


def format_time(ms: int) -> str:
    """``TimeValue.toString()``: the largest unit that fits, one decimal at most (``1.5d``, ``2m``)."""
    for unit in ("d", "h", "m", "s"):
        if ms >= _UNITS[unit]:
            text = f"{round(ms / _UNITS[unit], 1):.1f}".removesuffix(".0")
            return text + unit
    return f"{ms}ms"


def check_keep_alive(ms: int) -> None:
    """SearchService.checkKeepAliveLimit."""
    if ms > MAX_KEEP_ALIVE_MS:
        raise illegal_argument(
            f"Keep alive for request ({format_time(ms)}) is too large. It must be less than "
            f"({format_time(MAX_KEEP_ALIVE_MS)}). This limit can be set by changing the "
            "[search.max_keep_alive] cluster level setting."
        )


# --- errors -------------------------------------------------------------------------------


class ContextMissing(EsError):
    """SearchContextMissingException (404), as a search whose only shard failed reports it:
    ``search_phase_execution_exception`` "all shards failed", the missing context as its cause."""

    def __init__(self, ctx_id: int | str) -> None:
        super().__init__(
            404, "search_context_missing_exception", f"No search context found for id [{ctx_id}]"
        )

    def to_body(self) -> dict[str, Any]:
        cause = self.cause()
        return {
            "error": {
                "root_cause": [cause],
                "type": "search_phase_execution_exception",
                "reason": "all shards failed",
                "phase": "query",
                "grouped": True,
                "failed_shards": [{"shard": -1, "index": None, "reason": cause}],
                "caused_by": cause,
            },
            "status": 404,
        }


# --- contexts -----------------------------------------------------------------------------


class Pinned:
    """One index's snapshot and the SQLite read transaction of the same state, held open."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.reader = handle.store.pinned_reader()
        try:
            self.seg = handle.snapshot_of(self.reader)
        except BaseException:
            self.reader.close()
            raise

    def close(self) -> None:
        self.reader.close()


@dataclass
class Context:
    id: int
    kind: str  # "scroll" or "pit"
    keep_alive_ms: int
    pinned: Pinned
    expires: float = 0.0
    #: held while a request uses the context (the pinned connection serves one at a time)
    lock: threading.Lock = field(default_factory=threading.Lock)
    state: Any = None  # a scroll's SearchRun and position (engine/rest/scroll.py)
    closed: bool = False

    def touch(self, keep_alive_ms: int | None = None) -> None:
        if keep_alive_ms is not None:
            self.keep_alive_ms = keep_alive_ms
        self.expires = time.monotonic() + self.keep_alive_ms / 1000


class Registry:
    """The open contexts of one engine in this process."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(8)
        self._lock = threading.Lock()
        self._contexts: dict[int, Context] = {}
        self._next = 0
        self._opening = {"scroll": 0, "pit": 0}
        self._reaper: threading.Thread | None = None

    # ids: url-safe base64 of "<kind>:<registry token>:<context number>"
    def encode(self, ctx: Context) -> str:
        raw = f"{ctx.kind}:{self.token}:{ctx.id}".encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def _decode(self, kind: str, text: Any) -> int:
        """The context number of an id this registry issued; ContextMissing for a well-formed id of
        another process; an id that does not parse: Elasticsearch's parse errors."""
        try:
            raw = str(text)
            parts = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode().split(":")
            if len(parts) != 3 or parts[0] != kind:
                raise ValueError(text)
            number = int(parts[2])
        except (ValueError, binascii.Error, UnicodeDecodeError):
            # ParsedScrollId / SearchContextId.decode
            raise illegal_argument(
                "Cannot parse scroll id" if kind == "scroll" else f"invalid id: [{text}]"
            ) from None
        if parts[1] != self.token:
            raise ContextMissing(number)
        return number

    def open(self, kind: str, keep_alive_ms: int, handle) -> Context:
        if _refused is not None:
            raise illegal_argument(_refused)
        check_keep_alive(keep_alive_ms)
        self.reap()
        with self._lock:
            # contexts being opened count too, so concurrent opens cannot pass the bound together
            open_now = sum(1 for c in self._contexts.values() if c.kind == kind) + self._opening[kind]
            if kind == "scroll" and open_now >= MAX_OPEN_SCROLL_CONTEXT:
                raise EsError(
                    429,
                    "too_many_scroll_contexts_exception",
                    f"Trying to create too many scroll contexts. Must be less than or equal to: "
                    f"[{MAX_OPEN_SCROLL_CONTEXT}]. This limit can be set by changing the "
                    "[search.max_open_scroll_context] setting.",
                )
            if kind == "pit" and open_now >= MAX_OPEN_PIT_CONTEXT:
                raise EsError(
                    429,
                    "es_rejected_execution_exception",
                    f"Trying to create too many point in time contexts. Must be less than or equal to: "
                    f"[{MAX_OPEN_PIT_CONTEXT}] (the embedded engine's bound: each holds a snapshot and a "
                    "SQLite read transaction); close the ones you are done with (DELETE /_pit)",
                )
            self._next += 1
            number = self._next
            self._opening[kind] += 1
        try:
            ctx = Context(number, kind, keep_alive_ms, Pinned(handle))
            ctx.touch()
            with self._lock:
                self._contexts[number] = ctx
                self._start_reaper()
        finally:
            with self._lock:
                self._opening[kind] -= 1
        return ctx

    def get(self, kind: str, text: Any) -> Context:
        number = self._decode(kind, text)
        self.reap()
        with self._lock:
            ctx = self._contexts.get(number)
        if ctx is None:
            raise ContextMissing(number)
        return ctx

    def free(self, kind: str, text: Any) -> bool:
        """Free the context ``text`` names; False when there is none (expired, freed, another process's)."""
        try:
            number = self._decode(kind, text)
        except ContextMissing:
            return False
        return self._free(number)

    def free_all(self, kind: str) -> int:
        with self._lock:
            numbers = [n for n, c in self._contexts.items() if c.kind == kind]
        return sum(self._free(n) for n in numbers)

    def _free(self, number: int) -> bool:
        with self._lock:
            ctx = self._contexts.pop(number, None)
        if ctx is None:
            return False
        with ctx.lock:  # a request using it finishes first
            ctx.closed = True
            ctx.pinned.close()
        return True

    def reap(self) -> None:
        now = time.monotonic()
        with self._lock:
            expired = [n for n, c in self._contexts.items() if c.expires < now and not c.lock.locked()]
        for n in expired:
            self._free(n)

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for c in self._contexts.values() if c.kind == kind)

    def _start_reaper(self) -> None:
        """(Under ``_lock``.) A daemon thread that frees expired contexts while any is open."""
        if self._reaper is not None and self._reaper.is_alive():
            return
        ref = weakref.ref(self)

        def loop() -> None:
            while True:
                time.sleep(REAP_EVERY_S)
                reg = ref()
                if reg is None:
                    return
                reg.reap()
                with reg._lock:
                    if not reg._contexts:
                        reg._reaper = None
                        return
                del reg

        self._reaper = threading.Thread(target=loop, name="scholar-es-context-reaper", daemon=True)
        self._reaper.start()


_REGISTRIES: weakref.WeakKeyDictionary[Any, Registry] = weakref.WeakKeyDictionary()
_REGISTRIES_LOCK = threading.Lock()


def registry(engine) -> Registry:
    """The context registry of ``engine`` in this process."""
    with _REGISTRIES_LOCK:
        reg = _REGISTRIES.get(engine)
        if reg is None:
            reg = _REGISTRIES[engine] = Registry()
        return reg


def using(ctx: Context, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` while holding ``ctx`` (its pinned connection serves one request at a time)."""
    with ctx.lock:
        if ctx.closed:  # freed (expired, cleared) between the look-up and now
            raise ContextMissing(ctx.id)
        return fn()
