"""``_mget``: several documents by id, each answered as ``GET /{index}/_doc/{id}`` would be.

The body is ``{"docs": [{"_index", "_id", "_source", ...}]}`` or, with an index in the path,
``{"ids": [...]}`` (MultiGetRequest.parse). Each found document comes back with its version,
sequence number and ``_source`` (filtered by the doc's ``_source`` / the URL's ``_source``,
``_source_includes``, ``_source_excludes``, the doc's own winning); a missing one as
``{"_index", "_id", "found": false}``; an index that does not exist, or an alias over several,
as that item's ``error`` (the other items are still answered).

``realtime`` and ``refresh`` are accepted with either value: the engine reads documents from SQLite,
where every acknowledged write already is, and its searchable snapshot follows SQLite without a
refresh interval, so both give the answer a refreshed cluster gives. ``preference`` has one copy to
choose from. ``stored_fields`` and ``routing`` (URL or per document) are refused by name: the engine
stores no fields apart from ``_source`` and has one shard.
"""

from __future__ import annotations

from typing import Any

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index import versioning
from scholar_es.engine.search.hits import filter_source

#: the URL parameters _mget reads (the REST spec's names); the _source ones via handler._source_params
MGET_PARAMS = ("_source", "_source_includes", "_source_excludes", "realtime", "refresh", "preference")
_REFUSED_PARAMS = ("stored_fields", "routing")
_DOC_KEYS = {"_index", "_id", "_source", "stored_fields", "routing", "version", "version_type"}


def _flag(params: dict, name: str) -> None:
    """A boolean URL parameter: ``true``/``false``/empty, else Elasticsearch's parse error."""
    v = params.get(name)
    if v is not None and str(v).lower() not in ("", "true", "false"):
        raise illegal_argument(f"Failed to parse value [{v}] as only [true] or [false] are allowed.")


def _requests(index: str | None, body) -> list[dict]:
    """The documents asked for (MultiGetRequest.parse and validate)."""
    if body is None:
        raise EsError(400, "parse_exception", "request body or source parameter is required")
    if not isinstance(body, dict):
        raise parsing_error("request body must be a JSON object")
    unknown = set(body) - {"docs", "ids"}
    if unknown:
        raise parsing_error(f"unknown key [{sorted(unknown)[0]}] for a START_ARRAY, expected [docs] or [ids]")
    docs: list[dict] = []
    for item in body.get("docs") or []:
        if not isinstance(item, dict):
            raise parsing_error("docs array element should include an object")
        extra = set(item) - _DOC_KEYS
        if extra:
            raise parsing_error(f"unknown key [{sorted(extra)[0]}] for a document to get")
        docs.append(item)
    ids = body.get("ids")
    if ids is not None:
        if not isinstance(ids, list):
            raise parsing_error("ids array element should only contain ids")
        for i in ids:
            if isinstance(i, (dict, list)):
                raise parsing_error("ids array element should only contain ids")
            docs.append({"_id": i})
    problems: list[str] = []
    for item in docs:
        item.setdefault("_index", index)
        if item.get("_index") is None:
            problems.append("index is missing")
        if item.get("_id") is None:
            problems.append("id is missing")
    if not docs:
        problems.append("no documents to get")
    if problems:
        raise versioning.validation_error(problems)
    return docs


def _concrete(engine, name: str) -> str:
    """IndexNameExpressionResolver.concreteSingleIndex: one index, or this item's error."""
    indices = engine.store.indices()
    if name in indices:
        return name
    targets = sorted({i for a, i, _ in engine.store.aliases() if a == name})
    if len(targets) == 1:
        return targets[0]
    if len(targets) > 1:
        raise illegal_argument(
            f"alias [{name}] has more than one index associated with it [{', '.join(targets)}], "
            "can't execute a single index op"
        )
    from scholar_es.engine.errors import index_not_found

    raise index_not_found(name)


def _one(engine, item: dict, url_source) -> dict:
    doc_id = str(item["_id"])
    for key in ("stored_fields", "routing", "version", "version_type"):
        if key in item:
            raise unsupported(
                f"_mget docs.{key}", "the embedded engine stores only _source and has one shard"
            )
    name = _concrete(engine, str(item["_index"]))
    doc = engine.handle(name).get(doc_id)
    if doc is None:
        return {"_index": name, "_id": doc_id, "found": False}
    spec = item.get("_source", url_source)
    if spec is not None:
        filtered = filter_source(doc["_source"], spec)
        doc = {k: v for k, v in doc.items() if k != "_source"}
        if filtered is not None:
            doc["_source"] = filtered
    return doc


def mget(engine, index: str | None, params: dict, body, url_source) -> dict[str, Any]:
    for name in _REFUSED_PARAMS:
        if params.get(name) not in (None, ""):
            raise unsupported(name, "the embedded engine stores only _source and has one shard")
    for name in ("realtime", "refresh"):
        _flag(params, name)
    out = []
    for item in _requests(index, body):
        try:
            out.append(_one(engine, item, url_source))
        except EsError as e:
            if e.status >= 500 or e.type == "parsing_exception":
                raise
            # MultiGetResponse.Failure: the item's index and id beside the error
            out.append(
                {"_index": str(item["_index"]), "_id": str(item["_id"]), "error": e.to_body()["error"]}
            )
    return {"docs": out}
