"""URL parameters of ``_search``/``_msearch`` that change the request or the response's shape.

* ``rest_total_hits_as_int=true``: ``hits.total`` (also inside ``top_hits`` and inner hits) is a
  number instead of ``{"value", "relation"}``; total hits are then tracked exactly, and a numeric
  ``track_total_hits`` is refused (``RestSearchAction.parseSearchRequest``); ``-1`` when tracking is off.
* ``search_type``: ``query_then_fetch`` or ``dfs_query_then_fetch`` (the same scores on one
  shard); anything else is ``No search type for [x]`` (``SearchType.fromString``); any value
  beside a top-level ``knn`` is refused (``RestSearchAction#validateSearchRequest``).
* ``include_named_queries_score=true`` (``matched_queries`` with each name's score) is refused by
  name; ``false`` is the default, the names only.
* ``terminate_after``: as the body key of that name (``RestSearchAction.parseSearchRequest``).
* ``typed_keys``: aggregation names prefixed with their result type, as clients that decode
  aggregations by type ask for them (``sterms#genres``).
* ``_msearch`` header lines accept Elasticsearch's metadata keys only
  (``MultiSearchRequest.readMultiLineFormat``).
"""

from __future__ import annotations

from typing import Any

from scholar_es.engine.errors import illegal_argument, unsupported
from scholar_es.engine.validate import with_flags

SEARCH_TYPES = ("query_then_fetch", "dfs_query_then_fetch")
MSEARCH_HEADER_KEYS = {
    "index",
    "indices",
    "expand_wildcards",
    "ignore_unavailable",
    "allow_no_indices",
    "search_type",
    "request_cache",
    "preference",
    "routing",
    "allow_partial_search_results",
    "ccs_minimize_roundtrips",
}


def _true(v) -> bool:
    return v is not None and str(v).lower() in ("", "true")


def typed_keys(params: dict) -> bool:
    """``typed_keys=true``: aggregation names prefixed with their result type (``sterms#genres``)."""
    return _true(params.get("typed_keys"))


def check_search_type(value) -> None:
    if value is not None and str(value) not in SEARCH_TYPES:
        raise illegal_argument(f"No search type for [{value}]")


def prepare(params: dict, body: dict) -> dict:
    """Apply the URL parameters to a search body (a copy); validate them. The body's options
    given as text are read first (:func:`validate.with_flags`: ``"track_total_hits": "true"``)."""
    body = with_flags(body)
    check_search_type(params.get("search_type"))
    if "search_type" in params and body.get("knn") not in (None, []):
        # RestSearchAction#validateSearchRequest (checkSearchType), also run per _msearch item
        raise illegal_argument(
            "cannot set [search_type] when using [knn] search, since the search type is determined automatically"
        )
    if _true(params.get("include_named_queries_score")):
        # matched_queries as {name: score} (MatchedQueriesPhase); the engine lists the names only
        raise unsupported("include_named_queries_score", "matched_queries lists the matched names")
    if _true(params.get("rest_total_hits_as_int")):
        track = body.get("track_total_hits")
        if track is None:
            body = {**body, "track_total_hits": True}
        elif track is not True and track is not False:
            raise illegal_argument(
                "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, "
                f"got {track}"
            )
    if params.get("terminate_after") is not None:  # RestSearchAction: paramAsInt("terminate_after")
        body = {**body, "terminate_after": param_int("terminate_after", params["terminate_after"])}
    return body


def param_int(name: str, value: Any) -> int:
    """A URL parameter read as ``RestRequest.paramAsInt`` reads it (``Integer.parseInt``: a sign,
    then decimal digits, within Java's int; no spaces or ``_``, which Python's ``int`` takes),
    else its IllegalArgumentException."""
    text = str(value)
    digits = text[1:] if text[:1] in ("+", "-") else text
    if digits.isdecimal():
        number = int(text)
        if -(2**31) <= number <= 2**31 - 1:
            return number
    raise illegal_argument(f"Failed to parse int parameter [{name}] with value [{value}]")


def shape(params: dict, response: dict) -> dict:
    """The response as the URL parameters ask for it."""
    if _true(params.get("rest_total_hits_as_int")):
        _totals_as_int(response)
    return response


def _totals_as_int(obj) -> None:
    if isinstance(obj, dict):
        hits = obj.get("hits")
        if isinstance(hits, dict) and "hits" in hits:
            total = hits.get("total")
            if isinstance(total, dict) and "value" in total:
                hits["total"] = total["value"]
            elif "total" not in hits:
                hits["total"] = -1
        for v in obj.values():
            _totals_as_int(v)
    elif isinstance(obj, list):
        for v in obj:
            _totals_as_int(v)


def check_msearch_header(header) -> None:
    if header is None:
        return
    if not isinstance(header, dict):
        raise illegal_argument("msearch header lines must be JSON objects")
    for key in header:
        if key not in MSEARCH_HEADER_KEYS:
            raise illegal_argument(f"key [{key}] is not supported in the metadata section")
    check_search_type(header.get("search_type"))
