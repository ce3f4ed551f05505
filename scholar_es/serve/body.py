"""A request body parsed in place, with the answers the in-process transport node gives.

The in-process node (:mod:`scholar_es.engine.rest.transport`) decodes a body to text and hands
it to :func:`scholar_es.engine.xcontent.loads` (Jackson's limits: nesting, number length, no
``NaN``), one line at a time for NDJSON. Over HTTP the same answers are given without the
copies that path makes of a large body (the text, the list of lines, and for a body with more
than 1000 brackets, ``nesting_depth``'s integer arrays, about 40 bytes per body byte):

* the nesting check, where a body has more than 1000 openers, is ``nesting_depth``'s run over
  windows of the buffer (:func:`depth`), a few MB whatever the body's size;
* the buffer the guard read is handed to ``orjson`` directly (a ``memoryview`` per NDJSON line),
  which is what ``xcontent.loads`` does first for a text without risky numbers;
* anything ``orjson`` refuses, and a body that may hold a risky number, goes to
  ``xcontent.loads_json`` (``xcontent.loads`` after its nesting check) on that line's text, so
  the results and the error messages are the in-process ones.

NDJSON lines are split on ``\\n`` (Elasticsearch's bulk and msearch separator); a line of
whitespace only is skipped.
"""

from __future__ import annotations

import re
import threading
from typing import Any, cast

import numpy as np
import orjson

from scholar_es.engine import xcontent

_NONSPACE = re.compile(rb"[^ \t\r\n\x0b\x0c]")
_WINDOW = 1 << 18
_ONE_AT_A_TIME = threading.Lock()
_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN, _CLOSE = (ord("["), ord("{")), (ord("]"), ord("}"))


def depth(view: memoryview) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text, brackets inside strings not counted:
    ``xcontent.nesting_depth``'s computation, run over windows of 256 KiB with its state (inside
    a string or not, the backslashes that end the window, the depth) carried from one to the
    next, so its memory is a few MB whatever the text's size."""
    level = deepest = inside = backslashes = 0
    for at in range(0, len(view), _WINDOW):
        b = np.frombuffer(view[at : at + _WINDOW], dtype=np.uint8)
        pos = np.arange(len(b))
        last_plain = np.maximum.accumulate(np.where(b != _BACKSLASH, pos, -1))
        quote = np.flatnonzero(b == _QUOTE)
        if len(quote):
            # a quote is escaped when an odd run of backslashes precedes it (the run may have
            # begun in the window before)
            before = quote - 1
            run = np.where(before >= 0, before - last_plain[np.maximum(before, 0)], 0)
            run += np.where(last_plain[np.maximum(before, 0)] < 0, backslashes, 0)
            run[before < 0] = backslashes
            real = quote[run % 2 == 0]
            toggles = np.zeros(len(b), dtype=np.int8)
            toggles[real] = 1
            in_string = (np.cumsum(toggles, dtype=np.int64) + inside) % 2 == 1
            inside = (inside + len(real)) % 2
        else:
            in_string = np.full(len(b), inside == 1)
        step = np.zeros(len(b), dtype=np.int8)
        step[(b == _OPEN[0]) | (b == _OPEN[1])] = 1
        step[(b == _CLOSE[0]) | (b == _CLOSE[1])] = -1
        step[in_string] = 0
        sums = np.cumsum(step, dtype=np.int64)
        deepest = max(deepest, level + int(sums.max()))
        level += int(sums[-1])
        tail = len(b) - 1 - int(last_plain[-1])  # backslashes ending this window
        backslashes = backslashes + tail if tail == len(b) else tail
    return deepest


def _one(buf: bytearray | bytes, start: int, end: int, checked: bool) -> Any:
    view = memoryview(buf)[start:end]
    if buf.count(b"[", start, end) + buf.count(b"{", start, end) > xcontent.MAX_NESTING_DEPTH:
        found = depth(view)
        if found > xcontent.MAX_NESTING_DEPTH:
            raise xcontent.too_deep(found)
    if checked:
        try:
            return orjson.loads(view)
        except orjson.JSONDecodeError:
            pass  # the reference path answers it (its own message, or lone surrogates accepted)
    return xcontent.loads_json(bytes(view).decode("utf-8"))


def parse(buf: bytearray | bytes, ndjson: bool) -> Any:
    """The body's value (a list of the lines' values for NDJSON); None for an empty body.
    Raises :class:`~scholar_es.engine.errors.EsError` (400) or ``UnicodeDecodeError``.

    One body is parsed at a time in a process (callers run this off the event loop, in threads):
    parsing holds the GIL, so overlapping parses gain no speed, and each holds ``orjson``'s
    transient document (about twice the body) while it runs."""
    if not buf:
        return None
    with _ONE_AT_A_TIME:
        return _parse(buf, ndjson)


def _parse(buf: bytearray | bytes, ndjson: bool) -> Any:
    # one scan of the whole body (a translated copy, released at once); number_risk only
    # translates and searches, which a bytearray does as bytes do
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
