"""Appending to a mapped base keeps the base in place (engine/index/segment/buffers.py ``Split``).

Opening a commit point with deltas, or appending to a freshly opened base, used to copy every
big column (vector matrix, postings) into a growable buffer. Now the mapped array stays the base
of a two-part column and only the new rows are held apart. The reference is the same on-disk
index opened with the old, copying layout (``SPLIT_MIN_ROWS`` above any size): every answer
(hits, scores, aggregations, fields, explanations, kNN through the graph and exact) must be the
same, before and after further appends, deletes and a reopen.
"""

from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from scholar_es.engine.index import hnsw
from scholar_es.engine.index.indices import Engine
from scholar_es.engine.index.segment import buffers
from scholar_es.engine.rest.handler import handle as rest_handle

WORDS = ["graph", "neural", "model", "data", "protein", "cell", "gene", "tree", "the", "of"]
MAPPING = {
    "properties": {
        "title": {"type": "text"},
        "tag": {"type": "keyword"},
        "year": {"type": "integer"},
        "v": {"type": "dense_vector", "dims": 4, "similarity": "cosine", "index_options": {"type": "hnsw"}},
        "f": {"type": "dense_vector", "dims": 3, "similarity": "l2_norm", "index_options": {"type": "flat"}},
    }
}
QV = [0.3, -0.2, 0.9, 0.1]
QUERIES = [
    {"query": {"match": {"title": "graph neural model"}}},
    {"query": {"term": {"tag": "t2"}}, "aggs": {"tags": {"terms": {"field": "tag"}}}},
    {"query": {"bool": {"must": {"match": {"title": "cell"}}, "filter": {"range": {"year": {"gte": 2004}}}}}},
    {"knn": {"field": "v", "query_vector": QV, "k": 10, "num_candidates": 100}},
    {
        "knn": {
            "field": "v",
            "query_vector": QV,
            "k": 5,
            "num_candidates": 10,
            "filter": {"term": {"tag": "t1"}},
        }
    },
    {"knn": {"field": "f", "query_vector": [0.5, 0.1, 0.2], "k": 7, "num_candidates": 20}},
    {
        "query": {
            "script_score": {
                "query": {"match": {"title": "gene data"}},
                "script": {"source": "cosineSimilarity(params.q, 'v') + 1.0", "params": {"q": QV}},
            }
        }
    },
    {
        "query": {"match": {"title": "protein tree"}},
        "rescore": {
            "window_size": 20,
            "query": {
                "rescore_query": {
                    "script_score": {
                        "query": {"match_all": {}},
                        "script": {"source": "dotProduct(params.q, 'v') + 2.0", "params": {"q": QV}},
                    }
                }
            },
        },
    },
    {"query": {"match": {"title": "graph"}}, "fields": ["tag", "year"], "size": 50},
    {"query": {"match": {"title": "model data"}}, "explain": True, "size": 3},
]


def _doc(rnd: random.Random, i: int) -> dict:
    return {
        "title": " ".join(rnd.choices(WORDS, k=rnd.randint(1, 9))),
        "tag": f"t{rnd.randint(0, 4)}",
        "year": 2000 + rnd.randint(0, 9),
        "v": [rnd.uniform(-1, 1) for _ in range(4)],
        "f": [rnd.uniform(-1, 1) for _ in range(3)],
    }


def _rest(engine: Engine, method: str, path: str, body=None) -> dict:
    status, resp = rest_handle(engine, method, path, {}, body)
    assert status in (200, 201), resp
    return resp


def _answers(engine: Engine) -> list:
    out = []
    for body in QUERIES:
        resp = _rest(engine, "POST", "/p/_search", {"size": 30, **body})
        hits = [(h["_id"], h["_score"], h.get("fields"), h.get("_explanation")) for h in resp["hits"]["hits"]]
        out.append((resp["hits"]["total"], hits, resp.get("aggregations")))
    return out


def _layout(engine: Engine) -> set[str]:
    """Names of the columns held split in the current snapshot."""
    with engine.handle("p").reading() as (seg, _reader):
        split = set()
        for name, col in seg.vectors.items():
            if type(col.__dict__["matrix"]) is buffers.Split:
                split.add(f"vectors.{name}")
        for kind in ("text", "keyword"):
            for name, col in getattr(seg, kind).items():
                if type(col.postings.__dict__["indices"]) is buffers.Split:
                    split.add(f"{kind}.{name}")
        return split


