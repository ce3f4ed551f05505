"""Document routes: index, create, get, exists, source, delete, update, the by-query APIs,
reindex and bulk (RestIndexAction, RestGetAction, RestDeleteAction, RestUpdateAction,
RestBulkAction ...), with the URL parameters each implements."""

from __future__ import annotations

import uuid

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index import versioning
from scholar_es.engine.index.versioning import Condition
from scholar_es.engine.rest import by_query
from scholar_es.engine.rest import update as rest_update
from scholar_es.engine.rest.routing import route
from scholar_es.engine.search.hits import filter_source
from scholar_es.engine.validate import check_bulk_meta

#: parameters of the document write APIs the engine does not implement: refused by name (a
#: ``false`` is what they default to, and accepted)
_UNSUPPORTED_WRITE_PARAMS = ("routing", "pipeline", "require_alias", "require_data_stream")


#: the URL parameters the document APIs implement (the write parameters above: ``false`` only)
_COND_PARAMS = ("version", "version_type", "if_seq_no", "if_primary_term", "refresh")
_INDEX_PARAMS = ("op_type", *_UNSUPPORTED_WRITE_PARAMS, *_COND_PARAMS)
_CREATE_PARAMS = ("routing", "pipeline", "version", "version_type", "refresh")
_CREATE_EXTRA = ("op_type", "if_seq_no", "if_primary_term", "require_alias", "require_data_stream")
_DELETE_PARAMS = ("routing", *_COND_PARAMS)
_SOURCE_PARAMS = ("_source", "_source_includes", "_source_excludes")


def check_refresh(params: dict) -> None:
    """``WriteRequest.RefreshPolicy.parse``: ``true`` (or empty), ``false``, ``wait_for``. Every
    value holds as is: a write is visible to the next search, refreshed or not (docs/storage.md)."""
    value = params.get("refresh")
    if value is not None and str(value) not in ("", "true", "false", "wait_for"):
        raise illegal_argument(f"Unknown value for refresh: [{value}].")


def _write_params(params: dict, op: str, has_id: bool = True) -> Condition:
    """The condition of a document write from its URL parameters (RestIndexAction,
    RestDeleteAction); the parameters the engine does not implement are refused by name."""
    for name in _UNSUPPORTED_WRITE_PARAMS:
        if name in params and str(params[name]).lower() != "false":
            raise unsupported(name, "the embedded engine has one shard and no ingest pipelines")
    check_refresh(params)
    return versioning.checked(params, op, has_id)


def _op_type(value) -> str:
    """``IndexRequest.opType(String)``."""
    op = str(value).lower()
    if op not in ("index", "create"):
        raise illegal_argument(f"opType must be 'create' or 'index', found: [{value}]")
    return op


def _write_one(engine, index, doc_id, source, cond: Condition):
    if not isinstance(source, dict):
        raise parsing_error("request body is required and must be a JSON object")
    name = engine.write_index(index)
    return _item_response(engine.handle(name).write([("index", doc_id, source, cond)])[0])


_item_response = rest_update.item_response


@route("PUT|POST", "/{index}/_doc/{doc_id}", api="index", params=_INDEX_PARAMS)
def index_doc(engine, params, body, index, doc_id):
    cond = _write_params(params, _op_type(params.get("op_type", "index")))
    return _write_one(engine, index, doc_id, body, cond)


@route("POST", "/{index}/_doc", api="index", params=_INDEX_PARAMS)
def index_doc_auto(engine, params, body, index):
    # RestIndexAction.AutoIdHandler: op_type create unless the request names one
    cond = _write_params(params, _op_type(params.get("op_type", "create")), has_id=False)
    return _write_one(engine, index, uuid.uuid4().hex[:20], body, cond)


# RestIndexAction.CreateHandler reads op_type (validateOpType) and, through IndexHandler, the
# parameters of index.json that create.json does not list
@route("PUT|POST", "/{index}/_create/{doc_id}", api="create", params=_CREATE_PARAMS, extra=_CREATE_EXTRA)
def create_doc(engine, params, body, index, doc_id):
    op_type = params.get("op_type")
    if op_type is not None and op_type != "create":  # RestIndexAction.CreateHandler.validateOpType
        raise illegal_argument(f"opType must be 'create', found: [{op_type}]")
    return _write_one(engine, index, doc_id, body, _write_params(params, "create"))


