"""Elasticsearch's REST API, for the routes the project (and a console user) needs.

``handle(engine, method, path, params, body)`` returns ``(status, body)`` exactly as a
cluster would answer, errors included; the transport node and the console both use it.

Every route declares its API's name in Elasticsearch's REST specification and the URL parameters
its handler implements::

    @route("GET|POST", "/{index}/_count", api="count", params=("q",))

``handle`` checks the request's parameters against that declaration before the handler runs
(:mod:`engine.rest.spec`): a parameter the specification does not list for the API is
Elasticsearch's 400 ``contains unrecognized parameter``, one it lists that the route does not
declare is a 400 naming it as not implemented. A route without ``api`` accepts only the global
parameters (``pretty``, ``human``, ``error_trace``, ``filter_path``, ``format``). Declare a
parameter only where the handler reads it and does exactly what Elasticsearch does with it
(or refuses the values it does not implement, by name). The answer is then shaped by the global
parameters (:mod:`engine.rest.shaping`: ``filter_path``, ``error_trace``).
"""

from __future__ import annotations

import logging
import sqlite3
from urllib.parse import unquote

from scholar_es.engine.diskfull import disk_full
from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    index_not_found,
    internal_error,
    parsing_error,
)
from scholar_es.engine.index import versioning
from scholar_es.engine.index.indices import Engine
from scholar_es.engine.rest import analyze as analyze_api
from scholar_es.engine.rest import (
    cat,
    documents,  # noqa: F401  (its routes register on import)
    indices_options,
    query_apis,
    shaping,
    spec,
)
from scholar_es.engine.rest import health as rest_health
from scholar_es.engine.rest import mget as rest_mget
from scholar_es.engine.rest import params as rest_params
from scholar_es.engine.rest import scroll as rest_scroll
from scholar_es.engine.rest import update as rest_update
from scholar_es.engine.rest.documents import _SOURCE_PARAMS, _source_params
from scholar_es.engine.rest.routing import _ROUTES, route
from scholar_es.engine.rest.url_query import Q_PARAMS, with_url_query
from scholar_es.engine.search.execute import SearchRun, count
from scholar_es.engine.validate import (
    check_alias_actions,
    check_create_index,
    check_is_write_index,
    check_msearch_header,
    check_put_mapping,
    check_script_body,
    check_search_body,
    check_template_body,
)

VERSION = {
    "number": "8.15.0",
    "build_flavor": "default",
    "lucene_version": "9.11.1",
    "minimum_wire_compatibility_version": "7.17.0",
    "minimum_index_compatibility_version": "7.0.0",
}


def handle(
    engine: Engine, method: str, path: str, params: dict, body, accept: str | None = None
) -> tuple[int, object]:
    """Dispatch one request; EsErrors become Elasticsearch-shaped error bodies. ``accept``: the
    request's ``Accept`` header (``_cat`` answers JSON for ``application/json``)."""
    path = "/" + path.strip("/") if path.strip("/") else "/"
    method = method.upper()
    allowed = []
    for m, rx, fn, declared in _ROUTES:
        match = rx.match(path)
        if match:
            if m != method:
                allowed.append(m)
                continue
            args: dict[str, str | None] = {k: unquote(v) for k, v in match.groupdict().items()}
            if declared.text:
                args["accept"] = accept
            try:
                spec.check(declared, path, params)
                status, out = fn(engine, params=params, body=body, **args)
                return status, shaping.shape(params, status, out)
            except Exception as exc:  # noqa: BLE001
                err = error_of(method, path, exc)
                return err.status, shaping.with_trace(params, err.to_body(), exc)
    if allowed:
        return 405, {
            "error": f"Incorrect HTTP method for uri [{path}] and method [{method}], allowed: "
            f"[{', '.join(sorted(set(allowed)))}]",
            "status": 405,
        }
    err = EsError(
        400,
        "illegal_argument_exception",
        f"request [{path}] contains unrecognized or unsupported-by-the-embedded-engine route",
    )
    return 400, err.to_body()


