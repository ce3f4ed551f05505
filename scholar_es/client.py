"""TARGET -> client: a real cluster for ``http(s)://`` URLs, the embedded engine for a directory.

Credentials come from the environment -- ``SCHOLAR_ES_API_KEY``, or ``SCHOLAR_ES_USER`` +
``SCHOLAR_ES_PASSWORD`` -- or from the URL's ``user:password@`` part, and never appear in any
output: every message built from a URL shows it through :func:`display_target`, which drops the
user info, query and fragment whatever the URL's shape (a malformed port included), and the client
gets the URL without its user info (the credentials travel as ``basic_auth``).  A warning goes to
stderr, once, when credentials would travel over plain ``http://``.  ``SCHOLAR_ES_CA_CERTS`` names a
CA bundle. TLS verification stays on unless ``SCHOLAR_ES_VERIFY_CERTS=false``.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from scholar_es.errors import ConfigError

DEFAULT_TARGET = "./.scholar-es"
RETRY_STATUSES = (429, 502, 503, 504)


def default_target() -> str:
    return os.environ.get("SCHOLAR_ES_URL") or DEFAULT_TARGET


def is_url(target: str) -> bool:
    return target.lower().startswith(("http://", "https://"))


_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)(.*)$", re.S)
_warned_plain_http = False


def _split_userinfo(target: str) -> tuple[str, str | None]:
    """(TARGET without its user info, the user info or None).  The user info is everything
    between ``://`` and the LAST ``@`` anywhere in the text, so a password holding ``/``, ``?``,
    ``#`` or ``@`` is never mistaken for the host (over-redacting a rare ``@`` in a path is fine)."""
    m = _SCHEME.match(target)
    if m is None or "@" not in m.group(2):
        return target, None
    userinfo, _, rest = m.group(2).rpartition("@")
    return m.group(1) + rest, userinfo


def display_target(target: str) -> str:
    """TARGET for messages: a URL without its ``user:password@`` part, query or fragment.

    Works on text that is not a valid URL (a malformed port, a stray ``@``): nothing is parsed
    that could raise with the secret in its message.
    """
    if _SCHEME.match(target) is None:
        return target
    bare, userinfo = _split_userinfo(target)
    bare = re.split(r"[?#]", bare, maxsplit=1)[0]
    if userinfo is None:
        return bare
    scheme, _, rest = bare.partition("://")
    return f"{scheme}://***@{rest}"


def is_loopback(host: str | None) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1): traffic that never leaves the machine."""
    import ipaddress

    if not host:
        return False
    name = host.lower().rstrip(".")
    if name in ("localhost", "localhost.localdomain") or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _warn_plain_http(target: str, what: str) -> None:
    global _warned_plain_http
    if not _warned_plain_http:
        _warned_plain_http = True
        print(
            f"scholar-es: warning: {what} would travel unencrypted over {display_target(target)}; "
            "use an https:// URL",
            file=sys.stderr,
        )


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

        bare, userinfo = _split_userinfo(target)
        try:
            parts = urlsplit(bare)
            parts.port  # noqa: B018 - raises ValueError on a malformed port
        except ValueError as e:
            # the exception text may quote the URL: re-raise with the redacted form only
            raise ConfigError(
                f"invalid cluster URL {display_target(target)!r} ({str(e).split(':')[0]}); "
                "expected http(s)://host[:port][/path] with a numeric port"
            ) from None
        if not parts.hostname:
            raise ConfigError(f"invalid cluster URL {display_target(target)!r}: no host name")
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
        elif userinfo is not None:
            user, _, password = userinfo.partition(":")
            kwargs["basic_auth"] = (unquote(user), unquote(password))
        # credentials over plain http to another machine; a local `scholar-es serve` is not warned about
        if (
            parts.scheme.lower() == "http"
            and ("api_key" in kwargs or "basic_auth" in kwargs)
            and not is_loopback(parts.hostname)
        ):
            _warn_plain_http(target, "an API key" if "api_key" in kwargs else "a password")
        if os.environ.get("SCHOLAR_ES_CA_CERTS"):
            kwargs["ca_certs"] = os.environ["SCHOLAR_ES_CA_CERTS"]
        if os.environ.get("SCHOLAR_ES_VERIFY_CERTS", "").lower() == "false":
            kwargs["verify_certs"] = False
        try:
            return Elasticsearch(bare, **kwargs)
        except ValueError:  # the client's own URL checks: never echo the text it quotes
            raise ConfigError(
                f"invalid cluster URL {display_target(target)!r}; expected http(s)://host[:port][/path]"
            ) from None
    if "://" in target:
        raise ConfigError(
            f"unsupported target {display_target(target)!r}: use an http(s):// URL for a cluster or a "
            "directory for the embedded engine"
        )
    path = Path(target).expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"target {target!r} is a file; the embedded engine needs a directory")
    if must_exist and not (path / "engine.sqlite3").exists() and not _empty_dir(path):
        raise ConfigError(
            f"no embedded engine at {target!r}; index papers there first (scholar-es index ... "
            f"--es {target}) or pass --es with the right directory or URL"
        )
    from scholar_es.engine.rest.transport import embedded_client

    try:
        return embedded_client(path)
    except OSError as e:
        raise ConfigError(
            f"cannot open an embedded engine at {target!r}: {e.strerror or e}; use a writable directory"
        ) from None