@route("GET", "/{index}/_doc/{doc_id}", api="get", params=_SOURCE_PARAMS)
def get_doc(engine, params, body, index, doc_id):
    name = engine.write_index(index, create=False)
    doc = engine.handle(name).get(doc_id)
    if doc is None:
        return 404, {"_index": name, "_id": doc_id, "found": False}
    spec = _source_params(params)
    if spec is not None:
        filtered = filter_source(doc["_source"], spec)
        doc = {k: v for k, v in doc.items() if k != "_source"}
        if filtered is not None:
            doc["_source"] = filtered
    return 200, doc


@route("HEAD", "/{index}/_doc/{doc_id}", api="exists", params=_SOURCE_PARAMS)
def doc_exists(engine, params, body, index, doc_id):
    status, _ = get_doc(engine, params, body, index, doc_id)
    return status, None


@route("GET", "/{index}/_source/{doc_id}", api="get_source", params=_SOURCE_PARAMS)
def get_source(engine, params, body, index, doc_id):
    status, doc = get_doc(engine, params, body, index, doc_id)
    if status == 200 and doc.get("_source") is None:  # RestGetSourceAction: no source stored
        raise EsError(404, "resource_not_found_exception", f"Source not found [{index}]/[{doc_id}]")
    return status, doc.get("_source") if status == 200 else doc


@route("HEAD", "/{index}/_source/{doc_id}", api="exists_source", params=_SOURCE_PARAMS)
def source_exists(engine, params, body, index, doc_id):
    """RestGetSourceAction's HEAD: the status ``GET _source`` would answer, without a body."""
    try:
        status, _ = get_source(engine, params, body, index, doc_id)
    except EsError as e:
        return e.status, None
    return status, None


@route("DELETE", "/{index}/_doc/{doc_id}", api="delete", params=_DELETE_PARAMS)
def delete_doc(engine, params, body, index, doc_id):
    cond = _write_params(params, "delete")
    name = engine.write_index(index, create=False)
    return _item_response(engine.handle(name).write([("delete", doc_id, cond)])[0])


@route("POST", "/{index}/_update/{doc_id}", api="update", params=rest_update.PARAMS)
def update_doc(engine, params, body, index, doc_id):
    return rest_update.update_request(engine, params, body, index, doc_id, _source_params(params))


def _by_query_route(kind: str):
    """``POST /{index}/_<kind>`` and ``POST /_all/_<kind>`` (``{index}`` never starts with ``_``)."""
    params, extra = by_query.PARAMS[kind], by_query.EXTRA

    def deco(fn):
        for pattern in (f"/_all/_{kind}", f"/{{index}}/_{kind}"):
            fn = route("POST", pattern, api=kind, params=params, extra=extra)(fn)
        return fn

    return deco


@_by_query_route("delete_by_query")
def delete_by_query(engine, params, body, index="_all"):
    return by_query.run(engine, by_query.parse(engine, "delete_by_query", index, params, body))


@_by_query_route("update_by_query")
def update_by_query(engine, params, body, index="_all"):
    return by_query.run(engine, by_query.parse(engine, "update_by_query", index, params, body))


@route("POST", "/_reindex", api="reindex", params=by_query.PARAMS["reindex"], extra=("require_alias",))
def reindex(engine, params, body):
    return by_query.run(engine, by_query.parse(engine, "reindex", None, params, body))


