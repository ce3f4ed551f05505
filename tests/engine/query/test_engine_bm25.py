"""BM25 scores of the embedded engine, pinned to values computed by hand from Elasticsearch's formula.

Elasticsearch's default similarity (LegacyBM25Similarity over Lucene's BM25Similarity):

    score = boost · (k1 + 1) · idf · freq / (freq + k1 · (1 − b + b · dl / avgdl)),  k1 = 1.2, b = 0.75
    idf   = ln(1 + (N − n + 0.5) / (n + 0.5))

N = documents that have the field, n = documents containing the term, avgdl = (sum of the exact
token counts) / N, dl = the token count after Lucene's one-byte norm (SmallFloat.intToByte4 /
byte4ToInt): exact up to 40, truncated above (45 → 44, 55 → 54, 100 → 96; worked out below).
"""

from __future__ import annotations

import json
import math

import pytest

K1, B = 1.2, 0.75


def idf(n: int, N: int) -> float:
    return math.log(1 + (N - n + 0.5) / (n + 0.5))


def bm25(
    freq: float, dl: float, avgdl: float, n: int, N: int, boost: float = 1.0, k1: float = K1, b: float = B
) -> float:
    return boost * (k1 + 1) * idf(n, N) * freq / (freq + k1 * (1 - b + b * dl / avgdl))


def pad(k: int) -> str:
    return " pad" * k


# SmallFloat by hand (intToByte4(i) = 24 + longToInt4(i - 24) for i >= 24; 4 significant bits kept):
#   45: 45-24 = 21 = 0b10101 -> keep 0b1010 << 1 = 20 -> decodes to 24 + 20 = 44
#   55: 55-24 = 31 = 0b11111 -> keep 0b1111 << 1 = 30 -> 54
#  100: 100-24 = 76 = 0b1001100 -> keep 0b1001 << 3 = 72 -> 96
#    3, 2, 1, 4, 5: below 24, stored exactly
DL45, DL55, DL100 = 44, 54, 96

DOCS = [
    # id, title (standard), abstract (standard), body (english), tag (keyword)
    (
        "1",
        "Quick brown fox",
        "the fox jumps",
        "The foxes are running" + pad(43),  # english: fox run + 43 pad = 45 tokens ("The", "are": stop words)
        "red",
    ),
    ("2", "Quick quick dog", "a lazy dog sleeps", "Dogs run fast", "animal"),  # body: dog run fast = 3
    ("3", "Lazy dog", None, "A fox's den" + pad(98), "pet"),  # body: fox den + 98 pad = 100 ("A": stop,
    #                                                            "fox's": possessive filter -> fox)
    ("4", None, "quick fox", "running runs ran", None),  # body: run run ran = 3 (tf(run) = 2)
    ("5", "Fox", "brown bears and the fox", "The fox" + pad(54), "animal"),  # body: fox + 54 pad = 55
]

# Per-field statistics, by hand:
#   title    (standard): docs 1,2,3,5 -> N = 4; lengths 3,3,2,1 -> avgdl = 9/4
#   abstract (standard): docs 1,2,4,5 -> N = 4; lengths 3,4,2,5 -> avgdl = 14/4
#   body     (english):  all 5 docs   -> N = 5; lengths 45,3,100,3,55 -> avgdl = 206/5
#   tag      (keyword):  docs 1,2,3,5 -> N = 4; one value each -> avgdl = 1, dl = 1 (no norms)
T_N, T_AVG = 4, 9 / 4
A_N, A_AVG = 4, 14 / 4
B_N, B_AVG = 5, 206 / 5


def fox_title(dl):
    return bm25(1, dl, T_AVG, n=2, N=T_N)


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("bm25"))
    client.indices.create(
        index="docs",
        mappings={
            "properties": {
                "title": {"type": "text"},
                "abstract": {"type": "text", "analyzer": "standard"},
                "body": {"type": "text", "analyzer": "english"},
                "tag": {"type": "keyword"},
            }
        },
    )
    for doc_id, title, abstract, body, tag in DOCS:
        src = {
            k: v
            for k, v in (("title", title), ("abstract", abstract), ("body", body), ("tag", tag))
            if v is not None
        }
        client.index(index="docs", id=doc_id, document=src)
    client.indices.refresh(index="docs")
    yield client
    client.close()


