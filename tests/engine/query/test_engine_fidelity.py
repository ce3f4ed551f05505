"""Search API fidelity: aggregations, fields/docvalue_fields, rest_total_hits_as_int, _msearch
items, highlighting and retriever validation, each checked against the values and messages
Elasticsearch documents or its source throws (cited per test). The YAML REST tests adapted from
Elasticsearch itself run in tests/engine/rest/test_rest_api_spec.py."""

from __future__ import annotations

import math
import warnings

import pytest
from elasticsearch import BadRequestError


@pytest.fixture
def es(tmp_engine):
    return tmp_engine


def _bad(call) -> dict:
    with pytest.raises(BadRequestError) as e:
        call()
    return e.value.body


# --- aggregations -----------------------------------------------------------------------------


@pytest.fixture
def genres(es):
    # the terms aggregation reference's example: 6 electronic, 3 rock, 2 jazz
    es.indices.create(
        index="music",
        mappings={
            "properties": {"genre": {"type": "keyword"}, "year": {"type": "integer"}, "t": {"type": "text"}}
        },
    )
    docs = ["electronic"] * 6 + ["rock"] * 3 + ["jazz"] * 2
    ops = []
    for i, g in enumerate(docs):
        ops += [{"index": {"_id": str(i)}}, {"genre": g, "year": 2000 + i, "t": f"song {g}"}]
    es.bulk(index="music", operations=ops, refresh=True)
    return es


def test_terms_documented_response(genres):
    # Elasticsearch reference, terms aggregation: the "genres" example response
    resp = genres.search(index="music", size=0, aggs={"genres": {"terms": {"field": "genre"}}})
    assert resp["aggregations"] == {
        "genres": {
            "doc_count_error_upper_bound": 0,
            "sum_other_doc_count": 0,
            "buckets": [
                {"key": "electronic", "doc_count": 6},
                {"key": "rock", "doc_count": 3},
                {"key": "jazz", "doc_count": 2},
            ],
        }
    }
    assert resp["hits"]["hits"] == [] and resp["hits"]["max_score"] is None


def test_terms_size_other_count_ties_and_orders(genres):
    es = genres
    resp = es.search(index="music", size=0, aggs={"g": {"terms": {"field": "genre", "size": 1}}})
    assert resp["aggregations"]["g"]["sum_other_doc_count"] == 5  # rock 3 + jazz 2 not returned
    es.index(index="music", id="x", document={"genre": "jazz"}, refresh=True)
    es.index(index="music", id="y", document={"genre": "blues"}, refresh=True)
    es.index(index="music", id="z", document={"genre": "blues"}, refresh=True)
    buckets = es.search(index="music", size=0, aggs={"g": {"terms": {"field": "genre"}}})["aggregations"][
        "g"
    ]["buckets"]
    # jazz and rock both hold 3 docs: _count desc, then _key asc (InternalOrder.compound tie-breaker)
    assert [(b["key"], b["doc_count"]) for b in buckets] == [
        ("electronic", 6),
        ("jazz", 3),
        ("rock", 3),
        ("blues", 2),
    ]
    by_key = es.search(
        index="music", size=0, aggs={"g": {"terms": {"field": "genre", "order": {"_key": "desc"}}}}
    )
    assert [b["key"] for b in by_key["aggregations"]["g"]["buckets"]] == [
        "rock",
        "jazz",
        "electronic",
        "blues",
    ]
    asc = es.search(
        index="music", size=0, aggs={"g": {"terms": {"field": "genre", "order": {"_count": "asc"}}}}
    )
    assert [b["key"] for b in asc["aggregations"]["g"]["buckets"]] == ["blues", "jazz", "rock", "electronic"]


def test_terms_order_by_sub_aggregation_and_nesting(genres):
    resp = genres.search(
        index="music",
        size=0,
        aggs={
            "g": {
                "terms": {"field": "genre", "order": {"latest": "desc"}},
                "aggs": {"latest": {"max": {"field": "year"}}, "y": {"stats": {"field": "year"}}},
            }
        },
    )
    buckets = resp["aggregations"]["g"]["buckets"]
    assert [(b["key"], b["latest"]["value"]) for b in buckets] == [
        ("jazz", 2010.0),
        ("rock", 2008.0),
        ("electronic", 2005.0),
    ]
    assert buckets[0]["y"] == {"count": 2, "min": 2009.0, "max": 2010.0, "avg": 2009.5, "sum": 4019.0}


