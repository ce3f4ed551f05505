"""Storage safety of the embedded engine (issue 12): crashes during a save, damaged cache files,
one client shared by threads, several processes on one directory.

Every answer is checked against a reference that cannot be wrong in the same way: the same
directory with its derived files removed, so the engine rebuilds from SQLite (the source of
truth), or a separate directory that received the same writes without a fault.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from pathlib import Path

import pytest
from elasticsearch import helpers

from scholar_es.engine.index.indices import Engine
from scholar_es.engine.rest.handler import handle as rest_handle
from scholar_es.engine.rest.transport import embedded_client

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
MAPPING = {
    "properties": {
        "title": {"type": "text", "analyzer": "english"},
        "tag": {"type": "keyword"},
        "n": {"type": "integer"},
    }
}
WORDS = [
    "graph",
    "neural",
    "molecule",
    "protein",
    "citation",
    "network",
    "learning",
    "survey",
    "model",
    "data",
]
QUERIES = [
    {"query": {"match": {"title": "graph molecules"}}, "size": 100},
    {"query": {"match": {"title": "protein network survey"}}, "size": 7},
    {"query": {"term": {"tag": "t3"}}, "size": 100},
    {"query": {"bool": {"filter": [{"range": {"n": {"gte": 20, "lt": 70}}}]}}, "size": 100},
    {"query": {"ids": {"values": ["3", "17", "45", "61", "77"]}}},
    {"query": {"match_all": {}}, "size": 200},
]

# The writes of a crash test: round 1, then round 2 (updates, deletes, new documents). Each
# round ends with a refresh, i.e. a save of the segment files.
WRITER = textwrap.dedent("""
    import random, sys
    from elasticsearch import helpers
    from scholar_es.engine.rest.transport import embedded_client

    WORDS = {words!r}

    def doc(i, r):
        rng = random.Random(i * 1000 + r)
        return {{"title": " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))),
                 "tag": f"t{{(i + r) % 5}}", "n": i}}

    es = embedded_client(sys.argv[1])
    if not es.indices.exists(index="p"):
        es.indices.create(index="p", mappings={mapping!r})
    helpers.bulk(es, ({{"_index": "p", "_id": str(i), **doc(i, 1)}} for i in range(60)))
    es.indices.refresh(index="p")
    ops = [{{"_index": "p", "_id": str(i), **doc(i, 2)}} for i in range(0, 20)]
    ops += [{{"_op_type": "delete", "_index": "p", "_id": str(i)}} for i in range(40, 50)]
    ops += [{{"_index": "p", "_id": str(i), **doc(i, 2)}} for i in range(60, 80)]
    helpers.bulk(es, ops)
    print("written", flush=True)
    es.indices.refresh(index="p")
    print("saved", flush=True)
""").format(words=WORDS, mapping=MAPPING)


def _search_all(engine: Engine, index: str = "p") -> list:
    """Every query's hits as (id, score, _source), through the REST layer of ``engine``."""
    out = []
    for body in QUERIES:
        status, resp = rest_handle(engine, "POST", f"/{index}/_search", {}, body)
        assert status == 200, resp
        out.append(
            (resp["hits"]["total"], [(h["_id"], h["_score"], h.get("_source")) for h in resp["hits"]["hits"]])
        )
    return out


def _rebuilt_reference(path: Path, tmp_path: Path) -> list:
    """Answers of a copy of ``path`` without its derived files: rebuilt from SQLite alone."""
    ref = tmp_path / f"reference-{random.random()}"
    shutil.copytree(path, ref, ignore=shutil.ignore_patterns("segments"))
    engine = Engine(ref)
    try:
        return _search_all(engine)
    finally:
        engine.store.close()


def _open_and_search(path: Path) -> list:
    engine = Engine(path)
    try:
        return _search_all(engine)
    finally:
        engine.store.close()


def _cache_dir(path: Path) -> Path:
    (folder,) = (path / "segments").iterdir()
    return folder


def _run_writer(path: Path, crash_at: str | None = None) -> subprocess.CompletedProcess:
    env = dict(ENV)
    if crash_at:
        env["SCHOLAR_ES_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-c", WRITER, str(path)], env=env, capture_output=True, text=True, timeout=120
    )


