"""``matched_queries`` of named queries, as Elasticsearch's MatchedQueriesPhase lists them.

Expected values: a named query matches a hit when its own query matches the document (wherever it
sits in the tree); the names of the query and of the ``post_filter`` both count; the names come in
``java.util.HashMap`` iteration order (the order search.vectors/40_knn_search.yml asserts for
``my_knn_query``/``my_query``); ``include_named_queries_score=true`` is refused by name.
"""

from __future__ import annotations

import pytest
from elasticsearch import BadRequestError

from scholar_es.engine.search.named import java_hashmap_order


def test_java_hashmap_order() -> None:
    # String.hashCode: "a"=97 -> bucket 1, "b" -> 2; "my_knn_query" -> bucket 0, "my_query" -> 8
    assert java_hashmap_order(["b", "a"]) == ["a", "b"]
    assert java_hashmap_order(["my_query", "my_knn_query"]) == ["my_knn_query", "my_query"]


@pytest.fixture
def es(tmp_engine):
    tmp_engine.indices.create(
        index="p", mappings={"properties": {"t": {"type": "text"}, "k": {"type": "keyword"}}}
    )
    tmp_engine.index(index="p", id="1", document={"t": "graph neural", "k": "a"})
    tmp_engine.index(index="p", id="2", document={"t": "graph", "k": "b"})
    tmp_engine.indices.refresh(index="p")
    return tmp_engine


def test_query_and_post_filter_names(es) -> None:
    resp = es.search(
        index="p",
        query={
            "bool": {
                "should": [
                    {"match": {"t": {"query": "neural", "_name": "n"}}},
                    {"term": {"k": {"term": "b", "_name": "kb"}}},
                    {"match": {"t": "graph"}},
                ],
                "_name": "all",
            }
        },
        post_filter={"exists": {"field": "k", "_name": "has_k"}},
    )
    got = {h["_id"]: h.get("matched_queries") for h in resp["hits"]["hits"]}
    assert sorted(got["1"]) == ["all", "has_k", "n"]
    assert sorted(got["2"]) == ["all", "has_k", "kb"]
    assert got["1"] == java_hashmap_order(["all", "n", "has_k"])


def test_no_names_no_field(es) -> None:
    hits = es.search(index="p", query={"match": {"t": "graph"}})["hits"]["hits"]
    assert all("matched_queries" not in h for h in hits)


def test_include_named_queries_score_refused(es) -> None:
    with pytest.raises(BadRequestError) as e:
        es.search(index="p", include_named_queries_score=True, query={"match_all": {"_name": "x"}})
    assert "include_named_queries_score" in str(e.value)