def scores(es, query, **kw) -> dict[str, float]:
    resp = es.search(index=kw.pop("index", "docs"), query=query, size=kw.pop("size", 20), **kw)
    return {h["_id"]: h["_score"] for h in resp["hits"]["hits"]}


def ranked(es, query, **kw) -> list[str]:
    resp = es.search(index="docs", query=query, size=20, **kw)
    return [h["_id"] for h in resp["hits"]["hits"]]


def approx(d: dict[str, float]):
    return pytest.approx(d, rel=1e-5)


def test_analysis_assumptions(es):
    """The lengths used below: checked through the mapping's analyzers, not assumed."""
    from scholar_es.engine.analysis.analyzers import get_analyzer

    english, standard = get_analyzer("english", None), get_analyzer("standard", None)
    assert english("The foxes are running")[:2] == ["fox", "run"]
    assert english("A fox's den") == ["fox", "den"]
    assert english("running runs ran") == ["run", "run", "ran"]
    assert (
        len(english(DOCS[0][3])) == 45 and len(english(DOCS[2][3])) == 100 and len(english(DOCS[4][3])) == 55
    )
    assert standard("Quick brown fox") == ["quick", "brown", "fox"]
    assert standard("brown bears and the fox") == ["brown", "bears", "and", "the", "fox"]


def test_match_single_term_short_fields(es):
    got = scores(es, {"match": {"title": "fox"}})
    assert got == approx({"1": fox_title(3), "5": fox_title(1)})
    assert ranked(es, {"match": {"title": "fox"}}) == ["5", "1"]  # the shorter title wins


def test_match_or_sums_term_scores(es):
    quick = lambda tf, dl: bm25(tf, dl, T_AVG, n=2, N=T_N)  # noqa: E731
    got = scores(es, {"match": {"title": "quick fox"}})
    assert got == approx({"1": quick(1, 3) + fox_title(3), "2": quick(2, 3), "5": fox_title(1)})


def test_match_and_requires_every_term(es):
    got = scores(es, {"match": {"title": {"query": "quick fox", "operator": "and"}}})
    assert got == approx({"1": bm25(1, 3, T_AVG, 2, T_N) + fox_title(3)})


@pytest.mark.parametrize(
    "msm, expected_ids",
    [
        ("2", {"1"}),  # quick + fox
        ("67%", {"1"}),  # 3 * 0.67 = 2.01 -> 2
        ("66%", {"1", "2", "3", "5"}),  # 3 * 0.66 = 1.98 -> rounds DOWN to 1
        ("-1", {"1"}),  # 3 - 1 = 2
        ("-70%", {"1", "2", "3", "5"}),  # 3 + (int)(-2.1) = 1
        (3, set()),  # no title holds quick, fox and lazy
        ("2<67%", {"1"}),  # 3 clauses > 2 -> 67% -> 2
        ("3<10%", set()),  # 3 clauses <= 3 -> all required
    ],
)
def test_match_minimum_should_match(es, msm, expected_ids):
    got = scores(es, {"match": {"title": {"query": "quick fox lazy", "minimum_should_match": msm}}})
    assert set(got) == expected_ids
    if "1" in got:
        assert got["1"] == pytest.approx(bm25(1, 3, T_AVG, 2, T_N) + fox_title(3), rel=1e-5)


def test_repeated_query_term_counts_twice(es):
    # Lucene's BooleanQuery rewrite folds "fox fox" into fox^2
    got = scores(es, {"match": {"title": "fox fox"}})
    assert got == approx({"1": 2 * fox_title(3), "5": 2 * fox_title(1)})


def test_match_boost(es):
    got = scores(es, {"match": {"title": {"query": "fox", "boost": 3}}})
    assert got == approx({"1": 3 * fox_title(3), "5": 3 * fox_title(1)})


