"""URL parameters against Elasticsearch's REST specification, and the response-shaping parameters.

Every routed endpoint is sent every parameter its API lists in ``spec_params.json`` (generated
from Elasticsearch's ``rest-api-spec``): a parameter the route declares is implemented (never
answered as unrecognized or unimplemented), any other is a 400 that names it; a parameter the
specification does not list is Elasticsearch's ``contains unrecognized parameter`` 400
(``BaseRestHandler.unrecognized``).
"""

from __future__ import annotations

import json
import re
import string

import pytest
from elasticsearch import ApiError, BadRequestError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scholar_es.engine.index.indices import open_engine
from scholar_es.engine.rest import spec
from scholar_es.engine.rest.handler import _ROUTES, handle, route
from scholar_es.engine.rest.shaping import TextBody, filter_path, java_instant

SAMPLES = {"index": "t", "doc_id": "1", "name": "a", "script_id": "s", "scroll_id": "x"}
BODIES = {"_bulk": [{"index": {"_id": "9"}}, {"n": 1}], "_msearch": [{}, {"query": {"match_all": {}}}]}


def _path(rx: re.Pattern) -> str:
    p = re.sub(r"\(\?P<(\w+)>[^)]*\)", lambda m: SAMPLES[m[1]], rx.pattern)
    return p.removeprefix("^").removesuffix("/?$") or "/"


def _value(kind: dict) -> str:
    if kind.get("options"):
        return kind["options"][0]
    return {"boolean": "true", "number": "1", "int": "1", "long": "1", "time": "1s", "list": "a"}.get(
        kind["type"], "x"
    )


def _body(method: str, path: str):
    last = path.rstrip("/").rsplit("/", 1)[-1]
    if last in BODIES:
        return BODIES[last]
    if "/_doc/" in path or "/_create/" in path or path.endswith("/_doc"):
        return {"n": 1} if method in ("PUT", "POST") else None
    if path.startswith("/_scripts/") and method in ("PUT", "POST"):
        return {"script": {"source": "1", "lang": "painless"}}
    if path == "/_aliases":
        return {"actions": []}
    return None


CASES = [
    (m, _path(rx), declared, name, kind)
    for m, rx, _fn, declared in _ROUTES
    for name, kind in sorted(spec.table()["apis"][declared.api]["params"].items())
    if declared.api is not None
]


@pytest.fixture()
def engine(tmp_path):
    eng = open_engine(tmp_path / "engine")
    handle(eng, "PUT", "/t", {}, {"settings": {"number_of_replicas": 0}})
    handle(eng, "PUT", "/t/_doc/1", {}, {"n": 1})
    handle(eng, "PUT", "/t/_alias/a", {}, None)
    handle(eng, "PUT", "/_scripts/s", {}, {"script": {"source": "{}", "lang": "mustache"}})
    yield eng
    eng.close()


def _reason(out) -> str:
    if isinstance(out, dict) and isinstance(out.get("error"), dict):
        return out["error"].get("reason", "")
    return ""


def _names_as_refused(status: int, out, name: str) -> bool:
    reason = _reason(out)
    return (
        status == 400
        and f"[{name}]" in reason
        and ("unrecognized parameter" in reason or "does not implement" in reason)
    )


def test_every_route_names_an_api_of_the_specification() -> None:
    assert all(d.api in spec.table()["apis"] for _, _, _, d in _ROUTES)
    assert "28a996c6525b5b03a2474f7e43d4ddaf11e46e7e" in spec.table()["source"]
    assert {"pretty", "human", "error_trace", "filter_path"} <= set(spec.table()["common"])


def test_every_parameter_of_every_routed_endpoint_is_implemented_or_refused_by_name(engine) -> None:
    assert len(CASES) > 150
    for method, path, declared, name, kind in CASES:
        status, out = handle(engine, method, path, {name: _value(kind)}, _body(method, path))
        if name in declared.params:
            assert not _names_as_refused(status, out, name), (method, path, name, out)
        else:
            assert status == 400 and f"[{name}]" in _reason(out), (method, path, name, status, out)


_NAMES = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(sorted({(m, p) for m, p, *_ in CASES})), name=_NAMES)
def test_an_unknown_parameter_is_always_elasticsearchs_400_naming_it(engine, case, name) -> None:
    method, path = case
    declared = next(d for m, rx, _, d in _ROUTES if m == method and rx.match(path))
    if name in declared.recognized or name in spec.GLOBAL:
        return
    status, out = handle(engine, method, path, {name: "1"}, _body(method, path))
    assert status == 400
    assert out["error"]["type"] == "illegal_argument_exception"
    assert out["error"]["reason"].startswith(f"request [{path}] contains unrecognized parameter: [{name}]")


