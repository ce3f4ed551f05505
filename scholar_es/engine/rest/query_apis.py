"""``GET|POST /{index}/_explain/{id}`` and ``GET|POST [/{index}]/_validate/query``.

* ``_explain`` (RestExplainAction): the body's ``query`` (or ``q`` and its URL parameters) run on
  the index and the document's score explained by the same ``explain`` the search's hits give
  (the dense path, engine/query/nodes.py). Answer: ``_index``, ``_id``, ``matched`` and
  ``explanation``; a document that does not match gets ``matched: false`` and an explanation of
  value 0 (Lucene's Weight#explain of a non-matching document), a missing one 404 with
  ``matched: false`` and no explanation. ``_source``, ``stored_fields`` and ``routing`` are refused
  by name.
* ``_validate/query`` (RestValidateQueryAction, TransportValidateQueryAction): ``valid`` and
  ``_shards``; a body without ``query``, or a query that fails to parse or to build, is
  ``valid: false`` (status 200), with ``explain=true`` its ``error`` text. ``explain=true`` on a
  valid query lists each index's query as Lucene prints it (the node types engine/search/profile.py
  can print; others are refused by name). ``rewrite`` and ``all_shards`` are refused by name.
"""

from __future__ import annotations

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.query.nodes import expl
from scholar_es.engine.rest.url_query import with_url_query
from scholar_es.engine.search.execute import SearchRun
from scholar_es.engine.search.profile import NoLuceneString, lucene_string

#: Java class names Elasticsearch prints before an error's message in ``_validate/query``'s ``error``
_JAVA_CLASS = {
    "parsing_exception": "org.elasticsearch.common.ParsingException",
    "illegal_argument_exception": "java.lang.IllegalArgumentException",
    "query_shard_exception": "org.elasticsearch.index.query.QueryShardException",
    "x_content_parse_exception": "org.elasticsearch.xcontent.XContentParseException",
}


#: errors Elasticsearch raises while parsing the request, before any shard sees the query
_REQUEST_LEVEL = ("parsing_exception", "x_content_parse_exception")
_REFUSED = "is not supported by the scholar-es embedded engine"  # errors.unsupported


def _flag(params: dict, name: str) -> bool:
    v = params.get(name)
    return v is not None and str(v).lower() in ("", "true")


def _query_of(body, params: dict, path: str) -> dict:
    """The query of an explain/validate body (RestActions#getQueryContent: ``query`` only)."""
    if body is not None and not isinstance(body, dict):
        raise parsing_error("request body must be a JSON object")
    for key in body or {}:
        if key != "query":
            raise parsing_error(f"request does not support [{key}]")
    merged = with_url_query(params, body, path, body_wins=True)
    return merged.get("query", {"match_all": {}})


def explain(engine, params: dict, body, index: str, doc_id: str) -> tuple[int, dict]:
    for name in ("_source", "_source_includes", "_source_excludes", "stored_fields", "routing"):
        if name in params:
            raise unsupported(f"_explain.{name}")
    path = f"/{index}/_explain/{doc_id}"
    if not (body or {}).get("query") and "q" not in params:
        _query_of(body, params, path)  # a body with other keys: its parsing error first
        # ExplainRequest#validate
        raise EsError(400, "action_request_validation_exception", "Validation Failed: 1: query is missing;")
    query = _query_of(body, params, path)
    names = engine.resolve(index)
    if len(names) != 1:
        raise illegal_argument(f"explain needs one index, [{index}] resolves to {len(names)}")
    handle = engine.handle(names[0])
    run = SearchRun(handle, {"query": query, "explain": True, "size": 0})
    with handle.reading() as (seg, reader):
        run.bind(seg, reader)
        pos = seg.position_of(doc_id)
        if pos is None:
            return 404, {"_index": handle.name, "_id": doc_id, "matched": False}
        mask, scores, run.nodes = run.score()
        if not mask[pos]:
            return 200, {
                "_index": handle.name,
                "_id": doc_id,
                "matched": False,
                "explanation": expl(0.0, "no matching term"),
            }
        return 200, {
            "_index": handle.name,
            "_id": doc_id,
            "matched": True,
            "explanation": run.explain(int(pos), float(scores[pos])),
        }


def validate_query(engine, params: dict, body, index: str = "_all") -> tuple[int, dict]:
    for name in ("rewrite", "all_shards"):
        if _flag(params, name):
            raise unsupported(f"_validate/query.{name}")
    want_explain = _flag(params, "explain")
    names = engine.resolve(index)
    shards = {"total": len(names), "successful": len(names), "failed": 0}
    path = "/_validate/query" if index == "_all" else f"/{index}/_validate/query"
    valid, explanations, error = True, [], None
    try:
        query = _query_of(body, params, path)
        nodes = []
        for name in names:
            handle = engine.handle(name)
            run = SearchRun(handle, {"query": query, "size": 0})
            with handle.reading() as (seg, reader):
                run.bind(seg, reader)
                try:
                    nodes.append((name, run.parser.parse(query)))
                except EsError as e:
                    if e.status >= 500 or e.type in _REQUEST_LEVEL:
                        raise
                    valid = False  # a query that parses but cannot be built on this index's fields
                    error = f"[{name}] {_JAVA_CLASS.get(e.type, e.type)}: {e.reason}"
                    explanations.append({"index": name, "valid": False, "error": error})
    except EsError as e:
        if e.type not in _REQUEST_LEVEL or _REFUSED in e.reason:  # a refusal is not an invalid query
            raise
        # RestValidateQueryAction: a body that does not parse answers valid: false (200), the
        # error's text only with explain
        out: dict = {"valid": False}
        if want_explain:
            out["error"] = f"{_JAVA_CLASS[e.type]}: {e.reason}"
        return 200, out
    for name, node in nodes:
        if want_explain:
            try:
                text = lucene_string(node)
            except NoLuceneString as missing:
                raise unsupported(
                    f"_validate/query explain of a [{missing}] query", "leave explain out to validate only"
                ) from None
            explanations.append({"index": name, "valid": True, "explanation": text})
    out = {"_shards": shards, "valid": valid}
    if want_explain:
        out["explanations"] = explanations
        if error is not None:
            out["error"] = error
    return 200, out