@route("POST|PUT", "/_bulk", api="bulk", params=("refresh",))
def bulk(engine, params, body, index=None):
    check_refresh(params)
    lines = body if isinstance(body, list) else []
    items: list[dict] = []
    groups: dict[str, list] = {}
    order: list[tuple[str, int, str, dict | None]] = []
    invalid: list[str] = []  # validation errors of the items (ActionRequestValidationException)
    i = 0
    while i < len(lines):
        action = lines[i]
        i += 1
        if not isinstance(action, dict) or len(action) != 1:
            raise illegal_argument(
                f"Malformed action/metadata line [{i}], expected START_OBJECT or END_OBJECT but "
                f"found [{type(action).__name__}]"
            )
        op, meta = next(iter(action.items()))
        if op not in ("index", "create", "delete", "update"):
            raise illegal_argument(
                f"Malformed action/metadata line [{i}], expected field [create], [delete], "
                f"[index] or [update] but found [{op}]"
            )
        check_bulk_meta(i, op, meta)
        meta = meta or {}
        kind = "create" if op == "create" or (op == "index" and meta.get("op_type") == "create") else op
        cond = versioning.parse(meta, "index" if op == "update" else kind)
        if op != "update":  # an update's conditions are validated with the rest of it, below
            invalid.extend(versioning.problems(cond, kind, has_id=meta.get("_id") is not None))
        target = meta.get("_index", index)
        if target is None:
            raise illegal_argument("Validation Failed: 1: index is missing;")
        doc_id = meta.get("_id")
        source = None
        if op != "delete":
            if i >= len(lines):
                raise illegal_argument("The bulk request must be terminated by a newline [\\n]")
            source = lines[i]
            i += 1
            if doc_id is None:
                doc_id = uuid.uuid4().hex[:20]
        elif doc_id is None:
            raise illegal_argument("Validation Failed: 1: id is missing;")
        if op == "update":
            if meta.get("_id") is None:
                invalid.append("id is missing")
            source, problems = rest_update.parse_update(
                source,
                cond,
                rest_update.retry_count(meta.get("retry_on_conflict", 0)),
                rest_update.source_spec(meta["_source"]) if meta.get("_source") is not None else None,
                engine.store.get_script,
            )
            invalid.extend(problems)
        order.append((target, len(groups.setdefault(target, [])), op, source))
        groups[target].append((op, str(doc_id), source, cond))
    if invalid:  # BulkRequest.validate: every item's validation errors, the whole request refused
        raise versioning.validation_error(invalid)
    results: dict[str, list[dict]] = {}
    for target, ops in groups.items():
        try:
            name = engine.write_index(target)
            handle_ = engine.handle(name)
            results[target] = _bulk_writes(handle_, name, ops)
        except EsError as e:
            results[target] = [
                {"_index": target, "_id": doc_id, "status": e.status, "error": e.cause()}
                for _, doc_id, _, _ in ops
            ]
    errors = False
    for target, pos, op, _ in order:
        item = results[target][pos]
        item.setdefault("_index", target)
        errors = errors or "error" in item
        items.append({op: item})
    return 200, {"took": 0, "errors": errors, "items": items}


def _bulk_writes(handle_, name: str, ops: list[tuple]) -> list[dict]:
    """One index's bulk items in order: runs of index/create/delete ops written together, each
    update applied on its own (it reads the document the earlier items wrote)."""
    out: list[dict] = []
    run: list[tuple] = []

    def flush() -> None:
        good = [w for w in run if w[0] != "bad"]
        written = iter(handle_.write(good) if good else [])
        out.extend(
            next(written)
            if w[0] != "bad"
            else {
                "_index": name,
                "_id": w[1],
                "status": 400,
                "error": {
                    "type": "document_parsing_exception",
                    "reason": "[1:1] failed to parse: source is not a JSON object",
                },
            }
            for w in run
        )
        run.clear()

    for op, doc_id, source, cond in ops:
        if op == "update":
            flush()
            out.append(rest_update.update_item(handle_, doc_id, source))
        elif op == "delete":
            run.append(("delete", doc_id, cond))
        elif not isinstance(source, dict):
            run.append(("bad", doc_id))
        else:
            run.append(("index", doc_id, source, cond))
    flush()
    return out


@route("POST|PUT", "/{index}/_bulk", api="bulk", params=("refresh",))
def bulk_index(engine, params, body, index):
    return bulk(engine, params, body, index=index)


def _source_params(params: dict) -> bool | dict | None:
    """FetchSourceContext.parseFromRestRequest: the ``_source`` (true, false or fields),
    ``_source_includes`` and ``_source_excludes`` URL parameters, which replace the body's
    ``_source`` when any is given (None: none given)."""
    fetch, includes, excludes = None, None, None
    if "_source" in params:
        v = params["_source"]
        if v.lower() in ("true", "false"):
            fetch = v.lower() == "true"
        else:
            includes = v.split(",")
    if "_source_includes" in params:
        includes = params["_source_includes"].split(",")
    if "_source_excludes" in params:
        excludes = params["_source_excludes"].split(",")
    if fetch is None and includes is None and excludes is None:
        return None
    if fetch is False:
        return False
    return {"includes": includes or [], "excludes": excludes or []}
