"""Approximate kNN through the HNSW graph (engine/index/hnsw.py) on fields above the graph threshold.

References are computed here in float64 from Elasticsearch's similarity -> score formulas
(docs/es-semantics.md §7: cosine (1 + cos) / 2, dot_product (1 + dot) / 2, l2_norm 1 / (1 + d²)),
never from the engine: recall@10 of the graph's answer against the exact top 10, every returned
score against the formula for that document, exact answers where Lucene answers exactly
(flat types, small fields, selective filters; AbstractKnnVectorQuery#getLeafResults).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from elasticsearch import helpers

from scholar_es.engine.index import hnsw
from scholar_es.engine.rest.transport import embedded_client

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
@pytest.mark.slow  # many seconds: left out of make test-fast
def test_graph_recall_and_exact_scores(es, index, similarity, vecs):
    assert _check_recall_and_scores(es, index, similarity, vecs) >= 0.95


def test_graph_is_used_above_the_threshold(es):
    from scholar_es.engine.index.hnsw import graph_params
    from scholar_es.engine.index.mapping import Mapping

    for index in ("h", "i8", "dot", "l2"):
        assert _graph(es, index) is not None  # built when the refresh wrote the base
    builds = hnsw.counts["build"]
    for index in ("h", "i8", "dot", "l2", "flat", "small"):
        knn(es, index, QUERIES[0])
    assert builds == hnsw.counts["build"]  # a search never builds
    assert _graph(es, "flat") is None and _graph(es, "small") is None
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


def test_a_filter_letting_through_documents_away_from_the_query_widens_the_graph_search(es, monkeypatch):
    """Every document but those of the query's own cluster is let through: the graph's first
    oversampled candidates (its ~100 nearest) are nearly all rejected. Lucene's filtered search
    visits on until it has k accepted nodes; the graph is searched wider instead of scoring the
    ~19,700 documents let through exactly, and keeps recall against the exact filtered top 10."""
    from scholar_es.engine.query import knn as knn_module

    labels = np.argmin(((X[:, None, :] - CENTERS[None, :, :]) ** 2).sum(axis=2), axis=1)
    scored: list[int] = []
    original = knn_module.subset_raw

    def counting(col, kind, qv, pos):
        scored.append(len(pos))
        return original(col, kind, qv, pos)

    monkeypatch.setattr(knn_module, "subset_raw", counting)
    recalls = []
    for q in QUERIES[:10]:
        own = labels == np.argmin(((CENTERS - q) ** 2).sum(axis=1))
        expected = reference("cosine", X, q)
        scored.clear()
        got = knn(
            es,
            "h",
            q,
            filter={"bool": {"must_not": {"ids": {"values": [str(i) for i in np.flatnonzero(own)]}}}},
        )
        assert len(got) == 10 and not any(own[int(d)] for d, _ in got)
        assert scored and max(scored) < 2_000  # the graph's candidates, not every document let through
        for doc, score in got:
            assert score == pytest.approx(expected[int(doc)], abs=2e-6)
        recalls.append(len({d for d, _ in got} & set(exact_top(expected, 10, ~own))) / 10)
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
    builds = hnsw.counts["build"]
    es.index(index="h", id="new", document={"v": q.tolist(), "c": "new", "b": "new"}, refresh=True)
    got = knn(es, "h", q)
    assert got[0] == ("new", pytest.approx(1.0, abs=1e-6))
    # a row newer than the graph is filtered like the graph's own candidates
    filtered = knn(es, "h", q, filter={"term": {"b": "3"}})
    assert len(filtered) == 10 and all(d != "new" and BAND[int(d)] == 3 for d, _ in filtered)
    assert knn(es, "h", q, k=1, nc=10, filter={"term": {"c": "new"}}) == [got[0]]
    top = got[1][0]
    es.delete(index="h", id=top, refresh=True)
    got2 = knn(es, "h", q)
    assert top not in {d for d, _ in got2} and got2[0][0] == "new"
    assert builds == hnsw.counts["build"]  # extended in place, not rebuilt
    es.delete(index="h", id="new", refresh=True)
    es.index(index="h", id=top, document={"v": X[int(top)].tolist(), "c": "x", "b": "x"}, refresh=True)


REPO = Path(__file__).resolve().parents[3]
EXTRA = (CENTERS[RNG.integers(0, CLUSTERS, 3000)] + 0.35 * RNG.standard_normal((3000, D))).astype(np.float32)


def _graph(es, index: str):
    """The HNSW graph of field ``v`` in the index's current snapshot (None: exact kNN)."""
    return es.transport.node_pool.get()._engine.handle(index).segment().vectors["v"].graph


