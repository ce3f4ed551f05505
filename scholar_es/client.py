"""TARGET -> client: a real cluster for ``http(s)://`` URLs, the embedded engine for a directory.

Credentials come from the environment and are never logged:
``SCHOLAR_ES_API_KEY``, or ``SCHOLAR_ES_USER`` + ``SCHOLAR_ES_PASSWORD``; ``SCHOLAR_ES_CA_CERTS``
names a CA bundle. TLS verification stays on unless ``SCHOLAR_ES_VERIFY_CERTS=false``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from scholar_es.errors import ConfigError

DEFAULT_TARGET = "./.scholar-es"
RETRY_STATUSES = (429, 502, 503, 504)


def default_target() -> str:
    return os.environ.get("SCHOLAR_ES_URL") or DEFAULT_TARGET


def is_url(target: str) -> bool:
    return target.lower().startswith(("http://", "https://"))


def display_target(target: str) -> str:
    """TARGET for messages: a URL without its user:password part."""
    if not is_url(target):
        return target
    parts = urlsplit(target)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _empty_dir(path: Path) -> bool:
    """An existing directory with nothing in it: a new, empty engine (not a mistyped path)."""
    try:
        return path.is_dir() and next(path.iterdir(), None) is None
    except OSError:
        return False


def connect(target: str | None = None, *, must_exist: bool = False):
    """An ``elasticsearch.Elasticsearch`` client for TARGET (see module doc); no request is sent.

    With ``must_exist``, the directory must already exist: one holding an engine, or an empty
    one (a new, empty engine, e.g. ``mktemp -d``), so a mistyped path is an error instead of a
    new engine somewhere unexpected.
    """
    target = target or default_target()
    if is_url(target):
        from elasticsearch import Elasticsearch

        kwargs: dict = {
            "retry_on_status": RETRY_STATUSES,
            "retry_on_timeout": True,
            "max_retries": 5,
            "request_timeout": 60,
        }
        if os.environ.get("SCHOLAR_ES_API_KEY"):
            kwargs["api_key"] = os.environ["SCHOLAR_ES_API_KEY"]
        elif os.environ.get("SCHOLAR_ES_USER"):
            kwargs["basic_auth"] = (os.environ["SCHOLAR_ES_USER"], os.environ.get("SCHOLAR_ES_PASSWORD", ""))
        if os.environ.get("SCHOLAR_ES_CA_CERTS"):
            kwargs["ca_certs"] = os.environ["SCHOLAR_ES_CA_CERTS"]
        if os.environ.get("SCHOLAR_ES_VERIFY_CERTS", "").lower() == "false":
            kwargs["verify_certs"] = False
        return Elasticsearch(target, **kwargs)
    if "://" in target:
        raise ConfigError(
            f"unsupported target {target!r}: use an http(s):// URL for a cluster or a directory "
            "for the embedded engine"
        )
    path = Path(target).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"target {target!r} is a file; the embedded engine needs a directory")
    if must_exist and not (path / "engine.sqlite3").exists() and not _empty_dir(path):
        raise ConfigError(
            f"no embedded engine at {target!r}; index papers there first (scholar-es index ... "
            f"--es {target}) or pass --es with the right directory or URL"
        )
    from scholar_es.engine.node import embedded_client

    try:
        return embedded_client(path)
    except OSError as e:
        raise ConfigError(
            f"cannot open an embedded engine at {target!r}: {e.strerror or e}; use a writable directory"
        ) from None
