"""The route table of the REST layer: ``@route(methods, pattern, api=..., params=...)`` registers a
handler (:mod:`engine.rest.handler` dispatches; route modules such as :mod:`engine.rest.documents`
register here, so they never import the dispatcher)."""

from __future__ import annotations

import re
from collections.abc import Callable

from scholar_es.engine.rest import spec

Route = tuple[str, re.Pattern, Callable, spec.Declared]
_ROUTES: list[Route] = []


def route(methods: str, pattern: str, api: str | None = None, params=(), text: bool = False, extra=()):
    """Register ``fn`` for ``methods`` (``"GET|POST"``) on ``pattern``; ``api``: the API's name in
    Elasticsearch's REST specification (``spec_params.json``), ``params``: the URL parameters the
    handler implements (see the module's docstring); ``text``: the route answers ``_cat`` text
    tables, and its handler takes the request's ``Accept`` header as ``accept``; ``extra``:
    parameters Elasticsearch's handler reads that the specification omits."""
    declared = spec.declare(api, params, text, extra)

    # an index name never starts with "_", so "/{index}" cannot swallow "/_bulk"
    rx = re.compile(
        "^"
        + re.sub(
            r"\{(\w+)\}",
            lambda m: f"(?P<{m[1]}>[^/_][^/]*)" if m[1] == "index" else f"(?P<{m[1]}>[^/]+)",
            pattern,
        )
        + "/?$"
    )

    def deco(fn):
        for m in methods.split("|"):
            _ROUTES.append((m, rx, fn, declared))
        return fn

    return deco
