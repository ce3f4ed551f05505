"""Scroll and point in time over the REST API (contexts: engine/search/contexts.py).

* ``_search?scroll=1m`` runs the search once on a pinned snapshot, answers the first ``size``
  hits with a ``_scroll_id`` and keeps every hit in order; ``_search/scroll`` (``scroll_id`` and
  ``scroll`` in the body or the URL; the body wins, as RestSearchScrollAction reads it) answers the
  next ``size``, until a page comes back empty. A request without ``scroll`` frees the context after
  answering. SearchRequest.validate's scroll rules apply: no ``from``, ``size`` 0, ``rescore``,
  ``collapse``, ``search_after``, disabled ``track_total_hits``, ``request_cache`` or ``pit``.
* ``DELETE _search/scroll`` frees the ids in the body or the URL (``_all``: every scroll):
  ``{"succeeded": true, "num_freed": N}``, 404 when none was freed (ClearScrollResponse.status).
* ``POST /{index}/_pit?keep_alive=1m`` pins one index (``{"id": ..., "_shards": ...}``); a search
  with ``pit: {"id", "keep_alive"}`` and no index in the path runs on that snapshot and answers
  ``pit_id``; a ``sort`` gets the ``_shard_doc`` tiebreaker (search_after.py). ``DELETE /_pit``
  frees it.

The URL parameters each route reads are named in ``*_PARAMS`` here (the REST spec's names).
"""

from __future__ import annotations

from typing import Any

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index import versioning
from scholar_es.engine.rest import params as rest_params
from scholar_es.engine.search import contexts
from scholar_es.engine.search.execute import SearchRun
from scholar_es.engine.search.search_after import with_tiebreaker
from scholar_es.engine.validate import check_search_body

#: the URL parameters of the scroll and point-in-time routes (beside _search's own)
SCROLL_PARAMS = ("scroll", "scroll_id", "rest_total_hits_as_int")
OPEN_PIT_PARAMS = ("keep_alive", "index")
PIT_KEYS = {"id", "keep_alive"}


def _single_index(engine, index: str) -> str:
    names = engine.resolve(index)
    if len(names) != 1:
        raise illegal_argument(
            f"searching several indices at once ({', '.join(names)}) is not supported by the "
            "embedded engine; search one index or alias at a time"
            if names
            else f"no index matches [{index}]"
        )
    return names[0]


# --- scroll -------------------------------------------------------------------------------


def scroll_problems(body: dict, params: dict) -> list[str]:
    """SearchRequest.validate, for a request with ``scroll``."""
    out = []
    track = body.get("track_total_hits")
    if track is not None and track is not True:
        out.append("disabling [track_total_hits] is not allowed in a scroll context")
    if body.get("from", 0) not in (0, None):
        out.append("using [from] is not allowed in a scroll context")
    if body.get("size") == 0:
        out.append("[size] cannot be [0] in a scroll context")
    if body.get("rescore"):
        out.append("using [rescore] is not allowed in a scroll context")
    if body.get("search_after") is not None:
        out.append("[search_after] cannot be used in a scroll context")
    if "collapse" in body:
        out.append("cannot use `collapse` in a scroll context")
    if str(params.get("request_cache", "")).lower() == "true":
        out.append("[request_cache] cannot be used in a scroll context")
    if "pit" in body:
        out.append("using [point in time] is not allowed in a scroll context")
    return out


def start_scroll(engine, index: str, body: dict, params: dict, typed_keys: bool) -> dict:
    keep = contexts.parse_time(params["scroll"], "scroll")
    found = scroll_problems(body, params)
    if found:
        raise versioning.validation_error(found)
    if "retriever" in body:
        raise unsupported("scroll with a retriever", "page with from/size or search_after")
    check_search_body(body)
    handle = engine.handle(_single_index(engine, index))
    run = SearchRun(handle, body, typed_keys=typed_keys, scroll=True)
    reg = contexts.registry(engine)
    ctx = reg.open("scroll", keep, handle)
    try:
        first = contexts.using(ctx, lambda: run.run_on(ctx.pinned.seg, ctx.pinned.reader))
    except BaseException:
        reg.free("scroll", reg.encode(ctx))
        raise
    ctx.state = {"run": run, "offset": len(first["hits"]["hits"])}
    return {"_scroll_id": reg.encode(ctx), **first}


def scroll_args(params: dict, body) -> tuple[Any, Any]:
    """(scroll_id, scroll) of a scroll request: the body's, else the URL's."""
    if body is not None and not isinstance(body, dict):
        raise parsing_error("request body must be a JSON object")
    body = body or {}
    unknown = set(body) - {"scroll_id", "scroll"}
    if unknown:  # SearchScrollRequest.fromXContent
        raise illegal_argument(
            f"Unknown parameter [{sorted(unknown)[0]}] in request body or parameter is of the wrong type[VALUE_STRING] "
        )
    scroll_id = body.get("scroll_id", params.get("scroll_id"))
    if not scroll_id:
        raise versioning.validation_error(["scrollId is missing"])  # SearchScrollRequest.validate
    return scroll_id, body.get("scroll", params.get("scroll"))


