"""``POST /{index}/_update/{id}`` and the ``update`` action of ``_bulk``, as Elasticsearch's
``UpdateHelper``/``TransportUpdateAction`` run them on the engine's conditional writes.

An update reads the document, computes the new source (a partial ``doc`` merged as
``XContentHelper.update`` merges, or a script of :mod:`engine.script.update_script`), and writes it
on condition that the document is still the one read (``if_seq_no`` of the read, or ``op_type
create`` when it was missing); a concurrent write makes that condition fail, and the update is
read and applied again up to ``retry_on_conflict`` times (then 409), so no update is ever lost.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
    x_content_parse_error,
)
from scholar_es.engine.index import versioning
from scholar_es.engine.index.versioning import Condition
from scholar_es.engine.rest.params import param_int
from scholar_es.engine.script.update_script import compile_update_script, run_script
from scholar_es.engine.search.hits import filter_source
from scholar_es.engine.validate import check_time_value, json_token

#: the body keys of an update (UpdateRequest.PARSER)
BODY_KEYS = ("script", "scripted_upsert", "upsert", "doc", "doc_as_upsert", "detect_noop", "_source")


@dataclass
class UpdateSpec:
    """One parsed update request."""

    doc: dict | None = None
    upsert: dict | None = None
    doc_as_upsert: bool = False
    scripted_upsert: bool = False
    detect_noop: bool = True
    script_body: Any = None  # the request's ``script``, compiled when it runs (UpdateHelper)
    stored: Any = None  # the stored-script look-up
    cond: Condition = versioning.ANY
    retry_on_conflict: int = 0
    source: bool | dict | None = None  # what ``get._source`` shows (None: no ``get``)


def _levenshtein_similarity(a: str, b: str) -> float:
    """Lucene's ``LevenshteinDistance.getDistance``: 1 - edits / the longer length."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1.0 - prev[-1] / max(len(a), len(b), 1)


def unknown_field(parser: str, name: str, candidates: tuple[str, ...]) -> EsError:
    """``SuggestingErrorOnUnknown``: ``[parser] unknown field [x] did you mean [y]?``."""
    scored = sorted(
        ((s, c) for c in candidates if (s := _levenshtein_similarity(name, c)) > 0.5),
        key=lambda t: (-t[0], t[1]),
    )
    hint = ""
    if len(scored) == 1:
        hint = f" did you mean [{scored[0][1]}]?"
    elif scored:
        hint = f" did you mean any of [{', '.join(c for _, c in scored)}]?"
    return x_content_parse_error(f"[{parser}] unknown field [{name}]{hint}")


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    raise x_content_parse_error(f"[UpdateRequest] failed to parse field [{key}]")


def source_spec(value: Any) -> bool | dict | None:
    """``FetchSourceContext.fromXContent`` of a body ``_source`` (true/false, a field or fields,
    or an object of ``includes``/``excludes``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return {"includes": [value], "excludes": []}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return {"includes": value, "excludes": []}
    if isinstance(value, dict):
        for key, v in value.items():
            if key not in ("includes", "include", "excludes", "exclude"):
                raise parsing_error(f"Unknown key for a {json_token(v)} in [{key}].")
        return {
            "includes": _names(value.get("includes", value.get("include", []))),
            "excludes": _names(value.get("excludes", value.get("exclude", []))),
        }
    raise parsing_error(
        "Expected one of [TRUE, FALSE, VALUE_STRING, START_ARRAY, START_OBJECT] for [_source]"
    )


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise parsing_error("Expected a string or an array of strings for [_source] includes and excludes")


def parse_update(
    body: Any, cond: Condition, retry_on_conflict: int, source: bool | dict | None, stored
) -> tuple[UpdateSpec, list[str]]:
    """An update request from its body and URL/metadata values, and what ``UpdateRequest.validate``
    says of it (the messages of an ``action_request_validation_exception``, none when valid)."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise parsing_error("request body is required and must be a JSON object")
    spec = UpdateSpec(cond=cond, retry_on_conflict=retry_on_conflict, source=source)
    for key, value in body.items():
        if key not in BODY_KEYS:
            raise unknown_field("UpdateRequest", key, BODY_KEYS)
        if key in ("doc", "upsert"):
            if not isinstance(value, dict):
                raise x_content_parse_error(f"[UpdateRequest] failed to parse field [{key}]")
            setattr(spec, key, value)
        elif key in ("doc_as_upsert", "scripted_upsert", "detect_noop"):
            setattr(spec, key, _bool(key, value))
        elif key == "_source":
            spec.source = source_spec(value) if source is None else source
    problems: list[str] = []
    spec.script_body, spec.stored = body.get("script"), stored
    if spec.script_body is None and spec.doc is None:
        problems.append("script or doc is missing")
    if spec.script_body is not None and spec.doc is not None:
        problems.append("can't provide both script and doc")
    if spec.doc is None and spec.doc_as_upsert:
        problems.append("doc must be specified if doc_as_upsert is enabled")
    problems.extend(versioning.problems(cond, "index"))
    if cond.if_seq_no != versioning.UNASSIGNED_SEQ_NO:
        if retry_on_conflict > 0:
            problems.append("compare and write operations can not be retried")
        if spec.doc_as_upsert:
            problems.append("compare and write operations can not be used with upsert")
        if spec.upsert is not None:
            problems.append("upsert requests don't support `if_seq_no` and `if_primary_term`")
    if retry_on_conflict < 0:
        problems.append("retry_on_conflict must be greater than or equal to 0")
    return spec, problems