def _bool_param(params: dict, name: str, default: bool = False) -> bool:
    v = params.get(name)
    if v is None:
        return default
    return str(v).lower() in ("", "true", "1")


# --- cluster ---------------------------------------------------------------------------


@route("GET", "/", api="info")
@route("HEAD", "/", api="ping")
def info(engine, params, body):
    return 200, {
        "name": "scholar-es-embedded",
        "cluster_name": "embedded",
        "cluster_uuid": "embedded",
        "version": VERSION,
        "tagline": "You Know, for Search",
    }


@route("GET", "/_cluster/health", api="cluster.health", params=rest_health.PARAMS)
@route("GET", "/_cluster/health/{index}", api="cluster.health", params=rest_health.PARAMS)
def health(engine, params, body, index=None):
    return rest_health.health(engine, params, index)


@route("GET", "/_cat/indices", api="cat.indices", params=cat.INDICES_PARAMS, text=True)
@route("GET", "/_cat/indices/{index}", api="cat.indices", params=cat.INDICES_PARAMS, text=True)
def cat_indices(engine, params, body, accept, index="_all"):
    rows = cat.indices_rows(engine, engine.resolve(index), params.get("health"))
    return 200, cat.table(cat.INDICES, rows, params, accept, strict=True)


@route("GET", "/_cat/aliases", api="cat.aliases", params=(*cat.PARAMS, "local"), text=True)
@route("GET", "/_cat/aliases/{name}", api="cat.aliases", params=(*cat.PARAMS, "local"), text=True)
def cat_aliases(engine, params, body, accept, name=None):
    if "local" in params:  # deprecated, no effect on one node
        spec.parse_bool("local", params["local"])
    return 200, cat.table(cat.ALIASES, cat.aliases_rows(engine, name), params, accept)


@route("GET", "/_cat/count", api="cat.count", params=cat.PARAMS, text=True)
@route("GET", "/_cat/count/{index}", api="cat.count", params=cat.PARAMS, text=True)
def cat_count(engine, params, body, accept, index="_all"):
    check_search_body(body)  # RestCountAction: the body's query, if any
    total = sum(count(engine.handle(n), body) for n in engine.resolve(index))
    return 200, cat.table(cat.COUNT, [cat.with_time({"count": total})], params, accept)


@route("GET", "/_cat/health", api="cat.health", params=(*cat.PARAMS, "ts", "time"), text=True)
def cat_health(engine, params, body, accept):
    return 200, cat.table(cat.HEALTH, [cat.with_time(cat.health_row(engine))], params, accept)


# --- indices ---------------------------------------------------------------------------


#: the acknowledgement waits of the index APIs: one node, one copy, nothing to wait for
#: (time values checked as TimeValue parses them, ``wait_for_active_shards`` 0, 1 or all)
_ACK_WAITS = ("timeout", "master_timeout")


@route("PUT", "/{index}", api="indices.create", params=(*_ACK_WAITS, "wait_for_active_shards"))
def create_index(engine, params, body, index):
    rest_update.check_write_waits(params, _ACK_WAITS)
    check_create_index(body)
    return 200, engine.create_index(index, body or {})


@route("DELETE", "/{index}", api="indices.delete", params=(*indices_options.PARAMS, *_ACK_WAITS))
def delete_index(engine, params, body, index):
    """``ignore_unavailable``, ``allow_no_indices``, ``expand_wildcards``: as ``IndicesOptions``
    resolves them (``indices.delete(index="x", ignore_unavailable=True)`` of a missing index is
    acknowledged, the usual "drop if it exists" of a setup script)."""
    rest_update.check_write_waits(params, _ACK_WAITS)
    if any(p in params for p in indices_options.PARAMS):
        names = indices_options.resolve(engine, index, params, allow_aliases=False)
        if names:
            engine.delete_index(",".join(names))
    else:
        engine.delete_index(index)
    return 200, {"acknowledged": True}


