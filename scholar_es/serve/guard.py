"""Every request passes here first: the API key (when one is set) and the body size limit.

``SCHOLAR_ES_SERVE_API_KEY`` set: every route needs the key, sent the way Elasticsearch clients
send theirs (``Authorization: ApiKey <key>``, or base64 ``id:key`` as the official clients encode
an ``(id, key)`` pair), or ``Authorization: Bearer <key>``, or HTTP Basic with the key as the
password (any user name), which is what a browser asks a person for. The key is compared in
constant time and never echoed.

Bodies are read here, up to ``max_body`` bytes (Elasticsearch's ``http.max_content_length``,
100mb by default); a larger one is answered 413 before any route sees it.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from scholar_es.serve.errors import error_response

# two WWW-Authenticate headers, as Elasticsearch sends them (one challenge each: a browser that
# meets "ApiKey" inside the Basic challenge's value refuses the whole header)
CHALLENGES = ('Basic realm="scholar-es", charset="UTF-8"', "ApiKey")


def _candidates(header: str) -> list[str]:
    """The keys an ``Authorization`` header may carry (several readings of one value)."""
    scheme, _, value = header.strip().partition(" ")
    scheme, value = scheme.lower(), value.strip()
    if not value:
        return []
    out = []
    if scheme in ("apikey", "bearer"):
        out.append(value)
    if scheme in ("apikey", "basic"):
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            decoded = None
        if decoded is not None and ":" in decoded:
            out.append(decoded.split(":", 1)[1])
    return out


def key_matches(header: str | None, key: str) -> bool:
    if not header:
        return False
    want = key.encode("utf-8")
    # every candidate is compared, so the time taken does not depend on which one matched
    return any([hmac.compare_digest(c.encode("utf-8"), want) for c in _candidates(header)])


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
            return await resp(scope, receive, send)
        limit = self.state.max_body
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            return await self._too_large(int(declared), limit, scope, receive, send)
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return await self._too_large(size, limit, scope, receive, send)
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    @staticmethod
    async def _too_large(size: int, limit: int, scope, receive, send):
        resp = error_response(
            413,
            "content_too_long_exception",
            f"request body is too large: at least {size} bytes, the limit is {limit} bytes "
            "(scholar-es serve --max-body)",
            headers={"Connection": "close"},
        )
        return await resp(scope, receive, send)
