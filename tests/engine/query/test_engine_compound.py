"""bool / dis_max / constant_score and the constant-scoring leaves, pinned to hand-computed scores.

BM25 as in Elasticsearch (LegacyBM25): boost · 2.2 · ln(1 + (N − n + 0.5)/(n + 0.5)) · tf/(tf + 1.2·(0.25 + 0.75·dl/avgdl)).
"""

from __future__ import annotations

import math

import pytest
from elasticsearch import BadRequestError


def bm25(freq, dl, avgdl, n, N, boost=1.0):
    idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
    return boost * 2.2 * idf * freq / (freq + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))


DOCS = {  # title (standard analyzer), tag (keyword), year (integer)
    "d1": {"title": "apple banana", "tag": "a", "year": 2001},
    "d2": {"title": "apple", "tag": "b", "year": 2005},
    "d3": {"title": "banana cherry", "tag": "a", "year": 2010},
    "d4": {"title": "cherry date"},
    "d5": {"title": "apple banana date", "tag": "c", "year": 2020},
}
# title: N = 5, lengths 2, 1, 2, 2, 3 -> avgdl = 10 / 5 = 2.0
# n: apple 3 (d1 d2 d5), banana 3 (d1 d3 d5), cherry 2 (d3 d4), date 2 (d4 d5); every tf = 1
N, AVG = 5, 2.0
DL = {"d1": 2, "d2": 1, "d3": 2, "d4": 2, "d5": 3}
DF = {"apple": 3, "banana": 3, "cherry": 2, "date": 2}


def t(term, doc, boost=1.0):
    return bm25(1, DL[doc], AVG, DF[term], N, boost)


def match(term):
    return {"match": {"title": term}}


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("compound"))
    client.indices.create(
        index="c",
        mappings={
            "properties": {"title": {"type": "text"}, "tag": {"type": "keyword"}, "year": {"type": "integer"}}
        },
    )
    for doc_id, src in DOCS.items():
        client.index(index="c", id=doc_id, document=src)
    client.indices.refresh(index="c")
    yield client
    client.close()


def scores(es, query, **kw):
    hits = es.search(index="c", query=query, size=20, **kw)["hits"]["hits"]
    return {h["_id"]: h["_score"] for h in hits}


def ids(es, query):
    return [h["_id"] for h in es.search(index="c", query=query, size=20)["hits"]["hits"]]


def approx(d):
    return pytest.approx(d, rel=1e-5)


# --- bool ------------------------------------------------------------------------------------


def test_bool_must_plus_should_adds_optional_scores(es):
    q = {"bool": {"must": [match("apple")], "should": [match("banana")]}}
    assert scores(es, q) == approx(
        {
            "d1": t("apple", "d1") + t("banana", "d1"),
            "d2": t("apple", "d2"),
            "d5": t("apple", "d5") + t("banana", "d5"),
        }
    )


def test_bool_filter_and_must_not_do_not_score(es):
    q = {
        "bool": {
            "must": [match("apple")],
            "should": [match("banana")],
            "filter": [{"range": {"year": {"gte": 2002}}}],
        }
    }
    assert scores(es, q) == approx({"d2": t("apple", "d2"), "d5": t("apple", "d5") + t("banana", "d5")})
    q["bool"]["must_not"] = [{"term": {"tag": "c"}}]
    assert scores(es, q) == approx({"d2": t("apple", "d2")})


def test_bool_should_only_needs_one_match(es):
    q = {"bool": {"should": [match("apple"), match("cherry")]}}
    assert scores(es, q) == approx(
        {
            "d1": t("apple", "d1"),
            "d2": t("apple", "d2"),
            "d3": t("cherry", "d3"),
            "d4": t("cherry", "d4"),
            "d5": t("apple", "d5"),
        }
    )


def test_bool_minimum_should_match(es):
    q = {"bool": {"should": [match("apple"), match("banana"), match("cherry")], "minimum_should_match": 2}}
    assert scores(es, q) == approx(
        {
            "d1": t("apple", "d1") + t("banana", "d1"),
            "d3": t("banana", "d3") + t("cherry", "d3"),
            "d5": t("apple", "d5") + t("banana", "d5"),
        }
    )
    q["bool"]["minimum_should_match"] = "34%"  # 3 · 0.34 = 1.02 -> 1
    assert set(scores(es, q)) == {"d1", "d2", "d3", "d4", "d5"}
    q["bool"]["minimum_should_match"] = "-34%"  # 3 + (int)(-1.02) = 2
    assert set(scores(es, q)) == {"d1", "d3", "d5"}


def test_bool_should_is_optional_next_to_must(es):
    q = {"bool": {"must": [match("date")], "should": [match("apple")]}}  # default msm 0 with a must
    assert scores(es, q) == approx({"d4": t("date", "d4"), "d5": t("date", "d5") + t("apple", "d5")})
    q["bool"]["minimum_should_match"] = 1
    assert scores(es, q) == approx({"d5": t("date", "d5") + t("apple", "d5")})


def test_bool_filter_plus_should_matches_filter_docs(es):
    q = {"bool": {"filter": [{"range": {"year": {"gte": 2005}}}], "should": [match("cherry")]}}
    assert scores(es, q) == approx({"d2": 0.0, "d3": t("cherry", "d3"), "d5": 0.0})
    assert ids(es, q) == ["d3", "d2", "d5"]


