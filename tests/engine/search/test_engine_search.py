"""The search request around the query: collapse + inner_hits, retrievers, sort, paging, _source,
track_total_hits and explain."""

from __future__ import annotations

import math

import pytest
from elasticsearch import BadRequestError

K1, B = 1.2, 0.75


def idf(n, N):
    return math.log(1 + (N - n + 0.5) / (n + 0.5))


def bm25(freq, dl, avgdl, n, N, boost=1.0):
    return boost * (K1 + 1) * idf(n, N) * freq / (freq + K1 * (1 - B + B * dl / avgdl))


DOCS = {  # paper (keyword), title (standard), year (integer), meta (object)
    "c1": {"paper": "A", "title": "graph graph", "year": 2001, "meta": {"a": 1, "b": 2}},
    "c2": {"paper": "A", "title": "graph", "year": 2001, "meta": {"a": 3, "b": 4}},
    "c3": {"paper": "B", "title": "graph neural", "year": 2010},
    "c4": {"paper": "A", "title": "graph x y", "year": 2000},
    "c5": {"paper": "C", "title": "other", "year": 2020},
    "c6": {"paper": "B", "title": "graph", "year": 2005},
}
# title: N = 6, lengths 2, 1, 2, 3, 1, 1 -> avgdl = 10/6; "graph": n = 5
AVG = 10 / 6
G = {
    "c1": bm25(2, 2, AVG, 5, 6),
    "c2": bm25(1, 1, AVG, 5, 6),
    "c3": bm25(1, 2, AVG, 5, 6),
    "c4": bm25(1, 3, AVG, 5, 6),
    "c6": bm25(1, 1, AVG, 5, 6),
}
G_ORDER = ["c1", "c2", "c6", "c3", "c4"]  # c2 and c6 tie: index order
GRAPH = {"match": {"title": "graph"}}


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("search"))
    client.indices.create(
        index="s",
        mappings={
            "properties": {
                "paper": {"type": "keyword"},
                "title": {"type": "text"},
                "year": {"type": "integer"},
                "meta": {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
            }
        },
    )
    for doc_id, src in DOCS.items():
        client.index(index="s", id=doc_id, document=src)
    client.indices.refresh(index="s")
    yield client
    client.close()


def hits(resp):
    return resp["hits"]["hits"]


def ids(resp):
    return [h["_id"] for h in hits(resp)]


def test_plain_ranking(es):
    resp = es.search(index="s", query=GRAPH)
    assert ids(resp) == G_ORDER
    assert {h["_id"]: h["_score"] for h in hits(resp)} == pytest.approx(G, rel=1e-5)
    assert resp["hits"]["max_score"] == pytest.approx(G["c1"], rel=1e-5)


# --- collapse ---------------------------------------------------------------------------------


def test_collapse_with_inner_hits(es):
    resp = es.search(
        index="s", query=GRAPH, collapse={"field": "paper", "inner_hits": {"name": "top", "size": 2}}
    )
    assert resp["hits"]["total"] == {"value": 5, "relation": "eq"}  # documents, not groups
    assert ids(resp) == ["c1", "c6"]  # best of A, best of B, by score
    a, b = hits(resp)
    assert a["fields"] == {"paper": ["A"]} and b["fields"] == {"paper": ["B"]}
    assert a["_score"] == pytest.approx(G["c1"], rel=1e-5)
    inner_a = a["inner_hits"]["top"]["hits"]
    assert inner_a["total"] == {"value": 3, "relation": "eq"}
    assert [h["_id"] for h in inner_a["hits"]] == ["c1", "c2"]
    assert inner_a["max_score"] == pytest.approx(G["c1"], rel=1e-5)
    assert [h["_score"] for h in inner_a["hits"]] == pytest.approx([G["c1"], G["c2"]], rel=1e-5)
    assert inner_a["hits"][0]["_source"] == DOCS["c1"]
    inner_b = b["inner_hits"]["top"]["hits"]
    assert inner_b["total"]["value"] == 2 and [h["_id"] for h in inner_b["hits"]] == ["c6", "c3"]


def test_collapse_inner_hits_default_size_is_3_and_paging_is_over_groups(es):
    resp = es.search(
        index="s", query={"match_all": {}}, collapse={"field": "paper", "inner_hits": {"name": "all"}}
    )
    assert ids(resp) == ["c1", "c3", "c5"]  # all score 1: first doc of each group in index order
    assert [h["_id"] for h in hits(resp)[0]["inner_hits"]["all"]["hits"]["hits"]] == ["c1", "c2", "c4"]
    resp = es.search(index="s", query=GRAPH, collapse={"field": "paper"}, from_=1, size=1)
    assert ids(resp) == ["c6"] and "inner_hits" not in hits(resp)[0]


def test_collapse_with_sort_reports_each_group_heads_sort_values(es):
    # Elasticsearch's "Collapse search results" (collapse + sort on http.response.bytes): the hits
    # are sorted by `sort`, each group is represented by its first document in that order, and each
    # hit's `sort` holds that document's own sort values (CollapseTopFieldDocs keeps the head's fields).
    # year desc: c5 2020 (C), c3 2010 (B), c6 2005 (B), c1 2001 (A), c2 2001 (A), c4 2000 (A)
    resp = es.search(index="s", query={"match_all": {}}, collapse={"field": "paper"}, sort=[{"year": "desc"}])
    assert ids(resp) == ["c5", "c3", "c1"]
    assert [h["sort"] for h in hits(resp)] == [[2020], [2010], [2001]]
    assert [h["fields"]["paper"] for h in hits(resp)] == [["C"], ["B"], ["A"]]
    paged = es.search(
        index="s",
        query={"match_all": {}},
        collapse={"field": "paper"},
        sort=[{"year": "desc"}],
        from_=1,
        size=2,
    )
    assert ids(paged) == ["c3", "c1"] and [h["sort"] for h in hits(paged)] == [[2010], [2001]]
    # two keys: the second breaks the year tie inside A (c1 and c2 both 2001) by _doc desc
    two = es.search(
        index="s",
        query={"match_all": {}},
        collapse={"field": "paper"},
        sort=[{"year": "asc"}, {"_doc": "desc"}],
    )
    # year asc: c4 2000 (A), c2 2001 (A, _doc desc puts c2 before c1), c1, c6 2005 (B), c3, c5
    assert ids(two) == ["c4", "c6", "c5"]
    assert [h["sort"] for h in hits(two)] == [[2000, 3], [2005, 5], [2020, 4]]


# --- retrievers ----------------------------------------------------------------------------------


def standard(query):
    return {"standard": {"query": query}}


def test_rrf_retriever(es):
    # r1: graph ranking c1 c2 c6 c3 c4; r2: papers B or C, constant score -> index order c3 c5 c6
    r2 = {"terms": {"paper": ["B", "C"]}}
    resp = es.search(index="s", retriever={"rrf": {"retrievers": [standard(GRAPH), standard(r2)]}})
    expected = {
        "c1": 1 / 61,
        "c2": 1 / 62,
        "c6": 1 / 63 + 1 / 63,
        "c3": 1 / 64 + 1 / 61,
        "c4": 1 / 65,
        "c5": 1 / 62,
    }
    assert {h["_id"]: h["_score"] for h in hits(resp)} == pytest.approx(expected, rel=1e-5)
    assert ids(resp) == ["c3", "c6", "c1", "c2", "c5", "c4"]  # c2/c5 tie: index order
    resp = es.search(
        index="s",
        retriever={
            "rrf": {"retrievers": [standard(GRAPH), standard(r2)], "rank_constant": 1, "rank_window_size": 2}
        },
        size=2,
    )
    # only each retriever's top 2 count: c1 c2 | c3 c5
    assert {h["_id"]: h["_score"] for h in hits(resp)} == pytest.approx({"c1": 1 / 2, "c3": 1 / 2}, rel=1e-5)


def test_linear_retriever_minmax(es):
    by_year = {
        "function_score": {
            "query": {"exists": {"field": "year"}},
            "field_value_factor": {"field": "year"},
            "boost_mode": "replace",
        }
    }
    resp = es.search(
        index="s",
        retriever={
            "linear": {
                "retrievers": [
                    {"retriever": standard(GRAPH), "weight": 2, "normalizer": "minmax"},
                    {"retriever": standard(by_year), "weight": 1, "normalizer": "minmax"},
                ]
            }
        },
    )
    lo, hi = G["c4"], G["c1"]
    year = {d: src["year"] for d, src in DOCS.items()}
    expected = {d: (2 * (G[d] - lo) / (hi - lo) if d in G else 0.0) + (year[d] - 2000) / 20 for d in DOCS}
    got = {h["_id"]: h["_score"] for h in hits(resp)}
    assert got == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert ids(resp)[0] == "c1"


# --- sort / paging / _source -------------------------------------------------------------------


def test_sort_by_field_then_score(es):
    resp = es.search(index="s", query=GRAPH, sort=[{"year": "asc"}, {"_score": "desc"}])
    assert ids(resp) == ["c4", "c1", "c2", "c6", "c3"]  # c1/c2 share 2001: higher score first
    assert [h["sort"][0] for h in hits(resp)] == [2000, 2001, 2001, 2005, 2010]
    assert [h["sort"][1] for h in hits(resp)] == pytest.approx([G[d] for d in ids(resp)], rel=1e-5)
    assert hits(resp)[0]["_score"] == pytest.approx(G["c4"], rel=1e-5)


def test_sort_by_field_only_has_no_scores(es):
    resp = es.search(index="s", query=GRAPH, sort=[{"year": {"order": "desc"}}])
    assert ids(resp) == ["c3", "c6", "c1", "c2", "c4"]
    assert all(h["_score"] is None for h in hits(resp)) and resp["hits"]["max_score"] is None
    assert [h["sort"] for h in hits(resp)] == [[2010], [2005], [2001], [2001], [2000]]


def test_from_and_size(es):
    resp = es.search(index="s", query=GRAPH, from_=1, size=2)
    assert ids(resp) == G_ORDER[1:3]
    assert resp["hits"]["total"] == {"value": 5, "relation": "eq"}
    assert ids(es.search(index="s", query=GRAPH, from_=4, size=5)) == ["c4"]
    assert ids(es.search(index="s", query=GRAPH, from_=10)) == []
    assert ids(es.search(index="s", query=GRAPH, size=0)) == []


def test_source_filtering(es):
    def src(spec):
        return hits(es.search(index="s", query={"ids": {"values": ["c1"]}}, source=spec))[0].get(
            "_source", "ABSENT"
        )

    assert src({"includes": ["title", "meta.*"], "excludes": ["meta.b"]}) == {
        "title": "graph graph",
        "meta": {"a": 1},
    }
    assert src({"excludes": ["meta", "year"]}) == {"paper": "A", "title": "graph graph"}
    assert src(["paper", "year"]) == {"paper": "A", "year": 2001}
    assert src("title") == {"title": "graph graph"}
    assert src(False) == "ABSENT"
    assert src(True) == DOCS["c1"]


# --- track_total_hits -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    from elasticsearch import helpers

    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("big"))
    client.indices.create(index="big", mappings={"properties": {"k": {"type": "keyword"}}})
    helpers.bulk(
        client,
        ({"_index": "big", "_id": str(i), "_source": {"k": "x"}} for i in range(10_001)),
        chunk_size=5000,
    )
    client.indices.refresh(index="big")
    yield client
    client.close()