def test_english_field_long_documents(es):
    """Stemming, possessives and stop words change n, N and the lengths; dl above 40 is lossy."""
    fox = lambda dl: bm25(1, dl, B_AVG, n=3, N=B_N)  # noqa: E731  fox: docs 1, 3, 5
    run = lambda tf, dl: bm25(tf, dl, B_AVG, n=3, N=B_N)  # noqa: E731  run: docs 1, 2, 4
    got = scores(es, {"match": {"body": "Running foxes"}})
    assert got == approx(
        {"1": run(1, DL45) + fox(DL45), "2": run(1, 3), "3": fox(DL100), "4": run(2, 3), "5": fox(DL55)}
    )
    # the decoded length matters: with the exact 45 the score would differ by more than 1e-5
    assert got["1"] != pytest.approx(run(1, 45) + fox(45), rel=1e-5)
    assert scores(es, {"match": {"body": "fox's"}}) == approx(
        {"1": fox(DL45), "3": fox(DL100), "5": fox(DL55)}
    )


def test_stop_words_only_match_nothing(es):
    assert scores(es, {"match": {"body": "the and of"}}) == {}
    assert set(scores(es, {"match": {"body": {"query": "the", "zero_terms_query": "all"}}})) == {
        "1",
        "2",
        "3",
        "4",
        "5",
    }


def test_multi_match_best_fields_tie_breaker_and_field_boosts(es):
    # per field: a bool of the analyzed terms, the field boost multiplying every term's BM25 weight
    t = lambda term_n, tf, dl: bm25(tf, dl, T_AVG, term_n, T_N, boost=2.0)  # noqa: E731  title^2
    a = lambda term_n, tf, dl: bm25(tf, dl, A_AVG, term_n, A_N)  # noqa: E731  abstract
    b = lambda term_n, tf, dl: bm25(tf, dl, B_AVG, term_n, B_N, boost=0.5)  # noqa: E731  body^0.5
    # n: title quick 2 / fox 2; abstract quick 1 (doc 4) / fox 3 (1, 4, 5); body quick 0 / fox 3
    fields = {
        "1": [t(2, 1, 3) + t(2, 1, 3), a(3, 1, 3), b(3, 1, DL45)],
        "2": [t(2, 2, 3)],
        "3": [b(3, 1, DL100)],
        "4": [a(1, 1, 2) + a(3, 1, 2)],
        "5": [t(2, 1, 1), a(3, 1, 5), b(3, 1, DL55)],
    }

    def dis_max(parts, tie):
        best = max(parts)
        return best + tie * (sum(parts) - best)

    q = {
        "multi_match": {
            "query": "quick fox",
            "fields": ["title^2", "abstract", "body^0.5"],
            "tie_breaker": 0.3,
        }
    }
    assert scores(es, q) == approx({d: dis_max(p, 0.3) for d, p in fields.items()})
    q["multi_match"].pop("tie_breaker")  # best_fields default tie_breaker 0.0: the best field only
    assert scores(es, q) == approx({d: max(p) for d, p in fields.items()})
    q["multi_match"]["type"] = "most_fields"  # a sum over the fields
    assert scores(es, q) == approx({d: sum(p) for d, p in fields.items()})
    q["multi_match"]["boost"] = 2  # query boost on top of the field boosts
    assert scores(es, q) == approx({d: 2 * sum(p) for d, p in fields.items()})


def test_multi_match_operator_and_is_per_field(es):
    # "quick fox" with AND: title of doc 1 and abstract of doc 4 hold both terms; doc 5 has only fox
    q = {"multi_match": {"query": "quick fox", "fields": ["title", "abstract"], "operator": "and"}}
    got = scores(es, q)
    assert got == approx(
        {
            "1": 2 * fox_title(3),  # quick and fox have the same n, tf and dl in doc 1's title
            "4": bm25(1, 2, A_AVG, 1, A_N) + bm25(1, 2, A_AVG, 3, A_N),
        }
    )


def test_keyword_term_scores_idf(es):
    # keyword: freq 1, norms off (dl = 1) and avgdl = 1 -> tf part = 1/(1 + 1.2·1) · 2.2 = 1 -> score = idf
    assert scores(es, {"term": {"tag": "pet"}}) == approx({"3": idf(1, 4)})
    assert scores(es, {"term": {"tag": {"value": "animal", "boost": 2}}}) == approx(
        {"2": 2 * idf(2, 4), "5": 2 * idf(2, 4)}
    )
    assert ranked(es, {"term": {"tag": "animal"}}) == ["2", "5"]  # ties: insertion order


