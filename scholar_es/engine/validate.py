"""Parse-time checks of request bodies' JSON types and numbers, before anything runs.

Elasticsearch's ``SearchSourceBuilder.parseXContent`` reads each top-level key with the token
type it expects and refuses anything else with a 400; the embedded engine's search code reads
these values late (while ranking or rendering), so their JSON types are checked here, once, and
a value of the wrong type is a ``parsing_exception`` naming the key and the value instead of an
exception deep inside the engine.  Query clauses are checked by :mod:`engine.query.dsl` as they
are parsed; retriever trees are walked here for the same scalar checks.  The other routes' bodies
(create index, mappings, aliases, bulk metadata, msearch headers, scripts, templates) get the same
treatment below.  Anything these checks miss and the engine trips over is a 500 ``internal_error``
(:func:`engine.errors.internal_error`): a bug to fix here, never reported as the caller's fault.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from scholar_es.engine.errors import EsError, parsing_error, unsupported


def _show(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


def json_token(value: Any) -> str:
    """The XContent token name Elasticsearch reports for a JSON value."""
    if value is None:
        return "VALUE_NULL"
    if isinstance(value, bool):
        return "VALUE_BOOLEAN"
    if isinstance(value, (int, float)):
        return "VALUE_NUMBER"
    if isinstance(value, str):
        return "VALUE_STRING"
    return "START_ARRAY" if isinstance(value, list) else "START_OBJECT"


FLOAT_MAX = 3.4028234663852886e38  # Java's Float.MAX_VALUE: boosts, weights and factors are floats


def check_number(where: str, key: str, value: Any, limit: float = FLOAT_MAX) -> float:
    """A finite JSON number (or a numeric string, as Jackson coerces) within ``limit``, else a 400.

    Elasticsearch reads boosts, weights and factors as Java floats, where 1e39 is already
    Infinity; a non-finite boost would make every score NaN or Infinity (a wrong answer, not
    an error), so they are refused here.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise parsing_error(f"[{where}] [{key}] must be a number, got [{_show(value)}]")
    try:
        out = float(value)
    except ValueError:
        raise parsing_error(f"[{where}] failed to parse [{key}] value [{_show(value)}] as a number") from None
    except OverflowError:  # an integer beyond the double range (10**400)
        out = math.inf
    if not math.isfinite(out) or abs(out) > limit:
        raise parsing_error(
            f"[{where}] [{key}] must be a finite number, got [{_show(value)}]; "
            f"NaN, Infinity and numbers beyond +/-{limit:g} are refused"
        )
    return out


def check_int(where: str, key: str, value: Any, minimum: int | None = None) -> int:
    """A JSON integer (or an integer string) that fits Java's int, else a 400."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise parsing_error(f"[{where}] [{key}] must be an integer, got [{_show(value)}]")
    try:
        out = int(value)
    except ValueError:
        raise parsing_error(
            f"[{where}] failed to parse [{key}] value [{_show(value)}] as an integer"
        ) from None
    if not -(2**31) <= out <= 2**31 - 1:
        raise EsError(
            400,
            "x_content_parse_exception",
            f"[{where}] [{key}] Numeric value ({_show(value)}) out of range of int "
            f"({-(2**31)} - {2**31 - 1})",
        )
    if minimum is not None and out < minimum:
        raise parsing_error(f"[{where}] [{key}] must be >= {minimum}, got [{out}]")
    return out


_TIME_VALUE = re.compile(r"(-?[0-9]+(?:\.[0-9]+)?)\s*(nanos|micros|ms|s|m|h|d)")


def check_time_value(key: str, value: str) -> None:
    """A time value as TimeValue.parseTimeValue reads it ("-1", "0" or a number and a unit), else a 400."""
    text = value.strip().lower()
    if text in ("-1", "0"):
        return
    match = _TIME_VALUE.fullmatch(text)
    why = "unit is missing or unrecognized"
    if match and "." in match.group(1):  # TimeValue#parse: a double that is not a long
        raise EsError(
            400,
            "parse_exception",
            f"failed to parse [{_show(value)}], fractional time values are not supported",
        )
    if match and match.group(1).startswith("-"):
        why = "negative durations are not supported"
    elif match:
        return
    raise EsError(
        400,
        "parse_exception",
        f"failed to parse setting [{key}] with value [{_show(value)}] as a time value: {why}; "
        'write e.g. "10s", "500ms" or "1m"',
    )


def check_bool(key: str, value: Any) -> None:
    if not isinstance(value, bool) and str(value).lower() not in ("true", "false"):
        raise parsing_error(f"[{key}] must be a boolean, got [{_show(value)}]")


def flag(value: Any) -> bool:
    """A boolean option as :func:`check_bool` accepts it, read: true, or the text "true" (any
    case); "false" and an absent option are false."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