@route("HEAD", "/{index}", api="indices.exists")
def index_exists(engine, params, body, index):
    try:
        engine.resolve(index)
    except EsError:
        return 404, None
    return 200, None


@route("GET", "/{index}", api="indices.get", params=indices_options.PARAMS)
def get_index(engine, params, body, index):
    out = {n: engine.handle(n).describe() for n in indices_options.resolve(engine, index, params)}
    for desc in out.values():
        desc["settings"]["index"] = shaping.human_settings(params, desc["settings"]["index"])
    return 200, out


@route("GET", "/{index}/_mapping", api="indices.get_mapping", params=indices_options.PARAMS)
def get_mapping(engine, params, body, index):
    names = indices_options.resolve(engine, index, params)
    return 200, {n: {"mappings": engine.handle(n).mapping.to_body()} for n in names}


@route("GET", "/_mapping", api="indices.get_mapping")
def get_all_mappings(engine, params, body):
    return 200, {n: {"mappings": engine.handle(n).mapping.to_body()} for n in engine.index_names()}


@route("PUT|POST", "/{index}/_mapping", api="indices.put_mapping", params=_ACK_WAITS)
def put_mapping(engine, params, body, index):
    rest_update.check_write_waits(params, _ACK_WAITS)
    check_put_mapping(body)
    for n in engine.resolve(index):
        engine.handle(n).put_mapping(body or {})
    return 200, {"acknowledged": True}


@route("GET", "/{index}/_settings", api="indices.get_settings")
def get_settings(engine, params, body, index):
    return 200, {
        n: {
            "settings": {
                "index": shaping.human_settings(params, engine.handle(n).describe()["settings"]["index"])
            }
        }
        for n in engine.resolve(index)
    }


@route("PUT", "/{index}/_settings", api="indices.put_settings")
def put_settings(engine, params, body, index):
    if body is None:  # RestRequest.contentOrSourceParam
        raise EsError(400, "parse_exception", "request body is required")
    if not isinstance(body, dict):
        raise parsing_error("the settings must be a JSON object")
    if not body:  # UpdateSettingsRequest.validate
        raise EsError(
            400, "action_request_validation_exception", "Validation Failed: 1: no settings to update;"
        )
    engine.put_settings(index, body)
    return 200, {"acknowledged": True}


@route("PUT", "/_settings", api="indices.put_settings")
def put_settings_all(engine, params, body):
    return put_settings(engine, params, body, "_all")


@route("POST|GET", "/{index}/_refresh", api="indices.refresh")
def refresh(engine, params, body, index):
    names = engine.resolve(index)
    for n in names:
        engine.handle(n).save()
    return 200, {"_shards": {"total": len(names), "successful": len(names), "failed": 0}}


@route("POST|GET", "/_refresh", api="indices.refresh")
def refresh_all(engine, params, body):
    return refresh(engine, params, body, "_all")


@route("POST|GET", "/{index}/_flush", api="indices.flush")
def flush(engine, params, body, index):
    out = refresh(engine, params, body, index)
    engine.store.flush()  # and the translog: commits of async indices are fsynced now
    return out


# --- aliases ---------------------------------------------------------------------------


@route("POST", "/_aliases", api="indices.update_aliases")
def update_aliases(engine, params, body):
    if not isinstance(body, dict) or "actions" not in body:
        raise parsing_error("[aliases] requires [actions]")
    check_alias_actions(body["actions"])
    engine.update_aliases(body["actions"])
    return 200, {"acknowledged": True, "errors": False}


@route("PUT|POST", "/{index}/_alias/{name}", api="indices.put_alias")
@route("PUT|POST", "/{index}/_aliases/{name}", api="indices.put_alias")
def put_alias(engine, params, body, index, name):
    spec = {"index": index, "alias": name}
    if isinstance(body, dict) and "is_write_index" in body:
        check_is_write_index(body["is_write_index"])
        spec["is_write_index"] = body["is_write_index"]
    engine.update_aliases([{"add": spec}])
    return 200, {"acknowledged": True, "errors": False}


