"""Every unsupported or invalid construct gets an Elasticsearch-shaped error naming the clause:
an ``elasticsearch.ApiError`` subclass whose body is ``{"error": {"root_cause", "type", "reason"}, "status"}``."""

from __future__ import annotations

import pytest
from elasticsearch import ApiError, BadRequestError, NotFoundError, helpers


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("errors"))
    client.indices.create(
        index="e",
        mappings={
            "properties": {
                "title": {"type": "text"},
                "tag": {"type": "keyword"},
                "year": {"type": "integer"},
                "vec": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
            }
        },
    )
    client.index(
        index="e", id="1", document={"title": "hello world", "tag": "a", "year": 2001, "vec": [1, 0, 0]}
    )
    client.index(
        index="e", id="2", document={"title": "hello there", "tag": "b", "year": 2002, "vec": [0, 1, 0]}
    )
    client.indices.refresh(index="e")
    yield client
    client.close()


def check(exc: ApiError, status: int, type_: str, *in_reason: str) -> None:
    body = exc.body
    assert isinstance(body, dict) and body["status"] == status == exc.meta.status, body
    err = body["error"]
    assert err["type"] == type_, err
    assert err["root_cause"] and err["root_cause"][0]["type"] == type_
    for part in in_reason:
        assert part in err["reason"], err["reason"]


def bad_search(es, **body) -> BadRequestError:
    with pytest.raises(BadRequestError) as e:
        es.search(index="e", **body)
    return e.value


@pytest.mark.parametrize(
    "query, name",
    [
        ({"simple_query_string": {"query": "helo~1"}}, "simple_query_string fuzzy term [helo~1]"),
        ({"match_phrase_prefix": {"title": "hello wor"}}, "match_phrase_prefix"),
        ({"query_string": {"query": "title:helo~"}}, "query_string fuzzy term [~]"),
        (
            {"wildcard": {"tag": {"value": "a*", "rewrite": "scoring_boolean"}}},
            "wildcard.rewrite [scoring_boolean]",
        ),
        ({"fuzzy": {"title": "helo"}}, "fuzzy"),
        ({"nested": {"path": "x", "query": {"match_all": {}}}}, "nested"),
        ({"bool": {"must": [{"regexp": {"tag": "a.*"}}]}}, "regexp"),  # nested inside bool too
    ],
)
def test_unsupported_queries(es, query, name):
    check(bad_search(es, query=query), 400, "parsing_exception", f"[{name}]")


def test_unknown_query_name(es):
    check(
        bad_search(es, query={"frobnicate": {"title": "x"}}),
        400,
        "parsing_exception",
        "unknown query [frobnicate]",
    )


def test_unknown_parameter_in_match(es):
    check(
        bad_search(es, query={"match": {"title": {"query": "hello", "fuzzyness": 2}}}),
        400,
        "parsing_exception",
        "[match] query does not support [fuzzyness]",
    )


def test_unknown_parameter_in_other_clauses(es):
    check(
        bad_search(es, query={"bool": {"must": [], "shoud": []}}),
        400,
        "parsing_exception",
        "[bool]",
        "[shoud]",
    )
    check(
        bad_search(es, query={"multi_match": {"query": "x", "fields": ["title"], "slop": 1}}),
        400,
        "parsing_exception",
        "[multi_match]",
        "[slop]",
    )
    check(
        bad_search(es, query={"function_score": {"query": {"match_all": {}}, "functions": [], "bogus": 1}}),
        400,
        "parsing_exception",
        "[function_score]",
        "[bogus]",
    )


@pytest.mark.parametrize("mtype", ["phrase", "cross_fields", "phrase_prefix", "bool_prefix"])
def test_unsupported_multi_match_types(es, mtype):
    check(
        bad_search(es, query={"multi_match": {"query": "hello", "fields": ["title"], "type": mtype}}),
        400,
        "parsing_exception",
        mtype,
    )


@pytest.mark.parametrize("key", ["suggest"])
def test_unsupported_search_sections(es, key):
    value = {"s": {"text": "helo", "term": {"field": "title"}}}
    with pytest.raises(BadRequestError) as e:
        es.search(index="e", body={"query": {"match_all": {}}, key: value})
    check(e.value, 400, "parsing_exception", f"[{key}]")