#: the search body's boolean options (SearchSourceBuilder's declareBoolean fields)
SEARCH_FLAGS = ("explain", "track_scores", "version", "seq_no_primary_term", "profile")


def with_flags(body: dict) -> dict:
    """``body`` with its boolean options read (:func:`flag`) and a ``track_total_hits`` given
    as text read (:func:`track_total_hits`): a copy where one was given as text, so that every
    reader of the body sees ``"false"`` as false and ``"10"`` as 10 (anything but an object:
    as it is, for :func:`check_search_body` to refuse)."""
    if not isinstance(body, dict):
        return body
    texts = [key for key in SEARCH_FLAGS if isinstance(body.get(key), str)]
    track = body.get("track_total_hits")
    if not texts and not isinstance(track, str):
        return body
    out = {**body, **{key: flag(body[key]) for key in texts}}
    if isinstance(track, str):
        out["track_total_hits"] = track_total_hits(track)
    return out


def track_total_hits(value: Any) -> Any:
    """A body's ``track_total_hits`` as SearchSourceBuilder reads it: a boolean, or the text
    ``"true"``/``"false"`` (``Booleans.isBoolean``: exactly these) as one, else an integer
    (``parser.intValue()``: an integer text too); a value neither reads as is left as it is,
    for :func:`check_search_body` to refuse."""
    if value in ("true", "false"):
        return value == "true"
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value


def _check_object(where: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise parsing_error(f"[{where}] must be an object, got [{_show(value)}]")
    return value


def _check_patterns(key: str, value: Any) -> None:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(v, str) for v in items):
        raise parsing_error(f"[{key}] must be a string or an array of strings, got [{_show(value)}]")


def _check_source(value: Any) -> None:
    if isinstance(value, (bool, str)) or value is None:
        return
    if isinstance(value, list):
        _check_patterns("_source", value)
        return
    if isinstance(value, dict):
        for key, v in value.items():
            if key not in ("includes", "include", "excludes", "exclude"):
                raise parsing_error(f"[_source] unknown key [{key}]")
            _check_patterns(f"_source.{key}", v)
        return
    raise parsing_error(f"[_source] unsupported value [{_show(value)}]")


def _check_collapse(value: Any) -> None:
    spec = _check_object("collapse", value)
    if "field" in spec and not isinstance(spec["field"], str):
        raise parsing_error(f"[collapse] [field] must be a string, got [{_show(spec['field'])}]")
    if "max_concurrent_group_searches" in spec:
        check_int("collapse", "max_concurrent_group_searches", spec["max_concurrent_group_searches"], 1)
    inner = spec.get("inner_hits")
    if inner is None:
        return
    names: set[str] = set()
    for item in inner if isinstance(inner, list) else [inner]:
        item = _check_object("collapse.inner_hits", item)
        if "name" in item and not isinstance(item["name"], str):
            raise parsing_error(f"[inner_hits] [name] must be a string, got [{_show(item['name'])}]")
        name = item.get("name", spec.get("field"))  # unnamed inner hits are keyed by the collapse field
        if isinstance(name, str) and name in names:  # each would overwrite the other in the response
            raise EsError(
                400,
                "illegal_argument_exception",
                f"[inner_hits] already contains an entry for key [{name}]; give each inner_hits a distinct [name]",
            )
        if isinstance(name, str):
            names.add(name)
        for key in ("size", "from"):
            if key in item:
                check_int("inner_hits", key, item[key], 0)
        for key in ("track_scores", "version", "seq_no_primary_term"):  # InnerHitBuilder booleans
            if key in item:
                check_bool(key, item[key])


def _check_knn(spec: Any) -> None:
    for item in spec if isinstance(spec, list) else [spec]:
        item = _check_object("knn", item)
        if "field" in item and not isinstance(item["field"], str):
            raise parsing_error(f"[knn] [field] must be a string, got [{_show(item['field'])}]")
        vector = item.get("query_vector")
        if vector is not None:
            if not isinstance(vector, list):
                raise parsing_error(
                    f"[knn] [query_vector] must be an array of numbers, got [{_show(vector)}]"
                )
            if not _plain_finite_floats(vector):  # the fast check failed: find the value to name
                for v in vector:
                    check_number("knn", "query_vector", v)
        for key in ("k", "num_candidates"):
            if key in item:
                check_int("knn", key, item[key])
        for key in ("boost", "similarity"):
            if key in item and item[key] is not None:
                check_number("knn", key, item[key])