def deep_merge(source: dict, changes: dict) -> bool:
    """``XContentHelper.update``: ``changes`` merged into ``source`` in place (objects merged
    recursively, anything else replaced); whether anything changed."""
    modified = False
    for key, new in changes.items():
        old = source.get(key, _ABSENT)
        if isinstance(new, dict) and isinstance(old, dict):
            modified |= deep_merge(old, new)
            continue
        source[key] = new
        modified = modified or old is _ABSENT or not _same(old, new)
    return modified


_ABSENT = object()


def _same(a: Any, b: Any) -> bool:
    """``Objects.equals`` of two parsed JSON values (1 and 1.0 differ: Integer vs Double)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _missing(handle, doc_id: str) -> EsError:
    """``DocumentMissingException``."""
    return EsError(
        404,
        "document_missing_exception",
        f"[{doc_id}]: document missing",
        index_uuid=handle.uuid,
        shard="0",
        index=handle.name,
    )


def _plan(
    handle, doc_id: str, spec: UpdateSpec, current: dict | None
) -> tuple[str, tuple | None, dict | None]:
    """What one attempt writes: (result, store op or None for a noop, the source to show)."""
    if current is None:
        if spec.upsert is None and not spec.doc_as_upsert:
            raise _missing(handle, doc_id)
        source = copy.deepcopy(spec.doc if spec.doc_as_upsert else spec.upsert)
        assert source is not None
        if spec.scripted_upsert and spec.script_body is not None:
            ctx = _run(
                spec,
                "upsert",
                {
                    "_index": handle.name,
                    "_id": doc_id,
                    "_routing": None,
                    "_now": _now(),
                    "_type": "_doc",
                    "op": "create",
                    "_source": source,
                },
            )
            source = ctx["_source"]
            if ctx["op"] == "noop":  # UpdateHelper.prepareUpsert: NONE
                return "noop", None, source
        return "created", ("index", doc_id, source, versioning.CREATE), source
    seen = Condition(if_seq_no=current["_seq_no"], if_primary_term=versioning.PRIMARY_TERM)
    old = current["_source"]
    if spec.script_body is None:
        merged = copy.deepcopy(old)
        assert spec.doc is not None
        changed = deep_merge(merged, spec.doc)
        if spec.detect_noop and not changed:
            return "noop", None, old
        return "updated", ("index", doc_id, merged, seen), merged
    ctx = _run(
        spec,
        "update",
        {
            "_index": handle.name,
            "_id": doc_id,
            "_version": current["_version"],
            "_routing": None,
            "_now": _now(),
            "_type": "_doc",
            "op": "index",
            "_source": copy.deepcopy(old),
        },
    )
    if ctx["op"] == "noop":
        return "noop", None, old
    if ctx["op"] == "delete":
        return "deleted", ("delete", doc_id, seen), None
    return "updated", ("index", doc_id, ctx["_source"], seen), ctx["_source"]


def _run(spec: UpdateSpec, context: str, values: dict) -> dict:
    """The script on one ctx; any failure, compiling included, is ``failed to execute script``
    (``UpdateHelper.executeScript``)."""
    try:
        return run_script(compile_update_script(spec.script_body, spec.stored), context, values)
    except EsError as e:
        raise EsError(
            400, "illegal_argument_exception", "failed to execute script", caused_by=e.cause()
        ) from None


def _now() -> int:
    return int(time.time() * 1000)


def update_item(handle, doc_id: str, spec: UpdateSpec) -> dict:
    """Apply one update to ``handle``'s index: its item (``status`` included) or error item."""
    attempts = 0
    while True:
        try:
            current = handle.get(doc_id)
            if current is not None and spec.cond.if_seq_no != versioning.UNASSIGNED_SEQ_NO:
                reason = versioning.conflict(spec.cond, current["_version"], current["_seq_no"] + 1)
                if reason is not None:  # UpdateHelper.prepare: checked against the document read
                    raise versioning.conflict_error(doc_id, reason, handle.name, handle.uuid)
            result, op, shown = _plan(handle, doc_id, spec, current)
        except EsError as e:
            return {"_index": handle.name, "_id": doc_id, "status": e.status, "error": e.cause()}
        if op is None:  # a noop writes nothing and reports the document as read
            item: dict[str, Any] = {
                "_index": handle.name,
                "_id": doc_id,
                "_version": current["_version"] if current is not None else 0,
                "result": "noop",
                "_shards": {"total": 0, "successful": 0, "failed": 0},
            }
            if current is not None:
                item["_seq_no"] = current["_seq_no"]
                item["_primary_term"] = versioning.PRIMARY_TERM
            item["status"] = 200
            _add_get(item, spec, shown)
            return item
        out = handle.write([op])[0]
        if "error" in out and out["status"] == 409 and attempts < spec.retry_on_conflict:
            attempts += 1
            continue
        if "error" not in out:
            out["result"] = result
            if result != "deleted":
                _add_get(out, spec, shown)
        return out