def test_track_total_hits(big):
    def total(**kw):
        return big.search(index="big", query={"term": {"k": "x"}}, size=1, **kw)["hits"].get(
            "total", "ABSENT"
        )

    assert total() == {"value": 10_000, "relation": "gte"}
    assert total(track_total_hits=True) == {"value": 10_001, "relation": "eq"}
    assert total(track_total_hits=False) == "ABSENT"
    assert total(track_total_hits=100) == {"value": 100, "relation": "gte"}
    assert total(track_total_hits=20_000) == {"value": 10_001, "relation": "eq"}
    assert big.count(index="big")["count"] == 10_001


def test_track_total_hits_given_as_text(big):
    """SearchSourceBuilder reads ``"true"``/``"false"`` (Booleans.isBoolean: exactly these) as
    booleans and other text as an integer (``parser.intValue()``); a body with ``"true"`` was a 500."""
    from elasticsearch import ApiError

    def total(track, **kw):
        body = {"query": {"term": {"k": "x"}}, "size": 1, "track_total_hits": track}
        return big.search(index="big", body=body, **kw)["hits"].get("total", "ABSENT")

    assert total("true") == {"value": 10_001, "relation": "eq"}
    assert total("false") == "ABSENT"
    assert total("100") == {"value": 100, "relation": "gte"}
    assert total("true", rest_total_hits_as_int=True) == 10_001
    for bad in ("TRUE", "many"):
        with pytest.raises(ApiError) as e:
            total(bad)
        assert e.value.status_code == 400 and "[track_total_hits] must be a boolean or an integer" in str(
            e.value
        )
    with pytest.raises(ApiError) as e:  # SearchRequest.validate, as with the boolean false
        big.search(index="big", body={"track_total_hits": "false"}, scroll="1m")
    assert e.value.status_code == 400 and "disabling [track_total_hits] is not allowed" in str(e.value)


