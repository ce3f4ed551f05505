"""The ``q`` URL parameter of ``_search``, ``_count``, ``_explain`` and ``_validate/query``: a
``query_string`` query (RestActions#urlParamsToQueryBuilder) with ``df`` (default_field),
``analyzer``, ``analyze_wildcard``, ``lenient`` and ``default_operator``; those five without
``q`` are a 400, as Elasticsearch answers them.
"""

from __future__ import annotations

from scholar_es.engine.errors import illegal_argument

#: the URL parameters that shape ``q`` (RestActions.queryStringParams)
Q_PARAMS = ("df", "analyzer", "analyze_wildcard", "lenient", "default_operator")


def _bool(params: dict, name: str) -> bool:
    v = str(params[name]).lower()
    if v not in ("", "true", "false"):  # RestRequest#paramAsBoolean (Booleans.parseBoolean)
        raise illegal_argument(
            f"Failed to parse value [{params[name]}] as only [true] or [false] are allowed."
        )
    return v in ("", "true")


def url_query(params: dict, path: str) -> dict | None:
    """The query the URL parameters ask for (None: no ``q``)."""
    if "q" not in params:
        given = [k for k in Q_PARAMS if k in params]
        if given:
            raise illegal_argument(
                f"request [{path}] contains parameters [{', '.join(given)}] but missing query string "
                "parameter 'q'."
            )
        return None
    qs: dict = {"query": params["q"]}
    if "df" in params:
        qs["default_field"] = params["df"]
    if "analyzer" in params:
        qs["analyzer"] = params["analyzer"]
    if "analyze_wildcard" in params:
        qs["analyze_wildcard"] = _bool(params, "analyze_wildcard")
    if "lenient" in params:
        qs["lenient"] = _bool(params, "lenient")
    if "default_operator" in params:
        qs["default_operator"] = params["default_operator"]
    return {"query_string": qs}


def with_url_query(params: dict, body: dict | None, path: str, body_wins: bool = False) -> dict:
    """``body`` with the ``q`` query in place of its own (``_search``: RestSearchAction sets it
    over the body's). ``body_wins`` (``_count``, ``_explain``, ``_validate/query``): with a body
    the ``q`` parameters are never read, so Elasticsearch refuses them as unrecognized."""
    body = dict(body or {})
    if body_wins and body:
        given = [k for k in ("q", *Q_PARAMS) if k in params]
        if given:
            s = "s" if len(given) > 1 else ""
            raise illegal_argument(
                f"request [{path}] contains unrecognized parameter{s}: [{', '.join(given)}]"
            )
        return body
    q = url_query(params, path)
    if q is not None:
        body["query"] = q
    return body