def test_terms_min_doc_count_zero_and_missing(genres):
    es = genres
    es.index(index="music", id="n", document={"year": 1999}, refresh=True)
    resp = es.search(
        index="music",
        size=0,
        query={"term": {"genre": "rock"}},
        aggs={"g": {"terms": {"field": "genre", "min_doc_count": 0}}},
    )
    assert [(b["key"], b["doc_count"]) for b in resp["aggregations"]["g"]["buckets"]] == [
        ("rock", 3),
        ("electronic", 0),
        ("jazz", 0),
    ]
    resp = es.search(index="music", size=0, aggs={"g": {"terms": {"field": "genre", "missing": "N/A"}}})
    assert {"key": "N/A", "doc_count": 1} in resp["aggregations"]["g"]["buckets"]


def test_metrics_empty_set_and_value_count(genres):
    resp = genres.search(
        index="music",
        size=0,
        query={"term": {"genre": "none"}},
        aggs={
            "mn": {"min": {"field": "year"}},
            "s": {"sum": {"field": "year"}},
            "a": {"avg": {"field": "year"}},
            "st": {"stats": {"field": "year"}},
            "vc": {"value_count": {"field": "genre"}},
            "c": {"cardinality": {"field": "genre"}},
        },
    )
    # InternalMin/Max/Avg render an empty result as null, InternalSum as 0.0, InternalStats count 0
    assert resp["aggregations"] == {
        "mn": {"value": None},
        "s": {"value": 0.0},
        "a": {"value": None},
        "st": {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0},
        "vc": {"value": 0},
        "c": {"value": 0},
    }


def test_top_hits_under_terms_and_aggs_ignore_post_filter(genres):
    resp = genres.search(
        index="music",
        size=0,
        post_filter={"term": {"genre": "jazz"}},
        aggs={
            "g": {
                "terms": {"field": "genre", "size": 1},
                "aggs": {"top": {"top_hits": {"size": 2, "sort": [{"year": "desc"}], "_source": ["year"]}}},
            }
        },
    )
    bucket = resp["aggregations"]["g"]["buckets"][0]
    assert bucket["key"] == "electronic" and bucket["doc_count"] == 6
    top = bucket["top"]["hits"]
    assert top["total"] == {"value": 6, "relation": "eq"}
    assert [h["_source"] for h in top["hits"]] == [{"year": 2005}, {"year": 2004}]


def test_histogram_range_filter_filters(genres):
    resp = genres.search(
        index="music",
        size=0,
        aggs={
            "h": {"histogram": {"field": "year", "interval": 5, "offset": 1}},
            "r": {
                "range": {
                    "field": "year",
                    "ranges": [{"from": 2005}, {"to": 2003}, {"from": 2003, "to": 2005}],
                }
            },
            "f": {"filter": {"term": {"genre": "rock"}}, "aggs": {"n": {"value_count": {"field": "year"}}}},
            "fs": {"filters": {"filters": [{"term": {"genre": "rock"}}, {"term": {"genre": "jazz"}}]}},
        },
    )
    aggs = resp["aggregations"]
    # years 2000..2010, key = floor((v - 1) / 5) * 5 + 1
    assert [(b["key"], b["doc_count"]) for b in aggs["h"]["buckets"]] == [
        (1996.0, 1),
        (2001.0, 5),
        (2006.0, 5),
    ]
    # ranges come back sorted by (from, to); from inclusive, to exclusive
    assert [(b["key"], b["doc_count"]) for b in aggs["r"]["buckets"]] == [
        ("*-2003.0", 3),
        ("2003.0-2005.0", 2),
        ("2005.0-*", 6),
    ]
    assert aggs["f"] == {"doc_count": 3, "n": {"value": 3}}
    assert aggs["fs"] == {"buckets": [{"doc_count": 3}, {"doc_count": 2}]}