def _plain_finite_floats(values: list) -> bool:
    """Every value a JSON number (no bool, no string) within +/-FLOAT_MAX: one vectorized check
    for a query vector's hundreds of numbers (check_number per value names the offending one)."""
    if not all(type(v) is float or type(v) is int for v in values):
        return False
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (OverflowError, ValueError):
        return False
    return bool(np.all(np.abs(arr) <= FLOAT_MAX))  # NaN and +/-inf fail the comparison


def _check_retriever(spec: Any, depth: int = 0) -> None:
    if depth > 100:
        raise parsing_error("[retriever] is nested too deeply")
    if not isinstance(spec, dict) or len(spec) != 1:
        raise parsing_error("[retriever] must be an object with exactly one retriever")
    kind, p = next(iter(spec.items()))
    p = _check_object(f"{kind}", p)
    if kind == "knn":
        _check_knn(p)
    for key in ("rank_window_size", "rank_constant"):
        if key in p:
            check_int(kind, key, p[key])
    if "min_score" in p:
        check_number(kind, "min_score", p["min_score"])
    children = p.get("retrievers")
    if children is None:
        return
    if not isinstance(children, list):
        raise parsing_error(f"[{kind}] [retrievers] must be an array, got [{_show(children)}]")
    for child in children:
        child = _check_object(f"{kind}.retrievers", child)
        if "retriever" in child:
            for key in ("weight",):
                if key in child:
                    check_number(kind, key, child[key])
            _check_retriever(child["retriever"], depth + 1)
        else:
            _check_retriever(child, depth + 1)


def check_search_body(body: Any) -> None:
    """The top-level values of a ``_search`` body have the JSON types Elasticsearch reads."""
    if body is None:
        return
    if not isinstance(body, dict):
        raise parsing_error(f"request body must be a JSON object, got [{_show(body)}]")
    for key in ("size", "from", "terminate_after"):
        if key in body:
            check_int("search", key, body[key])
    if "min_score" in body:
        check_number("search", "min_score", body["min_score"])
    if "track_total_hits" in body:
        v = body["track_total_hits"]
        if not isinstance(v, bool) and v not in ("true", "false"):  # Booleans.isBoolean: exact
            try:
                check_int("search", "track_total_hits", v, -1)
            except EsError:
                raise parsing_error(
                    f"[track_total_hits] must be a boolean or an integer, got [{_show(v)}]"
                ) from None
    for key in SEARCH_FLAGS:
        if key in body:
            check_bool(key, body[key])
    if "timeout" in body and not isinstance(body["timeout"], str):
        raise parsing_error(f'[timeout] must be a time value such as "10s", got [{_show(body["timeout"])}]')
    if "timeout" in body:
        check_time_value("timeout", body["timeout"])
    for key in ("fields", "docvalue_fields"):  # SearchSourceBuilder reads these only as arrays
        if key in body and not isinstance(body[key], list):
            raise parsing_error(
                f"Unknown key for a {json_token(body[key])} in [{key}]. "
                f'[{key}] takes an array, e.g. "{key}": ["title"]'
            )
    if "_source" in body:
        _check_source(body["_source"])
    if "collapse" in body:
        _check_collapse(body["collapse"])
    if "knn" in body:
        _check_knn(body["knn"])
    if "retriever" in body:
        _check_retriever(body["retriever"])


# --- other request bodies: the JSON types Elasticsearch's parsers expect ----------------------


