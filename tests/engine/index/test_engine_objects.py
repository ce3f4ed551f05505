"""Object fields' own mapping parameters: ``enabled: false`` and an object's ``dynamic``.

Expected behaviour from Elasticsearch's reference pages: "enabled" (a disabled object's value is
kept in ``_source`` only, never parsed, whatever it is; the mapping shows
``{"type": "object", "enabled": false}``) and "dynamic" (an inner object inherits ``dynamic``
from its parent and may override it; StrictDynamicMappingException names the new field within
its parent object). Both used to be wrong answers: a disabled object was parsed, mapped and
searchable, an object's own ``dynamic`` was ignored, and an object declared with no sub-fields
vanished from the mapping. A PUT _mapping on an existing object merges into it
(MapperService merge) instead of failing with "cannot be changed from type [None]".
"""

from __future__ import annotations

from scholar_es.engine.index.indices import Engine
from scholar_es.engine.rest.handler import handle as rest_handle


def _call(engine: Engine, method: str, path: str, body=None) -> tuple[int, dict]:
    return rest_handle(engine, method, path, {}, body)


def _ok(engine: Engine, method: str, path: str, body=None) -> dict:
    status, resp = _call(engine, method, path, body)
    assert status in (200, 201), resp
    if method in ("PUT", "POST") and "/_doc" in path:
        _call(engine, "POST", "/" + path.strip("/").split("/")[0] + "/_refresh")
    return resp


SESSION_MAPPING = {
    "properties": {
        "user_id": {"type": "keyword"},
        "last_updated": {"type": "date"},
        "session_data": {"type": "object", "enabled": False},
    }
}
SESSION_1 = {
    "user_id": "kimchy",
    "session_data": {"arbitrary_object": {"some_array": ["foo", "bar", {"baz": 2}]}},
    "last_updated": "2015-12-06T18:20:22",
}
SESSION_2 = {"user_id": "jpountz", "session_data": "none", "last_updated": "2015-12-06T18:22:13"}


def test_a_disabled_object_is_kept_in_source_and_never_parsed(tmp_path):
    """The "enabled" reference page's example, then the same index reopened."""
    path = tmp_path / "engine"
    engine = Engine(path)
    try:
        _ok(engine, "PUT", "/my-index-000001", {"mappings": SESSION_MAPPING})
        _ok(engine, "PUT", "/my-index-000001/_doc/session_1", SESSION_1)
        # any value: "The session_data will also ignore values that are not JSON objects"
        _ok(engine, "PUT", "/my-index-000001/_doc/session_2", SESSION_2)
    finally:
        engine.store.close()
    engine = Engine(path)
    try:
        mapping = _ok(engine, "GET", "/my-index-000001/_mapping")["my-index-000001"]["mappings"]
        assert mapping["properties"]["session_data"] == {"type": "object", "enabled": False}
        assert set(mapping["properties"]) == {"user_id", "last_updated", "session_data"}
        for query in (
            {"match": {"session_data.arbitrary_object.some_array": "foo"}},
            {"exists": {"field": "session_data"}},
            {"exists": {"field": "session_data.arbitrary_object.some_array.baz"}},
            {"multi_match": {"query": "none foo bar", "fields": ["*"]}},
        ):
            hits = _ok(engine, "POST", "/my-index-000001/_search", {"query": query})["hits"]
            assert hits["total"]["value"] == 0, query
        assert _ok(engine, "GET", "/my-index-000001/_doc/session_1")["_source"] == SESSION_1
        assert _ok(engine, "GET", "/my-index-000001/_doc/session_2")["_source"] == SESSION_2
        # the enabled fields still answer
        hits = _ok(engine, "POST", "/my-index-000001/_search", {"query": {"term": {"user_id": "jpountz"}}})
        assert [h["_id"] for h in hits["hits"]["hits"]] == ["session_2"]
    finally:
        engine.store.close()


COMPUTERS = {
    "dynamic": "strict",
    "properties": {
        "name": {"type": "text"},
        "specifications": {
            "properties": {
                "cpu": {"properties": {"name": {"type": "text"}}},
                "other": {"dynamic": True, "properties": {}},
            }
        },
    },
}


