"""Incremental saves and cheap appends (issue 16, write path): a refresh after appends writes a
small delta file beside the unchanged base, a merge policy writes a new base now and then, and
an append grows the in-memory snapshot without touching the one searches may still hold.

Every answer is checked against a reference that cannot be wrong in the same way: a fresh
directory that indexed the same live documents in the same order, or the same directory with
its derived files removed (rebuilt from SQLite, the source of truth).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from scholar_es.engine.index import indices as core
from scholar_es.engine.index.indices import Engine
from scholar_es.engine.index.segment import ParsedDoc, postings
from scholar_es.engine.rest.handler import handle as rest_handle
from scholar_es.engine.rest.transport import embedded_client

ROOT = Path(__file__).resolve().parents[3]
ENV = {"PYTHONPATH": str(ROOT)}
MAPPING = {
    "properties": {
        "title": {"type": "text", "analyzer": "english"},
        "tag": {"type": "keyword"},
        "n": {"type": "integer"},
        "v": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
    }
}
WORDS = ["graph", "neural", "molecule", "protein", "citation", "network", "learning", "survey", "model"]
QUERIES = [
    {"query": {"match": {"title": "graph molecules"}}, "size": 50},
    {"query": {"match": {"title": "protein network survey learning"}}, "size": 7},
    {"query": {"term": {"tag": "t3"}}, "size": 50},
    {"query": {"bool": {"filter": [{"range": {"n": {"gte": 20, "lt": 70}}}]}}, "size": 50},
    {"query": {"match_all": {}}, "size": 300, "sort": [{"n": "desc"}]},
    {"knn": {"field": "v", "query_vector": [0.3, -0.2, 0.9], "k": 10, "num_candidates": 50}},
    {"size": 0, "aggs": {"tags": {"terms": {"field": "tag"}}, "mean": {"avg": {"field": "n"}}}},
    {"query": {"match": {"extra": "graph neural survey"}}, "size": 50},
    {"query": {"bool": {"filter": [{"range": {"late.x": {"gte": 3}}}]}}, "size": 50},
    {"size": 0, "aggs": {"late": {"terms": {"field": "late.k.keyword"}}}},
]


def _doc(i: int, r: int) -> dict:
    rng = random.Random(i * 7919 + r)
    doc = {
        "title": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))),
        "tag": f"t{(i + r) % 6}",
        "n": rng.randrange(100),
        "v": [rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(0.1, 1)],
    }
    if r >= 5 and i % 3 == 0:  # dynamic fields first seen in a later delta
        doc["extra"] = rng.choice(WORDS)
        doc["late"] = {"k": f"k{i % 4}", "x": i % 9}
    return doc


def _answers(engine: Engine, index: str = "p") -> list:
    out = []
    for body in QUERIES:
        status, resp = rest_handle(engine, "POST", f"/{index}/_search", {}, body)
        assert status == 200, resp
        hits = [(h["_id"], h["_score"], h.get("sort")) for h in resp["hits"]["hits"]]
        out.append((resp["hits"]["total"], hits, resp.get("aggregations")))
    return out


def _commit(path: Path) -> dict:
    (folder,) = (path / "segments").iterdir()
    (point,) = folder.glob("segments_*.json")
    return json.loads(point.read_bytes().partition(b"\n")[2])


def _fresh(docs: dict[str, dict], tmp_path: Path) -> list:
    """Answers of a new directory that indexed ``docs`` (in their order) in one bulk."""
    ref = tmp_path / f"fresh-{random.random()}"
    engine = Engine(ref)
    try:
        rest_handle(engine, "PUT", "/p", {}, {"mappings": MAPPING})
        lines = [x for i, d in docs.items() for x in ({"index": {"_index": "p", "_id": i}}, d)]
        status, resp = rest_handle(engine, "POST", "/_bulk", {}, lines)
        assert status == 200 and not resp["errors"], resp
        return _answers(engine)
    finally:
        engine.store.close()
        shutil.rmtree(ref, ignore_errors=True)


def _write(engine: Engine, ops: list[tuple[str, str, dict | None]]) -> None:
    lines: list[dict] = []
    for op, doc_id, doc in ops:
        lines.append({op: {"_index": "p", "_id": doc_id}})
        if doc is not None:
            lines.append(doc)
    status, resp = rest_handle(engine, "POST", "/_bulk", {}, lines)
    assert status == 200 and not resp["errors"], resp


# --- saves write deltas, not the whole index -------------------------------------------------


def test_refreshes_write_small_delta_files_then_a_merge_writes_one_base(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(index="p", mappings=MAPPING)
    docs = {str(i): _doc(i, 0) for i in range(300)}
    for i, d in docs.items():
        es.index(index="p", id=i, document=d)
    es.indices.refresh(index="p")
    first = _commit(path)
    ((base,),) = [first["files"]]
    for r in range(1, core.MAX_DELTAS + 1):  # each refresh: 3 new docs, 1 update, 1 delete
        for i in range(300 + 3 * r, 303 + 3 * r):
            docs[str(i)] = _doc(i, r)
            es.index(index="p", id=str(i), document=docs[str(i)])
        docs.pop(str(r))
        docs[str(r)] = _doc(r, r)  # an update moves the document to the end (a new seq)
        es.index(index="p", id=str(r), document=docs[str(r)])
        docs.pop(str(100 + r))
        es.delete(index="p", id=str(100 + r))
        es.indices.refresh(index="p")
        files = _commit(path)["files"]
        assert len(files) == 1 + r and files[0] == base  # the base file is listed again, unchanged
        assert files[-1]["name"] == f"_{1 + r}.seg"
        assert files[-1]["size"] * 4 < base["size"]  # only the new documents and deletions
        delta = _commit(path)["meta"]["deltas"][-1]
        assert (delta["segment"]["n"], delta["deletes"]) == (4, 2)  # 3 new + 1 update; update + delete
    names = sorted(p.name for p in (path / "segments").iterdir() for p in p.iterdir())
    assert len([n for n in names if n.endswith(".seg")]) == 1 + core.MAX_DELTAS
    es.index(index="p", id="last", document=_doc(999, 0))
    docs["last"] = _doc(999, 0)
    es.indices.refresh(index="p")  # one delta too many: the merge policy writes a new base
    merged = _commit(path)
    assert [f["name"] for f in merged["files"]] == [f"_{core.MAX_DELTAS + 2}.seg"]
    assert merged["meta"]["deltas"] == [] and merged["meta"]["docs"] == len(docs)
    names = sorted(p.name for p in (path / "segments").iterdir() for p in p.iterdir())
    assert names == [f"_{core.MAX_DELTAS + 2}.seg", f"segments_{core.MAX_DELTAS + 2}.json", "write.lock"]
    es.close()
    reopened = Engine(path)
    try:
        assert _answers(reopened) == _fresh(docs, tmp_path)
    finally:
        reopened.store.close()


def test_the_full_save_switch_writes_a_base_every_time(tmp_path, monkeypatch):
    monkeypatch.setenv(core.FULL_SAVE_ENV, "1")
    path = tmp_path / "engine"
    es = embedded_client(path)
    for r in range(3):
        es.index(index="p", id=str(r), document={"title": "x"})
        es.indices.refresh(index="p")
        assert [f["name"] for f in _commit(path)["files"]] == [f"_{r + 1}.seg"]
    es.close()


# --- old snapshots never see an append -------------------------------------------------------


def _parsed(handle, seq: int, doc_id: str, doc: dict) -> ParsedDoc:
    from scholar_es.engine.index.segment import parse_document

    return parse_document(handle.mapping, handle.analysis, seq, doc_id, doc)


def test_an_old_snapshot_is_unchanged_by_appends_and_branches_copy(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(index="p", mappings=MAPPING)
    for i in range(40):
        es.index(index="p", id=str(i), document=_doc(i, 0))
    handle = es.transport.node_pool.get()._engine.handle("p")
    old = handle.segment()
    before = {
        "seqs": old.seqs.copy(),
        "matrix": old.vectors["v"].matrix.copy(),
        "graph": [a.copy() for a in old.text["title"].postings.postings("graph")],
        "indices": old.text["title"].postings.indices.copy(),
        "first": old.keyword["tag"].first.copy(),
    }
    top = int(old.seqs[-1])
    a = old.with_changes([_parsed(handle, top + 1 + i, f"a{i}", _doc(100 + i, 1)) for i in range(5)], [])
    b = old.with_changes([_parsed(handle, top + 1 + i, f"b{i}", _doc(200 + i, 2)) for i in range(3)], [])
    a2 = a.with_changes([_parsed(handle, top + 10, "a-more", {"title": "graph graph"})], [])
    assert np.shares_memory(a2.seqs, a.seqs)  # grown in place: the rows past a's view were free
    assert not np.shares_memory(b.seqs, a.seqs)  # b branched from old after a took the space: a copy
    for name, arr in [
        ("seqs", old.seqs),
        ("matrix", old.vectors["v"].matrix),
        ("indices", old.text["title"].postings.indices),
        ("first", old.keyword["tag"].first),
    ]:
        assert np.array_equal(arr, before[name]), name
        assert not arr.flags.writeable
    graph = old.text["title"].postings.postings("graph")
    assert all(np.array_equal(x, y) for x, y in zip(graph, before["graph"], strict=True))
    assert a.ids[-5:] == [f"a{i}" for i in range(5)] and b.ids[-3:] == ["b0", "b1", "b2"]
    assert a2.text["title"].postings.postings("graph")[0][-1] == len(a2.seqs) - 1
    for seg, extra in [(a, [_doc(100 + i, 1) for i in range(5)]), (b, [_doc(200 + i, 2) for i in range(3)])]:
        want = np.array([d["v"] for d in extra], dtype=np.float32)
        assert np.array_equal(seg.vectors["v"].matrix[40:], want)
        assert np.array_equal(seg.vectors["v"].matrix[:40], before["matrix"])
    es.close()


# --- crashes during a delta save and during a merge ----------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from scholar_es.engine.rest.transport import embedded_client
    es = embedded_client(sys.argv[1])
    if not es.indices.exists(index="p"):
        es.indices.create(index="p", mappings={mapping!r})
    rounds = int(sys.argv[2])
    for r in range(rounds):
        for i in range(30):
            es.index(index="p", id=str(r * 7 + i), document={{"title": "graph model " * (1 + (i + r) % 4), "tag": f"t{{i % 6}}", "n": i + r}})
        es.delete(index="p", id=str(r * 7 + 3))
        print("written", r, flush=True)
        es.indices.refresh(index="p")
        print("saved", r, flush=True)
""").format(mapping=MAPPING)