def _check_names(where: str, value: Any) -> None:
    """An index/alias name or a list of them."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) for v in items):
        raise parsing_error(f"[{where}] must be a name or an array of names, got [{_show(value)}]")


def check_is_write_index(value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise parsing_error(f"[is_write_index] must be a boolean, got [{_show(value)}]")


def check_create_index(body: Any) -> None:
    """``PUT <index>``: settings, mappings and aliases are objects of the expected shapes."""
    if body is None:
        return
    body = _check_object("create index", body)
    settings = body.get("settings")
    if settings is not None:
        settings = _check_object("settings", settings)
        index = settings.get("index")
        analysis = settings.get("analysis", index.get("analysis") if isinstance(index, dict) else None)
        if analysis is not None:
            analysis = _check_object("settings.analysis", analysis)
            for group, defs in analysis.items():
                defs = _check_object(f"analysis.{group}", defs)
                for name, spec in defs.items():
                    spec = _check_object(f"analysis.{group}.{name}", spec)
                    for key in ("type", "tokenizer"):
                        if key in spec and not isinstance(spec[key], str):
                            raise parsing_error(
                                f"[analysis.{group}.{name}.{key}] must be a string, got [{_show(spec[key])}]"
                            )
                    for key in ("filter", "char_filter"):
                        if key in spec:
                            _check_patterns(f"analysis.{group}.{name}.{key}", spec[key])
    if body.get("mappings") is not None:
        _check_object("mappings", body["mappings"])
    aliases = body.get("aliases")
    if aliases is not None:
        for name, spec in _check_object("aliases", aliases).items():
            if spec is not None:
                check_is_write_index(_check_object(f"aliases.{name}", spec).get("is_write_index"))


def check_put_mapping(body: Any) -> None:
    if body is None:
        return
    body = _check_object("mapping", body)
    if "properties" in body:
        for name, spec in _check_object("properties", body["properties"]).items():
            _check_object(f"properties.{name}", spec)


def check_alias_actions(actions: Any) -> None:
    if not isinstance(actions, list):
        raise parsing_error(f"[aliases] [actions] must be an array, got [{_show(actions)}]")
    for action in actions:
        if not isinstance(action, dict) or len(action) != 1:
            raise parsing_error("[aliases] each action must be an object with one key")
        kind, spec = next(iter(action.items()))
        spec = _check_object(f"aliases.{kind}", spec)
        for key in ("index", "indices", "alias", "aliases"):
            if spec.get(key) is not None:
                _check_names(f"{kind}.{key}", spec[key])
        check_is_write_index(spec.get("is_write_index"))


#: the keys of a bulk action's metadata (BulkRequestParser); the engine implements _index, _id,
#: op_type, version, version_type, if_seq_no and if_primary_term (engine.index.versioning);
#: retry_on_conflict and _source only mean something to an update (which is refused)
BULK_META_KEYS = {
    "_index",
    "_id",
    "routing",
    "op_type",
    "version",
    "version_type",
    "if_seq_no",
    "if_primary_term",
    "retry_on_conflict",
    "pipeline",
    "_source",
    "require_alias",
    "require_data_stream",
    "list_executed_pipelines",
    "dynamic_templates",
}
#: ... and refuses these by name, unless they say what they default to
BULK_META_UNSUPPORTED = frozenset(
    (
        "routing",
        "pipeline",
        "require_alias",
        "require_data_stream",
        "list_executed_pipelines",
        "dynamic_templates",
    )
)


def check_bulk_meta(line: int, op: str, meta: Any) -> None:
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise EsError(
            400,
            "illegal_argument_exception",
            f"Malformed action/metadata line [{line}], expected START_OBJECT but found [{_show(meta)}]",
        )
    for key in ("_index", "_id"):
        value = meta.get(key)
        if value is not None and not isinstance(value, str) and not (key == "_id" and type(value) is int):
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Malformed action/metadata line [{line}], [{op}] [{key}] must be a string, got [{_show(value)}]",
            )
    for key, value in meta.items():
        # BulkRequestParser: the keys it knows; objects only for dynamic_templates and _source
        if key not in BULK_META_KEYS:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Action/metadata line [{line}] contains an unknown parameter [{key}]",
            )
        if isinstance(value, (list, dict)) and not (
            isinstance(value, dict) and key in ("dynamic_templates", "_source")
        ):
            token = "START_ARRAY" if isinstance(value, list) else "START_OBJECT"
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Malformed action/metadata line [{line}], expected a simple value for field [{key}] but found [{token}]",
            )
        if key in BULK_META_UNSUPPORTED and value not in (None, False, "false", {}):
            raise unsupported(f"{op}.{key}", "the embedded engine has one shard and no ingest pipelines")


def check_msearch_header(header: Any) -> dict:
    if header is None:
        return {}
    header = _check_object("msearch header", header)
    if header.get("index") is not None:
        _check_names("msearch.index", header["index"])
    return header


def check_template_body(body: Any) -> dict:
    body = _check_object("search_template", body if body is not None else {})
    if "id" in body and not isinstance(body["id"], str):
        raise parsing_error(f"[search_template] [id] must be a string, got [{_show(body['id'])}]")
    if "source" in body and not isinstance(body["source"], (str, dict)):
        raise parsing_error(
            f"[search_template] [source] must be a string or an object, got [{_show(body['source'])}]"
        )
    if body.get("params") is not None:
        _check_object("search_template.params", body["params"])
    return body


def check_script_body(body: Any) -> None:
    body = _check_object("script", body if body is not None else {})
    script = body.get("script")
    if isinstance(script, dict) and "source" in script and not isinstance(script["source"], (str, dict)):
        raise parsing_error(
            f"[script] [source] must be a string or an object, got [{_show(script['source'])}]"
        )
