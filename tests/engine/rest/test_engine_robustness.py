"""Malformed requests, Elasticsearch's limits, and two writers: clear errors, never a crash."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from elasticsearch import BadRequestError, helpers

from scholar_es.engine.rest.transport import embedded_client

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def es(tmp_path):
    client = embedded_client(tmp_path)
    client.indices.create(
        index="t",
        mappings={"properties": {"t": {"type": "text"}, "n": {"type": "integer"}, "k": {"type": "keyword"}}},
    )
    helpers.bulk(
        client,
        [
            {"_index": "t", "_id": str(i), "t": text, "n": i}
            for i, text in enumerate(["apple pie", "banana bread", "cherry tart"])
        ],
    )
    return client


@pytest.mark.parametrize(
    "body",
    [
        {"min_score": "x"},
        {"query": {"multi_match": {"query": "apple", "fields": ["t^abc"]}}},
        {"query": {"multi_match": {"query": "apple", "fields": [1]}}},
        {"collapse": {"field": "k", "inner_hits": "yes"}},
        {"track_total_hits": "many"},
        {"_source": [[1]]},
    ],
)
def test_malformed_values_are_400s_not_crashes(es, body):
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", body=body)
    assert e.value.body["error"]["type"] == "parsing_exception"


def test_deeply_nested_bool_is_refused(es):
    q = {"match_all": {}}
    for _ in range(40):
        q = {"bool": {"must": [q]}}
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", query=q)
    assert "max_nested_depth" in e.value.body["error"]["reason"]


@pytest.mark.parametrize("msm", [0, "10%"])
def test_should_only_bool_still_needs_one_match(es, msm):
    q = {"bool": {"should": [{"match": {"t": "apple"}}], "minimum_should_match": msm}}
    hits = es.search(index="t", query=q)["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["0"]


def test_documents_a_cluster_refuses_are_refused(es):
    ok, errors = helpers.bulk(
        es,
        [
            {"_index": "t", "_id": "big", "n": 30_000_000_000},
            {"_index": "t", "_id": "kw", "k": "x" * 40_000},
            {"_index": "t", "_id": "i" * 600, "n": 1},
            {"_index": "t", "_id": "coerced", "n": 1.7},
        ],
        raise_on_error=False,
    )
    assert ok == 1
    reasons = {e["index"]["_id"][:3]: e["index"]["error"]["reason"] for e in errors}
    assert "out of range for an integer" in reasons["big"]
    assert "immense term" in reasons["kw"]
    assert "too long, must be no longer than 512 bytes" in reasons["iii"]
    es.indices.refresh(index="t")
    assert es.search(index="t", query={"term": {"n": 1}})["hits"]["total"]["value"] == 2  # 1 and 1.7 -> 1


def test_two_processes_writing_one_engine(tmp_path):
    script = textwrap.dedent("""
        import sys
        from elasticsearch import helpers
        from scholar_es.engine.rest.transport import embedded_client
        es = embedded_client(sys.argv[1])
        tag = sys.argv[2]
        for batch in range(5):
            helpers.bulk(es, ({"_index": "w", "_id": f"{tag}-{batch}-{i}", "t": "word"} for i in range(200)))
    """)
    embedded_client(tmp_path).indices.create(index="w", mappings={"properties": {"t": {"type": "text"}}})
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), tag],
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    assert embedded_client(tmp_path).count(index="w")["count"] == 2000