def test_search_after_without_sort(es):
    """SearchAfterBuilder.buildFieldDoc: search_after needs a sort (search_after is implemented)."""
    with pytest.raises(BadRequestError) as e:
        es.search(index="e", body={"query": {"match_all": {}}, "search_after": [1]})
    check(e.value, 400, "illegal_argument_exception", "Sort must contain at least one field.")


def test_unknown_top_level_key(es):
    with pytest.raises(BadRequestError) as e:
        es.search(index="e", body={"query": {"match_all": {}}, "qurey": {}})
    check(e.value, 400, "parsing_exception", "qurey")


@pytest.mark.parametrize(
    "source",
    [
        "for (int i = 0; i < 10; i++) { }",
        "while (true) { }",
        "Runtime.getRuntime().exec('ls')",
    ],
)
def test_script_outside_the_expression_subset(es, source):
    e = bad_search(es, query={"script_score": {"query": {"match_all": {}}, "script": {"source": source}}})
    check(e, 400, "script_exception")
    assert e.body["error"].get("script") == source


def test_knn_query_vector_of_wrong_dimension(es):
    e = bad_search(es, knn={"field": "vec", "query_vector": [1, 0], "k": 1, "num_candidates": 2})
    check(e, 400, "illegal_argument_exception", "different number of dimensions [2]", "[3]")
    e = bad_search(es, query={"knn": {"field": "vec", "query_vector": [1, 0, 0, 0], "k": 1}})
    check(e, 400, "illegal_argument_exception", "[4]", "[3]")
    e = bad_search(
        es,
        query={
            "script_score": {
                "query": {"match_all": {}},
                "script": {"source": "cosineSimilarity(params.q, 'vec') + 1.0", "params": {"q": [1, 0]}},
            }
        },
    )
    assert e.body["error"]["type"] in ("illegal_argument_exception", "script_exception")
    assert "dimension" in str(e.body)


def test_knn_parameter_errors(es):
    # KnnSearchBuilder's constructor throws inside its ConstructingObjectParser: Elasticsearch
    # answers x_content_parse_exception "Failed to build [knn] ..." caused by the illegal argument
    for knn, reason in (
        ({"k": 0, "num_candidates": 2}, "[k] must be greater than 0"),
        ({"k": 1, "num_candidates": 10_001}, "[num_candidates] cannot exceed [10000]"),
    ):
        e = bad_search(es, knn={"field": "vec", "query_vector": [1, 0, 0], **knn})
        check(e, 400, "x_content_parse_exception", "Failed to build [knn] after last required field arrived")
        assert e.body["error"]["caused_by"] == {"type": "illegal_argument_exception", "reason": reason}
    check(
        bad_search(es, knn={"field": "title", "query_vector": [1, 0, 0], "k": 1}),
        400,
        "illegal_argument_exception",
        "[title]",
    )
    check(
        bad_search(es, knn={"field": "vec", "query_vector": [1, 0, 0], "k": 1, "foo": 1}),
        400,
        "parsing_exception",
        "[knn]",
        "[foo]",
    )


def test_missing_index(es):
    with pytest.raises(NotFoundError) as e:
        es.search(index="no-such-index", query={"match_all": {}})
    check(e.value, 404, "index_not_found_exception", "no such index [no-such-index]")
    assert e.value.body["error"]["index"] == "no-such-index"
    with pytest.raises(NotFoundError):
        es.get(index="no-such-index", id="1")
    with pytest.raises(NotFoundError):
        es.indices.delete(index="no-such-index")
    assert not es.indices.exists(index="no-such-index")


def test_create_index_twice(es):
    es.indices.create(index="twice")
    with pytest.raises(BadRequestError) as e:
        es.indices.create(index="twice")
    check(e.value, 400, "resource_already_exists_exception", "index [twice/", "already exists")


def test_invalid_index_name(es):
    with pytest.raises(BadRequestError) as e:
        es.indices.create(index="Upper")
    check(e.value, 400, "invalid_index_name_exception", "[Upper]", "must be lowercase")


def test_bad_mapping(es):
    with pytest.raises(BadRequestError) as e:
        es.indices.create(index="badmap", mappings={"properties": {"x": {"type": "sparkly"}}})
    check(e.value, 400, "mapper_parsing_exception", "[sparkly]", "[x]")