def test_unrecognized_parameter_wording(tmp_engine) -> None:
    """``BaseRestHandler.unrecognized``: sorted names, plural, Levenshtein suggestions over 0.5."""
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request("GET", "/idx/_search", params={"bogus_param": "1"})
    assert (
        e.value.body["error"]["reason"]
        == "request [/idx/_search] contains unrecognized parameter: [bogus_param]"
    )
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request("GET", "/idx/_search", params={"sise": "1", "explian": "true"})
    assert e.value.body["error"]["reason"] == (
        "request [/idx/_search] contains unrecognized parameters: [explian] -> did you mean [explain]?, "
        "[sise] -> did you mean [size]?"
    )
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request("GET", "/idx/_search", params={"ttrack_scores": "1"})
    assert e.value.body["error"]["reason"].endswith("[ttrack_scores] -> did you mean [track_scores]?")


def test_a_parameter_the_engine_does_not_implement_is_named(tmp_engine) -> None:
    tmp_engine.index(index="t", id="1", document={"a": "x"}, refresh=True)
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request("GET", "/t/_count", params={"preference": "_local"})
    assert e.value.body["error"]["reason"] == (
        "request [/t/_count] contains parameter [preference] that the embedded engine does not implement"
    )
    with pytest.raises(BadRequestError) as e:
        tmp_engine.bulk(operations=[{"index": {"_index": "t"}}, {"a": 1}], routing="r")
    assert "[routing]" in e.value.body["error"]["reason"]


def test_a_route_that_declares_nothing_refuses_every_non_global_parameter(tmp_engine) -> None:
    before = len(_ROUTES)

    @route("GET", "/_test_undeclared")
    def _undeclared(engine, params, body):
        return 200, {"ok": True}

    try:
        assert tmp_engine.perform_request("GET", "/_test_undeclared", params={"pretty": "true"}).body == {
            "ok": True
        }
        with pytest.raises(BadRequestError) as e:
            tmp_engine.perform_request("GET", "/_test_undeclared", params={"size": "1"})
        assert (
            e.value.body["error"]["reason"]
            == "request [/_test_undeclared] contains unrecognized parameter: [size]"
        )
    finally:
        del _ROUTES[before:]


def test_a_declaration_the_specification_does_not_back_fails_at_import() -> None:
    with pytest.raises(ValueError, match="specification lacks"):
        spec.declare("count", ("size",))


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"pretty": "yes"}, "Failed to parse value [yes] as only [true] or [false] are allowed."),
        ({"human": "1"}, "Failed to parse value [1] as only [true] or [false] are allowed."),
        (
            {"format": "yaml"},
            "request [/_search] asks for [format=yaml]: the embedded engine answers JSON only",
        ),
        (
            {"source": "{}"},
            "request [/_search] contains parameter [source] that the embedded engine does not",
        ),
        ({"refresh": "soon"}, None),
    ],
)
def test_global_parameters_are_checked(tmp_engine, params, reason) -> None:
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request("GET", "/_search", params=params)
    if reason:
        assert e.value.body["error"]["reason"].startswith(reason)


def test_refresh_values(tmp_engine) -> None:
    for value in ("true", "false", "wait_for", ""):
        tmp_engine.perform_request(
            "PUT", "/t/_doc/1", params={"refresh": value}, body={"a": 1}, headers=_JSON
        )
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request(
            "PUT", "/t/_doc/1", params={"refresh": "soon"}, body={"a": 1}, headers=_JSON
        )
    assert e.value.body["error"]["reason"] == "Unknown value for refresh: [soon]."


_JSON = {"content-type": "application/json", "accept": "application/json"}


# --- response shaping -----------------------------------------------------------------------


def test_pretty_indents_in_process(tmp_engine) -> None:
    node = tmp_engine.transport.node_pool.get()
    plain = node.perform_request("GET", "/", headers={"accept": "application/json"}).body
    pretty = node.perform_request("GET", "/?pretty", headers={"accept": "application/json"}).body
    assert json.loads(plain) == json.loads(pretty)
    assert b"\n" not in plain and pretty.decode().startswith('{\n  "name"')


def test_filter_path_semantics() -> None:
    """``FilterPathBasedFilter`` as ``XContentFilteringTests`` describes it."""
    doc = {"a": {"b": 1, "c": [{"d": 1, "e": 2}, {"e": 3}, 4]}, "f": {}, "g": []}
    assert filter_path(doc, "a.b") == {"a": {"b": 1}}
    assert filter_path(doc, "a.c.d") == {"a": {"c": [{"d": 1}]}}
    assert filter_path(doc, "**.e") == {"a": {"c": [{"e": 2}, {"e": 3}]}}
    assert filter_path(doc, "a.*") == {"a": doc["a"]}
    assert filter_path(doc, "nope") == {}
    assert filter_path(doc, "-a.c") == {"a": {"b": 1}, "f": {}, "g": []}  # empty from the start: kept
    assert filter_path(doc, "-a.b,-a.c") == {"f": {}, "g": []}  # emptied by the filter: dropped
    assert filter_path(doc, "-**.e") == {"a": {"b": 1, "c": [{"d": 1}, 4]}, "f": {}, "g": []}
    assert filter_path({"a.b": 1, "a": {"b": 2}}, r"a\.b") == {"a.b": 1}
    assert filter_path(doc, "") == doc


