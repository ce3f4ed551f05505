"""A Kibana-dev-console-style request runner: ``METHOD path`` + JSON body in, one JSON line out.

Input syntax (what Kibana's Dev Tools console accepts, minus its editor conveniences)::

    # a comment (also // comments)
    PUT my-index
    {"mappings": {"properties": {"title": {"type": "text"}}}}

    POST my-index/_bulk
    {"index": {"_id": "1"}}
    {"title": "hello world"}

    GET my-index/_search?size=3
    {
      "query": {"match": {"title": "hello"}}
    }

* A request starts with a ``METHOD path`` line (GET, POST, PUT, DELETE, HEAD, PATCH; the path may
  omit its leading ``/`` and may carry a query string).
* The lines after it, if any, are its body: one JSON value that may span lines, or for ``_bulk``
  and ``_msearch`` (and their ``/{index}/`` forms) NDJSON, one JSON value per line. Kibana's
  triple-quoted strings (three double quotes around raw, possibly multi-line, text) are accepted
  inside bodies and become JSON strings.
* A request ends at a blank line, at the next ``METHOD path`` line, or at the end of input, and is
  sent as soon as it has ended; its response is written at once as ONE JSON line and flushed, so a
  program can drive the console through a pipe (write a request and a blank line, read one line).
* Lines starting with ``#`` or ``//`` are comments, wherever they appear.

Every response is one line: the response body on success (``{"status": N}`` for ``HEAD``), and
``{"error": ..., "status": N}`` on failure -- the body Elasticsearch sent for an
``elasticsearch.ApiError``, a ``console_parse_exception`` (status 400, nothing sent) for input the
console cannot turn into a request (invalid JSON, bytes that are not UTF-8), an
``x_content_parse_exception`` (status 400, nothing sent) for a body over the limits Elasticsearch's
JSON parser sets (nesting deeper than 1,000, a number longer than 1,000 characters, ``NaN``; see
:mod:`engine.xcontent`), and ``{"error": {"type": "transport_error", ...}, "status": null}``
when no answer came back (e.g. a cluster that cannot be reached).  Whatever goes wrong with one
request, the console writes its one line and goes on with the next.

Only the public client API is used (``es.perform_request``), so the same input runs against the
embedded engine and against a real cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

METHODS = ("GET", "POST", "PUT", "DELETE", "HEAD", "PATCH")
_REQUEST_LINE = re.compile(r"^\s*(" + "|".join(METHODS) + r")\s+(\S+)\s*$", re.IGNORECASE)
_TRIPLE = re.compile(r'"""(.*?)"""', re.DOTALL)
_NDJSON_ENDPOINTS = {"_bulk", "_msearch"}


class ConsoleParseError(ValueError):
    """The console could not turn the input into a request (nothing was sent)."""

    def __init__(self, message: str, type_: str = "console_parse_exception") -> None:
        super().__init__(message)
        self.type = type_


def _is_comment(line: str) -> bool:
    s = line.lstrip()
    return s.startswith("#") or s.startswith("//")


def _is_ndjson(path: str) -> bool:
    """``_bulk`` / ``_msearch`` bodies (also ``/{index}/_bulk``, ``/_msearch/template``)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    return any(p in _NDJSON_ENDPOINTS for p in parts)


def _triple_quotes(text: str) -> str:
    """Kibana's triple-quoted raw text -> a JSON string literal."""
    return _TRIPLE.sub(lambda m: json.dumps(m.group(1)), text)


def _parse_body(path: str, lines: list[str]) -> Any:
    """The request body: None, a JSON value, or (NDJSON endpoints) a list of JSON values."""
    text = _triple_quotes("\n".join(lines))
    if not text.strip():
        return None
    if _is_ndjson(path):
        items = []
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            items.append(_loads(line, f"line {n} of the NDJSON body of [{path}]"))
        return items
    return _loads(text, f"the body of [{path}]")


def _loads(text: str, what: str) -> Any:
    """One JSON value, under the limits Elasticsearch's parser sets (:mod:`engine.xcontent`):
    a body a cluster would refuse (nesting deeper than 1,000, a number longer than 1,000
    digits, NaN) is refused here with the cluster's ``x_content_parse_exception``."""
    from scholar_es.engine.errors import EsError
    from scholar_es.engine.xcontent import JsonSyntaxError, loads

    try:
        return loads(text)
    except JsonSyntaxError as e:
        raise ConsoleParseError(
            f"{what} is not valid JSON: {e.msg} (line {e.line}, column {e.col})"
        ) from None
    except EsError as e:
        raise ConsoleParseError(f"{what}: {e.reason}", e.type) from None


def _dump(obj: Any, indent: int | None = None) -> str:
    """One JSON line (``indent``: pretty-printed); text that is not valid Unicode (lone surrogates)
    is written as \\u escapes."""
    line = json.dumps(obj, ensure_ascii=False, indent=indent)
    return json.dumps(obj, indent=indent) if _SURROGATES.search(line) else line


_SURROGATES = re.compile("[\ud800-\udfff]")