# --- crashes during a save -------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference_answers(tmp_path_factory) -> list:
    """What the writer's two rounds must give, written without any fault."""
    path = tmp_path_factory.mktemp("clean") / "engine"
    proc = _run_writer(path)
    assert proc.returncode == 0, proc.stderr
    return _open_and_search(path)


@pytest.mark.parametrize("point", ["file_half", "files", "commit_tmp", "commit", "cleanup"])
def test_kill_at_each_step_of_a_save_never_serves_wrong_hits(tmp_path, point, reference_answers):
    path = tmp_path / "engine"
    proc = _run_writer(path, crash_at=f"{point}:2")  # the second save: one good generation exists
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert "written" in proc.stdout and "saved" not in proc.stdout
    assert _open_and_search(path) == reference_answers
    assert _rebuilt_reference(path, tmp_path) == reference_answers


def test_kill_during_the_first_save_rebuilds_from_sqlite(tmp_path, reference_answers):
    path = tmp_path / "engine"
    proc = _run_writer(path, crash_at="file_half:1")
    assert proc.returncode == -signal.SIGKILL
    _run_writer(path)  # a new process finds no usable commit point, rebuilds, writes round 2 again
    assert _open_and_search(path) == reference_answers


def test_real_kills_mid_write_and_save(tmp_path):
    """A process updating and refreshing in a loop is killed at random moments, three times."""
    path = tmp_path / "engine"
    loop = textwrap.dedent("""
        import random, sys
        from elasticsearch import helpers
        from scholar_es.engine.rest.transport import embedded_client
        es = embedded_client(sys.argv[1])
        if not es.indices.exists(index="p"):
            es.indices.create(index="p", mappings=%r)
        rng = random.Random(int(sys.argv[2]))
        words = %r
        print("ready", flush=True)
        while True:
            ops = [{"_index": "p", "_id": str(rng.randrange(400)), "n": rng.randrange(100), "tag": f"t{rng.randrange(5)}",
                    "title": " ".join(rng.choice(words) for _ in range(rng.randint(1, 12)))} for _ in range(150)]
            ops += [{"_op_type": "delete", "_index": "p", "_id": str(rng.randrange(400))} for _ in range(10)]
            helpers.bulk(es, ops, raise_on_error=False)
            es.indices.refresh(index="p")
    """) % (MAPPING, WORDS)
    rng = random.Random(7)
    for attempt in range(3):
        proc = subprocess.Popen(
            [sys.executable, "-c", loop, str(path), str(attempt)], env=ENV, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.2, 0.8))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert _open_and_search(path) == _rebuilt_reference(path, tmp_path)


# --- damaged files ---------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "engine"
    proc = _run_writer(path)
    assert proc.returncode == 0, proc.stderr
    return path, _open_and_search(path)


def _commit(folder: Path) -> dict:
    (point,) = folder.glob("segments_*.json")
    return json.loads(point.read_bytes().partition(b"\n")[2])


def _postings_region(folder: Path) -> tuple[Path, int, int]:
    """(file, offset, size) of the term ids of the title postings of the base file."""
    commit = _commit(folder)
    name, _vocab, refs = commit["meta"]["segment"]["text"][0]
    assert name == "title"
    f = commit["files"][0]  # the base; the second save wrote a delta after it
    a = f["arrays"][refs[1]]
    return folder / f["name"], a["offset"], a["size"]


def _truncate(p: Path, region: tuple[int, int] | None) -> None:
    cut = region[0] + region[1] // 2 if region else p.stat().st_size // 2
    p.write_bytes(p.read_bytes()[:cut])


def _empty(p: Path, region) -> None:
    p.write_bytes(b"")


def _flip_64(p: Path, region: tuple[int, int] | None) -> None:
    data = bytearray(p.read_bytes())
    end = region[0] + region[1] if region else len(data)
    for i in range(end - 80, end - 16):  # inside the array data, past the .npy header
        data[i] ^= 0xFF
    p.write_bytes(bytes(data))


def _unlink(p: Path, region) -> None:
    p.unlink()