def test_bool_filter_only_and_must_not_only_score_zero(es):
    assert scores(es, {"bool": {"filter": [{"term": {"tag": "a"}}]}}) == {"d1": 0.0, "d3": 0.0}
    assert scores(es, {"bool": {"must_not": [{"exists": {"field": "tag"}}]}}) == {"d4": 0.0}


def test_bool_boost_and_empty_bool(es):
    q = {"bool": {"should": [match("cherry")], "boost": 2.5}}
    assert scores(es, q) == approx({"d3": 2.5 * t("cherry", "d3"), "d4": 2.5 * t("cherry", "d4")})
    assert scores(es, {"bool": {}}) == {d: 1.0 for d in DOCS}
    assert scores(es, {"bool": {"boost": 3}}) == {d: 3.0 for d in DOCS}


def test_bool_should_sums_constant_clauses(es):
    q = {"bool": {"should": [{"term": {"tag": "a"}}, {"range": {"year": {"gte": 2005, "boost": 0.5}}}]}}
    # term on a keyword scores idf (see test_engine_bm25): tag N = 4, n(a) = 2
    idf_a = math.log(1 + (4 - 2 + 0.5) / (2 + 0.5))
    assert scores(es, q) == approx({"d1": idf_a, "d2": 0.5, "d3": idf_a + 0.5, "d5": 0.5})


def test_nested_bool(es):
    inner = {"bool": {"should": [match("banana"), match("cherry")], "boost": 2}}
    q = {"bool": {"must": [inner], "must_not": [match("date")]}}
    assert scores(es, q) == approx(
        {"d1": 2 * t("banana", "d1"), "d3": 2 * (t("banana", "d3") + t("cherry", "d3"))}
    )


# --- dis_max / constant_score ------------------------------------------------------------------


def test_dis_max_tie_breaker(es):
    q = {"dis_max": {"queries": [match("apple"), match("banana"), match("date")], "tie_breaker": 0.4}}

    def dm(*parts):
        return max(parts) + 0.4 * (sum(parts) - max(parts))

    expected = {
        "d1": dm(t("apple", "d1"), t("banana", "d1")),
        "d2": dm(t("apple", "d2")),
        "d3": dm(t("banana", "d3")),
        "d4": dm(t("date", "d4")),
        "d5": dm(t("apple", "d5"), t("banana", "d5"), t("date", "d5")),
    }
    assert scores(es, q) == approx(expected)
    q["dis_max"].pop("tie_breaker")
    assert scores(es, q)["d5"] == pytest.approx(
        max(t("apple", "d5"), t("banana", "d5"), t("date", "d5")), rel=1e-5
    )
    q["dis_max"]["boost"] = 2
    assert scores(es, q)["d1"] == pytest.approx(2 * t("apple", "d1"), rel=1e-5)


def test_constant_score(es):
    assert scores(es, {"constant_score": {"filter": match("banana")}}) == {"d1": 1.0, "d3": 1.0, "d5": 1.0}
    assert scores(es, {"constant_score": {"filter": {"term": {"tag": "a"}}, "boost": 1.5}}) == {
        "d1": 1.5,
        "d3": 1.5,
    }


# --- constant-scoring leaves -------------------------------------------------------------------


def test_terms_range_exists_ids_score_their_boost(es):
    assert scores(es, {"terms": {"tag": ["a", "b"]}}) == {"d1": 1.0, "d2": 1.0, "d3": 1.0}
    assert scores(es, {"terms": {"tag": ["c", "zzz"], "boost": 2}}) == {"d5": 2.0}
    assert scores(es, {"range": {"year": {"gt": 2001, "lte": 2010}}}) == {"d2": 1.0, "d3": 1.0}
    assert scores(es, {"range": {"year": {"gte": 2010, "boost": 3}}}) == {"d3": 3.0, "d5": 3.0}
    assert scores(es, {"exists": {"field": "year"}}) == {"d1": 1.0, "d2": 1.0, "d3": 1.0, "d5": 1.0}
    assert scores(es, {"exists": {"field": "nope"}}) == {}
    assert scores(es, {"ids": {"values": ["d5", "d1", "zz"]}}) == {"d1": 1.0, "d5": 1.0}
    assert ids(es, {"ids": {"values": ["d5", "d1"]}}) == ["d1", "d5"]  # ties: index order, not request order
    assert scores(es, {"match_all": {"boost": 0.25}}) == {d: 0.25 for d in DOCS}
    assert scores(es, {"match_none": {}}) == {}


def test_terms_on_integer_and_match_on_integer(es):
    assert scores(es, {"terms": {"year": [2001, 2020]}}) == {"d1": 1.0, "d5": 1.0}
    assert scores(es, {"match": {"year": 2005}}) == {"d2": 1.0}
    assert scores(es, {"term": {"year": {"value": 2010, "boost": 4}}}) == {"d3": 4.0}


def test_constant_leaf_inside_bool_adds_its_boost(es):
    q = {"bool": {"must": [match("apple")], "should": [{"terms": {"tag": ["b", "c"], "boost": 0.7}}]}}
    assert scores(es, q) == approx(
        {"d1": t("apple", "d1"), "d2": t("apple", "d2") + 0.7, "d5": t("apple", "d5") + 0.7}
    )


def test_range_on_text_is_rejected(es):
    with pytest.raises(BadRequestError) as e:
        es.search(index="c", query={"range": {"title": {"gte": "a"}}})
    assert "range" in e.value.body["error"]["reason"]