@route("DELETE", "/{index}/_alias/{name}", api="indices.delete_alias")
@route("DELETE", "/{index}/_aliases/{name}", api="indices.delete_alias")
def delete_alias(engine, params, body, index, name):
    engine.update_aliases([{"remove": {"index": index, "alias": n}} for n in name.split(",")])
    return 200, {"acknowledged": True, "errors": False}


def _alias_view(engine, index_filter: list[str] | None, name_filter: str | None):
    out: dict = {}
    for alias, idx, is_write in engine.store.aliases():
        if index_filter is not None and idx not in index_filter:
            continue
        if name_filter is not None and alias not in name_filter.split(","):
            continue
        spec = {} if is_write is None else {"is_write_index": is_write}
        out.setdefault(idx, {"aliases": {}})["aliases"][alias] = spec
    return out


@route("GET", "/_alias", api="indices.get_alias")
@route("GET", "/_aliases", api="indices.get_alias")
def get_all_aliases(engine, params, body):
    out: dict[str, dict] = {n: {"aliases": {}} for n in engine.index_names()}
    out.update(_alias_view(engine, None, None))
    return 200, out


@route("GET", "/_alias/{name}", api="indices.get_alias")
@route("HEAD", "/_alias/{name}", api="indices.exists_alias")
def get_alias(engine, params, body, name):
    out = _alias_view(engine, None, name)
    if not out:
        return 404, {"error": f"alias [{name}] missing", "status": 404}
    return 200, out


@route("GET", "/{index}/_alias", api="indices.get_alias", params=indices_options.PARAMS)
def get_index_aliases(engine, params, body, index):
    names = indices_options.resolve(engine, index, params, allow_aliases=False)
    out: dict[str, dict] = {n: {"aliases": {}} for n in names}
    out.update(_alias_view(engine, names, None))
    return 200, out


@route("GET", "/{index}/_alias/{name}", api="indices.get_alias")
@route("HEAD", "/{index}/_alias/{name}", api="indices.exists_alias")
def get_index_alias(engine, params, body, index, name):
    out = _alias_view(engine, engine.resolve(index), name)
    if not out:
        return 404, {"error": f"alias [{name}] missing", "status": 404}
    return 200, out


# --- search ----------------------------------------------------------------------------


def _path(index: str, api: str) -> str:
    """The request path as Elasticsearch names it in errors (``_all``: none given)."""
    return f"/{api}" if index == "_all" else f"/{index}/{api}"


#: what ``_search`` implements of its URL parameters (here, in ``rest/params.py`` and ``_source_params``)
_SEARCH_PARAMS = (
    *indices_options.PARAMS,  # rest/indices_options.py
    "size",
    "from",
    "track_total_hits",
    "explain",
    *_SOURCE_PARAMS,
    "search_type",
    "rest_total_hits_as_int",
    "terminate_after",
    "typed_keys",
    "sort",
    "scroll",  # rest/scroll.py
    "request_cache",  # a cache hint: the same hits either way; refused with a scroll (rest/scroll.py)
    "q",  # rest/url_query.py
    *Q_PARAMS,
)
_MSEARCH_PARAMS = ("search_type", "rest_total_hits_as_int", "typed_keys")


def _search_params(params: dict, body: dict, path: str = "/_search") -> dict:
    check_search_body(body)
    body = with_url_query(params, body, path)
    for key in ("size", "from"):  # RestSearchAction.parseSearchSource: paramAsInt
        if key in params:
            body[key] = rest_params.param_int(key, params[key])
    if "track_total_hits" in params:  # Booleans.isBoolean (exactly "true"/"false"), else paramAsInt
        v = params["track_total_hits"]
        body["track_total_hits"] = (
            v == "true" if v in ("true", "false") else rest_params.param_int("track_total_hits", v)
        )
    if "explain" in params:
        body["explain"] = _bool_param(params, "explain")
    if "sort" in params:  # RestSearchAction: "field" or "field:order", comma-separated, after the body's
        items = body.get("sort", [])
        items = list(items) if isinstance(items, list) else [items]
        for part in str(params["sort"]).split(","):
            name, _, order = part.partition(":")
            items.append({name: order} if order else name)
        body["sort"] = items
    spec = _source_params(params)
    if spec is not None:
        body["_source"] = spec
    return body