def test_filter_path_does_not_filter_errors(tmp_engine) -> None:
    with pytest.raises(ApiError) as e:
        tmp_engine.search(index="missing", filter_path="took")
    assert e.value.body["error"]["type"] == "index_not_found_exception"


def test_human_adds_the_creation_date_string(tmp_engine) -> None:
    tmp_engine.indices.create(index="t")
    settings_ = tmp_engine.indices.get_settings(index="t", human=True)["t"]["settings"]["index"]
    assert settings_["creation_date_string"] == java_instant(int(settings_["creation_date"]))
    assert "creation_date_string" not in tmp_engine.indices.get(index="t")["t"]["settings"]["index"]
    assert java_instant(0) == "1970-01-01T00:00Z"  # ZonedDateTime.toString leaves out zero seconds
    assert java_instant(1_000) == "1970-01-01T00:00:01Z"
    assert java_instant(1_234) == "1970-01-01T00:00:01.234Z"


def test_error_trace_adds_the_stack_trace(tmp_engine) -> None:
    with pytest.raises(ApiError) as e:
        tmp_engine.search(index="missing", error_trace=True)
    assert "Traceback" in e.value.body["error"]["stack_trace"]
    with pytest.raises(ApiError) as e:
        tmp_engine.search(index="missing")
    assert "stack_trace" not in e.value.body["error"]


# --- _cat -----------------------------------------------------------------------------------


def test_cat_is_text_plain_unless_json_is_asked_for(tmp_engine) -> None:
    tmp_engine.indices.create(index="t", settings={"number_of_replicas": 0})
    tmp_engine.index(index="t", id="1", document={"a": 1}, refresh=True)
    node = tmp_engine.transport.node_pool.get()
    resp = node.perform_request("GET", "/_cat/count?v", headers={"accept": "text/plain"})
    assert resp.meta.headers["content-type"].startswith("text/plain")
    assert resp.body.decode().splitlines()[0].split() == ["epoch", "timestamp", "count"]
    assert isinstance(tmp_engine.cat.indices(h="index,docs.count").body, str)
    rows = tmp_engine.cat.indices(format="json").body
    assert rows[0]["index"] == "t" and rows[0]["docs.count"] == "1" and rows[0]["health"] == "green"
    assert list(rows[0]) == [
        "health",
        "status",
        "index",
        "uuid",
        "pri",
        "rep",
        "docs.count",
        "docs.deleted",
        "store.size",
        "pri.store.size",
        "dataset.size",
    ]
    json_by_accept = node.perform_request("GET", "/_cat/indices", headers={"accept": "application/json"})
    assert json.loads(json_by_accept.body) == rows
    assert tmp_engine.cat.indices(format="json", h="i,cd").body[0].keys() == {"i", "cd"}
    assert tmp_engine.cat.count(format="json", filter_path="**.count").body == [{"count": "1"}]


def test_cat_refuses_what_the_engine_does_not_have(tmp_engine) -> None:
    tmp_engine.indices.create(index="t")
    for params in (
        {"h": "search.query_total"},
        {"h": "docs.*"},
        {"help": "true"},
        {"expand_wildcards": "all"},
    ):
        with pytest.raises(BadRequestError):
            tmp_engine.perform_request("GET", "/_cat/indices", params=params)
    with pytest.raises(ApiError) as e:
        tmp_engine.cat.aliases(s="nope")
    assert (e.value.meta.status, e.value.body["error"]["reason"]) == (
        500,
        "Unable to sort by unknown sort key `nope`",
    )


def test_text_bodies_are_written_as_text() -> None:
    assert TextBody("a b\n").content_type.startswith("text/plain")


def test_delete_index_takes_the_indices_options(tmp_engine) -> None:
    """``DELETE /missing?ignore_unavailable=true`` is acknowledged (IndicesOptions; the "drop if it
    exists" line of setup scripts, refused by name before the review of issue 26); without it, a
    missing index is Elasticsearch's 404; a wildcard matching nothing with ``allow_no_indices=false``
    is a 404 naming it."""
    es = tmp_engine
    es.indices.create(index="keep")
    assert es.indices.delete(index="missing", ignore_unavailable=True).body == {"acknowledged": True}
    with pytest.raises(ApiError) as e:
        es.indices.delete(index="missing")
    assert e.value.meta.status == 404 and e.value.body["error"]["type"] == "index_not_found_exception"
    with pytest.raises(ApiError) as e:
        es.indices.delete(index="nothing-*", allow_no_indices=False)
    assert e.value.meta.status == 404
    assert es.indices.delete(index="keep,missing", ignore_unavailable=True).body == {"acknowledged": True}
    assert not es.indices.exists(index="keep")
