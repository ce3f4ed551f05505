"""simple_query_string: Lucene's SimpleQueryParser tree (SimpleQueryParser#buildQueryTree) and
scores equal to the bool / match / multi_match / match_phrase / prefix queries Elasticsearch's
SimpleQueryStringQueryParser builds, plus one term's score by hand from Lucene's BM25."""

from __future__ import annotations

import math

import pytest
from elasticsearch import BadRequestError

from scholar_es.engine.query.simple_query_string import Bool, Leaf, parse, resolve_flags

K1, B = 1.2, 0.75
DOCS = [
    "the quick brown fox",
    "quick fox brown",
    "brown quick quick fox jumps",
    "a lazy dog",
    "quick brown quick brown",
]
AVGDL = (4 + 3 + 5 + 3 + 4) / 5


@pytest.fixture
def es(tmp_engine):
    tmp_engine.indices.create(
        index="t",
        mappings={
            "properties": {"body": {"type": "text"}, "title": {"type": "text"}, "n": {"type": "integer"}}
        },
    )
    for i, text in enumerate(DOCS):
        tmp_engine.index(index="t", id=str(i), document={"body": text, "title": DOCS[-1 - i], "n": i})
    tmp_engine.indices.refresh(index="t")
    return tmp_engine


def hits(es, query) -> dict[str, float]:
    r = es.search(index="t", query=query, size=20)
    return {h["_id"]: h["_score"] for h in r["hits"]["hits"]}


def same(es, sqs: dict, equivalent: dict) -> dict[str, float]:
    got, want = hits(es, {"simple_query_string": sqs}), hits(es, equivalent)
    assert got.keys() == want.keys()
    for k in got:
        assert got[k] == pytest.approx(want[k], rel=1e-6)
    return got


T = lambda s: Leaf("term", s)  # noqa: E731


@pytest.mark.parametrize(
    "text, flags, tree",
    [
        ("a b", -1, Bool([("should", T("a")), ("should", T("b"))])),
        # an operator change wraps the tree so far as one clause
        ("a + b | c", -1, Bool([("should", Bool([("must", T("a")), ("must", T("b"))])), ("should", T("c"))])),
        ("-a", -1, Bool([("must_not", T("a"))], negation=True)),
        ("--a", -1, T("a")),  # two NOTs cancel
        ("+a", -1, T("a")),  # an operator before the first clause is ignored
        ("a*", -1, Leaf("prefix", "a")),
        ("*a", -1, T("*a")),  # a prefix needs a character before the *
        ('"a b"~2', -1, Leaf("phrase", "a b", 2)),
        ('"a b"~x', -1, Leaf("phrase", "a b", 0)),  # not a number: 0
        ("a~0", -1, T("a")),
        ("(a", -1, T("a")),  # an unclosed ( is skipped
        ('"a b', -1, Bool([("should", T("a")), ("should", T("b"))])),  # so is an unclosed "
        (
            "a | (b c)",
            -1,
            Bool([("should", T("a")), ("should", Bool([("should", T("b")), ("should", T("c"))]))]),
        ),
        ("a\\+b", -1, T("a+b")),
        ("a b", resolve_flags("NONE"), T("a b")),  # no WHITESPACE: one term
        ("a+b*", resolve_flags("WHITESPACE"), T("a+b*")),
        ("()", -1, None),
        ("  *  ", -1, "*"),
    ],
)
def test_tree(text, flags, tree):
    assert parse(text, flags, "should") == tree


def test_default_operator_and_tree():
    assert parse("a b | c", -1, "must") == Bool(
        [("should", Bool([("must", T("a")), ("must", T("b"))])), ("should", T("c"))]
    )


def test_flags():
    assert resolve_flags("and|or|Prefix") == 1 | 4 | 8
    assert resolve_flags("ALL") == -1 and resolve_flags(-3) == -1 and resolve_flags("SLOP") == 512
    assert resolve_flags("NONE") == 0


def test_one_term_bm25_by_hand(es):
    got = hits(es, {"simple_query_string": {"query": "lazy", "fields": ["body"]}})
    idf = math.log(1 + (5 - 1 + 0.5) / (1 + 0.5))
    assert got == {"3": pytest.approx((K1 + 1) * idf / (1 + K1 * (1 - B + B * 3 / AVGDL)), rel=1e-6)}


def test_terms_are_should_clauses(es):
    same(
        es,
        {"query": "quick lazy", "fields": ["body"]},
        {"bool": {"should": [{"match": {"body": "quick"}}, {"match": {"body": "lazy"}}]}},
    )


