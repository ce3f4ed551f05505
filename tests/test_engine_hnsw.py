"""Approximate kNN through the HNSW graph (engine/hnsw.py) on fields above the graph threshold.

References are computed here in float64 from Elasticsearch's similarity -> score formulas
(docs/es-semantics.md §7: cosine (1 + cos) / 2, dot_product (1 + dot) / 2, l2_norm 1 / (1 + d²)),
never from the engine: recall@10 of the graph's answer against the exact top 10, every returned
score against the formula for that document, exact answers where Lucene answers exactly
(flat types, small fields, selective filters; AbstractKnnVectorQuery#getLeafResults).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from elasticsearch import helpers

from scholar_es.engine import hnsw
from scholar_es.engine.node import embedded_client

N, D, CLUSTERS = 20_000, 32, 64
RNG = np.random.default_rng(20241124)
CENTERS = RNG.standard_normal((CLUSTERS, D)).astype(np.float32)
X = (CENTERS[RNG.integers(0, CLUSTERS, N)] + 0.35 * RNG.standard_normal((N, D))).astype(np.float32)
UNIT = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
QUERIES = (CENTERS[RNG.integers(0, CLUSTERS, 30)] + 0.35 * RNG.standard_normal((30, D))).astype(np.float32)
COLOR = np.arange(N) % 100  # keyword "c": 200 docs per value
BAND = np.arange(N) % 10  # keyword "b": 2,000 docs per value


def _mapping(similarity: str, index_options: dict | None) -> dict:
    v: dict = {"type": "dense_vector", "dims": D, "similarity": similarity}
    if index_options is not None:
        v["index_options"] = index_options
    return {"properties": {"v": v, "c": {"type": "keyword"}, "b": {"type": "keyword"}}}


def _fill(es, name: str, mapping: dict, vecs: np.ndarray) -> None:
    es.indices.create(index=name, mappings=mapping)
    helpers.bulk(
        es,
        (
            {"_index": name, "_id": str(i), "v": vecs[i].tolist(), "c": str(COLOR[i]), "b": str(BAND[i])}
            for i in range(len(vecs))
        ),
        chunk_size=5000,
    )
    es.indices.refresh(index=name)


def reference(similarity: str, vecs: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Elasticsearch's kNN score of every document, in float64."""
    v, qq = vecs.astype(np.float64), q.astype(np.float64)
    if similarity == "cosine":
        cos = v @ qq / (np.linalg.norm(v, axis=1) * np.linalg.norm(qq))
        return np.maximum((1 + cos) / 2, 0)
    if similarity == "dot_product":
        return (1 + v @ qq) / 2
    return 1 / (1 + ((v - qq) ** 2).sum(axis=1))