def test_term_on_text_field_is_not_analyzed(es):
    assert scores(es, {"term": {"title": "Fox"}}) == {}  # indexed lowercase
    assert scores(es, {"term": {"body": "run"}}) == approx(
        {"1": bm25(1, DL45, B_AVG, 3, B_N), "2": bm25(1, 3, B_AVG, 3, B_N), "4": bm25(2, 3, B_AVG, 3, B_N)}
    )


def test_unmapped_field_matches_nothing(es):
    assert scores(es, {"match": {"nope": "fox"}}) == {}


# --- custom BM25 parameters: index.similarity ------------------------------------------------
def test_custom_similarity_default_and_per_field(tmp_path):
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(tmp_path)
    # "default" replaces every field's similarity; a field may name another one, or the built-in BM25
    es.indices.create(
        index="sim",
        settings={
            "index": {
                "similarity": {
                    "default": {"type": "BM25", "b": 0.3},
                    "flat": {"type": "BM25", "k1": "0.9", "b": 0},
                }
            }
        },
        mappings={
            "properties": {
                "body": {"type": "text", "analyzer": "english"},
                "abstract": {"type": "text", "analyzer": "standard", "similarity": "flat"},
                "title": {"type": "text", "similarity": "BM25"},
            }
        },
    )
    for doc_id, title, abstract, body, _tag in DOCS:
        src = {k: v for k, v in (("title", title), ("abstract", abstract), ("body", body)) if v is not None}
        es.index(index="sim", id=doc_id, document=src)
    es.indices.refresh(index="sim")
    got = scores(es, {"match": {"body": "fox"}}, index="sim")
    assert got == approx(
        {
            "1": bm25(1, DL45, B_AVG, 3, B_N, b=0.3),
            "3": bm25(1, DL100, B_AVG, 3, B_N, b=0.3),
            "5": bm25(1, DL55, B_AVG, 3, B_N, b=0.3),
        }
    )
    assert got["1"] != approx(bm25(1, DL45, B_AVG, 3, B_N))  # b matters here
    # b = 0: no length normalization, k1 0.9 -> doc 5's five-token abstract scores as doc 4's two tokens
    assert scores(es, {"match": {"abstract": "fox"}}, index="sim") == approx(
        {d: bm25(1, 1, A_AVG, 3, A_N, k1=0.9, b=0) for d in ("1", "4", "5")}
    )
    assert scores(es, {"match": {"title": "fox"}}, index="sim") == approx(
        {"1": fox_title(3), "5": fox_title(1)}
    )
    expl = es.search(index="sim", query={"match": {"body": "fox"}}, explain=True)["hits"]["hits"][0][
        "_explanation"
    ]
    assert "b, length normalization parameter" in json.dumps(expl) and "0.3" in json.dumps(expl)
    es.close()


@pytest.mark.parametrize(
    ("settings", "mapping", "reason"),
    [
        ({"s": {"type": "BM25", "b": 1.5}}, {}, "illegal b value: 1.5, must be between 0 and 1"),
        (
            {"s": {"type": "BM25", "k1": -1}},
            {},
            "illegal k1 value: -1.0, must be a non-negative finite value",
        ),
        ({"s": {"type": "BM25", "b": "high"}}, {}, "Failed to parse value [high] for setting [b]"),
        (
            {"s": {"type": "DFR"}},
            {},
            "[similarity type [DFR]] is not supported by the scholar-es embedded engine",
        ),
        ({"s": {"b": 0.5}}, {}, "Similarity [s] must have an associated type"),
        ({"s": {"type": "BM25", "c": 1}}, {}, "Unknown settings for similarity of type [BM25]: [c]"),
        ({}, {"similarity": "nope"}, "Unknown Similarity type [nope] for field [body]"),
        ({}, {"similarity": "boolean"}, "[similarity [boolean]] is not supported"),
    ],
)
def test_bad_similarities_are_refused(tmp_path, settings, mapping, reason):
    from elasticsearch import BadRequestError

    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(tmp_path)
    with pytest.raises(BadRequestError) as err:
        es.indices.create(
            index="bad",
            settings={"similarity": settings} if settings else None,
            mappings={"properties": {"body": {"type": "text", **mapping}}},
        )
    assert reason in str(err.value)
    assert not es.indices.exists(index="bad")
    es.close()
