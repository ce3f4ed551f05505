"""kNN: Elasticsearch's similarity -> _score conversions, k, filters, thresholds, boosts, union with query.

cosine: (1 + cos)/2 · dot_product: (1 + dot)/2 (unit vectors) · l2_norm: 1/(1 + d²) (docs/es-semantics.md §7).
The engine's search is exact, which is what a cluster returns for flat / rescored indices.
"""

from __future__ import annotations

import math

import pytest
from elasticsearch import BadRequestError


def bm25(freq, dl, avgdl, n, N, boost=1.0):
    idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
    return boost * 2.2 * idf * freq / (freq + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))


DOCS = {
    #      cosine vec (3d)   color    title               dot (unit, 2d)  l2 (2d)
    "d1": ([1, 0, 0], "red", "red apple", [0.6, 0.8], [0, 0]),
    "d2": ([0.6, 0.8, 0], "blue", "blue sky", [0.8, 0.6], [3, 4]),
    "d3": ([0, 1, 0], "red", "green apple pie", [1, 0], [1, 1]),
    "d4": ([-1, 0, 0], "blue", "blue sea", [0, -1], [2, 0]),
    "d5": ([1, 1, 1], "red", "cherry", [-1, 0], [0, 3]),
}
QV = [2, 0, 0]  # not unit: cosine normalizes the query vector
COS = {"d1": 1.0, "d2": 0.6, "d3": 0.0, "d4": -1.0, "d5": 1 / math.sqrt(3)}
KNN_COS = {d: (1 + c) / 2 for d, c in COS.items()}  # d1 1.0, d2 0.8, d5 0.7887, d3 0.5, d4 0.0
DOT = {"d1": 0.6, "d2": 0.8, "d3": 1.0, "d4": 0.0, "d5": -1.0}  # with [1, 0]
SQ_DIST = {"d1": 0, "d2": 25, "d3": 2, "d4": 4, "d5": 9}  # from [0, 0]


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("knn"))
    client.indices.create(
        index="k",
        mappings={
            "properties": {
                "v": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
                "vd": {"type": "dense_vector", "dims": 2, "similarity": "dot_product"},
                "vl": {"type": "dense_vector", "dims": 2, "similarity": "l2_norm"},
                "color": {"type": "keyword"},
                "title": {"type": "text"},
            }
        },
    )
    for doc_id, (v, color, title, vd, vl) in DOCS.items():
        client.index(
            index="k", id=doc_id, document={"v": v, "color": color, "title": title, "vd": vd, "vl": vl}
        )
    client.indices.refresh(index="k")
    yield client
    client.close()


def search(es, **body):
    resp = es.search(index="k", size=body.pop("size", 10), **body)
    return resp


def scores(resp):
    return {h["_id"]: h["_score"] for h in resp["hits"]["hits"]}


def order(resp):
    return [h["_id"] for h in resp["hits"]["hits"]]


def approx(d):
    return pytest.approx(d, rel=1e-5)


def test_cosine_top_k(es):
    resp = search(es, knn={"field": "v", "query_vector": QV, "k": 3, "num_candidates": 5})
    assert order(resp) == ["d1", "d2", "d5"]
    assert scores(resp) == approx({d: KNN_COS[d] for d in ("d1", "d2", "d5")})
    assert resp["hits"]["total"] == {"value": 3, "relation": "eq"}
    assert resp["hits"]["max_score"] == pytest.approx(1.0, rel=1e-6)


def test_k_defaults_to_size(es):
    resp = search(es, knn={"field": "v", "query_vector": QV}, size=2)
    assert order(resp) == ["d1", "d2"]


def test_all_docs_and_opposite_vector_scores_zero(es):
    resp = search(es, knn={"field": "v", "query_vector": QV, "k": 5, "num_candidates": 10})
    assert scores(resp) == approx(KNN_COS)
    assert order(resp) == ["d1", "d2", "d5", "d3", "d4"]


def test_dot_product(es):
    resp = search(es, knn={"field": "vd", "query_vector": [1, 0], "k": 5, "num_candidates": 5})
    assert scores(resp) == approx({d: (1 + x) / 2 for d, x in DOT.items()})


def test_l2_norm_and_distance_threshold(es):
    resp = search(es, knn={"field": "vl", "query_vector": [0, 0], "k": 5, "num_candidates": 5})
    assert scores(resp) == approx({d: 1 / (1 + d2) for d, d2 in SQ_DIST.items()})
    # l2_norm "similarity" is a distance: keep docs at distance <= 2 (d1: 0, d3: sqrt 2, d4: 2)
    resp = search(
        es, knn={"field": "vl", "query_vector": [0, 0], "k": 5, "num_candidates": 5, "similarity": 2}
    )
    assert order(resp) == ["d1", "d3", "d4"]


def test_filter_is_a_pre_filter(es):
    # top-2 among red docs (a post-filter of the global top-2 would keep d1 only)
    resp = search(
        es,
        knn={
            "field": "v",
            "query_vector": QV,
            "k": 2,
            "num_candidates": 5,
            "filter": {"term": {"color": "red"}},
        },
    )
    assert scores(resp) == approx({"d1": KNN_COS["d1"], "d5": KNN_COS["d5"]})
    resp = search(
        es,
        knn={
            "field": "v",
            "query_vector": QV,
            "k": 2,
            "num_candidates": 5,
            "filter": [{"term": {"color": "red"}}, {"match": {"title": "apple"}}],
        },
    )
    assert order(resp) == ["d1", "d3"]