# --- explain ------------------------------------------------------------------------------------


def _walk(node):
    yield node
    for d in node.get("details", []):
        yield from _walk(d)


def test_explain_shows_the_bm25_parts(es):
    resp = es.search(index="s", query={"match": {"title": "graph"}}, explain=True, size=1)
    hit = hits(resp)[0]
    assert hit["_id"] == "c1"
    ex = hit["_explanation"]
    assert ex["value"] == pytest.approx(G["c1"], rel=1e-5)
    nodes = {n["description"].split(",")[0]: n for n in _walk(ex)}
    assert nodes["boost"]["value"] == pytest.approx(2.2, rel=1e-6)
    assert nodes["idf"]["value"] == pytest.approx(idf(5, 6), rel=1e-5)
    assert nodes["n"]["value"] == 5 and nodes["N"]["value"] == 6
    assert nodes["freq"]["value"] == 2
    assert nodes["dl"]["value"] == 2
    assert nodes["avgdl"]["value"] == pytest.approx(AVG, rel=1e-6)
    assert nodes["k1"]["value"] == pytest.approx(1.2) and nodes["b"]["value"] == pytest.approx(0.75)
    tf = nodes["tf"]["value"]
    assert tf == pytest.approx(2 / (2 + 1.2 * (0.25 + 0.75 * 2 / AVG)), rel=1e-5)
    assert any(n["description"].startswith("weight(title:graph") for n in _walk(ex))


