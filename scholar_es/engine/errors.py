"""Elasticsearch-shaped errors raised inside the embedded engine.

The REST layer turns an :class:`EsError` into the body Elasticsearch would send::

    {"error": {"root_cause": [...], "type": ..., "reason": ...}, "status": ...}

so that the official client raises the same ``elasticsearch.ApiError`` subclass
(``BadRequestError`` for 400, ``NotFoundError`` for 404, ...) for both engines.
"""

from __future__ import annotations

from typing import Any


class EsError(Exception):
    """An error with Elasticsearch's status, ``error.type`` and ``error.reason``."""

    def __init__(self, status: int, type: str, reason: str, **extra: Any) -> None:
        super().__init__(f"[{type}] {reason}")
        self.status = status
        self.type = type
        self.reason = reason
        self.extra = extra

    def cause(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason, **self.extra}

    def to_body(self) -> dict[str, Any]:
        return {"error": {"root_cause": [self.cause()], **self.cause()}, "status": self.status}


def parsing_error(reason: str, **extra: Any) -> EsError:
    """What Elasticsearch answers for a malformed or unknown query clause (400)."""
    return EsError(400, "parsing_exception", reason, **extra)


def illegal_argument(reason: str, **extra: Any) -> EsError:
    return EsError(400, "illegal_argument_exception", reason, **extra)


def unsupported(what: str, hint: str = "") -> EsError:
    """A construct Elasticsearch supports but the embedded engine does not.

    Never silently approximated: the caller gets a 400 naming the clause.
    """
    reason = f"[{what}] is not supported by the scholar-es embedded engine"
    if hint:
        reason += f"; {hint}"
    return EsError(400, "parsing_exception", reason)


def index_not_found(index: str) -> EsError:
    return EsError(
        404,
        "index_not_found_exception",
        f"no such index [{index}]",
        index=index,
        **{"resource.type": "index_or_alias", "resource.id": index},
    )


def script_error(reason: str, script: str = "") -> EsError:
    return EsError(400, "script_exception", reason, script=script, lang="painless")


def x_content_parse_error(reason: str, cause: EsError | None = None, **extra: Any) -> EsError:
    """A request body Elasticsearch's XContent parser refuses (400 ``x_content_parse_exception``).

    With ``cause``, the failure wraps it as Elasticsearch reports one: ``root_cause`` and ``type``
    are ``x_content_parse_exception`` and ``caused_by`` holds the ``illegal_argument_exception``
    (or other) that the parser threw."""
    if cause is not None:
        return _Wrapped(400, "x_content_parse_exception", reason, cause)
    return EsError(400, "x_content_parse_exception", reason, **extra)


def wrapped(status: int, type: str, reason: str, caused_by: EsError) -> EsError:
    """An error that Elasticsearch reports with the exception it wraps under ``caused_by``."""
    return _Wrapped(status, type, reason, caused_by)


class _Wrapped(EsError):
    def __init__(self, status: int, type: str, reason: str, caused_by: EsError) -> None:
        super().__init__(status, type, reason)
        self.caused_by = caused_by

    def to_body(self) -> dict[str, Any]:
        return {
            "error": {"root_cause": [self.cause()], **self.cause(), "caused_by": self.caused_by.cause()},
            "status": self.status,
        }


def internal_error(method: str, path: str, exc: BaseException) -> EsError:
    """An exception the engine did not expect: a bug of ours, never the caller's fault.

    Elasticsearch answers an unexpected exception with status 500 and the exception's class as
    ``type`` (e.g. ``null_pointer_exception``); the engine names it ``internal_error`` and says
    which request hit it.  The traceback goes to the ``scholar_es.engine`` log (stderr), never into
    the response body.
    """
    import logging

    logging.getLogger("scholar_es.engine").error(
        "internal error while handling [%s %s]", method, path, exc_info=exc
    )
    return EsError(
        500,
        "internal_error",
        f"the embedded engine failed on [{method} {path}] ({type(exc).__name__}); this is a bug in "
        "scholar-es, not in the request: please report it with the request that caused it",
    )