def test_aggregation_errors(genres):
    es = genres
    body = _bad(lambda: es.search(index="music", aggs={"g": {"terms": {"field": "genre", "size": 0}}}))
    assert body["error"]["type"] == "illegal_argument_exception"
    assert body["error"]["reason"] == "[size] must be greater than 0. Found [0] in [g]"
    # TermsAggregationBuilder#shardSize refuses shard_size <= 0 the same way
    for shard_size in (-3, 0):
        body = _bad(
            lambda n=shard_size: es.search(
                index="music", aggs={"g": {"terms": {"field": "genre", "shard_size": n}}}
            )
        )
        assert body["error"]["type"] == "illegal_argument_exception"
        assert body["error"]["reason"] == f"[shardSize] must be greater than 0. Found [{shard_size}] in [g]"
    assert es.search(index="music", aggs={"g": {"terms": {"field": "genre", "shard_size": 1}}})[
        "aggregations"
    ]
    body = _bad(lambda: es.search(index="music", aggs={"g": {"terms": {"field": "t"}}}))
    assert body["error"]["reason"].startswith("Fielddata is disabled on [t] in [music]. Text fields are not")
    body = _bad(lambda: es.search(index="music", aggs={"g": {"date_histogram": {"field": "year"}}}))
    assert "[aggregation type date_histogram] is not supported" in body["error"]["reason"]
    body = _bad(lambda: es.search(index="music", aggs={"g": {"termz": {"field": "genre"}}}))
    assert body["error"] == {
        "root_cause": [{"type": "parsing_exception", "reason": "Unknown aggregation type [termz]"}],
        "type": "parsing_exception",
        "reason": "Unknown aggregation type [termz]",
    }
    body = _bad(lambda: es.search(index="music", aggs={"g": {"avg": {"field": "genre"}}}))
    assert body["error"]["reason"] == "Field [genre] of type [keyword] is not supported for aggregation [avg]"


# --- fields, docvalue_fields, stored_fields ------------------------------------------------------


@pytest.fixture
def logs(es):
    # the "Retrieve selected fields" reference example
    es.indices.create(
        index="my-index-000001",
        mappings={
            "properties": {
                "user": {"properties": {"id": {"type": "keyword"}}},
                "http": {
                    "properties": {
                        "response": {
                            "properties": {"status_code": {"type": "integer"}, "bytes": {"type": "long"}}
                        }
                    }
                },
                "@timestamp": {"type": "date"},
                "message": {"type": "text"},
            }
        },
    )
    es.index(
        index="my-index-000001",
        id="0",
        document={
            "@timestamp": "2099-11-15T14:12:12",
            "http": {"request": {"method": "get"}, "response": {"bytes": 1070000, "status_code": 200}},
            "message": "GET /search HTTP/1.1 200 1070000",
            "user": {"id": "kimchy"},
        },
        refresh=True,
    )
    return es


def test_fields_documented_example(logs):
    resp = logs.search(
        index="my-index-000001",
        query={"match": {"user.id": "kimchy"}},
        fields=["user.id", "http.response.*", {"field": "@timestamp", "format": "epoch_millis"}],
        source=False,
    )
    hit = resp["hits"]["hits"][0]
    assert "_source" not in hit
    assert hit["fields"] == {
        "user.id": ["kimchy"],
        "@timestamp": ["4098435132000"],
        "http.response.bytes": [1070000],
        "http.response.status_code": [200],
    }


def test_docvalue_fields_and_default_date_format(logs):
    resp = logs.search(
        index="my-index-000001",
        docvalue_fields=["user.id", "http.response.*", {"field": "@timestamp"}],
        fields=[{"field": "@timestamp", "format": "yyyy-MM-dd"}],
    )
    hit = resp["hits"]["hits"][0]
    assert hit["fields"]["@timestamp"] == ["2099-11-15T14:12:12.000Z"]  # docvalue default format wins last
    assert hit["fields"]["http.response.status_code"] == [200]
    assert hit["fields"]["user.id"] == ["kimchy"]
    resp = logs.search(index="my-index-000001", fields=[{"field": "@timestamp", "format": "yyyy-MM-dd"}])
    assert resp["hits"]["hits"][0]["fields"] == {"@timestamp": ["2099-11-15"]}
    body = _bad(lambda: logs.search(index="my-index-000001", docvalue_fields=["message"]))
    assert body["error"]["reason"].startswith("Fielddata is disabled on [message]")