def exact_top(scores: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[str]:
    idx = np.arange(len(scores)) if allowed is None else np.flatnonzero(allowed)
    order = idx[np.lexsort((idx, -scores[idx]))][:k]
    return [str(i) for i in order]


def knn(es, index: str, q: np.ndarray, k: int = 10, nc: int = 100, **extra) -> list[tuple[str, float]]:
    body = {"field": "v", "query_vector": q.tolist(), "k": k, "num_candidates": nc, **extra}
    resp = es.search(index=index, knn=body, size=k)
    return [(h["_id"], h["_score"]) for h in resp["hits"]["hits"]]


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    path = tmp_path_factory.mktemp("hnsw")
    client = embedded_client(path)
    _fill(client, "h", _mapping("cosine", {"type": "hnsw", "m": 16, "ef_construction": 100}), X)
    _fill(client, "i8", _mapping("cosine", None), X)  # no index_options: int8_hnsw, as ES 8.14+
    _fill(client, "flat", _mapping("cosine", {"type": "flat"}), X)
    _fill(client, "dot", _mapping("dot_product", {"type": "int8_hnsw"}), UNIT)
    _fill(client, "l2", _mapping("l2_norm", {"type": "hnsw"}), X)
    _fill(client, "small", _mapping("cosine", {"type": "hnsw"}), X[: hnsw.GRAPH_THRESHOLD - 1])
    client.path = path
    yield client
    client.close()


def _check_recall_and_scores(es, index: str, similarity: str, vecs: np.ndarray) -> float:
    recalls = []
    for q in QUERIES:
        expected = reference(similarity, vecs, q)
        got = knn(es, index, q)
        assert len(got) == 10
        for doc, score in got:  # every score is the exact formula's score for that document
            assert score == pytest.approx(expected[int(doc)], abs=2e-6), (index, doc)
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        recalls.append(len({d for d, _ in got} & set(exact_top(expected, 10))) / 10)
    return float(np.mean(recalls))


@pytest.mark.parametrize(
    "index,similarity,vecs",
    [("h", "cosine", X), ("i8", "cosine", X), ("dot", "dot_product", UNIT), ("l2", "l2_norm", X)],
)
def test_graph_recall_and_exact_scores(es, index, similarity, vecs):
    assert _check_recall_and_scores(es, index, similarity, vecs) >= 0.95


def test_graph_is_used_above_the_threshold(es):
    from scholar_es.engine.hnsw import graph_params
    from scholar_es.engine.mapping import Mapping

    for index in ("h", "i8", "dot", "l2"):
        knn(es, index, QUERIES[0])
    builds = hnsw.BUILDS
    knn(es, "flat", QUERIES[0])
    knn(es, "small", QUERIES[0])
    assert builds == hnsw.BUILDS  # flat and small fields never build a graph
    fs = Mapping(_mapping("cosine", {"type": "int8_flat"})).get("v")
    assert graph_params(fs) is None
    assert graph_params(Mapping(_mapping("cosine", {"type": "bbq_hnsw", "m": 16})).get("v")) is None
    assert graph_params(Mapping(_mapping("cosine", None)).get("v"))["dtype"] == "i8"


@pytest.mark.parametrize("index,vecs", [("flat", X), ("small", X[: hnsw.GRAPH_THRESHOLD - 1])])
def test_flat_and_small_fields_stay_exact(es, index, vecs):
    for q in QUERIES[:10]:
        expected = reference("cosine", vecs, q)
        got = knn(es, index, q, k=10, nc=10)
        assert [d for d, _ in got] == exact_top(expected, 10)


def test_selective_filter_is_exact(es):
    """200 matching docs <= num_candidates 200 (Lucene's `cost <= k` short-circuit), and 200
    matching docs with num_candidates 100 (the graph would visit more nodes than match)."""
    for q in QUERIES[:10]:
        expected = reference("cosine", X, q)
        allowed = COLOR == 7
        for nc in (200, 100):
            got = knn(es, "h", q, nc=nc, filter={"term": {"c": "7"}})
            assert [d for d, _ in got] == exact_top(expected, 10, allowed)
            for doc, score in got:
                assert score == pytest.approx(expected[int(doc)], abs=2e-6)


def test_unselective_filter_goes_through_the_graph(es):
    """2,000 of 20,000 docs match: the graph's oversampled candidates, post-filtered, keep recall."""
    recalls = []
    for q in QUERIES:
        expected = reference("cosine", X, q)
        got = knn(es, "h", q, filter={"term": {"b": "3"}})
        assert all(BAND[int(d)] == 3 for d, _ in got) and len(got) == 10
        recalls.append(len({d for d, _ in got} & set(exact_top(expected, 10, BAND == 3))) / 10)
    assert np.mean(recalls) >= 0.9


def test_similarity_threshold_and_boost_on_graph_results(es):
    q = QUERIES[3]
    expected = reference("cosine", X, q)
    cut = float(np.sort(expected)[-5])  # the 5th best score
    raw_threshold = 2 * cut - 1  # cosine: threshold in cosine units
    got = knn(es, "h", q, similarity=raw_threshold - 1e-6, boost=2.0)
    assert [d for d, _ in got] == exact_top(expected, 5)
    for doc, score in got:
        assert score == pytest.approx(2 * expected[int(doc)], abs=4e-6)


def test_appended_and_deleted_docs(es):
    """Rows added after the graph was built are found (usearch add); deleted ones never return."""
    q = QUERIES[5]
    knn(es, "h", q)  # the graph exists
    builds = hnsw.BUILDS
    es.index(index="h", id="new", document={"v": q.tolist(), "c": "new", "b": "new"}, refresh=True)
    got = knn(es, "h", q)
    assert got[0] == ("new", pytest.approx(1.0, abs=1e-6))
    top = got[1][0]
    es.delete(index="h", id=top, refresh=True)
    got2 = knn(es, "h", q)
    assert top not in {d for d, _ in got2} and got2[0][0] == "new"
    assert builds == hnsw.BUILDS  # extended in place, not rebuilt
    es.delete(index="h", id="new", refresh=True)
    es.index(index="h", id=top, document={"v": X[int(top)].tolist(), "c": "x", "b": "x"}, refresh=True)


REPO = Path(__file__).resolve().parents[1]


def _in_subprocess(path: Path, n_queries: int) -> tuple[list, int]:
    """(kNN answers for the first queries, graphs built) from a fresh process that opens ``path``
    and closes it again (the engine of one path is shared within a process)."""
    script = textwrap.dedent(
        f"""
        import json
        import numpy as np
        from scholar_es.engine import hnsw
        from scholar_es.engine.node import embedded_client
        queries = np.array(json.loads({json.dumps(QUERIES[:n_queries].tolist())!r}), dtype=np.float32)
        es = embedded_client({str(path)!r})
        out = []
        for q in queries:
            body = {{"field": "v", "query_vector": q.tolist(), "k": 10, "num_candidates": 100}}
            hits = es.search(index="p", knn=body, size=10)["hits"]["hits"]
            out.append([[h["_id"], h["_score"]] for h in hits])
        es.close()
        print(json.dumps([out, hnsw.BUILDS]))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300, cwd=str(REPO)
    )
    assert proc.returncode == 0, proc.stderr
    answers, builds = json.loads(proc.stdout.strip().splitlines()[-1])
    return [[tuple(h) for h in a] for a in answers], builds


def test_graph_survives_reopen_and_a_corrupted_graph_is_rebuilt(tmp_path):
    es = embedded_client(tmp_path)
    _fill(es, "p", _mapping("cosine", {"type": "int8_hnsw"}), X)
    es.close()  # saved without a graph: no kNN ran yet

    first, builds = _in_subprocess(tmp_path, 10)
    assert builds == 1  # built by the first kNN, saved on close although no document changed
    again, builds = _in_subprocess(tmp_path, 10)
    assert (again, builds) == (first, 0)  # restored from the commit point, not rebuilt

    # flip bytes inside the stored graph array: its CRC32 fails, the index is rebuilt from
    # SQLite and the graph rebuilt (deterministically: the same approximate answers)
    (point,) = tmp_path.glob("segments/*/segments_*.json")
    body = json.loads(point.read_bytes().partition(b"\n")[2])
    (refs,) = [r for name, _, r in body["meta"]["segment"]["vectors"] if name == "v"]
    assert len(refs) == 3
    entry = body["files"][0]["arrays"][refs[2]]
    seg_file = point.parent / body["files"][0]["name"]
    data = bytearray(seg_file.read_bytes())
    mid = entry["offset"] + entry["size"] // 2
    data[mid : mid + 8] = bytes(255 - b for b in data[mid : mid + 8])
    seg_file.write_bytes(bytes(data))
    rebuilt, builds = _in_subprocess(tmp_path, 10)
    assert (rebuilt, builds) == (first, 1)


@pytest.mark.parametrize(
    "opts,reason",
    [
        ({"m": 16}, "[index_options] requires field [type] to be configured"),
        ({"type": "ivf"}, "Unknown vector index options type [ivf] for field [v]"),
    ],
)
def test_index_options_errors(es, opts, reason):
    from elasticsearch import BadRequestError

    with pytest.raises(BadRequestError) as e:
        es.indices.create(index="bad", mappings=_mapping("cosine", opts))
    assert e.value.body["error"]["type"] == "mapper_parsing_exception"
    assert reason in e.value.body["error"]["reason"]


def test_threads_search_while_a_writer_appends(tmp_path):
    """Searches on one graph from several threads while documents are appended (the graph grows
    under its lock): no error, every hit's score is the formula's for that document."""
    import threading

    es = embedded_client(tmp_path)
    n0 = 11_000
    _fill(es, "t", _mapping("cosine", {"type": "hnsw"}), X[:n0])
    errors: list[BaseException] = []
    stop = threading.Event()

    def searcher(seed: int) -> None:
        i = seed
        try:
            while not stop.is_set():
                q = QUERIES[i % len(QUERIES)]
                expected = reference("cosine", X, q)
                for doc, score in knn(es, "t", q):
                    assert score == pytest.approx(expected[int(doc)], abs=2e-6)
                i += 1
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=searcher, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for start in range(n0, n0 + 1000, 200):
        helpers.bulk(
            es, ({"_index": "t", "_id": str(i), "v": X[i].tolist()} for i in range(start, start + 200))
        )
        es.indices.refresh(index="t")
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    q = QUERIES[0]
    got = knn(es, "t", q, nc=200)
    expected = reference("cosine", X[: n0 + 1000], q)
    assert len({d for d, _ in got} & set(exact_top(expected, 10))) >= 9
    es.close()
