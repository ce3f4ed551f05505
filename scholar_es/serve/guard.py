"""Every request passes here first: the API key (when one is set) and the body size limit.

``SCHOLAR_ES_SERVE_API_KEY`` set: every route needs the key, sent the way Elasticsearch clients
send theirs (``Authorization: ApiKey <key>``, or base64 ``id:key`` as the official clients encode
an ``(id, key)`` pair), or ``Authorization: Bearer <key>``, or HTTP Basic with the key as the
password (any user name), which is what a browser asks a person for. The key is compared in
constant time and never echoed.

A header that cannot be decoded (non-ASCII base64, invalid UTF-8 inside) is a credential that
does not match: 401, as any other wrong key.

Bodies are read here, up to ``max_body`` bytes (Elasticsearch's ``http.max_content_length``,
100mb by default); a larger one is answered 413 before any route sees it. Each body is charged
to the process's in-flight requests breaker (:mod:`scholar_es.serve.breaker`) while its request
runs, and read into one buffer, handed to the route in the scope (``BODY_KEY``) so that the
Elasticsearch REST routes parse it in place (no joined copy, no decoded text); a route that
reads the body the ASGI way gets it once as bytes.
"""

from __future__ import annotations

import base64
import hmac

from scholar_es.serve.breaker import CircuitBreakingError
from scholar_es.serve.errors import error_response

BODY_KEY = "scholar_es.body"  # the request body (a bytearray) in the ASGI scope

# two WWW-Authenticate headers, as Elasticsearch sends them (one challenge each: a browser that
# meets "ApiKey" inside the Basic challenge's value refuses the whole header)
CHALLENGES = ('Basic realm="scholar-es", charset="UTF-8"', "ApiKey")


def _candidates(header: str) -> list[bytes]:
    """The keys an ``Authorization`` header may carry (several readings of one value)."""
    scheme, _, value = header.strip().partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if not value:
        return []
    out: list[bytes] = []
    if scheme in ("apikey", "bearer"):
        out.append(value.encode("latin-1"))  # the bytes as sent (the header was read as latin-1)
    if scheme in ("apikey", "basic"):
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (ValueError, UnicodeDecodeError):  # binascii.Error, or non-ASCII text: no key
            decoded = None
        if decoded is not None and ":" in decoded:
            out.append(decoded.split(":", 1)[1].encode("utf-8"))
    return out


def key_matches(header: str | None, key: str) -> bool:
    """Whether ``header`` (read as latin-1, so any bytes) carries ``key``."""
    if not header:
        return False
    want = key.encode("utf-8")
    # every candidate is compared, so the time taken does not depend on which one matched
    return any([hmac.compare_digest(c, want) for c in _candidates(header)])


class Guard:
    """ASGI middleware: API key check, then the body read up to the limit and replayed to the app."""

    def __init__(self, app, state) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = self.state.api_key
        if key and not key_matches(headers.get("authorization"), key):
            path = scope.get("path", "/")
            has = "authorization" in headers
            reason = (
                f"unable to authenticate with the provided credentials for REST request [{path}]"
                if has
                else f"missing authentication credentials for REST request [{path}]"
            )
            resp = error_response(
                401,
                "security_exception",
                reason + " (send the server's API key: Authorization: ApiKey <key>)",
                headers={"WWW-Authenticate": CHALLENGES[0]},
            )
            for challenge in CHALLENGES[1:]:
                resp.headers.append("WWW-Authenticate", challenge)
            await resp(scope, receive, send)
            return None  # never read the body nor reach a route unauthenticated
        charged = [0]  # bytes charged to the breaker for this request, released when it ends
        try:
            body = await self._read(headers, charged, scope, receive, send)
            if body is None:  # answered (413, 429) or the client went away
                return None
            scope = {**scope, BODY_KEY: body}
            del body  # the scope holds the only reference: a route that takes it frees it

            async def replay():
                held = scope.pop(BODY_KEY, None)
                if held is not None:
                    return {"type": "http.request", "body": bytes(held), "more_body": False}
                return await receive()

            return await self.app(scope, replay, send)
        finally:
            if charged[0]:
                self.state.breaker.release(charged[0])

    async def _read(self, headers: dict, charged: list[int], scope, receive, send) -> bytearray | None:
        """The whole body in one buffer (grown in place, never joined or copied), each byte
        charged to the breaker (``charged[0]``) before it is held; None once an error is sent."""
        limit, breaker = self.state.max_body, self.state.breaker
        declared = headers.get("content-length")
        known = int(declared) if declared is not None and declared.isdigit() else None
        if known is not None and known > limit:
            await self._too_large(known, limit, scope, receive, send)
            return None
        try:
            if known:  # charged whole before any of it is read, as Elasticsearch charges it
                breaker.charge(known)
                charged[0] = known
            buf = bytearray()
            more = True
            while more:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                size = len(buf) + len(message.get("body", b""))
                if size > limit:
                    await self._too_large(size, limit, scope, receive, send)
                    return None
                if size > charged[0]:  # a chunked body, charged as it arrives
                    breaker.charge(size - charged[0])
                    charged[0] = size
                buf += message.get("body", b"")
                more = message.get("more_body", False)
            return buf
        except CircuitBreakingError as e:
            await e.response()(scope, receive, send)
            return None

    @staticmethod
    async def _too_large(size: int, limit: int, scope, receive, send) -> None:
        resp = error_response(
            413,
            "content_too_long_exception",
            f"request body is too large: at least {size} bytes, the limit is {limit} bytes "
            "(scholar-es serve --max-body)",
            headers={"Connection": "close"},
        )
        await resp(scope, receive, send)