@pytest.mark.parametrize("damage", [_truncate, _empty, _flip_64, _unlink])
@pytest.mark.parametrize("target", ["postings", "commit point"])
def test_damaged_cache_files_are_detected_and_rebuilt(saved, damage, target, caplog):
    path, answers = saved
    folder = _cache_dir(path)
    if target == "postings":
        victim, offset, size = _postings_region(folder)
        damage(victim, (offset, size))
    else:
        damage(next(folder.glob("segments_*.json")), None)
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        assert _open_and_search(path) == answers
    assert "rebuil" in caplog.text, caplog.text  # said so, once, in the log
    engine = Engine(path)  # a refresh then writes a good generation again
    try:
        rest_handle(engine, "POST", "/p/_refresh", {}, None)
        assert _search_all(engine) == answers
    finally:
        engine.store.close()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        assert _open_and_search(path) == answers
    assert caplog.text == ""


def test_every_array_is_checked_not_only_the_commit_point(saved):
    path, answers = saved
    folder = _cache_dir(path)
    files = _commit(folder)["files"]
    assert len(files) == 2  # a base and the delta of the second save
    for f in files:
        for a in f["arrays"]:
            if a["size"] > 200:
                _flip_64(folder / f["name"], (a["offset"], a["size"]))
                assert _open_and_search(path) == answers
                _flip_64(folder / f["name"], (a["offset"], a["size"]))  # flipped back: valid again


# --- file names never come from user text ----------------------------------------------------