def test_similarity_threshold_on_raw_cosine(es):
    resp = search(es, knn={"field": "v", "query_vector": QV, "k": 5, "num_candidates": 5, "similarity": 0.58})
    assert order(resp) == ["d1", "d2"]  # cos 1.0 and 0.6 pass, d5's 0.577 does not
    resp = search(es, knn={"field": "v", "query_vector": QV, "k": 5, "num_candidates": 5, "similarity": 0.5})
    assert order(resp) == ["d1", "d2", "d5"]


def test_boost(es):
    resp = search(es, knn={"field": "v", "query_vector": QV, "k": 2, "num_candidates": 5, "boost": 2.5})
    assert scores(resp) == approx({"d1": 2.5 * KNN_COS["d1"], "d2": 2.5 * KNN_COS["d2"]})


def test_query_plus_knn_is_a_sum_over_the_union(es):
    # title: N = 5, lengths 2, 2, 3, 2, 1 -> avgdl 2; "apple": n = 2 (d1 dl 2, d3 dl 3)
    apple = {"d1": bm25(1, 2, 2.0, 2, 5), "d3": bm25(1, 3, 2.0, 2, 5)}
    resp = search(
        es,
        query={"match": {"title": {"query": "apple", "boost": 0.9}}},
        knn={"field": "v", "query_vector": QV, "k": 2, "num_candidates": 5, "boost": 0.1},
    )
    assert scores(resp) == approx(
        {"d1": 0.9 * apple["d1"] + 0.1 * KNN_COS["d1"], "d2": 0.1 * KNN_COS["d2"], "d3": 0.9 * apple["d3"]}
    )
    assert resp["hits"]["total"]["value"] == 3
    # size pages over the union
    resp = search(
        es,
        query={"match": {"title": "apple"}},
        knn={"field": "v", "query_vector": QV, "k": 2, "num_candidates": 5},
        size=1,
    )
    assert order(resp) == ["d1"] and resp["hits"]["total"]["value"] == 3


def test_several_knn_clauses_add_up(es):
    resp = search(
        es,
        knn=[
            {"field": "v", "query_vector": QV, "k": 2, "num_candidates": 5},
            {"field": "vd", "query_vector": [1, 0], "k": 2, "num_candidates": 5},
        ],
    )
    # v: d1, d2; vd: d3 (1.0), d2 (0.8)
    assert scores(resp) == approx(
        {"d1": KNN_COS["d1"], "d2": KNN_COS["d2"] + (1 + DOT["d2"]) / 2, "d3": (1 + DOT["d3"]) / 2}
    )


def test_bool_filter_beside_a_knn_query_post_filters(es):
    # Elasticsearch pre-filters only with the knn clause's own filter ("Filter approximate kNN
    # results"); a bool filter beside it removes hits after the top k are chosen.
    q = {
        "bool": {
            "must": [{"knn": {"field": "v", "query_vector": QV, "k": 2, "num_candidates": 5}}],
            "filter": [{"term": {"color": "blue"}}],
        }
    }
    # top 2 overall: d1 (red) and d2 (blue); the filter then leaves d2 alone
    assert scores(search(es, query=q)) == approx({"d2": KNN_COS["d2"]})
    q = {
        "knn": {
            "field": "v",
            "query_vector": QV,
            "k": 2,
            "num_candidates": 5,
            "filter": {"term": {"color": "blue"}},
        }
    }
    # the same filter inside the clause: the 2 nearest BLUE docs, d2 (0.8) and d4 (0.0)
    assert scores(search(es, query=q)) == approx({"d2": KNN_COS["d2"], "d4": KNN_COS["d4"]})
    q = {
        "bool": {
            "should": [
                {"knn": {"field": "v", "query_vector": QV, "k": 1, "num_candidates": 5, "boost": 2}},
                {"match": {"title": "blue"}},
            ],
            "must_not": [{"ids": {"values": ["d1"]}}],
        }
    }
    blue = bm25(1, 2, 2.0, 2, 5)  # "blue": d2 and d4, both titles of length 2
    # knn's top 1 is d1, which must_not removes: only the match clause scores
    assert scores(search(es, query=q)) == approx({"d2": blue, "d4": blue})


def test_knn_query_with_its_own_filter_and_similarity(es):
    q = {
        "knn": {
            "field": "v",
            "query_vector": QV,
            "k": 5,
            "num_candidates": 5,
            "filter": {"term": {"color": "red"}},
            "similarity": 0.5,
        }
    }
    assert scores(search(es, query=q)) == approx({"d1": KNN_COS["d1"], "d5": KNN_COS["d5"]})


def test_num_candidates_below_k_is_rejected(es):
    with pytest.raises(BadRequestError) as e:
        search(es, knn={"field": "v", "query_vector": QV, "k": 5, "num_candidates": 3})
    assert e.value.body["error"]["type"] == "x_content_parse_exception"
    assert e.value.body["error"]["caused_by"]["reason"] == "[num_candidates] cannot be less than [k]"