def search_one(
    engine, index: str, body: dict, typed_keys: bool = False, checked: bool = False, names=None
) -> dict:
    """One index's search; ``checked``: the body already passed ``check_search_body``;
    ``names``: ``index`` already resolved (by the request's indices options)."""
    names = engine.resolve(index) if names is None else names
    if not names:  # a wildcard that matched nothing: an empty answer, as Elasticsearch gives
        return {
            "took": 0,
            "timed_out": False,
            "_shards": {"total": 0, "successful": 0, "skipped": 0, "failed": 0},
            "hits": {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []},
        }
    if len(names) > 1:
        raise illegal_argument(
            f"searching several indices at once ({', '.join(names)}) is not supported by the "
            "embedded engine; search one index or alias at a time"
        )
    if not checked:
        check_search_body(body)
    return SearchRun(engine.handle(names[0]), body, typed_keys=typed_keys).run()


@route("GET|POST", "/{index}/_search", api="search", params=_SEARCH_PARAMS)
def search(engine, params, body, index=None):
    """``index`` None: the path names no index (``/_search``), as a point-in-time search must."""
    body = rest_params.prepare(params, _search_params(params, body, _path(index or "_all", "_search")))
    names = indices_options.search_names(engine, index, body, params)
    if names is not None and "scroll" in params:
        index = indices_options.scroll_target(names)
    resp = rest_scroll.search(engine, index, body, params)  # a scroll or a point in time, else None
    if resp is None:
        typed_keys = rest_params.typed_keys(params)
        resp = search_one(engine, index or "_all", body, typed_keys, checked=True, names=names)
    return 200, rest_params.shape(params, resp)


@route("GET|POST", "/_search", api="search", params=_SEARCH_PARAMS)
def search_all(engine, params, body):
    return search(engine, params, body)


# --- scroll and point in time (engine/rest/scroll.py) --------------------------------------


@route("GET|POST", "/_search/scroll", api="scroll", params=rest_scroll.SCROLL_PARAMS)
def scroll(engine, params, body, scroll_id=None):
    sid, keep = rest_scroll.scroll_args({**params, **({"scroll_id": scroll_id} if scroll_id else {})}, body)
    return 200, rest_params.shape(params, rest_scroll.continue_scroll(engine, sid, keep))


@route("GET|POST", "/_search/scroll/{scroll_id}", api="scroll", params=rest_scroll.SCROLL_PARAMS)
def scroll_by_path(engine, params, body, scroll_id):
    return scroll(engine, params, body, scroll_id=scroll_id)


@route("DELETE", "/_search/scroll", api="clear_scroll", extra=("scroll_id",))
def clear_scroll(engine, params, body):
    return rest_scroll.clear_scroll(engine, params, body)


@route("DELETE", "/_search/scroll/{scroll_id}", api="clear_scroll", extra=("scroll_id",))
def clear_scroll_by_path(engine, params, body, scroll_id):
    return rest_scroll.clear_scroll(engine, params, body, scroll_id=scroll_id)


@route("POST", "/{index}/_pit", api="open_point_in_time", params=("keep_alive",))
def open_pit(engine, params, body, index):
    return 200, rest_scroll.open_pit(engine, index, params)


@route("DELETE", "/_pit", api="close_point_in_time")
def close_pit(engine, params, body):
    return rest_scroll.close_pit(engine, body)


# --- data streams: the engine has none ----------------------------------------------------


@route("GET", "/_data_stream", api="indices.get_data_stream", params=("expand_wildcards",))
def get_data_streams(engine, params, body):
    return 200, {"data_streams": []}


