"""Elasticsearch's REST API at the root, answered by the embedded engine's own dispatcher.

Every request goes to :func:`scholar_es.engine.rest.handler.handle` (the dispatcher the in-process
transport node and ``scholar-es console`` use); this module only does what HTTP adds:

* content types as Elasticsearch accepts them: ``application/json``, ``application/x-ndjson`` and
  the ``application/vnd.elasticsearch+json`` / ``+x-ndjson`` media types with ``compatible-with=7|8``
  (the official clients send these); ``_bulk`` and ``_msearch`` bodies are read as NDJSON whatever
  the type, as Elasticsearch reads them. A body of another type is answered 406 ``Content-Type
  header [...] is not supported``, a compatible-with version other than 7 or 8 (or two that differ)
  400 ``media_type_header_exception``, as an 8.x cluster answers;
* the answer's media type follows the request's ``Accept`` (compatible-with echoed back), every
  answer carries ``X-Elastic-Product: Elasticsearch``; ``?pretty`` indents; a ``_cat`` table
  (:class:`~scholar_es.engine.rest.shaping.TextBody`) is ``text/plain``, and the ``Accept``
  header goes to the dispatcher (``_cat`` answers JSON for ``application/json``);
* the body is parsed in place from the guard's buffer (:mod:`scholar_es.serve.body`), with the
  in-process node's limits and messages (nesting past 1000 levels, a syntax error: 400
  ``x_content_parse_exception``), and released before the engine runs;
* an unexpected exception is a 500 ``internal_error`` (logged), never a traceback.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from scholar_es.engine.errors import EsError
from scholar_es.engine.rest.handler import handle
from scholar_es.engine.rest.shaping import TextBody
from scholar_es.engine.xcontent import answer_bytes
from scholar_es.serve.body import parse
from scholar_es.serve.errors import PRODUCT_HEADER, error_body, error_response
from scholar_es.serve.guard import BODY_KEY

if TYPE_CHECKING:
    from scholar_es.serve.state import ServerState

log = logging.getLogger("scholar_es.serve")

_MEDIA = re.compile(r"^application/(?:vnd\.elasticsearch\+)?(json|x-ndjson)$")
_NDJSON_ENDPOINTS = ("_bulk", "_msearch")
COMPATIBLE = ("7", "8")
METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD"]


class MediaTypeError(Exception):
    def __init__(self, status: int, body: dict) -> None:
        self.status, self.body = status, body


def parse_media_type(value: str) -> tuple[str, dict[str, str]]:
    """``application/json; charset=UTF-8`` -> (``application/json``, {``charset``: ``UTF-8``})."""
    base, *params = value.split(";")
    out = {}
    for p in params:
        k, _, v = p.partition("=")
        if k.strip():
            out[k.strip().lower()] = v.strip().strip('"')
    return base.strip().lower(), out


def negotiate(headers, has_body: bool) -> tuple[str | None, str | None]:
    """(request format 'json'/'x-ndjson' or None, compatible-with version or None); raises MediaTypeError."""
    ctype, accept = headers.get("content-type"), headers.get("accept")
    fmt, versions = None, {}
    if has_body:
        if not ctype:
            raise MediaTypeError(406, {"error": "Content-Type header is missing", "status": 406})
        base, params = parse_media_type(ctype)
        m = _MEDIA.match(base)
        if m is None:
            raise MediaTypeError(
                406, {"error": f"Content-Type header [{ctype}] is not supported", "status": 406}
            )
        fmt = m[1]
        if "compatible-with" in params:
            versions["Content-Type"] = params["compatible-with"]
    if accept:
        for part in accept.split(","):
            base, params = parse_media_type(part)
            if "compatible-with" in params and base.startswith("application/vnd.elasticsearch+"):
                versions["Accept"] = params["compatible-with"]
                break
    bad = [v for v in versions.values() if v not in COMPATIBLE]
    if bad or len(set(versions.values())) > 1:
        names = ", ".join(sorted(versions))
        shown = ", ".join(f"{k}={headers.get(k.lower())}" for k in sorted(versions))
        raise MediaTypeError(
            400,
            error_body(
                400,
                "media_type_header_exception",
                f"Invalid media-type value on headers [{names}]",
                caused_by={
                    "type": "status_exception",
                    "reason": "A compatible version is required on both Content-Type and Accept headers "
                    "if either one has requested a compatible version and the compatible versions must "
                    f"match; this server accepts versions {' or '.join(COMPATIBLE)}. {shown}",
                },
            ),
        )
    return fmt, next(iter(versions.values()), None)


def decode(raw: bytearray | bytes, path: str, fmt: str | None):
    """The body's value as the in-process node reads it (:mod:`scholar_es.serve.body`)."""
    last = path.rstrip("/").rsplit("/", 1)[-1]
    return parse(raw, ndjson=fmt == "x-ndjson" or last in _NDJSON_ENDPOINTS)