def test_field_names_with_slashes_and_dots_never_become_file_names(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    odd = {"a/b": "slash field", "../../escape": "dots", "c\\d": "backslash", "title": "plain"}
    es.index(index="odd", id="1", document=odd)
    es.indices.refresh(index="odd")
    es.index(index="odd", id="2", document={"a/b": "second doc", "title": "other"})
    es.indices.refresh(index="odd")
    es.index(index="odd", id="3", document={"title": "third"})
    es.indices.refresh(index="odd")
    resp = es.search(index="odd", query={"ids": {"values": ["1"]}})
    assert [(h["_id"], h["_source"]) for h in resp["hits"]["hits"]] == [("1", odd)]
    assert es.search(index="odd", query={"match": {"a/b": "second"}})["hits"]["hits"][0]["_id"] == "2"
    names = [p.name for p in (path / "segments").rglob("*")]
    assert all(re.fullmatch(r"_\d+\.seg|segments_\d+\.json|write\.lock|[0-9a-f]{32}", n) for n in names), (
        names
    )
    other = Engine(path)
    try:
        status, resp = rest_handle(other, "POST", "/odd/_search", {}, {"query": {"ids": {"values": ["2"]}}})
        assert resp["hits"]["hits"][0]["_source"] == {"a/b": "second doc", "title": "other"}
    finally:
        other.store.close()


def test_a_database_from_before_write_generations_is_read_whole(tmp_path):
    """An engine directory written before this storage format (documents, no ``write_gen`` rows,
    an old ``.npy`` cache) answers from SQLite, then saves a verified commit point."""
    import sqlite3

    path = tmp_path / "engine"
    proc = _run_writer(path)
    assert proc.returncode == 0, proc.stderr
    answers = _open_and_search(path)
    db = sqlite3.connect(path / "engine.sqlite3")
    db.execute("DELETE FROM write_gen")
    db.commit()
    db.close()
    folder = _cache_dir(path)
    for f in folder.iterdir():
        f.unlink()
    (folder / "manifest.json").write_text("{}")
    (folder / "seqs.npy").write_bytes(b"")
    assert _open_and_search(path) == answers
    engine = Engine(path)
    try:
        rest_handle(engine, "POST", "/p/_refresh", {}, None)
    finally:
        engine.store.close()
    assert sorted(p.name for p in folder.iterdir()) == ["_1.seg", "segments_1.json", "write.lock"]
    assert _open_and_search(path) == answers


def test_old_generations_and_snapshots_are_freed(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.index(index="g", id="0", document={"t": "x"})
    es.indices.refresh(index="g")
    handle = es.transport.node_pool.get()._engine.handle("g")
    first = weakref.ref(handle.segment())
    for i in range(1, 6):
        es.index(index="g", id=str(i), document={"t": "x"})
        es.indices.refresh(index="g")
    gc.collect()
    assert first() is None  # no reader holds it: the old version is gone from memory
    files = sorted(p.name for p in _cache_dir(path).iterdir())
    points = [n for n in files if n.startswith("segments_")]
    assert len(points) == 1, files  # one commit point on disk, and only the data files it lists
    listed = [f["name"] for f in _commit(_cache_dir(path))["files"]]
    assert sorted([*points, *listed, "write.lock"]) == files
    assert es.count(index="g")["count"] == 6
    old_dir = _cache_dir(path)
    recreate = (
        "import sys\nfrom scholar_es.engine.rest.transport import embedded_client\nes = embedded_client(sys.argv[1])\n"
        "es.indices.delete(index='g')\nes.index(index='g', id='new', document={'t': 'y'}, refresh=True)\n"
    )
    subprocess.run([sys.executable, "-c", recreate, str(path)], env=ENV, check=True, timeout=60)
    resp = es.search(index="g")  # another process deleted and recreated it: the new one, only
    assert [(h["_id"], h["_source"]) for h in resp["hits"]["hits"]] == [("new", {"t": "y"})]
    assert not old_dir.exists()


# --- threads ---------------------------------------------------------------------------------


def _check_hits(resp, max_total: int) -> list[str]:
    hits = resp["hits"]["hits"]
    ids = [h["_id"] for h in hits]
    assert len(ids) == len(set(ids)), "duplicate ids"
    assert resp["hits"]["total"]["value"] <= max_total
    for h in hits:
        assert "_source" in h, h
        assert h["_source"]["doc"] == int(h["_id"]), h  # the source of this very document
    return ids


def test_eight_threads_bulk_and_search_on_one_client(tmp_path):
    es = embedded_client(tmp_path / "engine")
    es.indices.create(
        index="t", mappings={"properties": {"title": {"type": "text"}, "doc": {"type": "integer"}}}
    )
    n_docs, errors = 300, []

    def work(t: int) -> None:
        rng = random.Random(t)
        try:
            for _ in range(6):
                ids = rng.sample(range(n_docs), 60)
                helpers.bulk(
                    es,
                    (
                        {"_index": "t", "_id": str(i), "doc": i, "title": f"{rng.choice(WORDS)} w{t}"}
                        for i in ids
                    ),
                )
                _check_hits(es.search(index="t", size=400), n_docs)
                _check_hits(
                    es.search(index="t", query={"match": {"title": rng.choice(WORDS)}}, size=400), n_docs
                )
        except Exception as e:  # any error, a spurious 400 included, fails the test
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    helpers.bulk(es, ({"_index": "t", "_id": str(i), "doc": i, "title": "final"} for i in range(n_docs)))
    ids = _check_hits(es.search(index="t", size=400), n_docs)
    assert sorted(map(int, ids)) == list(range(n_docs))
    assert es.count(index="t")["count"] == n_docs


def test_dynamic_fields_added_while_other_threads_search(tmp_path):
    """New fields (dynamic mapping) are added by writers while searches expand ``*`` patterns."""
    es = embedded_client(tmp_path / "engine")
    es.index(index="dyn", id="0", document={"doc": 0, "f_base": "graph"}, refresh=True)
    stop, errors = threading.Event(), []

    def searcher() -> None:
        while not stop.is_set():
            try:
                resp = es.search(index="dyn", query={"multi_match": {"query": "graph", "fields": ["f_*"]}})
                _check_hits(resp, 10_000)
            except Exception as e:
                errors.append(repr(e))

    def writer(t: int) -> None:
        try:
            for k in range(40):
                i = 1 + t * 100 + k
                es.index(index="dyn", id=str(i), document={"doc": i, f"f_{t}_{k}": "graph network"})
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=searcher) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
    for th in threads + writers:
        th.start()
    for th in writers:
        th.join()
    stop.set()
    for th in threads:
        th.join()
    assert errors == []
    resp = es.search(index="dyn", query={"multi_match": {"query": "graph", "fields": ["f_*"]}}, size=200)
    assert resp["hits"]["total"]["value"] == 121


def test_parallel_bulk_counts_exactly_while_another_thread_searches(tmp_path):
    es = embedded_client(tmp_path / "engine")
    es.indices.create(
        index="pb", mappings={"properties": {"title": {"type": "text"}, "doc": {"type": "integer"}}}
    )
    n_docs, stop, errors = 20_000, threading.Event(), []

    def searcher() -> None:
        while not stop.is_set():
            try:
                _check_hits(es.search(index="pb", query={"match": {"title": "graph"}}, size=50), n_docs)
            except Exception as e:  # a spurious 400, a missing _source, a duplicate
                errors.append(repr(e))

    thread = threading.Thread(target=searcher)
    thread.start()
    try:
        actions = (
            {"_index": "pb", "_id": str(i), "doc": i, "title": WORDS[i % len(WORDS)]} for i in range(n_docs)
        )
        oks = sum(ok for ok, _ in helpers.parallel_bulk(es, actions, thread_count=4, chunk_size=500))
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert oks == n_docs
    es.indices.refresh(index="pb")
    assert es.count(index="pb")["count"] == n_docs
    assert es.search(index="pb", size=0, track_total_hits=True)["hits"]["total"]["value"] == n_docs
    hits = es.search(index="pb", query={"match": {"title": "graph"}}, size=5000)["hits"]["hits"]
    assert sorted(int(h["_id"]) for h in hits) == list(range(0, n_docs, len(WORDS)))


# --- processes -------------------------------------------------------------------------------


TWO_WRITERS = textwrap.dedent("""
    import sys
    from elasticsearch import helpers
    from scholar_es.engine.rest.transport import embedded_client
    es = embedded_client(sys.argv[1])
    tag = sys.argv[2]
    for batch in range(4):
        helpers.bulk(es, ({"_index": "w", "_id": f"{tag}-{batch}-{i}", "title": f"word {tag}", "doc": batch,
                           f"{tag}_only_{batch}": "dynamic field"} for i in range(150)))
        es.indices.refresh(index="w")
""")


def test_two_writer_processes_on_a_fresh_directory(tmp_path):
    path = tmp_path / "fresh"  # does not exist yet: both create the database and auto-create the index
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TWO_WRITERS, str(path), tag], env=ENV, stderr=subprocess.PIPE, text=True
        )
        for tag in ("a", "b")
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    expected = sorted(f"{tag}-{b}-{i}" for tag in "ab" for b in range(4) for i in range(150))
    for engine_path in (path, None):  # through the saved files, and rebuilt from SQLite
        if engine_path is None:
            shutil.rmtree(path / "segments")
        engine = Engine(path)
        try:
            status, mapping = rest_handle(engine, "GET", "/w/_mapping", {}, None)
            fields = mapping["w"]["mappings"]["properties"]
            assert {f"{t}_only_{b}" for t in "ab" for b in range(4)} <= set(fields)  # none lost
            status, resp = rest_handle(engine, "POST", "/w/_search", {}, {"size": 2000})
            assert sorted(h["_id"] for h in resp["hits"]["hits"]) == expected
            assert all(h["_source"]["title"] == f"word {h['_id'][0]}" for h in resp["hits"]["hits"])
            for tag in "ab":  # fields each process added dynamically: kept, mapped, searchable
                for b in range(4):
                    body = {"query": {"match": {f"{tag}_only_{b}": "dynamic"}}, "size": 0}
                    status, resp = rest_handle(engine, "POST", "/w/_search", {}, body)
                    assert resp["hits"]["total"]["value"] == 150, (tag, b, resp)
        finally:
            engine.store.close()


