"""The ``rescore`` phase (query rescorer), pinned to values worked out by hand from Elasticsearch's
QueryRescorer: in the window, ``score_mode(first * query_weight, second * rescore_query_weight)``
where the rescore query matches and ``first * query_weight`` where it does not; beyond the window
``first * query_weight``; then everything re-sorted by score (ties by document order).

The collapse cases are Elasticsearch's own rest-api-spec test
``search/112_field_collapsing_with_rescore.yml`` (8.15+), with its documents and expected answers.
"""

from __future__ import annotations

import math

import pytest
from elasticsearch import BadRequestError

# a = first-pass score (script_score on doc['a']), b = rescore score (doc['b']); tag "x" on d2, d4
DOCS = {
    "d1": {"a": 10, "b": 1, "tag": "y", "vec": [1.0, 0.0]},
    "d2": {"a": 8, "b": 30, "tag": "x", "vec": [0.0, 1.0]},
    "d3": {"a": 6, "b": 5, "tag": "y", "vec": [1.0, 1.0]},
    "d4": {"a": 4, "b": 50, "tag": "x", "vec": [-1.0, 0.0]},
    "d5": {"a": 2, "b": 100, "tag": "y", "vec": [3.0, 4.0]},
}
FIRST = {"script_score": {"query": {"match_all": {}}, "script": {"source": "doc['a'].value"}}}
B = {"script_score": {"query": {"match_all": {}}, "script": {"source": "doc['b'].value"}}}
B_ON_X = {"script_score": {"query": {"term": {"tag": "x"}}, "script": {"source": "doc['b'].value"}}}


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("rescore"))
    client.indices.create(
        index="r",
        mappings={
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "tag": {"type": "keyword"},
                "vec": {"type": "dense_vector", "dims": 2, "similarity": "cosine"},
            }
        },
    )
    for doc_id, src in DOCS.items():
        client.index(index="r", id=doc_id, document=src)
    client.indices.refresh(index="r")
    yield client
    client.close()


def ranked(es, rescore, size=5, **kw):
    resp = es.search(index="r", query=FIRST, rescore=rescore, size=size, **kw)
    return [(h["_id"], h["_score"]) for h in resp["hits"]["hits"]], resp["hits"]


def test_default_window_and_weights_sum_both_scores(es):
    # window 10 covers all five: a + b
    hits, meta = ranked(es, {"query": {"rescore_query": B}})
    assert hits == [("d5", 102.0), ("d4", 54.0), ("d2", 38.0), ("d1", 11.0), ("d3", 11.0)]  # tie: doc order
    assert meta["max_score"] == 102.0  # the first hit after rescoring


def test_hits_beyond_the_window_keep_first_score_times_query_weight(es):
    # window 3 = d1, d2, d3 (first pass 10, 8, 6): 0.5a + 2b there; d4, d5 get 0.5a
    hits, _ = ranked(
        es,
        {"window_size": 3, "query": {"rescore_query": B, "query_weight": 0.5, "rescore_query_weight": 2}},
    )
    assert hits == [("d2", 64.0), ("d3", 13.0), ("d1", 7.0), ("d4", 2.0), ("d5", 1.0)]


def test_query_weight_zero_ranks_the_window_by_the_rescore_query_alone(es):
    hits, _ = ranked(
        es, {"window_size": 2, "query": {"rescore_query": B, "query_weight": 0, "rescore_query_weight": 1}}
    )
    # d1 (1), d2 (30) rescored; d3, d4, d5 beyond the window: 0, tied, in document order
    assert hits == [("d2", 30.0), ("d1", 1.0), ("d3", 0.0), ("d4", 0.0), ("d5", 0.0)]


def test_docs_the_rescore_query_does_not_match_keep_weighted_first_score(es):
    hits, _ = ranked(es, {"window_size": 5, "query": {"rescore_query": B_ON_X, "query_weight": 2}})
    # x: d2 = 16 + 30, d4 = 8 + 50; y: 2a
    assert hits == [("d4", 58.0), ("d2", 46.0), ("d1", 20.0), ("d3", 12.0), ("d5", 4.0)]


