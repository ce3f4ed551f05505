"""match_phrase, prefix, wildcard and query_string against values worked out by hand from
Lucene's formulas (PhraseWeight: BM25 with the phrase frequency and the sum of the terms' idf;
ExactPhraseMatcher / SloppyPhraseMatcher for the frequency), never from the engine's own output."""

from __future__ import annotations

import math

import pytest
from elasticsearch import BadRequestError

from scholar_es.engine.query.phrase import exact_freq, sloppy_freq

K1, B = 1.2, 0.75
DOCS = [
    "the quick brown fox",  # 0: dl 4
    "quick fox brown",  # 1: dl 3
    "brown quick quick fox jumps",  # 2: dl 5
    "a lazy dog",  # 3: dl 3
    "quick brown quick brown",  # 4: dl 4
]
AVGDL = (4 + 3 + 5 + 3 + 4) / 5


def idf(n: int, N: int = 5) -> float:
    return math.log(1 + (N - n + 0.5) / (n + 0.5))


def phrase_score(freq: float, dl: int, idfs: list[float], boost: float = 1.0) -> float:
    return boost * (K1 + 1) * sum(idfs) * freq / (freq + K1 * (1 - B + B * dl / AVGDL))


@pytest.fixture
def es(tmp_engine):
    tmp_engine.indices.create(
        index="t",
        mappings={
            "properties": {
                "body": {"type": "text"},
                "tag": {"type": "keyword", "normalizer": "lower"},
                "n": {"type": "integer"},
                "names": {"type": "text"},
            }
        },
        settings={"analysis": {"normalizer": {"lower": {"type": "custom", "filter": ["lowercase"]}}}},
    )
    for i, text in enumerate(DOCS):
        tmp_engine.index(index="t", id=str(i), document={"body": text, "tag": f"Tag-{i}", "n": i})
    tmp_engine.index(index="t", id="names", document={"names": ["John Abraham", "Lincoln Smith"]})
    tmp_engine.indices.refresh(index="t")
    return tmp_engine


def hits(es, query, **kw) -> dict[str, float]:
    r = es.search(index="t", query=query, size=20, **kw)
    return {h["_id"]: h["_score"] for h in r["hits"]["hits"]}


def test_phrase_frequencies_by_hand():
    # ExactPhraseMatcher counts start positions: "a a" in "a a a" matches at 0 and 1
    assert exact_freq([[0, 1, 2], [0, 1, 2]], [0, 1]) == 2
    # SloppyPhraseMatcher: "quick brown" in "quick fox brown": brown at 2 - offset 1 = 1 -> matchLength 1
    assert sloppy_freq([[0], [2]], [0, 1], 2) == pytest.approx(0.5)
    # reversed order "brown quick": brown pp at 0 - 1 = -1, quick at 1 -> matchLength 2 -> 1/3
    assert sloppy_freq([[1, 2], [0]], [0, 1], 2) == pytest.approx(1 / 3)
    assert sloppy_freq([[1, 2], [0]], [0, 1], 1) == 0


def test_match_phrase_exact_scores(es):
    got = hits(es, {"match_phrase": {"body": "quick brown"}})
    idfs = [idf(4), idf(4)]  # quick in 0,1,2,4; brown in 0,1,2,4
    assert set(got) == {"0", "4"}
    assert got["0"] == pytest.approx(phrase_score(1, 4, idfs), rel=1e-6)
    assert got["4"] == pytest.approx(phrase_score(2, 4, idfs), rel=1e-6)  # two matches


def test_match_phrase_sloppy_scores(es):
    got = hits(es, {"match_phrase": {"body": {"query": "quick brown", "slop": 2, "boost": 2}}})
    idfs = [idf(4), idf(4)]
    assert got["1"] == pytest.approx(phrase_score(0.5, 3, idfs, 2), rel=1e-6)
    assert got["2"] == pytest.approx(phrase_score(1 / 3, 5, idfs, 2), rel=1e-6)
    assert got["0"] == pytest.approx(phrase_score(1, 4, idfs, 2), rel=1e-6)


