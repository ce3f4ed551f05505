"""A request body parsed in place, as the in-process transport node parses it.

The in-process node (:mod:`scholar_es.engine.rest.transport`) decodes a body to text and hands
it to :func:`scholar_es.engine.xcontent.loads` (Jackson's limits: nesting, number length, no
``NaN``), one line at a time for NDJSON. Over HTTP the same answers are given without the
copies that path makes of a large body (the text, the list of lines): the buffer the guard read
is handed to ``orjson`` directly (a ``memoryview`` per NDJSON line), which is what
``xcontent.loads`` itself does first for a text without risky numbers and within the nesting
limit. Anything ``orjson`` refuses, and every line that may hold a risky number or be nested
too deeply, goes through ``xcontent.loads`` on that line's text, so the results and the error
messages are the in-process ones.

NDJSON lines are split on ``\\n`` (Elasticsearch's bulk and msearch separator); a line of
whitespace only is skipped.
"""

from __future__ import annotations

import re
from typing import Any, cast

import orjson

from scholar_es.engine import xcontent

_NONSPACE = re.compile(rb"[^ \t\r\n\x0b\x0c]")


def _one(buf: bytearray | bytes, start: int, end: int, checked: bool) -> Any:
    openers = buf.count(b"[", start, end) + buf.count(b"{", start, end)
    if openers <= xcontent.MAX_NESTING_DEPTH and checked:
        try:
            return orjson.loads(memoryview(buf)[start:end])
        except orjson.JSONDecodeError:
            pass  # the reference path answers it (its own message, or lone surrogates accepted)
    return xcontent.loads(bytes(buf[start:end]).decode("utf-8"))


def parse(buf: bytearray | bytes, ndjson: bool) -> Any:
    """The body's value (a list of the lines' values for NDJSON); None for an empty body.
    Raises :class:`~scholar_es.engine.errors.EsError` (400) or ``UnicodeDecodeError``."""
    if not buf:
        return None
    # one scan of the whole body; number_risk only translates and searches, which a bytearray does
    # as bytes do (no copy of it made here)
    checked = not xcontent.number_risk(cast(bytes, buf))
    if not ndjson:
        return _one(buf, 0, len(buf), checked)
    out, pos, n = [], 0, len(buf)
    while pos < n:
        end = buf.find(b"\n", pos)
        end = n if end == -1 else end
        if _NONSPACE.search(buf, pos, end) is not None:
            out.append(_one(buf, pos, end, checked))
        pos = end + 1
    return out