def test_stored_fields_none(logs):
    resp = logs.search(index="my-index-000001", stored_fields="_none_")
    assert resp["hits"]["hits"] == [{"_index": "my-index-000001", "_score": 1.0}]
    body = _bad(lambda: logs.search(index="my-index-000001", stored_fields="_none_", source=True))
    assert body["error"]["reason"] == "[stored_fields] cannot be disabled if [_source] is requested"


# --- rest_total_hits_as_int, search_type, _msearch ---------------------------------------------


def test_rest_total_hits_as_int(logs):
    resp = logs.search(index="my-index-000001", rest_total_hits_as_int=True)
    assert resp["hits"]["total"] == 1
    resp = logs.search(index="my-index-000001", rest_total_hits_as_int=True, track_total_hits=False)
    assert resp["hits"]["total"] == -1
    body = _bad(
        lambda: logs.search(index="my-index-000001", rest_total_hits_as_int=True, track_total_hits=100)
    )
    assert body["error"]["reason"] == (
        "[rest_total_hits_as_int] cannot be used if the tracking of total hits is not accurate, got 100"
    )


def test_search_type(logs):
    assert (
        logs.search(index="my-index-000001", search_type="dfs_query_then_fetch")["hits"]["total"]["value"]
        == 1
    )
    body = _bad(
        lambda: logs.perform_request("GET", "/my-index-000001/_search", params={"search_type": "scan"})
    )
    assert body["error"]["type"] == "illegal_argument_exception"
    assert body["error"]["reason"] == "No search type for [scan]"


def test_msearch_items(logs):
    resp = logs.msearch(
        searches=[
            {"index": "my-index-000001"},
            {"query": {"match_all": {}}},
            {"index": "missing"},
            {"query": {"match_all": {}}},
        ],
        rest_total_hits_as_int=True,
    )
    ok, missing = resp["responses"]
    assert ok["status"] == 200 and ok["hits"]["total"] == 1
    assert missing["status"] == 404 and missing["error"]["type"] == "index_not_found_exception"
    body = _bad(lambda: logs.msearch(searches=[{"index": "my-index-000001", "size": 3}, {}]))
    assert body["error"]["reason"] == "key [size] is not supported in the metadata section"


# --- highlighting -------------------------------------------------------------------------------


@pytest.fixture
def papers(es):
    es.indices.create(
        index="p", mappings={"properties": {"body": {"type": "text"}, "tag": {"type": "keyword"}}}
    )
    body = (
        "Transformers dominate language modelling. "
        "We study sparse attention for long documents in detail. "
        "Attention cost grows quadratically with length."
    )
    es.index(index="p", id="1", document={"body": body, "tag": "nlp"}, refresh=True)
    return es


def test_highlight_shape_tags_and_fragments(papers):
    resp = papers.search(
        index="p",
        query={"match": {"body": "attention"}},
        highlight={"fields": {"body": {}}, "pre_tags": ["<b>"], "post_tags": ["</b>"]},
    )
    # one fragment per matching sentence, in text order
    assert resp["hits"]["hits"][0]["highlight"] == {
        "body": [
            "We study sparse <b>attention</b> for long documents in detail.",
            "<b>Attention</b> cost grows quadratically with length.",
        ]
    }
    resp = papers.search(
        index="p",
        query={"match": {"body": "attention"}},
        highlight={"fields": {"body": {"number_of_fragments": 0}}},
    )
    (whole,) = resp["hits"]["hits"][0]["highlight"]["body"]
    assert whole.count("<em>") == 2 and whole.startswith("Transformers dominate")


def test_highlight_query_and_unmatched_fields(papers):
    resp = papers.search(
        index="p",
        query={"match_all": {}},
        highlight={"fields": {"body": {"highlight_query": {"match": {"body": "quadratically"}}}, "tag": {}}},
    )
    assert resp["hits"]["hits"][0]["highlight"] == {
        "body": ["Attention cost grows <em>quadratically</em> with length."]
    }  # "tag" has no match: left out, as Elasticsearch leaves it out
    resp = papers.search(index="p", query={"term": {"tag": "nlp"}}, highlight={"fields": {"tag": {}}})
    assert resp["hits"]["hits"][0]["highlight"] == {"tag": ["<em>nlp</em>"]}