def test_msearch_one_bad_item_among_good_ones(es):
    resp = es.msearch(
        searches=[
            {"index": "e"},
            {"query": {"match": {"title": "hello"}}},
            {"index": "e"},
            {"query": {"fuzzy": {"title": "x"}}},
            {"index": "missing"},
            {"query": {"match_all": {}}},
            {"index": "e"},
            {"query": {"term": {"tag": "b"}}},
        ]
    )
    r = resp["responses"]
    assert len(r) == 4
    assert r[0]["status"] == 200 and {h["_id"] for h in r[0]["hits"]["hits"]} == {"1", "2"}
    assert r[1]["status"] == 400 and r[1]["error"]["type"] == "parsing_exception"
    assert "[fuzzy]" in r[1]["error"]["reason"] and r[1]["error"]["root_cause"]
    assert r[2]["status"] == 404 and r[2]["error"]["type"] == "index_not_found_exception"
    assert r[3]["status"] == 200 and [h["_id"] for h in r[3]["hits"]["hits"]] == ["2"]


def test_bulk_one_bad_doc_among_good_ones(tmp_engine):
    es = tmp_engine
    es.indices.create(
        index="b",
        mappings={
            "properties": {
                "year": {"type": "integer"},
                "title": {"type": "text"},
                "vec": {"type": "dense_vector", "dims": 2},
            }
        },
    )
    resp = es.bulk(
        operations=[
            {"index": {"_index": "b", "_id": "1"}},
            {"title": "one", "year": 2001},
            {"index": {"_index": "b", "_id": "2"}},
            {"title": "two", "year": "not a year"},
            {"index": {"_index": "b", "_id": "3"}},
            {"title": "three", "vec": [1, 2, 3]},
            {"create": {"_index": "b", "_id": "1"}},
            {"title": "again"},
            {"index": {"_index": "b", "_id": "4"}},
            {"title": "four", "year": 2004},
        ],
        refresh=True,
    )
    assert resp["errors"] is True
    items = [next(iter(i.values())) for i in resp["items"]]
    assert [i["status"] for i in items] == [201, 400, 400, 409, 201]
    assert items[1]["error"]["type"] in ("mapper_parsing_exception", "document_parsing_exception")
    assert "[year]" in items[1]["error"]["reason"]
    assert "[vec]" in items[2]["error"]["reason"] and "dimensions" in items[2]["error"]["reason"]
    assert items[3]["error"]["type"] == "version_conflict_engine_exception"
    assert es.count(index="b")["count"] == 2
    assert sorted(h["_id"] for h in es.search(index="b")["hits"]["hits"]) == ["1", "4"]
    assert es.get(index="b", id="1")["_source"] == {"title": "one", "year": 2001}
    # helpers.bulk reports the failed items as BulkIndexError, after indexing the good ones
    with pytest.raises(helpers.BulkIndexError) as e:
        helpers.bulk(
            es,
            [
                {"_index": "b", "_id": "5", "_source": {"year": 5}},
                {"_index": "b", "_id": "6", "_source": {"year": "six"}},
            ],
            refresh=True,
        )
    assert len(e.value.errors) == 1 and es.count(index="b")["count"] == 3


def test_strict_mapping_rejects_unknown_fields(tmp_engine):
    es = tmp_engine
    es.indices.create(
        index="strict", mappings={"dynamic": "strict", "properties": {"a": {"type": "keyword"}}}
    )
    with pytest.raises(BadRequestError) as e:
        es.index(index="strict", id="1", document={"a": "x", "b": "y"})
    check(e.value, 400, "strict_dynamic_mapping_exception", "[b]")


def test_sort_and_collapse_on_text(es):
    check(
        bad_search(es, query={"match_all": {}}, sort=[{"title": "asc"}]),
        400,
        "illegal_argument_exception",
        "[title]",
    )
    check(
        bad_search(es, query={"match_all": {}}, collapse={"field": "title"}),
        400,
        "illegal_argument_exception",
        "collapse field `title`",
    )


def test_unknown_retriever_and_field(es):
    check(bad_search(es, retriever={"magic": {}}), 400, "parsing_exception", "[magic]")
    check(
        bad_search(es, retriever={"standard": {"query": {"match_all": {}}}}, query={"match_all": {}}),
        400,
        "parsing_exception",
        "[retriever]",
    )


def test_result_window(es):
    check(
        bad_search(es, query={"match_all": {}}, from_=9_999, size=2),
        400,
        "illegal_argument_exception",
        "Result window is too large",
    )