def test_reader_never_sees_a_half_state_of_another_process(tmp_path):
    """One process rewrites every document in each bulk; this one searches meanwhile: a search
    sees all documents of one round or of the next, each with its own ``_source``."""
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(
        index="r", mappings={"properties": {"title": {"type": "text"}, "doc": {"type": "integer"}}}
    )
    n = 200
    helpers.bulk(es, ({"_index": "r", "_id": str(i), "doc": i, "round": 0, "title": "w0"} for i in range(n)))
    writer = textwrap.dedent(f"""
        import sys
        from elasticsearch import helpers
        from scholar_es.engine.rest.transport import embedded_client
        es = embedded_client(sys.argv[1])
        for r in range(1, 40):
            helpers.bulk(es, ({{"_index": "r", "_id": str(i), "doc": i, "round": r, "title": f"w{{r}}"}}
                              for i in range({n})), chunk_size={n})
            if r % 5 == 0:
                es.indices.refresh(index="r")
    """)
    proc = subprocess.Popen(
        [sys.executable, "-c", writer, str(path)], env=ENV, stderr=subprocess.PIPE, text=True
    )
    rounds_seen = set()
    try:
        while proc.poll() is None:
            resp = es.search(index="r", size=n + 10)
            assert resp["hits"]["total"]["value"] == n
            _check_hits(resp, n)
            rounds = {h["_source"]["round"] for h in resp["hits"]["hits"]}
            assert len(rounds) == 1, rounds  # one bulk is one transaction: never half of it
            (r,) = rounds
            rounds_seen.add(r)
            titled = es.search(index="r", query={"match": {"title": f"w{r}"}}, size=n + 10)
            assert titled["hits"]["total"]["value"] in (0, n)  # the round or a later one
    finally:
        proc.wait(timeout=120)
    assert proc.returncode == 0, proc.stderr.read()
    assert len(rounds_seen) > 1
    assert {h["_source"]["round"] for h in es.search(index="r", size=n)["hits"]["hits"]} == {39}