@route("GET", "/_data_stream/{name}", api="indices.get_data_stream", params=("expand_wildcards",))
def get_data_stream(engine, params, body, name):
    """GetDataStreamAction: a wildcard matches none (an empty list), a name is 404 (helpers.reindex
    asks whether its target is a data stream)."""
    if any("*" in part or part == "_all" for part in name.split(",")):
        return 200, {"data_streams": []}
    raise index_not_found(name.split(",")[0])


# --- multi get (engine/rest/mget.py) --------------------------------------------------------


@route("GET|POST", "/_mget", api="mget", params=rest_mget.MGET_PARAMS)
def mget(engine, params, body, index=None):
    return 200, rest_mget.mget(engine, index, params, body, _source_params(params))


@route("GET|POST", "/{index}/_mget", api="mget", params=rest_mget.MGET_PARAMS)
def mget_index(engine, params, body, index):
    return mget(engine, params, body, index=index)


@route("GET|POST", "/{index}/_count", api="count", params=("q", *Q_PARAMS, *indices_options.PARAMS))
def count_route(engine, params, body, index):
    check_search_body(body)
    body = with_url_query(params, body, _path(index, "_count"), body_wins=True)
    names = indices_options.resolve(engine, index, params)
    total = sum(count(engine.handle(n), body) for n in names)
    return 200, {
        "count": total,
        "_shards": {"total": len(names), "successful": len(names), "skipped": 0, "failed": 0},
    }


@route("GET|POST", "/_count", api="count", params=("q", *Q_PARAMS, *indices_options.PARAMS))
def count_all(engine, params, body):
    return count_route(engine, params, body, "_all")


@route("GET|POST", "/_analyze", api="indices.analyze")
def analyze_route(engine, params, body, index=None):
    return 200, analyze_api.analyze(engine, body, index)


@route("GET|POST", "/{index}/_analyze", api="indices.analyze")
def analyze_index_route(engine, params, body, index):
    return analyze_route(engine, params, body, index)


@route("GET|POST", "/{index}/_explain/{doc_id}", api="explain", params=("q", *Q_PARAMS))
def explain_route(engine, params, body, index, doc_id):
    return query_apis.explain(engine, params, body, index, doc_id)


@route("GET|POST", "/_validate/query", api="indices.validate_query", params=("q", *Q_PARAMS, "explain"))
def validate_query_route(engine, params, body, index="_all"):
    return query_apis.validate_query(engine, params, body, index)


@route(
    "GET|POST", "/{index}/_validate/query", api="indices.validate_query", params=("q", *Q_PARAMS, "explain")
)
def validate_query_index_route(engine, params, body, index):
    return validate_query_route(engine, params, body, index)


def error_of(method: str, path: str, exc: Exception) -> EsError:
    """The Elasticsearch-shaped error answering ``exc`` raised while handling ``method path``:
    an unexpected exception is a logged 500 ``internal_error``, never a traceback."""
    if isinstance(exc, EsError):
        return exc
    if isinstance(exc, RecursionError):
        return parsing_error(f"[{method} {path}]: the request is nested too deeply for the embedded engine")
    full = disk_full(exc, "the engine's files")  # a write the engine's own handlers did not name
    if full is not None:
        return full
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF if isinstance(exc, sqlite3.Error) else 0
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):  # another process held the write lock
        return EsError(429, "es_rejected_execution_exception", f"the engine store is busy ({exc}); retry")
    if code == sqlite3.SQLITE_IOERR or isinstance(exc, OSError):  # the disk failed, not the engine's code
        logging.getLogger("scholar_es.engine").error("I/O error on [%s %s]", method, path, exc_info=exc)
        return EsError(500, "i_o_exception", f"{exc} (while handling [{method} {path}])")
    return internal_error(method, path, exc)