def test_malformed_query_values(es):
    check(
        bad_search(es, query={"match": {"title": {"query": "x", "operator": "xor"}}}),
        400,
        "illegal_argument_exception",
        "XOR",
    )
    check(
        bad_search(es, query={"bool": {"minimum_should_match": "lots", "should": [{"match_all": {}}]}}),
        400,
        "parsing_exception",
        "[minimum_should_match]",
    )
    check(
        bad_search(es, query={"function_score": {"query": {"match_all": {}}, "score_mode": "median"}}),
        400,
        "parsing_exception",
        "score_mode",
    )
    check(bad_search(es, query={"term": {"year": "abc"}}), 400, "query_shard_exception", "abc")


def test_unknown_route(es):
    with pytest.raises(ApiError) as e:
        es.perform_request("GET", "/_nodes/hot_threads", headers={"accept": "application/json"})
    assert e.value.meta.status == 400
    assert e.value.body["error"]["type"] == "illegal_argument_exception"
    assert "/_nodes/hot_threads" in e.value.body["error"]["reason"]


@pytest.mark.parametrize(
    "highlight, where, key",
    [
        ({"fields": {"title": {"pre_tags": [{}]}}}, "highlight_field", "pre_tags"),
        ({"fields": {"title": {"post_tags": [{}]}}}, "highlight_field", "post_tags"),
        ({"fields": {"title": {"pre_tags": [None]}}}, "highlight_field", "pre_tags"),
        ({"fields": {"title": {}}, "pre_tags": [None]}, "highlight", "pre_tags"),
        ({"fields": {"title": {}}, "post_tags": {"a": 1}}, "highlight", "post_tags"),
        ({"fields": [{"title": {"post_tags": [["<b>"]]}}]}, "highlight_field", "post_tags"),
    ],
)
def test_highlight_tags_that_are_not_strings(es, highlight, where, key):
    # AbstractHighlighterBuilder: declareStringArray(preTags/postTags); a null or object element has
    # no text, so the XContent parser fails the request with 400, never a 500
    e = bad_search(es, query={"match": {"title": "hello"}}, highlight=highlight)
    check(e, 400, "x_content_parse_exception", f"[{where}] failed to parse field [{key}]")


def test_highlight_tags_read_as_text(es):
    # parseArray reads a single value as a one-element array and each value with text():
    # a number becomes its text, as Elasticsearch does
    r = es.search(
        index="e",
        query={"match": {"title": "world"}},
        highlight={"fields": {"title": {"pre_tags": 1, "post_tags": [2]}}},
    )
    assert r["hits"]["hits"][0]["highlight"] == {"title": ["hello 1world2"]}


def test_msearch_item_that_crashes_is_that_items_500(es, monkeypatch, caplog):
    # Elasticsearch's TransportMultiSearchAction answers each item on its own: a failed item carries
    # its own error and status, the response is 200 and the other items are unaffected.  Fault
    # injection: the search of one item raises an exception the engine does not expect.
    from scholar_es.engine.rest import handler as rest

    real = rest.search_one

    def faulty(engine, target, *args, **kwargs):
        if target == "e,e":
            raise ZeroDivisionError("injected fault")
        return real(engine, target, *args, **kwargs)

    monkeypatch.setattr(rest, "search_one", faulty)
    with caplog.at_level("ERROR", logger="scholar_es.engine"):
        resp = es.msearch(
            searches=[
                {"index": "e"},
                {"query": {"term": {"tag": "a"}}},
                {"index": ["e", "e"]},
                {"query": {"match_all": {}}},
                {"index": "e"},
                {"query": {"term": {"tag": "b"}}},
            ]
        )
    r = resp["responses"]
    assert resp.meta.status == 200 and len(r) == 3
    assert r[0]["status"] == 200 and [h["_id"] for h in r[0]["hits"]["hits"]] == ["1"]
    assert r[1]["status"] == 500 and r[1]["error"]["type"] == "internal_error", r[1]
    assert r[1]["error"]["root_cause"][0]["type"] == "internal_error"
    assert "ZeroDivisionError" in r[1]["error"]["reason"] and "injected fault" not in str(r[1])
    assert r[2]["status"] == 200 and [h["_id"] for h in r[2]["hits"]["hits"]] == ["2"]
    assert any(rec.exc_info and "injected fault" in str(rec.exc_info[1]) for rec in caplog.records)


