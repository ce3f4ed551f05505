"""The in-flight requests circuit breaker: a bound on the body bytes a server process holds at once.

Elasticsearch charges every request's content length to its ``in_flight_requests`` breaker
before handling it and releases it once the answer is sent; a request that would take the
breaker's estimate over its limit is answered 429 ``circuit_breaking_exception`` and never
read further. The estimate is the bytes in flight times ``network.breaker.inflight_requests.overhead``
(2 by default: the raw request and the structured objects parsed from it), as
``ChildMemoryCircuitBreaker.limit`` computes it; the message is ``circuitBreak``'s
(server/src/main/java/org/elasticsearch/common/breaker/ChildMemoryCircuitBreaker.java).

The breaker is per process (as Elasticsearch's is per node): with ``--workers N`` each worker
holds up to the limit. A body whose length is declared (``Content-Length``) is charged whole
before any of it is read; a chunked body is charged as its chunks arrive.
"""

from __future__ import annotations

import os
import threading

from scholar_es.serve.errors import error_response

OVERHEAD = 2  # network.breaker.inflight_requests.overhead default
LABEL = "<http_request>"  # the label Elasticsearch charges a request body under
NAME = "in_flight_requests"


def default_limit() -> int:
    """A quarter of the machine's physical memory (Elasticsearch's default is 100% of its heap,
    which the JVM sizes to half the memory or less; a Python process has no heap to be bounded
    by, so a fixed share of the memory stands in for it)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):  # no sysconf (not POSIX): 2 GiB
        return 2 * 1024**3


def byte_size(n: int) -> str:
    """``ByteSizeValue.toString()``: the largest unit the value reaches, one decimal truncated
    and dropped when 0 (``Strings.format1Decimals``): 976.5kb, 60mb, 512b."""
    value, suffix = float(n), "b"
    for unit, name in ((1024**5, "pb"), (1024**4, "tb"), (1024**3, "gb"), (1024**2, "mb"), (1024, "kb")):
        if n >= unit:
            value, suffix = n / unit, name
            break
    whole, _, frac = repr(value).partition(".")
    return f"{whole}{suffix}" if frac[:1] in ("", "0") else f"{whole}.{frac[0]}{suffix}"


class CircuitBreakingError(Exception):
    def __init__(self, wanted: int, limit: int) -> None:
        reason = (
            f"[{NAME}] Data too large, data for [{LABEL}] would be [{wanted}/{byte_size(wanted)}], "
            f"which is larger than the limit of [{limit}/{byte_size(limit)}]"
        )
        super().__init__(reason)
        self.reason, self.wanted, self.limit = reason, wanted, limit

    def response(self):
        # the body must not be read further: the connection closes with the answer
        return error_response(
            429,
            "circuit_breaking_exception",
            self.reason,
            headers={"Connection": "close"},
            bytes_wanted=self.wanted,
            bytes_limit=self.limit,
            durability="TRANSIENT",
        )


class InFlightBreaker:
    """Bytes of request bodies held by this process; :meth:`charge` refuses past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._lock = threading.Lock()  # the event loop charges, but a release may come from anywhere

    def charge(self, n: int) -> None:
        """Add ``n`` bytes, or raise :class:`CircuitBreakingError` (nothing added) if the estimate
        would pass the limit."""
        with self._lock:
            wanted = (self.used + n) * OVERHEAD
            if self.limit >= 0 and wanted > self.limit:
                raise CircuitBreakingError(wanted, self.limit)
            self.used += n

    def release(self, n: int) -> None:
        with self._lock:
            self.used -= n
