"""When a write is durable: Elasticsearch's ``index.translog.durability`` for the SQLite store.

Elasticsearch fsyncs its translog before it acknowledges a write request
(``index.translog.durability: request``, the default) or, with ``async``, in the background every
``index.translog.sync_interval`` (5 s; at least 100 ms), so a crash may lose the writes of the
last interval (``IndexSettings.INDEX_TRANSLOG_DURABILITY_SETTING`` and
``INDEX_TRANSLOG_SYNC_INTERVAL_SETTING`` in elastic/elasticsearch's
server/src/main/java/org/elasticsearch/index/IndexSettings.java).

The engine's translog is SQLite's write-ahead log. ``request`` commits with
``PRAGMA synchronous=FULL``: in WAL mode SQLite fsyncs the WAL at every commit, so an
acknowledged write request is on disk. ``async`` commits with ``synchronous=NORMAL`` (the WAL is
fsynced only at checkpoints) and a :class:`WalSyncer` fsyncs the WAL ``sync_interval`` after the
first unsynced commit. All indices of an engine share one database and one WAL, so the setting
of the index a write request goes to decides how that request commits (a ``_bulk`` touching
several indices commits once per index); an fsync of the WAL makes every earlier commit durable,
whichever index it was for. Changes of index definitions, aliases and stored scripts always
commit with ``FULL``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from scholar_es.engine.errors import EsError, illegal_argument
from scholar_es.engine.validate import check_time_value

log = logging.getLogger("scholar_es.engine")

DURABILITY = "translog.durability"
SYNC_INTERVAL = "translog.sync_interval"
DEFAULT_SYNC_INTERVAL = "5s"  # IndexSettings.INDEX_TRANSLOG_SYNC_INTERVAL_SETTING's default
MIN_SYNC_INTERVAL_S = 0.1  # ... and its minimum, TimeValue.timeValueMillis(100)
_UNITS = {"nanos": 1e-9, "micros": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_TIME = re.compile(r"(-?[0-9]+)\s*(nanos|micros|ms|s|m|h|d)")


@dataclass(frozen=True)
class Durability:
    """How one index's write requests commit: ``sync_interval`` None is ``request``."""

    sync_interval: float | None = None

    @property
    def request(self) -> bool:
        return self.sync_interval is None


REQUEST = Durability()


def _text(value: object) -> str:
    """A settings value as Elasticsearch's flat settings hold it: a string."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _seconds(key: str, value: object) -> float:
    """A time value in seconds, with Elasticsearch's errors (``Setting.get`` turns the parser's
    ``ElasticsearchParseException`` into an ``IllegalArgumentException`` of the same message)."""
    text = _text(value)
    try:
        check_time_value(key, text)
    except EsError as e:
        raise illegal_argument(e.reason) from None
    stripped = text.strip().lower()
    if stripped in ("-1", "0"):
        return float(stripped)
    match = _TIME.fullmatch(stripped)
    if match is None:  # pragma: no cover - check_time_value accepted it
        raise illegal_argument(f"failed to parse setting [{key}] with value [{text}] as a time value")
    return int(match[1]) * _UNITS[match[2]]


def check_translog(translog: dict) -> dict:
    """The ``translog`` group of an index's settings, validated; returns it with the values as
    given (strings; None for null), as Elasticsearch shows them in GET _settings. Anything but ``durability``
    and ``sync_interval`` is refused by name: the engine implements nothing else of it."""
    out: dict = {}
    for key, value in translog.items():
        full = f"index.translog.{key}"
        if value is None and key in ("durability", "sync_interval"):
            out[key] = None  # null: the default (PUT _settings resets it)
        elif key == "durability":
            text = _text(value)
            if text.upper() not in ("REQUEST", "ASYNC"):
                # Setting.enumSetting: Enum.valueOf(Translog.Durability.class, value.toUpperCase(ROOT))
                raise illegal_argument(
                    f"No enum constant org.elasticsearch.index.translog.Translog.Durability.{text.upper()}"
                )
            out[key] = text
        elif key == "sync_interval":
            text = _text(value)
            if _seconds(full, text) < MIN_SYNC_INTERVAL_S:
                # Setting.parseTimeValue's bound check (Setting.java)
                raise illegal_argument(
                    f"failed to parse value [{text}] for setting [{full}], must be >= [100ms]"
                )
            out[key] = text
        else:
            raise illegal_argument(
                f"setting [{full}] is not supported by the embedded engine; of the translog settings it "
                "implements [index.translog.durability] and [index.translog.sync_interval]"
            )
    return out


def of_settings(settings: dict) -> Durability:
    """The durability an index's (validated) settings ask for."""
    translog = settings.get("translog") or {}
    if str(translog.get("durability") or "request").upper() != "ASYNC":
        return REQUEST
    return Durability(
        _seconds(f"index.{SYNC_INTERVAL}", translog.get("sync_interval") or DEFAULT_SYNC_INTERVAL)
    )


class WalSyncer:
    """Fsyncs an engine's WAL at most ``interval`` seconds after a commit that did not (``async``
    durability): Elasticsearch's ``IndexService.AsyncTranslogFSync`` (``maybeSyncTranslog``). One timer
    runs at a time; a commit with ``FULL`` durability syncs the whole WAL and cancels nothing
    (the timer's fsync then finds nothing to write)."""

    def __init__(self, wal: Path) -> None:
        self.wal = wal
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._due = 0.0

    def dirty(self, interval: float) -> None:
        """A commit was not fsynced: sync within ``interval`` seconds."""
        due = time.monotonic() + interval
        with self._lock:
            if self._timer is not None and self._due <= due:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._due = due
            self._timer = threading.Timer(interval, self._fire)
            self._timer.daemon = True  # a process exiting syncs in close() (atexit)
            self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            self._timer = None
        self.sync()

    def sync(self) -> None:
        """Fsync the WAL now: every commit written to it so far is durable afterwards (SQLite's
        ``FULL`` does the same fsync at each commit). A WAL that is gone was checkpointed into
        the database, which a checkpoint fsyncs."""
        try:
            fd = os.open(self.wal, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as e:  # pragma: no cover - logged: the next FULL commit or checkpoint syncs
            log.warning("could not open %s to fsync it: %s", self.wal, e)
            return
        try:
            os.fsync(fd)
        except OSError as e:  # pragma: no cover - a disk error; the next commit reports it
            log.warning("fsync of %s failed: %s", self.wal, e)
        finally:
            os.close(fd)

    def flush(self) -> None:
        """Sync what is pending now, and cancel the timer (engine close, process exit)."""
        with self._lock:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
            with contextlib.suppress(OSError):
                self.sync()


__all__ = [
    "DURABILITY",
    "Durability",
    "REQUEST",
    "SYNC_INTERVAL",
    "WalSyncer",
    "check_translog",
    "of_settings",
]