def test_highlight_errors(papers):
    body = _bad(
        lambda: papers.search(
            index="p", query={"match_all": {}}, highlight={"fields": {"body": {"type": "fvh"}}}
        )
    )
    assert "[highlight type fvh] is not supported" in body["error"]["reason"]


# --- retrievers -------------------------------------------------------------------------------------


def _two_legs(extra: dict | None = None, weight=1.0, normalizer="minmax"):
    return {
        "linear": {
            "retrievers": [
                {
                    "retriever": {"standard": {"query": {"term": {"genre": "jazz"}}}},
                    "weight": weight,
                    "normalizer": normalizer,
                },
                {"retriever": {"standard": {"query": {"term": {"genre": "rock"}}}}, "weight": 1.0},
            ],
            **(extra or {}),
        }
    }


def test_linear_validation_messages(genres):
    es = genres
    body = _bad(lambda: es.search(index="music", retriever=_two_legs({"rank_window_size": 2})))
    assert body["error"]["type"] == "action_request_validation_exception"
    assert body["error"]["reason"] == (
        "Validation Failed: 1: [linear] requires [rank_window_size: 2] be greater than or equal to [size: 10];"
    )
    body = _bad(lambda: es.search(index="music", retriever=_two_legs({"rank_window_size": -10})))
    assert body["error"]["reason"] == "[rank_window_size] parameter cannot be negative, found [-10]"
    body = _bad(lambda: es.search(index="music", retriever=_two_legs(weight=-1)))
    assert body["error"]["type"] == "x_content_parse_exception"
    assert body["error"]["caused_by"]["reason"] == "[weight] must be non-negative"
    body = _bad(lambda: es.search(index="music", retriever=_two_legs(normalizer="x")))
    assert body["error"]["caused_by"] == {
        "type": "illegal_argument_exception",
        "reason": "Unknown normalizer [x]",
    }


def test_linear_minmax_one_hit_leg_is_one(genres):
    es = genres
    es.index(index="music", id="solo", document={"genre": "solo"}, refresh=True)
    resp = es.search(
        index="music",
        retriever={
            "linear": {
                "retrievers": [
                    {
                        "retriever": {"standard": {"query": {"term": {"genre": "solo"}}}},
                        "normalizer": "minmax",
                        "weight": 3,
                    }
                ]
            }
        },
    )
    # MinMaxScoreNormalizer: max - min < 1e-6 -> every score 1
    assert [(h["_id"], h["_score"]) for h in resp["hits"]["hits"]] == [("solo", 3.0)]


def test_rrf_negative_weight_and_window(genres):
    es = genres
    body = _bad(
        lambda: es.search(
            index="music",
            retriever={
                "rrf": {
                    "retrievers": [
                        {"retriever": {"standard": {"query": {"match_all": {}}}}, "weight": -0.5},
                        {"standard": {"query": {"match_all": {}}}},
                    ]
                }
            },
        )
    )
    assert body["error"]["type"] == "x_content_parse_exception"
    assert body["error"]["caused_by"]["reason"] == "[weight] must be non-negative, found [-0.5]"
    body = _bad(
        lambda: es.search(
            index="music",
            size=5,
            retriever={
                "rrf": {"retrievers": [{"standard": {"query": {"match_all": {}}}}], "rank_window_size": 3}
            },
        )
    )
    assert body["error"]["reason"] == (
        "Validation Failed: 1: [rrf] requires [rank_window_size: 3] be greater than or equal to [size: 5];"
    )


def test_size_and_from_messages(genres):
    # SearchSourceBuilder#size and #from
    body = _bad(lambda: genres.search(index="music", size=-1))
    assert body["error"]["reason"] == "[size] parameter cannot be negative, found [-1]"
    body = _bad(lambda: genres.search(index="music", from_=-2))
    assert body["error"]["reason"] == "[from] parameter cannot be negative but was [-2]"