@route("GET|POST", "/_msearch", api="msearch", params=_MSEARCH_PARAMS)
def msearch(engine, params, body, index=None):
    lines = body if isinstance(body, list) else []
    if len(lines) % 2:
        raise illegal_argument("msearch request must be pairs of header and body lines")
    rest_params.check_search_type(params.get("search_type"))
    for header, sbody in zip(lines[::2], lines[1::2], strict=False):
        rest_params.check_msearch_header(header)
        rest_params.prepare(params, sbody or {})  # a bad URL parameter fails the whole request
        if isinstance(sbody, dict) and "pit" in sbody:  # a point in time names no index
            named = index is not None or (
                isinstance(header, dict) and ("index" in header or "indices" in header)
            )
            found = rest_scroll.pit_problems(named, header if isinstance(header, dict) else {})
            if found:
                raise versioning.validation_error(found)
    responses = []
    for n, (header, sbody) in enumerate(zip(lines[::2], lines[1::2], strict=False)):
        try:
            header = check_msearch_header(header)
        except EsError as e:
            responses.append({**e.to_body()})
            continue
        target = header.get("index", header.get("indices", index))
        if isinstance(target, list):
            target = ",".join(target)
        try:
            if isinstance(sbody, dict) and "pit" in sbody:
                resp = rest_scroll.search_pit(
                    engine, rest_params.prepare(params, sbody), rest_params.typed_keys(params)
                )
            elif target is None:
                raise illegal_argument("Validation Failed: 1: no index specified;")
            else:
                sbody = rest_params.prepare(params, sbody or {})
                names = indices_options.search_names(
                    engine, target, sbody, indices_options.from_header(header)
                )
                resp = search_one(engine, target, sbody, rest_params.typed_keys(params), names=names)
            resp["status"] = 200
        except Exception as exc:  # noqa: BLE001 - one item's failure is that item's answer only
            path = f"/{index}/_msearch" if index is not None else "/_msearch"
            resp = {**error_of("POST", f"{path} (search [{n}])", exc).to_body()}
        responses.append(rest_params.shape(params, resp))
    return 200, {"took": sum(r.get("took", 0) for r in responses), "responses": responses}


@route("GET|POST", "/{index}/_msearch", api="msearch", params=_MSEARCH_PARAMS)
def msearch_index(engine, params, body, index):
    return msearch(engine, params, body, index=index)


# --- stored scripts and search templates -----------------------------------------------


@route("PUT|POST", "/_scripts/{script_id}", api="put_script")
def put_script(engine, params, body, script_id):
    check_script_body(body)
    script = (body or {}).get("script")
    if not isinstance(script, dict) or "source" not in script:
        raise illegal_argument("must specify [script] with a [source]")
    if script.get("lang") not in ("mustache", "painless", None):
        raise illegal_argument(f"script_lang not supported [{script.get('lang')}]")
    engine.store.put_script(script_id, script)
    return 200, {"acknowledged": True}


@route("GET", "/_scripts/{script_id}", api="get_script")
def get_script(engine, params, body, script_id):
    script = engine.store.get_script(script_id)
    if script is None:
        return 404, {"_id": script_id, "found": False}
    return 200, {"_id": script_id, "found": True, "script": script}


@route("DELETE", "/_scripts/{script_id}", api="delete_script")
def delete_script(engine, params, body, script_id):
    if not engine.store.delete_script(script_id):
        raise EsError(404, "resource_not_found_exception", f"stored script [{script_id}] does not exist")
    return 200, {"acknowledged": True}


@route("GET|POST", "/{index}/_search/template", api="search_template")
def search_template(engine, params, body, index):
    from scholar_es.engine.search.templates import render_template

    return 200, search_one(engine, index, render_template(engine, check_template_body(body)))


@route("GET|POST", "/_render/template", api="render_search_template")
def render_template_route(engine, params, body):
    from scholar_es.engine.search.templates import render_template

    return 200, {"template_output": render_template(engine, check_template_body(body))}


@route("GET|POST", "/_render/template/{script_id}", api="render_search_template")
def render_stored_template(engine, params, body, script_id):
    return render_template_route(engine, params, {**check_template_body(body), "id": script_id})