@pytest.fixture
def on_disk(tmp_path, monkeypatch):
    """A base of 300 docs (with its HNSW graph), a delete, two deltas of 50, closed."""
    monkeypatch.setattr(hnsw, "GRAPH_THRESHOLD", 50)
    rnd = random.Random(7)
    path = tmp_path / "engine"
    engine = Engine(path)
    try:
        _rest(engine, "PUT", "/p", {"mappings": MAPPING})
        for lo, hi in ((0, 300), (300, 350), (350, 400)):
            for i in range(lo, hi):
                _rest(engine, "PUT", f"/p/_doc/{i}", _doc(rnd, i))
            _rest(engine, "POST", "/p/_refresh")
            if lo == 0:
                _rest(engine, "DELETE", "/p/_doc/17")
                _rest(engine, "POST", "/p/_refresh")
    finally:
        engine.store.close()
    return path


def _run(path, min_rows: int, monkeypatch) -> tuple[list, set[str], set[str]]:
    monkeypatch.setattr(buffers, "SPLIT_MIN_ROWS", min_rows)
    rnd = random.Random(11)
    engine = Engine(path)
    try:
        _rest(engine, "POST", "/p/_count")  # opens the index: base, its delete, two deltas
        opened = _layout(engine)
        first = _answers(engine)
        for i in range(400, 430):  # appends to the opened segment
            _rest(engine, "PUT", f"/p/_doc/{i}", _doc(rnd, i))
        _rest(engine, "POST", "/p/_refresh")
        appended = _layout(engine)
        second = _answers(engine)
        _rest(engine, "DELETE", "/p/_doc/3")  # a delete compacts every column
        _rest(engine, "PUT", "/p/_doc/5", _doc(rnd, 5))  # an update: delete + add
        _rest(engine, "POST", "/p/_refresh")
        third = _answers(engine)
    finally:
        engine.store.close()
    engine = Engine(path)  # the same state read back: base + deltas
    try:
        fourth = _answers(engine)
    finally:
        engine.store.close()
    return [first, second, third, fourth], opened, appended


def test_split_columns_answer_as_the_copied_layout(on_disk, tmp_path, monkeypatch):
    shutil.copytree(on_disk, tmp_path / "copied")
    shutil.copytree(on_disk, tmp_path / "split")
    reference, ref_opened, ref_appended = _run(tmp_path / "copied", 10**12, monkeypatch)
    got, opened, appended = _run(tmp_path / "split", 1, monkeypatch)
    assert ref_opened == ref_appended == set()  # the reference never splits
    # opening applies the deltas to the base (compacted by its delete): every big column is split
    assert opened == {"vectors.v", "vectors.f", "text.title", "keyword.tag"}
    # after every query above and 30 more docs, the hot paths (BM25, the graph's kNN, scripts and
    # rescore on candidates, fields) still read the parts; the exact scan of the flat field and
    # the terms aggregation read whole arrays, which joined those once
    assert appended == {"vectors.v", "text.title"}
    for phase, (ref, mine) in enumerate(zip(reference, got, strict=True)):
        assert mine == ref, f"phase {phase}"
    # the answers are not trivially empty
    assert all(total["value"] > 0 for total, _hits, _aggs in reference[0])


def test_take_and_slice_read_across_the_parts():
    base = np.arange(12, dtype=np.float32).reshape(6, 2)
    base.flags.writeable = False

    class Holder:
        arr = buffers.Splittable()

    h = Holder()
    h.arr = base
    old = buffers.SPLIT_MIN_ROWS
    buffers.SPLIT_MIN_ROWS = 1
    try:
        buffers.grow(h, "arr", np.full((3, 2), 7, dtype=np.float32))
        buffers.grow(h, "arr", np.full((2, 2), 9, dtype=np.float32))
    finally:
        buffers.SPLIT_MIN_ROWS = old
    whole = np.concatenate([base, np.full((3, 2), 7), np.full((2, 2), 9)]).astype(np.float32)
    assert type(h.__dict__["arr"]) is buffers.Split and h.__dict__["arr"].base is base
    pos = np.array([10, 0, 6, 5, 8, 2])
    assert np.array_equal(buffers.take(h, "arr", pos), whole[pos])
    for lo, hi in ((0, 4), (4, 9), (6, 11), (7, 8)):
        assert np.array_equal(buffers.slice_rows(h, "arr", lo, hi), whole[lo:hi])
    assert np.array_equal(buffers.since(h, "arr", 7), whole[7:])
    assert buffers.length(h, "arr") == 11
    assert np.array_equal(h.arr, whole)  # a whole read joins the parts, once
    assert type(h.__dict__["arr"]) is np.ndarray
