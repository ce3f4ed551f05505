"""Request bodies parsed under the limits Elasticsearch's JSON parser sets.

Elasticsearch reads request bodies with Jackson, whose ``StreamReadConstraints`` (jackson-core
2.15+, the versions Elasticsearch 8.x/9.x ship) refuse hostile input before any of it is used:

* ``maxNestingDepth`` 1000 (``StreamReadConstraints.DEFAULT_MAX_DEPTH``): "Document nesting depth
  (1001) exceeds the maximum allowed (1000, from `StreamReadConstraints.getMaxNestingDepth()`)";
* ``maxNumberLength`` 1000 (``DEFAULT_MAX_NUM_LEN``): "Number value length (5000) exceeds the
  maximum allowed (1000, from `StreamReadConstraints.getMaxNumberLength()`)";
* ``NaN``/``Infinity`` are not JSON: Jackson refuses them unless ``ALLOW_NON_NUMERIC_NUMBERS``.

One deliberate difference: a literal beyond the double range (``1e400``) is refused here, where
Jackson reads it as Infinity and lets it reach scores; integers of up to 1,000 digits
(``10**400``) parse, and the value checks (:mod:`engine.validate`) refuse them where a float is
expected.

Elasticsearch's ``JsonXContentParser`` turns these into ``x_content_parse_exception`` (400).
Python's ``json`` would instead recurse until ``RecursionError`` (about 1,000 levels), turn a
5,000-digit integer into ``ValueError`` (``sys.int_info`` 4,300-digit limit) and accept ``NaN``.

Speed: a body is first given to ``orjson`` (several times faster, most of all on vectors, whose
every float the ``json`` path hands to a Python callback). ``orjson`` answers exactly as the
``json`` path above does for what it accepts, except integers beyond 64 bits (it returns them
as floats) and numbers over the length limit; a text that may hold either (:func:`number_risk`) and
every text ``orjson`` refuses (syntax errors, ``NaN``, ``1e400``, lone surrogates, nesting past
1,024) go through the ``json`` path, so results and error messages are the ``json`` path's.
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np
import orjson

from scholar_es.engine.errors import EsError, x_content_parse_error

MAX_NESTING_DEPTH = 1000  # Jackson StreamReadConstraints.DEFAULT_MAX_DEPTH
MAX_NUMBER_LENGTH = 1000  # Jackson StreamReadConstraints.DEFAULT_MAX_NUM_LEN


class JsonSyntaxError(EsError):
    """Text that is not JSON at all (as opposed to JSON over a limit)."""

    def __init__(self, msg: str, line: int, col: int) -> None:
        super().__init__(400, "x_content_parse_exception", f"[{line}:{col}] {msg}", line=line, col=col)
        self.msg, self.line, self.col = msg, line, col


def _number_too_long(text: str) -> EsError:
    return x_content_parse_error(
        f"Number value length ({len(text)}) exceeds the maximum allowed ({MAX_NUMBER_LENGTH}, from "
        "`StreamReadConstraints.getMaxNumberLength()`)"
    )


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_LENGTH:
        raise _number_too_long(text)
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_LENGTH:
        raise _number_too_long(text)
    out = float(text)
    if math.isinf(out):
        # Jackson would read 1e400 as Infinity and let it reach scores as a wrong answer; refused
        raise x_content_parse_error(
            f"Numeric value ({text[:40]}) out of range of double (+/-{sys.float_info.max:g})"
        )
    return out


def _parse_constant(name: str) -> Any:
    raise x_content_parse_error(
        f"Non-standard token '{name}': enable `JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS` to allow"
    )


# number_risk's view of a text: digits -> "0", "." -> ".", "e"/"E" -> "e", anything else -> " "
_NUMBER_VIEW = bytes(
    48 if 48 <= c <= 57 else c if c == 46 else 101 if c in (101, 69) else 32 for c in range(256)
)
_LONG_RUN = b"0" * 80  # a number over MAX_NUMBER_LENGTH characters has a longer run of digits
_INT_START = b" " + b"0" * 19  # 19 digits after a non-number character: an integer part


def number_risk(raw: bytes) -> bool:
    """Whether ``raw`` may hold an integer literal of 19+ digits (orjson reads one beyond 64 bits
    as a float) or a number near the length limit (orjson has none). Inside strings a match
    only costs speed. A C-speed scan (translate + substring search), about 1 ns a byte."""
    view = raw.translate(_NUMBER_VIEW)
    if _LONG_RUN in view or view.startswith(_INT_START[1:]):
        return True
    n, at = len(view), view.find(_INT_START)
    while at != -1:
        end = at + len(_INT_START)
        while end < n and view[end] == 48:
            end += 1
        if end == n or view[end] not in (46, 101):  # not followed by a fraction or exponent
            return True
        at = view.find(_INT_START, end)
    return False


_FLOAT_MIN_NORMAL = float(np.finfo(np.float32).tiny)


def java_float(value: Any) -> float:
    """The number a client reads where Elasticsearch writes ``value`` as a Java ``float`` (a hit's
    ``_score``, ``max_score``, an explanation's ``value``, a ``float`` field's value in ``fields``):
    Jackson writes a float as its shortest decimal (Float.toString since JDK 19, Schubfach), e.g.
    ``0.2876821``, which reads as another double than the float's own expansion
    (0.28768208622932434); both round to the same float. Where one digit would do, Java picks the
    closest decimal of one or two digits (``1.4E-45``, not ``1E-45``). NaN and infinities as
    themselves (the writers decide how they show)."""
    f = np.float32(value)
    x = float(f)
    if not math.isfinite(x):
        return x
    if abs(x) < _FLOAT_MIN_NORMAL:
        # a subnormal float is far coarser than two digits: where NumPy's shortest decimal has
        # one digit, the closest decimal of two may be another (for a normal float whose one-digit
        # decimal reads back, that decimal is also the closest of two digits)
        text = str(f)
        if len(text.split("e")[0].replace("-", "").replace(".", "").strip("0")) <= 1:
            return float(np.format_float_scientific(f, precision=1, unique=False))
    return float(str(f))  # NumPy's shortest decimal that reads back as f


def nesting_depth(text: str) -> int:
    """The deepest ``[``/``{`` nesting of a JSON text (brackets inside strings not counted)."""
    raw = text.encode("utf-8", "surrogatepass")
    if b"[" not in raw and b"{" not in raw:
        return 0
    b = np.frombuffer(raw, dtype=np.uint8)
    quote = np.flatnonzero(b == ord('"'))
    inside = np.zeros(len(b), dtype=bool)
    if len(quote):
        # a quote is escaped when an odd run of backslashes precedes it
        pos = np.arange(len(b))
        last_plain = np.maximum.accumulate(np.where(b != ord("\\"), pos, -1))
        before = np.maximum(quote - 1, 0)
        run = np.where(quote > 0, before - last_plain[before], 0)
        real = quote[run % 2 == 0]
        toggles = np.zeros(len(b), dtype=np.int64)
        toggles[real] = 1
        inside = np.cumsum(toggles) % 2 == 1  # from an opening quote up to (not after) its close
    step = np.zeros(len(b), dtype=np.int64)
    step[(b == ord("[")) | (b == ord("{"))] = 1
    step[(b == ord("]")) | (b == ord("}"))] = -1
    step[inside] = 0
    return int(np.cumsum(step).max(initial=0))


def too_deep(depth: int) -> EsError:
    """Jackson's refusal of a document nested past ``MAX_NESTING_DEPTH``."""
    return x_content_parse_error(
        f"Document nesting depth ({depth}) exceeds the maximum allowed ({MAX_NESTING_DEPTH}, from "
        "`StreamReadConstraints.getMaxNestingDepth()`)"
    )


def loads(text: str, checked: bool = False) -> Any:
    """``json.loads`` with Jackson's limits; an ``x_content_parse_exception`` EsError on refusal.
    ``checked``: the caller found no :func:`number_risk` in a text holding this one (one scan
    of a whole NDJSON body instead of one per line)."""
    # depth can only pass the limit with more openers than that (str.count: cheap on every body)
    openers = text.count("[") + text.count("{")
    depth = nesting_depth(text) if openers > MAX_NESTING_DEPTH else 0
    if depth > MAX_NESTING_DEPTH:
        raise too_deep(depth)
    if checked or not number_risk(text.encode("utf-8", "surrogatepass")):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # the json path refuses it with its own message (or accepts it: lone surrogates)
    return loads_json(text)


def loads_json(text: str) -> Any:
    """The ``json`` path of :func:`loads` alone (the reference its ``orjson`` path must match),
    after the nesting check."""
    try:
        return json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
        )
    except RecursionError:
        # within Jackson's limit but deeper than this Python process can recurse
        raise x_content_parse_error(
            f"Document nesting depth ({nesting_depth(text)}) exceeds what the embedded engine can parse"
        ) from None
    except json.JSONDecodeError as e:
        raise JsonSyntaxError(e.msg, e.lineno, e.colno) from None


def orjson_exact(obj: Any, default: Any = None) -> bytes | None:
    """orjson's compact text of ``obj``, or None where ``json`` must write it instead: orjson
    refuses ``obj`` (integers beyond 64 bits, lone surrogates, non-string keys), or its text
    holds a ``null`` that does not read back as ``obj``'s own None (orjson writes a non-finite
    float as ``null``; a text without ``null`` needs no check). The read-back is orjson's, then
    ``==`` in C (None is not NaN, a list is not a tuple): a page of ``_source`` with null fields
    is written ~4x faster than by ``json`` (issue 29). With a ``default`` hook (the client's
    serializer: numpy arrays, dates) a text with ``null`` is always left to ``json``."""
    try:
        out = orjson.dumps(obj, default=default)
    except orjson.JSONEncodeError:
        return None
    if b"null" in out:
        if default is not None:  # what the hook made of an object is not obj's: json decides
            return None
        try:
            if orjson.loads(out) != obj:
                return None
        except (ValueError, TypeError):  # an object whose == is not a bool (a numpy array)
            return None
    return out


def dumps_text(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False)`` read back alike, several times faster
    (:func:`orjson_exact`)."""
    out = orjson_exact(obj)
    return json.dumps(obj, ensure_ascii=False) if out is None else out.decode("utf-8")


def non_finite_as_strings(obj: Any) -> Any:
    """Jackson's default (``WRITE_NAN_AS_STRINGS``): a non-finite float is written as the string
    ``"Infinity"``/``"-Infinity"``/``"NaN"``, so the answer stays JSON (a script_score may return
    Infinity, which Elasticsearch allows)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "NaN" if math.isnan(obj) else ("Infinity" if obj > 0 else "-Infinity")
    if isinstance(obj, dict):
        return {k: non_finite_as_strings(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [non_finite_as_strings(v) for v in obj]
    return obj


def answer_bytes(out: Any, pretty: bool = False) -> bytes:
    """An answer's JSON, as the embedded transport and ``scholar-es serve`` write it: orjson's
    compact text where it reads back as ``json``'s would (:func:`orjson_exact`: ~20x faster on a
    page of ``_source``), else ``json``'s (indented by 2 with a final newline under ``pretty``);
    non-finite floats as Jackson's strings either way. Raises ValueError/TypeError on what no
    JSON can hold (the caller's 500)."""
    if not pretty:
        fast = orjson_exact(out)
        if fast is not None:
            return fast
    indent = 2 if pretty else None
    try:
        data = json.dumps(out, ensure_ascii=False, allow_nan=False, indent=indent)
    except ValueError:  # NaN/Infinity somewhere (rare): the slow path
        data = json.dumps(non_finite_as_strings(out), ensure_ascii=False, allow_nan=False, indent=indent)
    return (data + "\n" if pretty else data).encode("utf-8")


__all__ = [
    "answer_bytes",
    "dumps_text",
    "non_finite_as_strings",
    "loads",
    "loads_json",
    "number_risk",
    "orjson_exact",
    "JsonSyntaxError",
    "nesting_depth",
    "too_deep",
    "MAX_NESTING_DEPTH",
    "MAX_NUMBER_LENGTH",
]