def test_an_inner_object_inherits_dynamic_and_may_override_it(tmp_path):
    """The "dynamic" reference page's example ("Inheritance for the dynamic parameter")."""
    path = tmp_path / "engine"
    engine = Engine(path)
    try:
        _ok(engine, "PUT", "/computers", {"mappings": COMPUTERS})
        # strict, inherited by specifications.cpu
        status, resp = _call(
            engine,
            "POST",
            "/computers/_doc",
            {
                "name": "Gamer PC",
                "specifications": {"cpu": {"name": "Intel Core i7-9700K", "frequency": 3.6}},
            },
        )
        assert status == 400
        assert resp["error"]["type"] == "strict_dynamic_mapping_exception"
        assert resp["error"]["reason"].endswith(
            "mapping set to strict, dynamic introduction of [frequency] within [specifications.cpu] is not allowed"
        )
        # true in specifications.other: the new field is mapped
        _ok(
            engine,
            "POST",
            "/computers/_doc",
            {
                "name": "Gamer PC",
                "specifications": {
                    "cpu": {"name": "Intel Core i7-9700K"},
                    "other": {"security": "Kensington"},
                },
            },
        )
    finally:
        engine.store.close()
    engine = Engine(path)  # the object parameters are kept with the stored mapping
    try:
        mapping = _ok(engine, "GET", "/computers/_mapping")["computers"]["mappings"]
        other = mapping["properties"]["specifications"]["properties"]["other"]
        assert other["dynamic"] == "true" and other["properties"]["security"]["type"] == "text"
        hits = _ok(
            engine,
            "POST",
            "/computers/_search",
            {"query": {"match": {"specifications.other.security": "kensington"}}},
        )
        assert hits["hits"]["total"]["value"] == 1
        status, resp = _call(engine, "POST", "/computers/_doc", {"name": "x", "price": 3})  # root: strict
        assert status == 400 and "dynamic introduction of [price] within [_doc]" in resp["error"]["reason"]
    finally:
        engine.store.close()


def test_an_object_with_dynamic_false_keeps_new_fields_in_source_only(tmp_path):
    engine = Engine(tmp_path / "engine")
    try:
        _ok(engine, "PUT", "/p", {"mappings": {"properties": {"meta": {"type": "object", "dynamic": False}}}})
        # an object without sub-fields is shown as Elasticsearch shows it
        assert _ok(engine, "GET", "/p/_mapping")["p"]["mappings"]["properties"]["meta"] == {
            "type": "object",
            "dynamic": "false",
        }
        doc = {"meta": {"note": "unindexed words"}, "title": "indexed words"}
        _ok(engine, "PUT", "/p/_doc/1", doc)
        props = _ok(engine, "GET", "/p/_mapping")["p"]["mappings"]["properties"]
        assert "title" in props and "properties" not in props["meta"]  # the root is still dynamic
        assert (
            _ok(engine, "POST", "/p/_search", {"query": {"match": {"meta.note": "unindexed"}}})["hits"][
                "total"
            ]["value"]
            == 0
        )
        assert (
            _ok(engine, "POST", "/p/_search", {"query": {"match": {"title": "indexed"}}})["hits"]["total"][
                "value"
            ]
            == 1
        )
        assert _ok(engine, "GET", "/p/_doc/1")["_source"] == doc
    finally:
        engine.store.close()


def test_put_mapping_merges_into_an_existing_object(tmp_path):
    engine = Engine(tmp_path / "engine")
    try:
        _ok(
            engine,
            "PUT",
            "/c",
            {
                "mappings": {
                    "properties": {"o": {"properties": {"k": {"type": "keyword"}}, "dynamic": "strict"}}
                }
            },
        )
        _ok(engine, "PUT", "/c/_mapping", {"properties": {"o": {"properties": {"z": {"type": "keyword"}}}}})
        o = _ok(engine, "GET", "/c/_mapping")["c"]["mappings"]["properties"]["o"]
        assert o == {"properties": {"k": {"type": "keyword"}, "z": {"type": "keyword"}}, "dynamic": "strict"}
        _ok(
            engine, "PUT", "/c/_mapping", {"properties": {"o": {"type": "object", "dynamic": "true"}}}
        )  # may change
        _ok(engine, "PUT", "/c/_doc/1", {"o": {"k": "a", "new": "b"}})
        status, resp = _call(
            engine, "PUT", "/c/_mapping", {"properties": {"o": {"type": "object", "enabled": False}}}
        )
        assert (
            status == 400
            and "[enabled] parameter can't be updated for the object mapping [o]" in resp["error"]["reason"]
        )
        status, resp = _call(
            engine, "PUT", "/c/_mapping", {"properties": {"o": {"properties": {"k": {"type": "text"}}}}}
        )
        assert (
            status == 400
            and "mapper [o.k] cannot be changed from type [keyword] to [text]" in resp["error"]["reason"]
        )
        status, resp = _call(engine, "PUT", "/c/_mapping", {"properties": {"o": {"type": "keyword"}}})
        assert status == 400 and resp["error"]["type"] == "illegal_argument_exception"
    finally:
        engine.store.close()