def test_explain_of_a_bool_sums_its_clauses(es):
    q = {"bool": {"should": [GRAPH, {"match": {"title": "neural"}}]}}
    hit = hits(es.search(index="s", query=q, explain=True, size=1))[0]
    assert hit["_id"] == "c3"
    ex = hit["_explanation"]
    assert ex["description"].startswith("sum of")
    assert ex["value"] == pytest.approx(sum(d["value"] for d in ex["details"]), rel=1e-5)
    assert len(ex["details"]) == 2


def _six(es):
    es.indices.create(index="ta", mappings={"properties": {"n": {"type": "integer"}}})
    ops = []
    for i in range(6):
        ops += [{"index": {"_id": str(i)}}, {"n": i}]
    es.bulk(index="ta", operations=ops, refresh=True)


def test_terminate_after_stops_collecting_after_n_docs(tmp_engine):
    # QueryPhaseCollector: docs are collected in index order and collection stops at the doc past
    # terminate_after; hits.total counts the N collected, aggregations see only those, and the
    # response says "terminated_early": true
    _six(tmp_engine)
    resp = tmp_engine.search(
        index="ta", query={"match_all": {}}, terminate_after=2, aggs={"s": {"sum": {"field": "n"}}}
    )
    assert resp["terminated_early"] is True
    assert resp["hits"]["total"] == {"value": 2, "relation": "eq"}
    assert [h["_id"] for h in resp["hits"]["hits"]] == ["0", "1"]
    assert resp["aggregations"]["s"]["value"] == 1.0


def test_terminate_after_counts_post_filtered_docs(tmp_engine):
    # "terminate_after is purposely applied after post_filter, and terminates aggs collection based
    # on number of filtered top hits" (QueryPhaseCollector): the aggregations see docs 0-4, the
    # hits are the first two docs passing the post_filter
    _six(tmp_engine)
    resp = tmp_engine.search(
        index="ta",
        query={"match_all": {}},
        post_filter={"range": {"n": {"gte": 3}}},
        terminate_after=2,
        aggs={"s": {"sum": {"field": "n"}}},
    )
    assert resp["terminated_early"] is True
    assert [h["_id"] for h in resp["hits"]["hits"]] == ["3", "4"]
    assert resp["hits"]["total"]["value"] == 2
    assert resp["aggregations"]["s"]["value"] == 10.0