def render(status: int, body, *, method: str, version: str | None, pretty: bool) -> Response:
    media = f"application/vnd.elasticsearch+json;compatible-with={version}" if version else "application/json"
    if isinstance(body, TextBody):  # a _cat table
        media, data = body.content_type, (b"" if method == "HEAD" else body.encode("utf-8"))
    elif method == "HEAD" or body is None:
        data = b""
    else:  # the embedded transport's text (non-finite floats as Jackson's strings)
        data = answer_bytes(body, pretty)
    return Response(
        data, status_code=status, media_type=media, headers={PRODUCT_HEADER[0]: PRODUCT_HEADER[1]}
    )


def router(state: ServerState) -> APIRouter:
    r = APIRouter()
    engine = state.engine
    if engine is None:
        raise ValueError("the Elasticsearch REST API needs the embedded engine (a directory target)")

    def call(
        method: str, path: str, params: dict[str, str], payload: Any, accept: str | None
    ) -> tuple[int, Any]:
        # no lock: the engine is safe across threads (searches on snapshots, writers serialized per index)
        return handle(engine, method, path, params, payload, accept=accept)

    @r.api_route("/{path:path}", methods=METHODS, include_in_schema=False)
    async def es_rest(request: Request, path: str = ""):
        # the guard's buffer, taken out of the scope so that it is freed once parsed
        raw = request.scope.pop(BODY_KEY, None)
        if raw is None:
            raw = await request.body()
        # the path as sent (percent-encoded), as the in-process node hands it to the dispatcher
        target = request.scope.get("raw_path", b"").decode("latin-1") or request.url.path
        params = dict(request.query_params)
        pretty = "pretty" in params and params.get("pretty", "").lower() not in ("false", "0")
        try:
            fmt, version = negotiate(request.headers, bool(raw))
        except MediaTypeError as e:
            return render(e.status, e.body, method=request.method, version=None, pretty=pretty)
        try:
            payload = await run_in_threadpool(decode, raw, target, fmt)  # a large body: off the loop
        except EsError as e:  # Jackson's limits, a syntax error: the in-process node's answer
            return render(e.status, e.to_body(), method=request.method, version=version, pretty=pretty)
        except UnicodeDecodeError as e:
            err = EsError(400, "x_content_parse_exception", str(e))
            return render(400, err.to_body(), method=request.method, version=version, pretty=pretty)
        del raw  # parsed: the body's bytes are not held while the engine works
        try:
            accept = request.headers.get("accept")
            status, out = await run_in_threadpool(call, request.method, target, params, payload, accept)
        except Exception:  # noqa: BLE001 - a bug in the engine: a 500, logged, never a traceback out
            log.exception("engine failed on %s %s", request.method, request.url.path)
            return error_response(500, "internal_error", "unexpected engine error; the server log has it")
        return render(status, out, method=request.method, version=version, pretty=pretty)

    return r
