"""JSON error bodies, in Elasticsearch's shape for every route, and the handlers that make them.

An error a caller caused is a 4xx naming what was wrong; anything unexpected is a 500
``internal_error`` whose traceback goes to the server log only, never into the answer.
"""

from __future__ import annotations

import json
import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from scholar_es.errors import ScholarEsError

log = logging.getLogger("scholar_es.serve")

PRODUCT_HEADER = ("X-Elastic-Product", "Elasticsearch")


def error_body(status: int, type_: str, reason: str, **extra) -> dict:
    cause = {"type": type_, "reason": reason, **extra}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


def json_response(status: int, body, headers: dict | None = None) -> Response:
    data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    return Response(
        content=data,
        status_code=status,
        media_type="application/json",
        headers={PRODUCT_HEADER[0]: PRODUCT_HEADER[1], **(headers or {})},
    )


def error_response(status: int, type_: str, reason: str, headers: dict | None = None, **extra) -> Response:
    return json_response(status, error_body(status, type_, reason, **extra), headers)


def _json_position(body: bytes, pos: int) -> str:
    """``character N (line L, column C)`` of the request body, counted from 0 as the parser does."""
    text = body[:pos].decode("utf-8", errors="replace")
    line = text.count("\n") + 1
    column = pos - (text.rfind("\n") + 1) + 1 if "\n" in text else pos + 1
    return f"character {pos} (line {line}, column {column})"


def _body_fields(request: Request) -> list[str]:
    """The JSON names of the fields the route's body model takes (aliases as sent), or []."""
    field = getattr(request.scope.get("route"), "body_field", None)
    model = getattr(getattr(field, "field_info", None), "annotation", None)
    fields = getattr(model, "model_fields", None)
    if not isinstance(fields, dict):
        return []
    return sorted(f.alias or name for name, f in fields.items())


def _validation_reason(
    exc: RequestValidationError, body: bytes = b"", fields: list[str] | None = None
) -> str:
    parts = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":  # loc: ("body", position); ctx: the parser's message
            loc = err.get("loc", ())
            pos = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else 0
            problem = (err.get("ctx") or {}).get("error", "not JSON")
            return f"the request body is not valid JSON: {problem} at {_json_position(body, pos)}"
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        value = err.get("input")
        shown = "" if isinstance(value, (dict, list)) or value is None else f" (got {value!r})"
        hint = ""
        if err.get("type") == "extra_forbidden" and fields and len(err.get("loc", ())) == 2:
            hint = f"; valid fields: {', '.join(fields)}"
            if "filters" in fields:
                hint += ' (filters such as year_from go inside "filters")'
        parts.append(f"{loc}: {err.get('msg')}{shown}{hint}")
    return "; ".join(parts) or "invalid request"


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError):
        body = await request.body()  # read once already: cached
        reason = _validation_reason(exc, body, _body_fields(request))
        return error_response(400, "illegal_argument_exception", reason)

    @app.exception_handler(ScholarEsError)
    async def _ours(request: Request, exc: ScholarEsError):
        return error_response(400, "illegal_argument_exception", str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        return error_response(exc.status_code, "http_exception", str(exc.detail))

    from elastic_transport import ApiError, TransportError

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError):
        # the cluster refused a request the search API built: pass its status and body on
        status = exc.meta.status if 400 <= exc.meta.status < 600 else 502
        if isinstance(exc.body, dict) and "error" in exc.body:
            return json_response(status, exc.body)
        return error_response(status, "elasticsearch_error", str(exc.message))

    @app.exception_handler(TransportError)
    async def _transport(request: Request, exc: TransportError):
        return error_response(502, "connection_error", f"cannot reach the cluster ({exc.message})")

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(
            500, "internal_error", f"unexpected {type(exc).__name__}; the server log has the details"
        )
