"""The global URL parameters that shape an answer: ``filter_path``, ``human``, ``error_trace``,
and text (``_cat``) answers.

* ``filter_path`` (``AbstractRestChannel``, ``FilterPath``, ``FilterPathBasedFilter``): a
  comma-separated list of dotted paths; a segment may hold ``*`` wildcards (``Regex.simpleMatch``)
  and ``**`` matches any number of levels; arrays are transparent (``hits.hits._id`` reaches
  every hit's ``_id``); a leading ``-`` excludes. Inclusion keeps only what lies on a matching path
  (an object or array left without a match is dropped, ``{}`` at the top); exclusion removes what
  matches, and an object or array emptied by it is dropped (one empty to begin with is kept,
  ``includeEmptyObject(contentsFiltered)``); with both, the inclusions apply first, then the
  exclusions (``JsonXContentGenerator``). Error answers are not filtered (``newErrorBuilder``).
* ``human=true`` adds ``index.creation_date_string`` next to ``index.creation_date`` in an index's
  settings (``IndexMetadata.addHumanReadableSettings``; ``GET /{index}`` and ``GET _settings``);
  the engine's other answers carry no byte-size or time field that ``human`` would spell out.
* ``error_trace=true`` adds ``stack_trace`` to an error raised while handling the request
  (``ElasticsearchException.generateThrowableXContent``): the engine's own (Python) trace.
* :class:`TextBody`: an answer that is ``text/plain`` (``_cat`` tables), written as is by the
  in-process transport and by ``serve``.
"""

from __future__ import annotations

import re
import traceback
from datetime import UTC, datetime

TEXT_CONTENT_TYPE = "text/plain; charset=UTF-8"


class TextBody(str):
    """A ``text/plain`` answer (``RestResponse.TEXT_CONTENT_TYPE``)."""

    content_type = TEXT_CONTENT_TYPE


def _segments(path: str) -> list[str]:
    """``FilterPath.parse``: split on dots not escaped with a backslash."""
    return [s.replace("\\.", ".") for s in re.split(r"(?<!\\)\.", path)]


def _glob(pattern: str, name: str) -> bool:
    if "*" not in pattern:
        return pattern == name
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), name, re.S) is not None


def _step(filters: list[list[str]], key: str) -> tuple[bool, list[list[str]]]:
    """(a filter ends at ``key``, the filters that go on below it)."""
    done, below = False, []
    todo = list(filters)
    while todo:
        f = todo.pop()
        if f[0] == "**":
            below.append(f)  # ``**`` takes this level and may take more
            if len(f) == 1:
                done = True
            else:
                todo.append(f[1:])  # ``**`` takes no level
            continue
        if _glob(f[0], key):
            if len(f) == 1:
                done = True
            else:
                below.append(f[1:])
    return done, below


_NOTHING = object()


def _include(value, filters: list[list[str]]):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            done, below = _step(filters, k)
            if done:
                out[k] = v
            elif below:
                kept = _include(v, below)
                if kept is not _NOTHING:
                    out[k] = kept
        return out if out else _NOTHING
    if isinstance(value, list):
        items = [x for x in (_include(v, filters) for v in value) if x is not _NOTHING]
        return items if items else _NOTHING
    return _NOTHING


def _exclude(value, filters: list[list[str]]):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            done, below = _step(filters, k)
            if done:
                continue
            if below and isinstance(v, (dict, list)) and v:
                kept = _exclude(v, below)
                if kept is _NOTHING:
                    continue
                out[k] = kept
            else:
                out[k] = v
        return out if out or not value else _NOTHING
    if isinstance(value, list):
        items = [x for x in (_exclude(v, filters) for v in value) if x is not _NOTHING]
        return items if items or not value else _NOTHING
    return value


def filter_path(body, spec: str):
    """``body`` as ``filter_path=spec`` writes it."""
    paths = [p.strip() for p in str(spec).split(",") if p.strip()]
    includes = [_segments(p) for p in paths if not p.startswith("-")]
    excludes = [_segments(p[1:]) for p in paths if p.startswith("-") and len(p) > 1]
    empty: list | dict = [] if isinstance(body, list) else {}
    if includes:
        body = _include(body, includes)
        if body is _NOTHING:
            return empty
    if excludes:
        body = _exclude(body, excludes)
        if body is _NOTHING:
            return empty
    return body


def _on(params: dict, name: str) -> bool:
    v = params.get(name)
    return v is not None and str(v) in ("", "true")


def shape(params: dict, status: int, body):
    """The answer of a handled request as the global parameters ask (``params`` already checked)."""
    if not params or body is None or isinstance(body, TextBody):
        return body
    if status >= 400 and isinstance(body, dict) and "error" in body:
        return body  # an error: never filtered
    spec = params.get("filter_path")
    if spec:
        return filter_path(body, spec)
    return body


def java_instant(millis: int) -> str:
    """``ZonedDateTime.toString()`` in UTC: ``2024-05-01T10:20:30.123Z`` (seconds and millis
    only when not zero)."""
    dt = datetime.fromtimestamp(millis / 1000, tz=UTC)
    out = dt.strftime("%Y-%m-%dT%H:%M")
    ms = millis % 1000
    if dt.second or ms:
        out += f":{dt.second:02d}"
        if ms:
            out += f".{ms:03d}"
    return out + "Z"


def human_settings(params: dict, index_settings: dict) -> dict:
    """``IndexMetadata.addHumanReadableSettings`` when ``human`` is on (the ``index`` object of
    an index's settings, a copy)."""
    if not _on(params, "human") or "creation_date" not in index_settings:
        return index_settings
    return {**index_settings, "creation_date_string": java_instant(int(index_settings["creation_date"]))}


def with_trace(params: dict, body: dict, exc: BaseException) -> dict:
    """``error_trace=true``: the error's ``stack_trace``."""
    if _on(params, "error_trace") and isinstance(body.get("error"), dict):
        body["error"]["stack_trace"] = "".join(traceback.format_exception(exc))
    return body