def test_match_phrase_single_term_and_zero_terms(es):
    assert hits(es, {"match_phrase": {"body": "lazy"}}) == hits(es, {"term": {"body": "lazy"}})
    assert hits(es, {"match_phrase": {"body": "!!"}}) == {}
    assert len(hits(es, {"match_phrase": {"body": {"query": "!!", "zero_terms_query": "all"}}})) == 6


def test_position_increment_gap_between_values(es):
    # John@0 Abraham@1, then +100, Lincoln@102: "abraham lincoln" has matchLength 100
    assert hits(es, {"match_phrase": {"names": "abraham lincoln"}}) == {}
    assert hits(es, {"match_phrase": {"names": {"query": "abraham lincoln", "slop": 99}}}) == {}
    assert set(hits(es, {"match_phrase": {"names": {"query": "abraham lincoln", "slop": 100}}})) == {"names"}


def test_match_phrase_errors(es):
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"match_phrase": {"body": {"query": "a b", "slop": -1}}})
    assert e.value.body["error"]["reason"] == "No negative slop allowed."
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"match_phrase": {"body": {"query": "quick quick", "slop": 1}}})
    assert "repeated term" in e.value.body["error"]["reason"]


def test_prefix_and_wildcard_are_constant_score(es):
    assert hits(es, {"prefix": {"body": "qu"}}) == {"0": 1.0, "1": 1.0, "2": 1.0, "4": 1.0}
    assert hits(es, {"prefix": {"body": {"value": "QU", "case_insensitive": True, "boost": 3}}})["0"] == 3.0
    assert hits(es, {"prefix": {"body": "QU"}}) == {}
    assert set(hits(es, {"wildcard": {"body": "b?o*n"}})) == {"0", "1", "2", "4"}
    # a keyword field's normalizer applies to the pattern (Tag-1 is indexed as tag-1)
    assert set(hits(es, {"wildcard": {"tag": {"value": "TAG-[1]"}}})) == set()
    assert set(hits(es, {"wildcard": {"tag": "TAG-1"}})) == {"1"}
    assert set(hits(es, {"wildcard": {"tag": {"value": "tag-\\*"}}})) == set()


def test_prefix_errors(es):
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"prefix": {"n": "1"}})
    assert e.value.body["error"]["type"] == "query_shard_exception"
    assert e.value.body["error"]["reason"] == (
        "Can only use prefix queries on keyword, text and wildcard fields - not on [n] which is of type [integer]"
    )
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"wildcard": {"body": {"value": "q*", "rewrite": "top_terms_10"}}})
    assert "[wildcard.rewrite [top_terms_10]]" in e.value.body["error"]["reason"]


def test_query_string_boolean_logic(es):
    qs = {"default_field": "body"}
    # default OR: a document with either term; scores are the sum of the term scores
    assert set(hits(es, {"query_string": {**qs, "query": "lazy jumps"}})) == {"2", "3"}
    assert set(hits(es, {"query_string": {**qs, "query": "quick AND NOT brown"}})) == set()
    assert set(hits(es, {"query_string": {**qs, "query": "+quick -the"}})) == {"1", "2", "4"}
    assert set(hits(es, {"query_string": {**qs, "query": "fox AND (lazy OR jumps)"}})) == {"2"}
    # a pure negative query matches every other document (the one without a body too)
    assert set(hits(es, {"query_string": {**qs, "query": "-fox"}})) == {"3", "4", "names"}
    assert set(hits(es, {"query_string": {**qs, "query": '"quick brown"'}})) == {"0", "4"}
    assert set(hits(es, {"query_string": {**qs, "query": '"quick brown"~2'}})) == {"0", "1", "2", "4"}
    assert set(hits(es, {"query_string": {"query": "n:[1 TO 2] OR n:>=4"}})) == {"1", "2", "4"}
    assert set(hits(es, {"query_string": {"query": "n:{1 TO 3}"}})) == {"2"}
    assert set(hits(es, {"query_string": {"query": "_exists_:names"}})) == {"names"}
    # a term's score is the match query's score on that field
    assert hits(es, {"query_string": {**qs, "query": "lazy^2"}}) == pytest.approx(
        hits(es, {"match": {"body": {"query": "lazy", "boost": 2}}})
    )