def test_a_bad_dynamic_value_is_a_clear_error(tmp_path):
    engine = Engine(tmp_path / "engine")
    try:
        for where, body in (
            ("_doc", {"dynamic": "sometimes"}),
            ("o", {"properties": {"o": {"type": "object", "dynamic": "sometimes"}}}),
        ):
            status, resp = _call(engine, "PUT", "/bad", {"mappings": body})
            assert status == 400 and resp["error"]["type"] == "mapper_parsing_exception", resp
            assert (
                f"[dynamic] on [{where}] must be true, false or strict, got ['sometimes']"
                in resp["error"]["reason"]
            )
        status, resp = _call(engine, "PUT", "/bad", {"mappings": {"dynamic": "runtime"}})
        assert status == 400 and "not supported by the embedded engine" in resp["error"]["reason"]
        status, resp = _call(
            engine, "PUT", "/bad", {"mappings": {"properties": {"o": {"type": "object", "enabled": "no"}}}}
        )
        assert status == 400 and resp["error"]["type"] == "mapper_parsing_exception"
    finally:
        engine.store.close()


# --- found by a review (probes in /tmp/review23 at the time) ---------------------------------


def test_dotted_keys_and_untyped_specs_reach_a_disabled_object(tmp_path):
    """A dotted key is the path s -> x (DotExpandingXContentParser), so ``"s.x"`` lies inside the
    disabled ``s``; ``{"enabled": false}`` alone is an object (ObjectMapper.TypeParser: the only
    key ``enabled``), ``{"dynamic": ...}`` alone has no type; ``enabled`` may be the string
    "false" and ``dynamic`` "STRICT" (nodeBooleanValue, equalsIgnoreCase)."""
    engine = Engine(tmp_path / "engine")
    try:
        _ok(engine, "PUT", "/d", {"mappings": {"properties": {"s": {"enabled": False, "properties": {}}}}})
        _ok(engine, "PUT", "/e", {"mappings": {"properties": {"s": {"enabled": False}}}})
        for index in ("d", "e"):
            _ok(engine, "PUT", f"/{index}/_doc/1", {"s.x": "hello", "s": {"k": "v"}})
            assert _ok(engine, "GET", f"/{index}/_mapping")[index]["mappings"]["properties"] == {
                "s": {"type": "object", "enabled": False}
            }
            for query in ({"match": {"s.x": "hello"}}, {"exists": {"field": "s.k"}}):
                assert (
                    _ok(engine, "POST", f"/{index}/_search", {"query": query})["hits"]["total"]["value"] == 0
                )
        status, resp = _call(engine, "PUT", "/f", {"mappings": {"properties": {"s": {"dynamic": "strict"}}}})
        assert status == 400 and resp["error"]["reason"] == "No type specified for field [s]"
        _ok(
            engine,
            "PUT",
            "/g",
            {"mappings": {"dynamic": "STRICT", "properties": {"s": {"type": "object", "enabled": "false"}}}},
        )
        status, resp = _call(engine, "PUT", "/g/_doc/1", {"t": 1})
        assert status == 400 and resp["error"]["type"] == "strict_dynamic_mapping_exception"
        _ok(engine, "PUT", "/g/_doc/2", {"s": {"anything": 1}})
        # a malformed update of an existing object is a 400, not a 500
        status, resp = _call(engine, "PUT", "/g/_mapping", {"properties": {"s": {"properties": []}}})
        assert status == 400 and resp["error"]["type"] == "mapper_parsing_exception"
    finally:
        engine.store.close()


def test_dynamic_changes_reach_every_process_and_stay(tmp_path):
    """PUT _mapping of the root's and an object's ``dynamic``: kept when set back to true (GET
    shows it, as a mapping that sets dynamic itself), seen by another engine on the same
    directory, and not undone by that engine's next dynamic field."""
    path = tmp_path / "engine"
    a, b = Engine(path), None
    try:
        _ok(
            a,
            "PUT",
            "/m",
            {"mappings": {"dynamic": "strict", "properties": {"o": {"type": "object", "dynamic": "strict"}}}},
        )
        b = Engine(path)
        _call(b, "POST", "/m/_count")  # b has read the mapping
        _ok(
            a,
            "PUT",
            "/m/_mapping",
            {"dynamic": True, "properties": {"o": {"type": "object", "dynamic": True}}},
        )
        _ok(b, "PUT", "/m/_doc/1", {"o": {"n": 1}, "top": "x"})  # b sees both changes
        _ok(a, "PUT", "/m/_doc/2", {"other": 2})
    finally:
        a.store.close()
        if b is not None:
            b.store.close()
    c = Engine(path)
    try:
        mapping = _ok(c, "GET", "/m/_mapping")["m"]["mappings"]
        assert mapping["dynamic"] == "true"
        assert (
            mapping["properties"]["o"]["dynamic"] == "true"
            and "n" in mapping["properties"]["o"]["properties"]
        )
        assert {"top", "other"} <= set(mapping["properties"])
    finally:
        c.store.close()
