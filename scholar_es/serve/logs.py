"""The server's log configuration: uvicorn's, with no secret in an access log line.

uvicorn's access log writes each request's path with its query string, so ``?api_key=...`` or
``?password=...`` would land in the log in clear. :class:`MaskSecrets` (a filter on the
``uvicorn.access`` logger, so every handler sees the masked line) replaces the value of every
query parameter whose name looks like a credential (:data:`SECRET_NAME`) with ``***``; the
other parameters are kept. Headers are never logged (uvicorn's access line has none), so an
``Authorization`` header cannot reach the log either.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any
from urllib.parse import unquote_plus

#: a parameter name holding any of these (case-insensitive) has its value masked
SECRET_NAME = re.compile(r"key|pass|pwd|secret|token|auth|credential|signature|session|cookie", re.I)
MASK = "***"


def mask_query(path: str) -> str:
    """``path?query`` with the values of secret-looking parameters replaced by ``***``."""
    base, sep, query = path.partition("?")
    if not sep:
        return path
    parts = []
    for item in query.split("&"):
        name, eq, _ = item.partition("=")
        parts.append(f"{name}={MASK}" if eq and SECRET_NAME.search(unquote_plus(name)) else item)
    return f"{base}?{'&'.join(parts)}"


class MaskSecrets(logging.Filter):
    """Masks secret-looking query parameters in uvicorn's access records (args: client, method,
    path with query, http version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], mask_query(args[2]), *args[3:])
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's default logging configuration with :class:`MaskSecrets` on its access logger."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["mask_secrets"] = {"()": f"{__name__}.MaskSecrets"}
    config["loggers"]["uvicorn.access"]["filters"] = ["mask_secrets"]
    return config