def test_query_string_several_fields_is_a_dis_max(es):
    got = hits(es, {"query_string": {"query": "tag-3 lazy", "fields": ["body", "tag^2"]}})
    lazy = hits(es, {"match": {"body": "lazy"}})["3"]
    tag = hits(es, {"term": {"tag": {"value": "tag-3", "boost": 2}}})["3"]
    # one multi-term run: dis_max(body:(tag 3 lazy), tag:"tag-3 lazy"^2); tag's keyword does not match
    assert got == pytest.approx({"3": lazy}) and tag > lazy


def test_query_string_syntax_error_shape(es):
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"query_string": {"query": "(foo AND"}})
    err = e.value.body["error"]
    assert err["type"] == "query_shard_exception" and err["reason"] == "Failed to parse query [(foo AND]"
    assert err["caused_by"]["type"] == "parse_exception"
    assert err["caused_by"]["reason"].startswith("Cannot parse '(foo AND': ")
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"query_string": {"query": "foo~2"}})
    assert "fuzzy" in e.value.body["error"]["reason"]


def test_q_parameter(es):
    assert es.count(index="t", q="body:quick AND body:jumps")["count"] == 1
    assert es.search(index="t", q="lazy", df="body")["hits"]["total"]["value"] == 1
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", df="body")
    assert e.value.body["error"]["reason"] == (
        "request [/t/_search] contains parameters [df] but missing query string parameter 'q'."
    )
    with pytest.raises(BadRequestError) as e:
        es.count(index="t", q="lazy", query={"match_all": {}})
    assert e.value.body["error"]["reason"] == "request [/t/_count] contains unrecognized parameter: [q]"


def test_explain_api_matches_search_explanation(es):
    q = {"match_phrase": {"body": "quick brown"}}
    r = es.explain(index="t", id="4", query=q)
    assert r["matched"] and r["explanation"]["value"] == pytest.approx(hits(es, q)["4"])
    assert (
        r["explanation"]["details"][0]["description"] == "score(freq=2.0), computed as boost * idf * tf from:"
    )
    assert es.explain(index="t", id="3", query=q)["matched"] is False
    missing = es.options(ignore_status=404).explain(index="t", id="nope", query=q)
    assert missing.body == {"_index": "t", "_id": "nope", "matched": False}
    with pytest.raises(BadRequestError) as e:  # ExplainRequest#validate
        es.explain(index="t", id="4")
    assert e.value.body["error"]["reason"] == "Validation Failed: 1: query is missing;"


def test_validate_query_explain_prints_lucene_queries(es):
    r = es.indices.validate_query(
        index="t",
        explain=True,
        query={
            "bool": {"must": [{"match": {"body": "quick fox"}}], "must_not": [{"prefix": {"body": "la"}}]}
        },
    )
    assert r["valid"] and r["explanations"][0]["explanation"] == "+(body:quick body:fox) -body:la*"
    assert es.indices.validate_query(index="t", query={"nope": {}})["valid"] is False


def test_profile_shape(es):
    r = es.search(index="t", query={"bool": {"must": [{"term": {"body": "quick"}}]}}, profile=True)
    shard = r["profile"]["shards"][0]
    assert shard["index"] == "t" and shard["shard_id"] == 0
    top = shard["searches"][0]["query"][0]
    assert top["type"] == "BooleanQuery" and top["description"] == "+body:quick"
    assert top["children"][0]["type"] == "TermQuery" and top["children"][0]["description"] == "body:quick"
    assert top["breakdown"]["score_count"] == 4 and top["time_in_nanos"] > 0
    assert shard["searches"][0]["collector"][0]["name"] == "QueryPhaseCollector"