def _run(path: Path, rounds: int, crash_at: str | None = None) -> subprocess.CompletedProcess:
    import os

    env = {**os.environ, **ENV}
    env.pop("SCHOLAR_ES_CRASH_AT", None)
    if crash_at:
        env["SCHOLAR_ES_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-c", WRITER, str(path), str(rounds)],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def _rebuilt(path: Path, tmp_path: Path) -> list:
    ref = tmp_path / f"rebuilt-{random.random()}"
    shutil.copytree(path, ref, ignore=shutil.ignore_patterns("segments"))
    engine = Engine(ref)
    try:
        return _answers(engine)
    finally:
        engine.store.close()


def _open(path: Path) -> list:
    engine = Engine(path)
    try:
        return _answers(engine)
    finally:
        engine.store.close()


MERGE_ROUND = core.MAX_DELTAS + 2  # save 1 writes the base, 2..MAX_DELTAS+1 deltas, then a merge


@pytest.mark.slow  # many seconds: left out of make test-fast
@pytest.mark.parametrize("point", ["file_half", "files", "commit_tmp", "commit", "cleanup"])
@pytest.mark.parametrize("save", [3, MERGE_ROUND], ids=["delta", "merge"])
def test_kill_at_each_step_of_a_delta_or_merge_save(tmp_path, point, save):
    path = tmp_path / "engine"
    proc = _run(path, save, crash_at=f"{point}:{save}")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert f"written {save - 1}" in proc.stdout and f"saved {save - 1}" not in proc.stdout
    assert f"saved {save - 2}" in proc.stdout
    answers = _open(path)
    assert answers == _rebuilt(path, tmp_path)
    clean = tmp_path / "clean"
    assert _run(clean, save).returncode == 0
    assert answers == _open(clean)
    proc = _run(path, 2)  # the same directory takes more writes and saves again
    assert proc.returncode == 0, proc.stderr
    assert _open(path) == _rebuilt(path, tmp_path)


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_the_crash_points_are_reached_by_deltas_and_merges(tmp_path):
    path = tmp_path / "engine"
    assert _run(path, 3).returncode == 0
    assert [f["name"] for f in _commit(path)["files"]] == ["_1.seg", "_2.seg", "_3.seg"]
    assert _run(path, MERGE_ROUND - 3).returncode == 0
    assert [f["name"] for f in _commit(path)["files"]] == [f"_{MERGE_ROUND}.seg"]