def _in_subprocess(path: Path, n_queries: int, body: str = "", env: dict | None = None) -> dict:
    """A fresh process opens ``path``, runs ``body`` (it may write), answers the first queries'
    kNN, reports whether the graph it searched was restored from disk, closes the engine (a save)
    and reports how many graphs it built and extended; ``rc`` is its exit status."""
    script = (
        textwrap.dedent(
            f"""
        import json
        import numpy as np
        from scholar_es.engine.index import hnsw
        from scholar_es.engine.rest.transport import embedded_client
        queries = np.array(json.loads({json.dumps(QUERIES[:n_queries].tolist())!r}), dtype=np.float32)
        es = embedded_client({str(path)!r})
        out = {{}}
        """
        )
        + textwrap.dedent(body)
        + textwrap.dedent(
            """
        answers = []
        for q in queries:
            body = {"field": "v", "query_vector": q.tolist(), "k": 10, "num_candidates": 100}
            hits = es.search(index="p", knn=body, size=10)["hits"]["hits"]
            answers.append([[h["_id"], h["_score"]] for h in hits])
        graph = es.transport.node_pool.get()._engine.handle("p").segment().vectors["v"].graph
        out.update(answers=answers, restored=graph is not None and graph.restored)
        out["at_search"] = [hnsw.counts["build"], hnsw.counts["extend"]]
        es.close()
        out["after_close"] = [hnsw.counts["build"], hnsw.counts["extend"]]
        print(json.dumps(out))
        """
        )
    )
    full_env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-"],
        input=script,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=300,
        cwd=str(REPO),
    )
    if proc.returncode != 0:
        return {"rc": proc.returncode, "stderr": proc.stderr}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["answers"] = [[tuple(h) for h in a] for a in out["answers"]]
    out["rc"] = 0
    return out


def _commit_body(path: Path) -> dict:
    (point,) = path.glob("segments/*/segments_*.json")
    return json.loads(point.read_bytes().partition(b"\n")[2])