def _add_get(item: dict, spec: UpdateSpec, source: dict | None) -> None:
    """``get`` in an update's answer when ``_source`` was asked for (UpdateHelper.extractGetResult)."""
    if spec.source is None or spec.source is False or source is None:
        return
    get: dict[str, Any] = {}
    if "_seq_no" in item:
        get["_seq_no"] = item["_seq_no"]
        get["_primary_term"] = item["_primary_term"]
    get["found"] = True
    shown = source if spec.source is True else filter_source(source, spec.source)
    if shown is not None:
        get["_source"] = shown
    item["get"] = get


def retry_count(value: Any) -> int:
    """``retry_on_conflict`` (``RestRequest.paramAsInt``)."""
    return param_int("retry_on_conflict", value)


#: URL parameters of ``_update`` the engine reads (its REST spec's others: refused by name)
PARAMS = (
    "if_seq_no", "if_primary_term", "retry_on_conflict", "refresh", "_source", "_source_includes",
    "_source_excludes", "timeout", "wait_for_active_shards", "lang", "require_alias",
)  # fmt: skip


def check_write_waits(params: dict, time_params: tuple[str, ...]) -> None:
    """The time values among ``time_params`` (a single shard is always available: nothing to
    wait for), and ``wait_for_active_shards``: 0, 1 or ``all`` (one copy), others refused by name."""
    for name in time_params:
        if name in params:
            check_time_value(name, str(params[name]))
    if "wait_for_active_shards" in params and str(params["wait_for_active_shards"]) not in ("1", "all", "0"):
        raise unsupported(
            f"wait_for_active_shards [{params['wait_for_active_shards']}]",
            "the embedded engine has one copy of each shard",
        )


def refresh_policy(params: dict) -> str:
    """``WriteRequest.RefreshPolicy.parse`` of the ``refresh`` parameter: ``false``, ``true``
    (also empty) or ``wait_for``."""
    value = params.get("refresh")
    if value is None or value == "false":
        return "false"
    if value in ("", "true"):
        return "true"
    if value == "wait_for":
        return "wait_for"
    raise illegal_argument(f"Unknown value for refresh: [{value}].")


def update_request(engine, params: dict, body: Any, index: str, doc_id: str, source) -> tuple[int, dict]:
    """``POST /{index}/_update/{id}`` (``RestUpdateAction``); ``source``: the ``_source`` URL
    parameters, parsed (None: not given)."""
    if "routing" in params:
        raise unsupported("routing", "the embedded engine has one shard")
    if "require_alias" in params and str(params["require_alias"]).lower() != "false":
        raise unsupported("require_alias", "the embedded engine writes to the index or alias named")
    if params.get("lang", "painless") != "painless":
        raise illegal_argument(f"script_lang not supported [{params['lang']}]")
    if "version" in params or "version_type" in params:  # RestUpdateAction
        raise versioning.validation_error(
            [
                "internal versioning can not be used for optimistic concurrency control. "
                "Please use `if_seq_no` and `if_primary_term` instead"
            ]
        )
    check_write_waits(params, ("timeout",))
    policy = refresh_policy(params)
    cond = versioning.parse(params, "index")
    retries = retry_count(params.get("retry_on_conflict", 0))
    spec, problems = parse_update(body, cond, retries, source, engine.store.get_script)
    if problems:
        raise versioning.validation_error(problems)
    handle = engine.handle(engine.write_index(index))
    item = update_item(handle, doc_id, spec)
    if "error" not in item and policy == "true":
        handle.save()
        item["forced_refresh"] = True
    return item_response(item)


def item_response(item: dict) -> tuple[int, dict]:
    """A single-document API's answer from its write item (an error item: Elasticsearch's error body)."""
    if "error" in item:
        return item["status"], {
            "error": {"root_cause": [item["error"]], **item["error"]},
            "status": item["status"],
        }
    return item["status"], {k: v for k, v in item.items() if k != "status"}