def test_terminate_after_not_reached_answers_false(tmp_engine):
    # QueryPhase: a set terminate_after that never stops collection gives "terminated_early": false;
    # without terminate_after the key is absent
    _six(tmp_engine)
    resp = tmp_engine.search(index="ta", query={"match_all": {}}, terminate_after=10)
    assert resp["terminated_early"] is False and resp["hits"]["total"]["value"] == 6
    assert "terminated_early" not in tmp_engine.search(index="ta", query={"match_all": {}})


def test_terminate_after_url_parameter(tmp_engine):
    # RestSearchAction.parseSearchRequest: the terminate_after URL parameter sets the body's
    _six(tmp_engine)
    headers = {"content-type": "application/json", "accept": "application/json"}
    resp = tmp_engine.perform_request(
        "POST", "/ta/_search?terminate_after=3", headers=headers, body={"query": {"match_all": {}}}
    )
    assert resp.body["terminated_early"] is True and resp.body["hits"]["total"]["value"] == 3
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request("POST", "/ta/_search?terminate_after=x", headers=headers, body={})
    assert "Failed to parse int parameter [terminate_after] with value [x]" in str(e.value.body)


@pytest.mark.parametrize(
    "param,value",
    [
        ("size", "abc"),
        ("size", "%202"),  # " 2": Integer.parseInt takes no spaces (Python's int does)
        ("size", "2_0"),  # nor underscores
        ("from", "2147483648"),  # past Java's int
        ("track_total_hits", "TRUE"),  # not Booleans.isBoolean: read as an int
        ("terminate_after", "1.0"),
    ],
)
def test_int_url_parameters_are_read_as_integer_parse_int(tmp_engine, param, value):
    """RestSearchAction.parseSearchSource reads from/size/terminate_after/track_total_hits with
    ``request.paramAsInt`` (``Integer.parseInt``): its IllegalArgumentException otherwise."""
    _six(tmp_engine)
    with pytest.raises(BadRequestError) as e:
        tmp_engine.perform_request(
            "GET", f"/ta/_search?{param}={value}", headers={"accept": "application/json"}
        )
    error = e.value.body["error"]
    assert error["type"] == "illegal_argument_exception"
    shown = value.replace("%20", " ")
    assert error["reason"] == f"Failed to parse int parameter [{param}] with value [{shown}]"
    ok = tmp_engine.perform_request(
        "GET", "/ta/_search?size=%2B2&track_total_hits=2", headers={"accept": "application/json"}
    )
    assert len(ok.body["hits"]["hits"]) == 2 and ok.body["hits"]["total"] == {"value": 2, "relation": "gte"}


def test_sort_mode_min_max_on_a_multi_valued_number(tmp_engine):
    # FieldSortBuilder: mode picks the value of a multi-valued field; default min for asc, max for desc
    es = tmp_engine
    es.indices.create(index="m", mappings={"properties": {"y": {"type": "integer"}}})
    es.index(index="m", id="a", document={"y": [1, 10]})
    es.index(index="m", id="b", document={"y": 5})
    es.indices.refresh(index="m")

    def ids(**opts):
        r = es.search(index="m", sort=[{"y": opts}])
        return [(h["_id"], h["sort"][0]) for h in r["hits"]["hits"]]

    assert ids(order="asc") == [("a", 1), ("b", 5)]
    assert ids(order="asc", mode="max") == [("b", 5), ("a", 10)]
    assert ids(order="desc") == [("a", 10), ("b", 5)]
    assert ids(order="desc", mode="min") == [("b", 5), ("a", 1)]


@pytest.mark.parametrize("mode", ["bogus", 3])
def test_sort_mode_unknown_is_a_400(tmp_engine, mode):
    es = tmp_engine
    es.indices.create(index="m", mappings={"properties": {"y": {"type": "integer"}}})
    with pytest.raises(BadRequestError) as e:
        es.search(index="m", sort=[{"y": {"mode": mode}}])
    err = e.value.body["error"]
    assert err["type"] == "x_content_parse_exception"
    assert err["reason"] == "[field_sort] failed to parse field [mode]"
    assert err["caused_by"]["reason"].startswith(f"Unknown SortMode [{mode}]")