def test_exists_matches_an_empty_text_value(es):
    # Lucene writes a zero norm for an indexed field without tokens, and TextFieldMapper's exists
    # query is a FieldExistsQuery on norms: "" and stop-words-only values exist, null and [] do not
    es.indices.create(index="e", mappings={"properties": {"t": {"type": "text", "analyzer": "english"}}})
    docs = {"empty": "", "stop": "the", "word": "graph", "null": None, "list": [], "absent": None}
    for doc_id, value in docs.items():
        es.index(index="e", id=doc_id, document={} if doc_id == "absent" else {"t": value})
    es.indices.refresh(index="e")
    resp = es.search(index="e", query={"exists": {"field": "t"}})
    assert sorted(h["_id"] for h in resp["hits"]["hits"]) == ["empty", "stop", "word"]
    es.delete(index="e", id="stop", refresh=True)
    resp = es.search(index="e", query={"exists": {"field": "t"}})
    assert sorted(h["_id"] for h in resp["hits"]["hits"]) == ["empty", "word"]


def test_typed_keys(genres):
    # typed_keys: "<InternalAggregation#getWriteableName>#<name>" (StringTerms "sterms", LongTerms "lterms")
    resp = genres.search(
        index="music",
        size=0,
        typed_keys=True,
        aggs={
            "g": {"terms": {"field": "genre"}, "aggs": {"y": {"max": {"field": "year"}}}},
            "years": {"terms": {"field": "year", "size": 1}},
            "s": {"stats": {"field": "year"}},
        },
    )
    aggs = resp["aggregations"]
    assert set(aggs) == {"sterms#g", "lterms#years", "stats#s"}
    assert set(aggs["sterms#g"]["buckets"][0]) == {"key", "doc_count", "max#y"}


def test_terms_fast_path_agrees_with_the_general_path(es):
    # the vectorized path (plain _count/_key orders) and the general one (taken when include is
    # set) must give the same buckets, sum_other_doc_count included, on multi-valued data
    import random

    rng = random.Random(7)
    es.indices.create(
        index="r", mappings={"properties": {"k": {"type": "keyword"}, "n": {"type": "integer"}}}
    )
    ops = []
    for i in range(300):
        ks = [rng.choice("abcdefghijklmnopqrstuvwxyzäé") for _ in range(rng.randint(0, 3))]
        ops += [
            {"index": {"_id": str(i)}},
            {"k": ks, "n": [rng.randint(0, 40) for _ in range(rng.randint(0, 2))]},
        ]
    es.bulk(index="r", operations=ops, refresh=True)
    all_n = list(range(41))
    for order in (
        None,
        {"_count": "asc"},
        {"_key": "asc"},
        {"_key": "desc"},
        [{"_count": "desc"}, {"_key": "desc"}],
    ):
        for size in (1, 5, 50):
            base = {"size": size, **({"order": order} if order else {})}
            fast = es.search(index="r", size=0, aggs={"a": {"terms": {"field": "k", **base}}})
            slow = es.search(
                index="r", size=0, aggs={"a": {"terms": {"field": "k", "include": ".*", **base}}}
            )
            assert fast["aggregations"] == slow["aggregations"], (order, size)
            fast = es.search(index="r", size=0, aggs={"a": {"terms": {"field": "n", **base}}})
            slow = es.search(
                index="r", size=0, aggs={"a": {"terms": {"field": "n", "include": all_n, **base}}}
            )
            assert fast["aggregations"] == slow["aggregations"], (order, size)


def test_collapse_keeps_requested_fields(genres):
    resp = genres.search(
        index="music",
        query={"match_all": {}},
        collapse={"field": "genre"},
        fields=["year"],
        size=1,
        source=False,
    )
    assert resp["hits"]["hits"][0]["fields"] == {"year": [2000], "genre": ["electronic"]}


def test_float_fields_aggregate_their_doc_values(es):
    # a float field's doc values hold the float32 value: 1.1f is 1.100000023841858 as a double
    es.indices.create(index="f", mappings={"properties": {"f": {"type": "float"}, "d": {"type": "double"}}})
    es.index(index="f", id="1", document={"f": 1.1, "d": 1.1}, refresh=True)
    aggs = es.search(
        index="f",
        size=0,
        aggs={"f": {"terms": {"field": "f"}}, "d": {"terms": {"field": "d"}}, "m": {"max": {"field": "f"}}},
    )["aggregations"]
    assert aggs["f"]["buckets"][0]["key"] == 1.100000023841858
    assert aggs["d"]["buckets"][0]["key"] == 1.1
    assert aggs["m"]["value"] == 1.100000023841858