@pytest.mark.parametrize(
    "mode, combine",
    [
        ("total", lambda p, s: p + s),
        ("multiply", lambda p, s: p * s),
        ("avg", lambda p, s: (p + s) / 2),
        ("max", max),
        ("min", min),
    ],
)
def test_score_modes(es, mode, combine):
    hits, _ = ranked(es, {"window_size": 5, "query": {"rescore_query": B, "score_mode": mode}})
    expected = {d: combine(float(s["a"]), float(s["b"])) for d, s in DOCS.items()}
    assert dict(hits) == pytest.approx(expected)
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)


def test_rescorers_apply_in_order(es):
    # first: window 5, a + b; second: window 2 over that order (d5 102, d4 54), x b-score * 10 added
    second = {"script_score": {"query": {"match_all": {}}, "script": {"source": "doc['b'].value * 10"}}}
    hits, _ = ranked(
        es,
        [
            {"window_size": 5, "query": {"rescore_query": B}},
            {"window_size": 2, "query": {"rescore_query": second}},
        ],
    )
    assert hits[:3] == [("d5", 1102.0), ("d4", 554.0), ("d2", 38.0)]


def test_from_and_size_page_the_rescored_order(es):
    hits, meta = ranked(es, {"window_size": 5, "query": {"rescore_query": B}}, size=2, from_=1)
    assert hits == [("d4", 54.0), ("d2", 38.0)]
    assert meta["total"]["value"] == 5


def test_window_smaller_than_from_plus_size_still_returns_every_hit(es):
    hits, _ = ranked(es, {"window_size": 1, "query": {"rescore_query": B, "query_weight": 1}}, size=5)
    # only d1 (a 10) is rescored: 11; the others keep a
    assert hits == [("d1", 11.0), ("d2", 8.0), ("d3", 6.0), ("d4", 4.0), ("d5", 2.0)]


def test_cosine_similarity_rescore(es):
    q = [0.6, 0.8]
    script = {
        "source": "(cosineSimilarity(params.query_vector, 'vec') + 1.0) / 2.0",
        "params": {"query_vector": q},
    }
    rescore_query = {"script_score": {"query": {"match_all": {}}, "script": script}}
    hits, _ = ranked(es, {"window_size": 5, "query": {"rescore_query": rescore_query, "query_weight": 0}})

    def cos(v):
        return (q[0] * v[0] + q[1] * v[1]) / math.hypot(*v)

    expected = {d: (cos(s["vec"]) + 1) / 2 for d, s in DOCS.items()}
    assert dict(hits) == pytest.approx(expected, rel=1e-6)
    assert hits[0][0] == "d5"  # [3, 4] points where the query does: cos 1, score 1


def test_size_zero_skips_the_phase(es):
    resp = es.search(index="r", query=FIRST, rescore={"query": {"rescore_query": B}}, size=0)
    assert resp["hits"]["hits"] == [] and resp["hits"]["total"]["value"] == 5


def test_sort_on_score_is_allowed_other_sorts_are_refused(es):
    hits, _ = ranked(es, {"window_size": 5, "query": {"rescore_query": B}}, sort=["_score"])
    assert hits[0] == ("d5", 102.0)
    with pytest.raises(BadRequestError) as e:
        ranked(es, {"query": {"rescore_query": B}}, sort=[{"a": "desc"}])
    assert e.value.body["error"]["reason"] == "Cannot use [sort] option in conjunction with [rescore]."


@pytest.mark.parametrize(
    "rescore, reason",
    [
        ({"window_size": 10001, "query": {"rescore_query": B}}, "Rescore window [10001] is too large"),
        ({"window_size": 5}, "missing rescore type"),
        ({"query": {"query_weight": 1}}, "rescore_query cannot be null"),
        (
            {"query": {"rescore_query": B}, "script": {"script": "1"}},
            "you can either define [query] or [script]",
        ),
        ({"query": {"rescore_query": B}, "windowsize": 3}, "rescore doesn't support [windowsize]"),
        ({"query": {"rescore_query": B, "weight": 2}}, "[query] unknown field [weight]"),
        ({"query": {"rescore_query": B, "score_mode": "sum"}}, "[query] failed to parse field [score_mode]"),
    ],
)
def test_invalid_rescore_is_a_400_naming_the_problem(es, rescore, reason):
    with pytest.raises(BadRequestError) as e:
        ranked(es, rescore)
    assert reason in e.value.body["error"]["reason"]