def _error_line(type_: str, reason: str, status: int | None) -> dict:
    cause = {"type": type_, "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def execute(es, method: str, path: str, body: Any) -> tuple[dict | list | str | bool | None, bool]:
    """Send one request through the client; (what to print, whether it succeeded)."""
    from elasticsearch import ApiError, TransportError

    method = method.upper()
    if not path.startswith("/"):
        path = "/" + path
    headers = {"accept": "application/json"}
    if body is not None:
        headers["content-type"] = "application/x-ndjson" if _is_ndjson(path) else "application/json"
    try:
        resp = es.perform_request(method, path, body=body, headers=headers)
    except ApiError as e:
        err_body = e.body
        if isinstance(err_body, dict) and "error" in err_body:
            out = dict(err_body)
            out["status"] = e.meta.status
            return out, False
        return {
            "error": err_body if err_body not in (None, "") else str(e.message),
            "status": e.meta.status,
        }, False
    except TransportError as e:
        return _error_line("transport_error", str(e), None), False
    except Exception as e:  # noqa: BLE001 - one bad request must not end the session
        return _error_line("client_exception", f"{type(e).__name__}: {e}", None), False
    if method == "HEAD":
        return {"status": resp.meta.status}, 200 <= resp.meta.status < 300
    return resp.body, True


class _Request:
    __slots__ = ("method", "path", "body", "line", "in_triple", "bad_utf8")

    def __init__(self, method: str, path: str, line: int) -> None:
        self.method, self.path, self.line = method, path, line
        self.body: list[str] = []
        self.in_triple = False
        self.bad_utf8: int | None = None  # first body line holding bytes that are not UTF-8


# bytes that are not UTF-8, as a stream opened with errors="surrogateescape" (the CLI) hands them over
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _lines(stream_in: IO[str] | Iterable[str], prompt: Callable[[], None] | None = None) -> Iterator[str]:
    """Lines as they arrive (readline, so a pipe is read one request at a time); ``prompt`` is
    called before each line is read."""
    readline = getattr(stream_in, "readline", None)
    if readline is None:
        yield from stream_in
        return
    while True:
        if prompt is not None:
            prompt()
        line = readline()
        if not line:
            return
        yield line


#: the prompts of an interactive console: before a request line, and inside a request's body
PROMPT, BODY_PROMPT = "scholar-es> ", "... "


def run_console(
    es,
    stream_in: IO[str] | Iterable[str],
    stream_out: IO[str],
    *,
    prompt_to: IO[str] | None = None,
    pretty: bool = False,
) -> int:
    """Run every request read from ``stream_in`` against ``es`` (an ``elasticsearch.Elasticsearch``),
    writing one JSON line per request (or per unparseable chunk of input) to ``stream_out``.

    For a person at a terminal: ``prompt_to`` gets a prompt before each line is read
    (:data:`PROMPT`, :data:`BODY_PROMPT` inside a request), and ``pretty`` indents each response
    (2 spaces) instead of one line.

    Returns the number of requests that failed (error responses and input errors), so a CLI can
    turn it into an exit status.
    """
    failures = 0
    indent = 2 if pretty else None

    def emit(obj: Any) -> None:
        stream_out.write(_dump(obj, indent) + "\n")
        stream_out.flush()

    def finish(req: _Request | None) -> None:
        nonlocal failures
        if req is None:
            return
        if req.bad_utf8 is not None:
            failures += 1
            emit(
                _error_line(
                    "console_parse_exception",
                    f"request at line {req.line} ({req.method} {req.path}): line {req.bad_utf8} is not valid "
                    "UTF-8; nothing was sent",
                    400,
                )
            )
            return
        try:
            body = _parse_body(req.path, req.body)
        except ConsoleParseError as e:
            failures += 1
            emit(_error_line(e.type, f"request at line {req.line} ({req.method} {req.path}): {e}", 400))
            return
        try:
            out, ok = execute(es, req.method, req.path, body)
            line = _dump(out, indent)
        except Exception as e:  # noqa: BLE001 - one bad request must not end the session
            out, ok = (
                _error_line(
                    "console_exception",
                    f"request at line {req.line} ({req.method} {req.path}) failed: {type(e).__name__}",
                    None,
                ),
                False,
            )
            line = json.dumps(out)
        failures += not ok
        stream_out.write(line + "\n")
        stream_out.flush()

    current: _Request | None = None
    stray: list[int] = []  # line numbers of text outside any request

    def flush_stray() -> None:
        nonlocal failures
        if stray:
            failures += 1
            where = f"line {stray[0]}" if len(stray) == 1 else f"lines {stray[0]}-{stray[-1]}"
            emit(
                _error_line(
                    "console_parse_exception",
                    f"{where}: expected a request line 'METHOD path' (one of {', '.join(METHODS)})",
                    400,
                )
            )
            stray.clear()

    def prompt() -> None:
        if prompt_to is not None:
            prompt_to.write(BODY_PROMPT if current is not None else PROMPT)
            prompt_to.flush()

    for n, raw in enumerate(_lines(stream_in, prompt if prompt_to is not None else None), start=1):
        line = raw.rstrip("\r\n")
        bad_utf8 = _NOT_UTF8.search(line) is not None
        if current is not None and current.in_triple:  # inside a triple-quoted string: take the line verbatim
            if bad_utf8 and current.bad_utf8 is None:
                current.bad_utf8 = n
            current.body.append(line)
            current.in_triple = line.count('"""') % 2 == 0
            continue
        if _is_comment(line):
            continue
        m = _REQUEST_LINE.match(line)
        if m:
            flush_stray()
            finish(current)
            current = _Request(m.group(1).upper(), m.group(2), n)
            if bad_utf8:
                current.bad_utf8 = n
            continue
        if not line.strip():
            flush_stray()
            finish(current)
            current = None
            continue
        if current is None:
            stray.append(n)
            continue
        if bad_utf8 and current.bad_utf8 is None:
            current.bad_utf8 = n
        current.body.append(line)
        current.in_triple = line.count('"""') % 2 == 1
    flush_stray()
    finish(current)
    return failures


__all__ = ["run_console", "execute", "ConsoleParseError", "METHODS"]