def test_highlight_matches_in_one_passage_share_one_fragment(papers):
    papers.index(
        index="p", id="2", document={"body": "Attention helps. So does attention. Done."}, refresh=True
    )
    resp = papers.search(
        index="p",
        query={"ids": {"values": ["2"]}},
        highlight={"fields": {"body": {}}, "highlight_query": {"match": {"body": "attention"}}},
    )
    assert resp["hits"]["hits"][0]["highlight"] == {
        "body": ["<em>Attention</em> helps. So does <em>attention</em>. Done."]
    }


@pytest.mark.parametrize(
    "aggs",
    [
        {"a": {"terms": {"field": 5}}},
        {"a": {"terms": "x"}},
        {"a": {"histogram": {"field": "year", "interval": "abc"}}},
        {"a": {"range": {"field": "year", "ranges": [{"from": "x"}]}}},
        {"a": {"filters": {"filters": 5}}},
        {"a": {"top_hits": {"size": "x"}}},
        {"a": {"terms": {"field": "genre", "order": "desc"}}},
        {"a": {"terms": {"field": "genre", "order": {"_count": "sideways"}}}},
        {"a": {"terms": {"field": "genre", "include": 5}}},
        {"a": {"terms": {"field": "genre", "include": "[invalid"}}},
        {"a": {"terms": {"field": "genre", "include": "a&b"}}},  # Lucene-only operator: refused
        {"a": {"filter": 5}},
        {"a": {"terms": {"field": "genre", "size": 1e400}}},
        {"a": {"histogram": {"field": "year", "interval": 10, "extended_bounds": {"min": "x"}}}},
        {"a": {"terms": {"field": "genre", "order": {"missing_agg": "asc"}}}},
    ],
)
def test_bad_aggregations_are_clear_400s(genres, aggs):
    body = _bad(lambda: genres.search(index="music", size=0, aggs=aggs))
    assert body["status"] == 400 and body["error"]["reason"]
    assert "Error" not in body["error"]["reason"]  # no Python exception names leak


@pytest.mark.parametrize("key", ["hard_bounds", "extended_bounds"])
@pytest.mark.parametrize("value, token", [("x", "VALUE_STRING"), (5, "VALUE_NUMBER"), ([1], "START_ARRAY")])
def test_histogram_bounds_must_be_objects(genres, key, value, token):
    # HistogramAggregationBuilder declares both bounds as ObjectParser.ValueType.OBJECT: any other
    # token is refused by the parser ("[histogram] hard_bounds doesn't support values of type: ...")
    aggs = {"a": {"histogram": {"field": "year", "interval": 10, key: value}}}
    body = _bad(lambda: genres.search(index="music", size=0, aggs=aggs))
    assert body["status"] == 400 and body["error"]["type"] == "x_content_parse_exception", body
    assert f"[histogram] {key} doesn't support values of type: {token}" in body["error"]["reason"]


@pytest.mark.parametrize("interval", [1e-9, 1e-300])
def test_histogram_tiny_interval_is_too_many_buckets(genres, interval):
    # search.max_buckets (65,536): filling the empty buckets between 2000 and 2010 needs ~1e10 or
    # ~1e303 buckets, so Elasticsearch refuses with too_many_buckets_exception; never one merged bucket
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow on the way
        body = _bad(
            lambda: genres.search(
                index="music", size=0, aggs={"c": {"histogram": {"field": "year", "interval": interval}}}
            )
        )
    assert body["error"]["type"] == "too_many_buckets_exception", body
    assert "[search.max_buckets]" in body["error"]["reason"]


def test_histogram_tiny_interval_keys_are_computed_in_double(genres):
    # Histogram rounding: Math.floor((value - offset) / interval) * interval + offset, in double;
    # with min_doc_count 1 no empty bucket is created, so each year is its own bucket
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resp = genres.search(
            index="music",
            size=0,
            aggs={"c": {"histogram": {"field": "year", "interval": 1e-300, "min_doc_count": 1}}},
        )
    buckets = resp["aggregations"]["c"]["buckets"]
    assert [b["key"] for b in buckets] == [math.floor(y / 1e-300) * 1e-300 for y in range(2000, 2011)]
    assert [b["doc_count"] for b in buckets] == [1] * 11
    assert all(
        b["key"] == pytest.approx(y, rel=1e-12) for b, y in zip(buckets, range(2000, 2011), strict=True)
    )