def continue_scroll(engine, scroll_id, scroll) -> dict:
    keep = None if scroll is None else contexts.parse_time(scroll, "scroll")
    reg = contexts.registry(engine)
    ctx = reg.get("scroll", scroll_id)
    if keep is not None:
        contexts.check_keep_alive(keep)

    def page():
        state = ctx.state
        resp, n = state["run"].scroll_page(state["offset"])
        state["offset"] += n
        ctx.touch(keep)
        return resp

    resp = contexts.using(ctx, page)
    if keep is None:  # a scroll request without `scroll` frees the context once answered
        reg.free("scroll", scroll_id)
    return {"_scroll_id": scroll_id, **resp}


def clear_scroll(engine, params: dict, body, scroll_id: str | None = None) -> tuple[int, dict]:
    """ClearScrollRequest: the ids of the body (a string or a list), else of the URL."""
    ids: Any = None
    if isinstance(body, dict) and "scroll_id" in body:
        ids = body["scroll_id"]
    elif body not in (None, {}) and not isinstance(body, dict):
        raise parsing_error("request body must be a JSON object")
    if ids is None:
        ids = scroll_id if scroll_id is not None else params.get("scroll_id")
    if isinstance(ids, str):
        ids = ids.split(",")
    if not ids:
        raise versioning.validation_error(["no scroll ids specified"])  # ClearScrollRequest.validate
    reg = contexts.registry(engine)
    freed = reg.free_all("scroll") if "_all" in ids else sum(reg.free("scroll", i) for i in ids)
    return (200 if freed else 404), {"succeeded": True, "num_freed": freed}


# --- point in time ------------------------------------------------------------------------


def open_pit(engine, index: str, params: dict) -> dict:
    if params.get("keep_alive") is None:  # OpenPointInTimeRequest.validate
        raise versioning.validation_error(["[keep_alive] is not specified"])
    keep = contexts.parse_time(params["keep_alive"], "keep_alive")
    handle = engine.handle(_single_index(engine, index))
    reg = contexts.registry(engine)
    ctx = reg.open("pit", keep, handle)
    return {"id": reg.encode(ctx), "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0}}


def close_pit(engine, body) -> tuple[int, dict]:
    if not isinstance(body, dict) or not body.get("id"):
        raise versioning.validation_error(["[id] is not specified"])  # ClosePointInTimeRequest
    freed = int(contexts.registry(engine).free("pit", body["id"]))
    return (200 if freed else 404), {"succeeded": True, "num_freed": freed}


def pit_problems(index_given: bool, params: dict) -> list[str]:
    """RestSearchAction.preparePointInTime: what a point-in-time search may not name."""
    out = []
    if index_given:
        out.append(
            "[indices] cannot be used with point in time. Do not specify any index with point in time."
        )
    if params.get("routing") is not None:
        out.append(
            "[routing] cannot be used with point in time. Do not specify any routing with point in time."
        )
    if params.get("preference") is not None:
        out.append(
            "[preference] cannot be used with point in time. Do not specify any preference with point in time."
        )
    return out


def search_pit(engine, body: dict, typed_keys: bool) -> dict:
    spec = body["pit"]
    if not isinstance(spec, dict) or "id" not in spec:
        raise parsing_error("[pit] requires [id]")
    unknown = set(spec) - PIT_KEYS
    if unknown:
        raise parsing_error(f"[pit] unknown field [{sorted(unknown)[0]}]")
    keep = None if spec.get("keep_alive") is None else contexts.parse_time(spec["keep_alive"], "keep_alive")
    if keep is not None:
        contexts.check_keep_alive(keep)
    if "retriever" in body:
        raise unsupported("pit with a retriever")
    reg = contexts.registry(engine)
    ctx = reg.get("pit", spec["id"])
    search_body = with_tiebreaker({k: v for k, v in body.items() if k != "pit"})
    check_search_body(search_body)
    run = SearchRun(ctx.pinned.handle, search_body, typed_keys=typed_keys, pit=True)

    def go():
        resp = run.run_on(ctx.pinned.seg, ctx.pinned.reader)
        ctx.touch(keep)
        return resp

    return {"pit_id": spec["id"], **contexts.using(ctx, go)}


def search(engine, index: str | None, body: dict, params: dict) -> dict | None:
    """A search that needs a context (``scroll`` or ``pit``), answered; None for any other."""
    typed_keys = rest_params.typed_keys(params)
    if "scroll" in params:
        return start_scroll(engine, index or "_all", body, params, typed_keys)
    if "pit" in body:
        found = pit_problems(index is not None, params)
        if found:
            raise versioning.validation_error(found)
        return search_pit(engine, body, typed_keys)
    return None


__all__ = ["EsError", "search", "continue_scroll", "clear_scroll", "open_pit", "close_pit"]