@pytest.mark.parametrize("key", ["fields", "docvalue_fields"])
@pytest.mark.parametrize(
    "value, token", [("title", "VALUE_STRING"), (3, "VALUE_NUMBER"), ({}, "START_OBJECT")]
)
def test_field_lists_that_are_not_arrays(es, key, value, token):
    # SearchSourceBuilder#parseXContent reads fields/docvalue_fields only as START_ARRAY
    check(bad_search(es, **{key: value}), 400, "parsing_exception", f"Unknown key for a {token} in [{key}].")
    assert es.search(index="e", **{key: ["tag"]})["hits"]["total"]["value"] == 2


@pytest.mark.parametrize(
    "opts, key, cause",
    [
        (
            {"max_analyzed_offset": -5},
            "max_analyzed_offset",
            "[max_analyzed_offset] must be a positive integer",
        ),
        (
            {"max_analyzed_offset": 0},
            "max_analyzed_offset",
            "[max_analyzed_offset] must be a positive integer",
        ),
        ({"require_field_match": "x"}, "require_field_match", "Failed to parse value [x] as only [true] or"),
        ({"require_field_match": 1}, "require_field_match", "Failed to parse value [1] as only [true] or"),
    ],
)
def test_highlight_option_values(es, opts, key, cause):
    # AbstractHighlighterBuilder: maxAnalyzedOffset refuses 0 and values below -1; require_field_match
    # is declareBoolean (a boolean or "true"/"false"); ObjectParser wraps the cause in a 400
    for highlight in ({"fields": {"title": opts}}, {"fields": {"title": {}}, **opts}):
        e = bad_search(es, query={"match": {"title": "hello"}}, highlight=highlight)
        check(e, 400, "x_content_parse_exception", f"failed to parse field [{key}]")
        assert cause in e.body["error"]["caused_by"]["reason"]


def test_highlight_option_values_accepted(es):
    def marked(**opts):
        r = es.search(
            index="e",
            query={"bool": {"must": [{"match": {"title": "world"}}, {"term": {"tag": "a"}}]}},
            highlight={"fields": {"title": {}, "tag": {}}, **opts},
        )
        return r["hits"]["hits"][0]["highlight"]

    assert marked(max_analyzed_offset=-1) == {"title": ["hello <em>world</em>"], "tag": ["<em>a</em>"]}
    assert marked(max_analyzed_offset=5) == {"tag": ["<em>a</em>"]}
    assert marked(require_field_match="false") == marked(require_field_match=False)
    assert marked(require_field_match="true") == marked(require_field_match=True)


@pytest.mark.parametrize("value", ["bogus", "5", "10 parsecs", "-5s"])
def test_timeout_that_is_not_a_time_value(es, value):
    # SearchSourceBuilder reads timeout with TimeValue.parseTimeValue: ElasticsearchParseException (400)
    e = bad_search(es, timeout=value)
    check(
        e, 400, "parse_exception", f"failed to parse setting [timeout] with value [{value}] as a time value"
    )


@pytest.mark.parametrize("value", ["10s", "500ms", "1m", "2h", "-1", "0", "100nanos", " 3D "])
def test_timeout_time_values(es, value):
    assert es.search(index="e", timeout=value)["hits"]["total"]["value"] == 2


@pytest.mark.parametrize(
    "query",
    [
        {"term": {"year": 99999999999999999999999}},
        {"term": {"year": "99999999999999999999999"}},
        {"term": {"year": 2**31}},
        {"terms": {"year": [2001, 2**31]}},
        {"match": {"year": -(2**31) - 1}},
    ],
)
def test_term_on_an_integer_field_out_of_range(es, query):
    # NumberFieldMapper.NumberType.INTEGER#parse: "Value [..] is out of range for an integer"
    e = bad_search(es, query=query)
    check(
        e, 400, "query_shard_exception", "failed to create query: Value [", "is out of range for an integer"
    )


def test_term_on_an_integer_field_at_the_bounds(es):
    assert es.search(index="e", query={"term": {"year": 2**31 - 1}})["hits"]["total"]["value"] == 0
    assert es.search(index="e", query={"terms": {"year": [-(2**31), 2001]}})["hits"]["total"]["value"] == 1
