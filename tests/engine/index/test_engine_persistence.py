"""Indices persist in their directory: a new client, and a fresh process, see the same results;
updates replace (and move the document to the end of the index order, as Lucene does); deletes stick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from elasticsearch import NotFoundError

REPO = Path(__file__).resolve().parents[3]
DOCS = [
    ("a", {"title": "graph neural networks for molecules", "tag": "x", "year": 2019, "vec": [1, 0, 0]}),
    ("b", {"title": "a survey of graph learning", "tag": "y", "year": 2021, "vec": [0, 1, 0]}),
    ("c", {"title": "molecules and proteins", "tag": "x", "year": 2020, "vec": [0.5, 0.5, 0.1]}),
    ("d", {"title": "neural graph graph", "tag": "z", "year": 2018, "vec": [0, 0, 1]}),
]
MAPPING = {
    "properties": {
        "title": {"type": "text", "analyzer": "english"},
        "tag": {"type": "keyword"},
        "year": {"type": "integer"},
        "vec": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
    }
}
SEARCH = {
    "query": {
        "bool": {
            "should": [{"match": {"title": "graph molecules"}}],
            "filter": [{"range": {"year": {"gte": 2018}}}],
        }
    },
    "knn": {"field": "vec", "query_vector": [1, 0.2, 0], "k": 2, "num_candidates": 4},
}


def _hits(resp) -> list[tuple[str, float]]:
    return [(h["_id"], h["_score"]) for h in resp["hits"]["hits"]]


def run_in_subprocess(path: Path, code: str) -> object:
    """Run ``code`` (which has ``es`` and must set ``out``) in a fresh interpreter; its ``out``."""
    script = (
        "import json, sys\nfrom scholar_es.engine.rest.transport import embedded_client\n"
        f"es = embedded_client({str(path)!r})\n" + textwrap.dedent(code) + "\nprint(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, cwd=str(REPO)
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture
def filled(tmp_path):
    from scholar_es.engine.rest.transport import embedded_client

    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(index="p", mappings=MAPPING)
    for doc_id, src in DOCS:
        es.index(index="p", id=doc_id, document=src)
    es.indices.refresh(index="p")
    yield path, es
    es.close()


def test_new_client_same_results(filled):
    from scholar_es.engine.rest.transport import embedded_client

    path, es = filled
    first = _hits(es.search(index="p", **SEARCH))
    assert len(first) == 4
    other = embedded_client(path)
    assert _hits(other.search(index="p", **SEARCH)) == first
    assert (
        other.indices.get_mapping(index="p")["p"]["mappings"]["properties"]["title"]["analyzer"] == "english"
    )
    assert other.count(index="p")["count"] == 4


def test_fresh_process_same_results_and_writes_visible_back(filled):
    path, es = filled
    first = _hits(es.search(index="p", **SEARCH))
    out = run_in_subprocess(
        path,
        f"""
        resp = es.search(index="p", **{SEARCH!r})
        hits = [[h["_id"], h["_score"]] for h in resp["hits"]["hits"]]
        es.index(index="p", id="e", document={{"title": "graph graph graph", "tag": "x", "year": 2022}})
        es.indices.refresh(index="p")
        out = {{"hits": hits, "count": es.count(index="p")["count"]}}
    """,
    )
    assert [tuple(h) for h in out["hits"]] == first  # identical ids, order and float scores
    assert out["count"] == 5
    # the parent process sees what the child wrote
    assert es.count(index="p")["count"] == 5
    assert es.get(index="p", id="e")["_source"]["title"] == "graph graph graph"
    assert "e" in [
        h["_id"] for h in es.search(index="p", query={"match": {"title": "graph"}})["hits"]["hits"]
    ]


def test_update_replaces_and_moves_to_the_end(filled):
    _, es = filled
    ids = lambda: [h["_id"] for h in es.search(index="p", query={"match_all": {}})["hits"]["hits"]]  # noqa: E731
    assert ids() == ["a", "b", "c", "d"]  # equal scores: index order
    resp = es.index(
        index="p",
        id="a",
        document={"title": "updated title", "tag": "w", "year": 2000, "vec": [1, 1, 1]},
        refresh=True,
    )
    assert resp["result"] == "updated" and resp["_version"] == 2
    assert es.count(index="p")["count"] == 4  # no duplicate
    assert ids() == ["b", "c", "d", "a"]  # Lucene: delete + append
    assert es.get(index="p", id="a")["_source"]["tag"] == "w"
    assert [h["_id"] for h in es.search(index="p", query={"term": {"tag": "x"}})["hits"]["hits"]] == ["c"]
    assert [
        h["_id"] for h in es.search(index="p", query={"match": {"title": "updated"}})["hits"]["hits"]
    ] == ["a"]
    assert es.search(index="p", query={"match": {"title": "molecules"}})["hits"]["total"]["value"] == 1


def test_same_id_twice_in_one_bulk(filled):
    _, es = filled
    resp = es.bulk(
        operations=[
            {"index": {"_index": "p", "_id": "n"}},
            {"title": "first", "year": 1},
            {"index": {"_index": "p", "_id": "n"}},
            {"title": "second", "year": 2},
        ],
        refresh=True,
    )
    assert [i["index"]["result"] for i in resp["items"]] == ["created", "updated"]
    assert es.count(index="p")["count"] == 5
    assert es.get(index="p", id="n")["_source"]["title"] == "second"
    assert es.search(index="p", query={"match": {"title": "first"}})["hits"]["hits"] == []


def test_delete(filled):
    _, es = filled
    resp = es.delete(index="p", id="b", refresh=True)
    assert resp["result"] == "deleted"
    assert es.count(index="p")["count"] == 3
    with pytest.raises(NotFoundError):
        es.get(index="p", id="b")
    with pytest.raises(NotFoundError):
        es.delete(index="p", id="b")
    assert es.search(index="p", query={"match": {"title": "survey"}})["hits"]["hits"] == []


def test_changes_survive_a_restart(filled):
    """Update, delete, alias, _meta, and a deleted + recreated index, read back by a fresh process."""
    path, es = filled
    es.index(index="p", id="a", document={"title": "updated title", "tag": "w", "year": 2000}, refresh=True)
    es.delete(index="p", id="b", refresh=True)
    es.indices.put_alias(index="p", name="papers")
    es.indices.put_mapping(index="p", meta={"schema_version": 3})
    es.indices.create(index="q", mappings={"properties": {"v": {"type": "dense_vector", "dims": 2}}})
    es.index(index="q", id="old", document={"v": [1, 0]})
    es.indices.delete(index="q")
    es.indices.create(index="q", mappings={"properties": {"title": {"type": "text"}}})
    es.index(index="q", id="new", document={"title": "fresh"}, refresh=True)
    here = {
        "order": [h["_id"] for h in es.search(index="p", query={"match_all": {}})["hits"]["hits"]],
        "hits": [[h["_id"], h["_score"]] for h in es.search(index="papers", **SEARCH)["hits"]["hits"]],
    }
    assert here["order"] == ["c", "d", "a"]
    out = run_in_subprocess(
        path,
        f"""
        out = {{"order": [h["_id"] for h in es.search(index="p", query={{"match_all": {{}}}})["hits"]["hits"]],
               "hits": [[h["_id"], h["_score"]] for h in es.search(index="papers", **{SEARCH!r})["hits"]["hits"]],
               "meta": es.indices.get_mapping(index="p")["p"]["mappings"].get("_meta"),
               "q": [h["_id"] for h in es.search(index="q")["hits"]["hits"]],
               "q_fields": sorted(es.indices.get_mapping(index="q")["q"]["mappings"]["properties"]),
               "version_a": es.get(index="p", id="a")["_version"]}}
    """,
    )
    assert out["order"] == here["order"] and out["hits"] == here["hits"]
    assert out["meta"] == {"schema_version": 3}
    assert out["q"] == ["new"] and out["q_fields"] == ["title"]
    assert out["version_a"] == 2