def test_explain_shows_both_weights(es):
    resp = es.search(
        index="r",
        query=FIRST,
        rescore={"window_size": 1, "query": {"rescore_query": B, "query_weight": 0.5}},
        size=2,
        explain=True,
    )
    top, second = resp["hits"]["hits"]
    e = top["_explanation"]
    assert top["_id"] == "d1" and e["value"] == pytest.approx(6.0) and e["description"] == "sum of:"
    prim, sec = e["details"]
    assert prim["value"] == 5.0 and prim["details"][1] == {
        "value": 0.5,
        "description": "primaryWeight",
        "details": [],
    }
    assert sec["value"] == 1.0 and sec["details"][1]["description"] == "secondaryWeight"
    # d2 is beyond the window: only the weighted first pass
    assert second["_explanation"]["description"] == "product of:"
    assert second["_explanation"]["value"] == 4.0


# --- Elasticsearch's rest-api-spec search/112_field_collapsing_with_rescore.yml ------------------


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("rescore-collapse"))
    client.indices.create(
        index="products",
        mappings={
            "properties": {
                "product_id": {"type": "keyword"},
                "description": {"type": "text"},
                "popularity": {"type": "integer"},
                "score": {"type": "integer"},
            }
        },
    )
    docs = [
        ("1", "0", "flat tv 4K HDR", 2, 30),
        ("2", "10", "LED Smart TV 32", 5, 100),
        ("3", "10", "LED Smart TV 65", 10, 50),
        ("4", "0", "flat tv", 1, 10),
        ("5", "129", "just a tv", 100, 3),
    ]
    for doc_id, product, description, score, popularity in docs:
        client.index(
            index="products",
            id=doc_id,
            document={
                "product_id": product,
                "description": description,
                "score": score,
                "popularity": popularity,
            },
        )
    client.indices.refresh(index="products")
    yield client
    client.close()


COLLAPSE_QUERY = {
    "bool": {
        "filter": {"match": {"description": "tv"}},
        "should": {"script_score": {"query": {"match_all": {}}, "script": {"source": "doc['score'].value"}}},
    }
}
POPULARITY = {"script_score": {"query": {"match_all": {}}, "script": {"source": "doc['popularity'].value"}}}


def test_field_collapsing_and_rescore(products):
    resp = products.search(
        index="products",
        query=COLLAPSE_QUERY,
        collapse={"field": "product_id"},
        rescore={"query": {"rescore_query": POPULARITY, "query_weight": 0, "rescore_query_weight": 1}},
    )
    hits = resp["hits"]
    assert hits["total"]["value"] == 5
    assert [(h["_id"], h["_score"], h["fields"]["product_id"]) for h in hits["hits"]] == [
        ("3", 50.0, ["10"]),
        ("1", 30.0, ["0"]),
        ("5", 3.0, ["129"]),
    ]


def test_field_collapsing_and_rescore_with_window_size(products):
    resp = products.search(
        index="products",
        query=COLLAPSE_QUERY,
        collapse={"field": "product_id"},
        rescore={
            "window_size": 2,
            "query": {"rescore_query": POPULARITY, "query_weight": 0, "rescore_query_weight": 1},
        },
        size=1,
    )
    hits = resp["hits"]
    assert hits["total"]["value"] == 5
    assert [(h["_id"], h["_score"], h["fields"]["product_id"]) for h in hits["hits"]] == [("3", 50.0, ["10"])]


def test_a_bad_rescore_query_is_an_error_even_without_hits(es):
    with pytest.raises(BadRequestError) as e:
        es.search(
            index="r",
            query={"term": {"tag": "nothing-has-this"}},
            rescore={"query": {"rescore_query": {"no_such_query": {}}}},
        )
    assert "no_such_query" in e.value.body["error"]["reason"]