def _check_answers(answers: list, vecs: np.ndarray, live: np.ndarray, min_recall: float) -> None:
    """Every score is the formula's for that document, only live documents come back, and
    recall@10 against the exact top 10 of the live documents is at least ``min_recall``."""
    recalls = []
    for q, got in zip(QUERIES, answers, strict=False):
        expected = reference("cosine", vecs, q)
        assert len(got) == 10
        for doc, score in got:
            assert live[int(doc)], doc
            assert score == pytest.approx(expected[int(doc)], abs=2e-6)
        recalls.append(len({d for d, _ in got} & set(exact_top(expected, 10, live))) / 10)
    assert np.mean(recalls) >= min_recall


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_graph_is_built_at_save_and_a_fresh_process_loads_it(tmp_path):
    """Lucene builds a segment's graph when it writes the segment: the refresh that writes the
    base builds it (once), and a new process restores it instead of building at its first kNN."""
    es = embedded_client(tmp_path)
    before = hnsw.counts["build"]
    _fill(es, "p", _mapping("cosine", {"type": "int8_hnsw"}), X)
    assert hnsw.counts["build"] == before + 1 and _graph(es, "p") is not None
    knn(es, "p", QUERIES[0])
    es.close()
    assert hnsw.counts["build"] == before + 1  # neither the search nor the closing save built another
    (refs,) = [r for name, _, r in _commit_body(tmp_path)["meta"]["segment"]["vectors"] if name == "v"]
    assert len(refs) == 3  # matrix, presence, graph

    first = _in_subprocess(tmp_path, 10)
    assert first["rc"] == 0, first
    assert first["restored"] and first["at_search"] == [0, 0] and first["after_close"] == [0, 0]
    _check_answers(first["answers"], X, np.ones(N, dtype=bool), 0.95)
    again = _in_subprocess(tmp_path, 10)
    assert again["answers"] == first["answers"]  # the same saved graph: the same approximate answers


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_deltas_then_a_cold_open(tmp_path):
    """Documents added and deleted after the base are saved as delta files without a graph; a new
    process searches the base's graph plus the delta rows exactly, and builds nothing."""
    es = embedded_client(tmp_path)
    _fill(es, "p", _mapping("cosine", None), X)
    vecs = np.concatenate([X, EXTRA[:600]])
    vecs[N] = QUERIES[0]  # a new document equal to the first query
    live = np.ones(len(vecs), dtype=bool)
    builds = hnsw.counts["build"]
    for r in range(3):
        helpers.bulk(
            es,
            (
                {"_index": "p", "_id": str(i), "v": vecs[i].tolist()}
                for i in range(N + 200 * r, N + 200 * (r + 1))
            ),
        )
        es.indices.refresh(index="p")
    gone = [int(d) for d in exact_top(reference("cosine", X, QUERIES[1]), 50)]
    for d in gone:
        es.delete(index="p", id=str(d))
        live[d] = False
    es.indices.refresh(index="p")
    assert hnsw.counts["build"] == builds and hnsw.counts["extend"] == 0
    es.close()
    meta = _commit_body(tmp_path)["meta"]
    assert len(meta["deltas"]) == 4
    assert all(len(r) == 2 for d in meta["deltas"] for _, _, r in d["segment"]["vectors"])  # no graph

    out = _in_subprocess(tmp_path, 10)
    assert out["rc"] == 0, out
    assert out["restored"] and out["at_search"] == [0, 0] and out["after_close"] == [0, 0]
    assert out["answers"][0][0] == (str(N), pytest.approx(1.0, abs=1e-6))
    _check_answers(out["answers"], vecs, live, 0.95)


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_a_merge_extends_the_graph_and_a_crash_before_it_is_written_loses_nothing(tmp_path):
    """More than MERGE_RATIO of new documents makes the next save write a base: the graph is
    extended by the new rows, not rebuilt. A process killed after that build, before the commit
    point, leaves the previous commit point; SQLite has every document, the next process answers
    with them (exact beside the old graph) and its closing save extends the graph."""
    from scholar_es.engine.index import indices as core

    n0 = 12_000
    es = embedded_client(tmp_path)
    _fill(es, "p", _mapping("cosine", {"type": "hnsw"}), X[:n0])
    es.close()
    added = int(core.MERGE_RATIO * n0) + 200
    vecs = np.concatenate([X[:n0], EXTRA[:added]])
    vecs[n0] = QUERIES[0]
    write = f"""
        from elasticsearch import helpers
        vecs = np.array(json.loads({json.dumps(vecs[n0:].tolist())!r}), dtype=np.float32)
        helpers.bulk(es, ({{"_index": "p", "_id": str({n0} + i), "v": v.tolist()}} for i, v in enumerate(vecs)))
        es.indices.refresh(index="p")
        """
    crashed = _in_subprocess(tmp_path, 10, write, env={"SCHOLAR_ES_CRASH_AT": "graph"})
    assert crashed["rc"] == -signal.SIGKILL, crashed
    assert _commit_body(tmp_path)["meta"]["docs"] == n0  # the commit point before the crash

    after = _in_subprocess(tmp_path, 10)
    assert after["rc"] == 0, after
    assert after["restored"] and after["at_search"] == [0, 0]
    assert after["after_close"] == [0, 1]  # the closing save wrote a base: extended, not rebuilt
    assert after["answers"][0][0] == (str(n0), pytest.approx(1.0, abs=1e-6))
    live = np.ones(len(vecs), dtype=bool)
    _check_answers(after["answers"], vecs, live, 0.95)
    meta = _commit_body(tmp_path)["meta"]
    assert meta["docs"] == len(vecs) and meta["deltas"] == []

    reopened = _in_subprocess(tmp_path, 10)
    assert reopened["restored"] and reopened["after_close"] == [0, 0]
    assert reopened["answers"][0][0] == (str(n0), pytest.approx(1.0, abs=1e-6))
    _check_answers(reopened["answers"], vecs, live, 0.95)


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_a_corrupted_graph_is_never_searched_and_the_next_base_rebuilds_it(tmp_path):
    es = embedded_client(tmp_path)
    _fill(es, "p", _mapping("cosine", {"type": "int8_hnsw"}), X)
    es.close()
    # flip bytes inside the stored graph array: its CRC32 fails, the index is rebuilt from
    # SQLite, kNN is exact until the closing save writes a base with a new graph
    body = _commit_body(tmp_path)
    (refs,) = [r for name, _, r in body["meta"]["segment"]["vectors"] if name == "v"]
    entry = body["files"][0]["arrays"][refs[2]]
    (point,) = tmp_path.glob("segments/*/segments_*.json")
    seg_file = point.parent / body["files"][0]["name"]
    data = bytearray(seg_file.read_bytes())
    mid = entry["offset"] + entry["size"] // 2
    data[mid : mid + 8] = bytes(255 - b for b in data[mid : mid + 8])
    seg_file.write_bytes(bytes(data))
    out = _in_subprocess(tmp_path, 10)
    assert out["rc"] == 0, out
    assert not out["restored"] and out["at_search"] == [0, 0] and out["after_close"] == [1, 0]
    for q, got in zip(QUERIES, out["answers"], strict=False):
        assert [d for d, _ in got] == exact_top(reference("cosine", X, q), 10)
    again = _in_subprocess(tmp_path, 10)
    assert again["restored"] and again["after_close"] == [0, 0]
    _check_answers(again["answers"], X, np.ones(N, dtype=bool), 0.95)


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


def test_build_threads_from_the_environment(monkeypatch):
    monkeypatch.delenv(hnsw.THREADS_ENV, raising=False)
    assert hnsw.build_threads() >= 1
    monkeypatch.setenv(hnsw.THREADS_ENV, "3")
    assert hnsw.build_threads() == 3
    for bad in ("two", "0"):
        monkeypatch.setenv(hnsw.THREADS_ENV, bad)
        with pytest.raises(ValueError, match=hnsw.THREADS_ENV):
            hnsw.build_threads()