# --- a damaged delta file ----------------------------------------------------------------


@pytest.mark.parametrize("damage", ["flip", "truncate", "unlink"])
def test_a_damaged_delta_is_detected_and_the_index_rebuilt(tmp_path, damage, caplog):
    path = tmp_path / "engine"
    assert _run(path, 4).returncode == 0
    answers = _open(path)
    files = _commit(path)["files"]
    assert len(files) == 4
    (folder,) = (path / "segments").iterdir()
    victim = folder / files[2]["name"]  # a delta in the middle
    data = bytearray(victim.read_bytes())
    if damage == "flip":
        a = max(files[2]["arrays"], key=lambda a: a["size"])
        for i in range(a["offset"] + a["size"] - 40, a["offset"] + a["size"] - 8):
            data[i] ^= 0x5A
        victim.write_bytes(bytes(data))
    elif damage == "truncate":
        victim.write_bytes(bytes(data[: len(data) // 2]))
    else:
        victim.unlink()
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        assert _open(path) == answers == _rebuilt(path, tmp_path)
    assert "rebuil" in caplog.text
    assert _run(path, 2).returncode == 0  # the next save writes a good base again
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        assert _open(path) == _rebuilt(path, tmp_path)
    assert caplog.text == ""


# --- random rounds against a fresh index ---------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_add_delete_refresh_reopen_rounds_answer_as_a_fresh_index(tmp_path, seed, monkeypatch, caplog):
    monkeypatch.setattr(core, "MAX_DELTAS", 4)  # reach a merge within the rounds
    if seed == 3:  # fold the term -> docs tail into its base at almost every append
        monkeypatch.setattr(postings, "TAIL_MIN_POSTINGS", 0)
        monkeypatch.setattr(postings, "TAIL_FRACTION", 2)
    rng = random.Random(seed)
    path = tmp_path / "engine"
    engine = Engine(path)
    rest_handle(engine, "PUT", "/p", {}, {"mappings": MAPPING})
    live: dict[str, dict] = {}
    next_id = 0
    try:
        for rnd in range(14):
            ops: list[tuple[str, str, dict | None]] = []
            for _ in range(rng.randint(1, 40)):
                roll = rng.random()
                if roll < 0.55 or not live:
                    doc_id, next_id = str(next_id), next_id + 1
                elif roll < 0.8:
                    doc_id = rng.choice(list(live))  # an update: delete + add at the end
                else:
                    doc_id = rng.choice(list(live))
                    ops.append(("delete", doc_id, None))
                    live.pop(doc_id)
                    continue
                doc = _doc(int(doc_id), rnd)
                ops.append(("index", doc_id, doc))
                live.pop(doc_id, None)
                live[doc_id] = doc  # an update moves the document to the end (a new seq)
            _write(engine, ops)
            action = rng.choice(["search", "refresh", "refresh", "reopen"])
            if action in ("refresh", "reopen"):
                assert rest_handle(engine, "POST", "/p/_refresh", {}, None)[0] == 200
            if action == "reopen":
                engine.store.close()
                with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
                    engine = Engine(path)
                    got = _answers(engine)
                assert caplog.text == ""  # opened from its commit point, not rebuilt
            else:
                got = _answers(engine)
            assert got == _fresh(live, tmp_path), f"round {rnd} ({action})"
    finally:
        engine.store.close()
    assert _open(path) == _rebuilt(path, tmp_path)


def test_a_delta_of_columns_without_values_reopens(tmp_path):
    """A keyword, numeric and vector field no document has a value in yet: their delta columns
    are empty (empty vocabulary, no vector dims) and still load."""
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(
        index="p",
        mappings={
            "properties": {
                "title": {"type": "text"},
                "tag": {"type": "keyword"},
                "n": {"type": "integer"},
                "v": {"type": "dense_vector"},
            }
        },
    )
    docs = {}
    for r in range(3):
        for i in range(5):
            docs[f"{r}-{i}"] = {"title": f"graph {'model ' * i}"}
            es.index(index="p", id=f"{r}-{i}", document=docs[f"{r}-{i}"])
        es.indices.refresh(index="p")
    assert len(_commit(path)["files"]) == 3
    es.index(index="p", id="tagged", document={"title": "graph", "tag": "a", "n": 3, "v": [1.0, 0.0]})
    es.indices.refresh(index="p")
    es.close()
    engine = Engine(path)
    try:
        status, resp = rest_handle(engine, "POST", "/p/_search", {}, {"query": {"match": {"title": "graph"}}})
        assert status == 200 and resp["hits"]["total"]["value"] == 16
        status, resp = rest_handle(engine, "POST", "/p/_search", {}, {"query": {"term": {"tag": "a"}}})
        assert [h["_id"] for h in resp["hits"]["hits"]] == ["tagged"]
    finally:
        engine.store.close()