@pytest.mark.slow
def test_two_index_runs_on_a_fresh_directory_both_publish_every_paper(tmp_path):
    """Two ``scholar-es index`` processes started together on a directory that does not exist."""
    target = tmp_path / "engine"
    files = []
    for tag in "ab":
        src = tmp_path / f"{tag}.jsonl"
        src.write_text(
            "".join(
                json.dumps(
                    {"id": f"{tag}{i}", "title": f"paper {tag} {i} on graphs", "abstract": "molecules"}
                )
                + "\n"
                for i in range(15)
            )
        )
        files.append(src)
    cli = [sys.executable, "-c", "from scholar_es.cli import main; main()", "index"]
    procs = [
        subprocess.Popen(
            [*cli, str(src), "--es", str(target), "--quiet"], env=ENV, stderr=subprocess.PIPE, text=True
        )
        for src in files
    ]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    es = embedded_client(target)
    papers = sorted(h["_id"] for h in es.search(index="papers", size=100)["hits"]["hits"])
    assert papers == sorted(f"{t}{i}" for t in "ab" for i in range(15))
    chunks = es.search(index="chunks", size=100)["hits"]["hits"]
    assert sorted({h["_source"]["paper_id"] for h in chunks}) == papers


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_verifying_a_commit_point_leaves_its_pages_out_of_the_resident_set(tmp_path):
    """Opening checks every array's CRC32, which reads every page of the commit point; the
    checked pages are released from the process afterwards (a fresh process opening a 4 GB
    commit point otherwise holds all of it resident). A 192 MB array: the process's resident
    set after opening stays far below it, and the arrays still read back exactly."""
    import numpy as np

    from scholar_es.engine.index.commit import write_commit

    big = np.arange(24 * 1024 * 1024, dtype=np.int64)  # 192 MB
    write_commit(tmp_path, [big, np.arange(10, dtype=np.int64)], {"what": "test"})
    code = f"""
import numpy as np
from pathlib import Path
from scholar_es.engine.index.commit import open_commit
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
before = rss()
found = open_commit(Path({str(tmp_path)!r}))
grown = rss() - before
arr = found.arrays[0]
ok = arr.shape == (24 * 1024 * 1024,) and int(arr[-1]) == 24 * 1024 * 1024 - 1 and int(arr[12345]) == 12345
print(grown, ok)
"""
    if not Path("/proc/self/statm").exists():
        pytest.skip("no /proc/self/statm on this platform")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    grown, ok = out.stdout.split()
    assert ok == "True"
    assert int(grown) < 64 * 1024 * 1024, f"{int(grown) / 2**20:.0f} MB resident after opening 192 MB"