def test_default_operator_and(es):
    got = same(
        es,
        {"query": "quick fox", "fields": ["body"], "default_operator": "and"},
        {"bool": {"must": [{"match": {"body": "quick"}}, {"match": {"body": "fox"}}]}},
    )
    assert set(got) == {"0", "1", "2"}


def test_fields_with_boost_most_fields(es):
    # newDefaultQuery: a most_fields multi_match per term (the field scores add up)
    same(
        es,
        {"query": "fox | lazy", "fields": ["body^2", "tit*"]},
        {
            "bool": {
                "should": [
                    {"multi_match": {"query": q, "fields": ["body^2", "title"], "type": "most_fields"}}
                    for q in ("fox", "lazy")
                ]
            }
        },
    )


def test_not_is_must_not_with_match_all(es):
    got = same(
        es,
        {"query": "fox -brown", "fields": ["body"]},
        {
            "bool": {
                "should": [
                    {"match": {"body": "fox"}},
                    {"bool": {"must_not": [{"match": {"body": "brown"}}], "should": [{"match_all": {}}]}},
                ]
            }
        },
    )
    assert set(got) == {"0", "1", "2", "3"}  # fox, or not brown
    assert set(hits(es, {"simple_query_string": {"query": "fox +-brown", "fields": ["body"]}})) == set()
    assert set(hits(es, {"simple_query_string": {"query": "-brown", "fields": ["body"]}})) == {"3"}


def test_phrase_slop_and_prefix(es):
    same(
        es,
        {"query": '"quick fox"~1', "fields": ["body"]},
        {"match_phrase": {"body": {"query": "quick fox", "slop": 1}}},
    )
    same(es, {"query": '"quick fox"', "fields": ["body"]}, {"match_phrase": {"body": "quick fox"}})
    got = same(es, {"query": "JUM*", "fields": ["body"]}, {"prefix": {"body": "jum"}})
    assert got == {"2": 1.0}


def test_precedence_and_flags(es):
    same(
        es,
        {"query": "lazy | (quick + jumps)", "fields": ["body"]},
        {
            "bool": {
                "should": [
                    {"match": {"body": "lazy"}},
                    {"bool": {"must": [{"match": {"body": "quick"}}, {"match": {"body": "jumps"}}]}},
                ]
            }
        },
    )
    # without WHITESPACE the text is one term: a match of it, with the default operator
    same(
        es,
        {"query": "quick fox", "fields": ["body"], "flags": "AND|OR", "default_operator": "and"},
        {"match": {"body": {"query": "quick fox", "operator": "and"}}},
    )


def test_syntax_never_fails_and_star(es):
    assert set(hits(es, {"simple_query_string": {"query": '(lazy "dog', "fields": ["body"]}})) == {"3"}
    assert len(hits(es, {"simple_query_string": {"query": "*"}})) == 5
    assert hits(es, {"simple_query_string": {"query": "", "fields": ["body"]}}) == {}
    # default fields are all fields, leniently: the integer field does not fail on text
    assert set(hits(es, {"simple_query_string": {"query": "lazy"}})) == {"1", "3"}
    assert hits(es, {"simple_query_string": {"query": "lazy", "fields": ["body"], "boost": 2}})[
        "3"
    ] == pytest.approx(2 * hits(es, {"match": {"body": "lazy"}})["3"])


@pytest.mark.parametrize(
    "params, status, etype, reason",
    [
        ({"query": "fox~1"}, 400, "parsing_exception", "[simple_query_string fuzzy term [fox~1]]"),
        (
            {"query": "fox", "minimum_should_match": 1},
            400,
            "parsing_exception",
            "[simple_query_string.minimum_should_match]",
        ),
        (
            {"query": "fox", "quote_field_suffix": ".x"},
            400,
            "parsing_exception",
            "[simple_query_string.quote_field_suffix]",
        ),
        (
            {"query": "fox", "bogus": 1},
            400,
            "parsing_exception",
            "[simple_query_string] unsupported field [bogus]",
        ),
        ({"fields": ["body"]}, 400, "parsing_exception", "[simple_query_string] query text missing"),
        (
            {"query": "fox", "flags": "AND|BOGUS"},
            400,
            "illegal_argument_exception",
            "Unknown simple_query_string flag [BOGUS]",
        ),
        (
            {"query": "fox", "analyzer": "nope"},
            400,
            "query_shard_exception",
            "[simple_query_string] analyzer [nope] not found",
        ),
    ],
)
def test_errors(es, params, status, etype, reason):
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query={"simple_query_string": params})
    err = e.value.body["error"]["root_cause"][0]
    assert (e.value.status_code, err["type"]) == (status, etype)
    assert err["reason"].startswith(reason)
