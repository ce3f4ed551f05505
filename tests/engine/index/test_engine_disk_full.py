"""A full disk, on a real full filesystem: named, survived, and nothing acknowledged lost (issue 25).

Each test mounts a 4 MiB tmpfs (root only; skipped with the reason otherwise), lets the engine or a
filler file fill it, and checks what a user sees: the write answered 500 ``i_o_exception`` "No
space left on device" (never a 429 "busy, retry"), reads still answered, a failed refresh leaving
no partial segment file, writes working again once space is freed (no restart), every
acknowledged document there after a reopen in another process -- through the embedded client and
through ``scholar-es serve`` over HTTP --, and ``scholar-es index`` saying it in one line with a
non-zero exit status.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from elasticsearch import ApiError

from scholar_es.engine.index import indices
from scholar_es.engine.rest.transport import embedded_client

ROOT = Path(__file__).resolve().parents[3]
CLI = [sys.executable, "-c", "from scholar_es.cli import main; main()"]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs mounted on a fresh folder; engines opened under it are closed, and it is
    unmounted, afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a real full filesystem needs a tmpfs mount, which needs root")
    mnt = tmp_path / "disk"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mnt
    finally:
        for key in [k for k in indices._ENGINES if k.startswith(str(mnt))]:
            with contextlib.suppress(Exception):
                indices._ENGINES.pop(key).store.close()
        gc.collect()  # the snapshots' mappings of segment files on the mount
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], check=False)  # a mapping still held: detach it


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem is full (a full tmpfs may refuse to create it at all)."""
    with contextlib.suppress(OSError), open(path, "ab") as f:
        while True:
            f.write(b"\1" * 4096)
            f.flush()
    assert os.statvfs(path.parent).f_bfree == 0


def _stray_files(engine: Path) -> list[str]:
    """Files of the segment folders that the newest commit point does not account for (a partial
    data file, a temporary commit point)."""
    stray = []
    for folder in (engine / "segments").glob("*"):
        names = set(os.listdir(folder)) - {"write.lock"}
        points = sorted(
            (n for n in names if n.startswith("segments_")), key=lambda n: int(n[9:].split(".")[0])
        )
        listed: set[str] = set()
        if points and points[-1].endswith(".json"):
            body = (folder / points[-1]).read_bytes().partition(b"\n")[2]
            listed = {points[-1], *(f["name"] for f in json.loads(body)["files"])}
        stray += sorted(f"{folder.name}/{n}" for n in names - listed)
    return stray


def _docs(n0: int, n: int) -> list[tuple[str, dict]]:
    # ~1.3 KB of poorly compressible text each (random hex: zlib halves it, no more)
    return [(f"d{i}", {"title": f"paper {i} " + os.urandom(500).hex(), "n": i}) for i in range(n0, n0 + n)]


def _bulk(es, docs: list[tuple[str, dict]]) -> list[dict]:
    ops: list[dict] = []
    for doc_id, source in docs:
        ops += [{"index": {"_index": "papers", "_id": doc_id}}, source]
    return [item["index"] for item in es.options(max_retries=0).bulk(operations=ops)["items"]]


def _bulk_until_refused(es, first: int, acked: dict[str, dict]) -> None:
    """Bulk requests of 20 documents (batch ``first`` on) until one is refused: every item of it
    with the disk-full error (one transaction: all or nothing), never a 429. The acknowledged
    documents go into ``acked``."""
    for k in range(first, first + 50):
        docs = _docs(20 * k, 20)
        items = _bulk(es, docs)
        assert not any(it["status"] == 429 for it in items), items[0]
        if any("error" in it for it in items):
            assert all("error" in it for it in items), "a bulk request is one transaction: all or nothing"
            _assert_disk_full(items[0]["status"], items[0]["error"])
            return
        acked.update(docs)
    pytest.fail("bulk requests were still acknowledged on a full filesystem")


def _assert_disk_full(status: int, error: dict) -> None:
    assert status == 500, (status, error)
    assert error["type"] == "i_o_exception", error
    assert error["reason"].startswith("No space left on device"), error
    assert "busy" not in error["reason"] and "cannot rollback" not in error["reason"], error


def _attempt(call) -> tuple[int, dict] | None:
    """(status, error) of a request that failed, None when it succeeded."""
    try:
        call()
    except ApiError as e:
        return e.meta.status, e.body["error"]
    return None


def test_full_disk_is_named_reads_go_on_and_writes_resume_with_nothing_lost(small_disk):
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\1" * (1024 * 1024))  # freed at the end: room for the writes after
    engine = small_disk / "engine"
    es = embedded_client(engine)
    es.indices.create(
        index="papers", mappings={"properties": {"title": {"type": "text"}, "n": {"type": "long"}}}
    )
    acked: dict[str, dict] = {}
    for k in range(3):
        docs = _docs(20 * k, 20)
        assert [it["status"] for it in _bulk(es, docs)] == [201] * 20
        acked.update(docs)
    filler = small_disk / "filler"
    _fill(filler)

    # an index definition (SQLite's COMMIT fails: its transaction is gone, and the error says why)
    failed = _attempt(lambda: es.indices.create(index="other"))
    assert failed is not None, "a new index was written on a full filesystem"
    _assert_disk_full(*failed)
    assert "engine.sqlite3" in failed[1]["reason"]  # it names the file it could not write
    # documents: the space a failed transaction left in SQLite's log may take a request or two
    _bulk_until_refused(es, 3, acked)
    # the segment files: a refresh names the disk and leaves no partial file
    failed = _attempt(lambda: es.indices.refresh(index="papers"))
    assert failed is not None, "the segment files were written on a full filesystem"
    _assert_disk_full(*failed)
    assert "this is a bug" not in failed[1]["reason"]
    assert _stray_files(engine) == []
    # any other write: acknowledged when it found room, else the same error, never a "busy, retry"
    for call in (
        lambda: es.index(index="papers", id="one", document={"title": "one more", "n": 1}),
        lambda: es.put_script(id="s", script={"lang": "painless", "source": "1"}),
    ):
        failed = _attempt(call)
        if failed is not None:
            _assert_disk_full(*failed)
    acked.pop("one", None)
    if es.exists(index="papers", id="one"):
        acked["one"] = {"title": "one more", "n": 1}

    # the engine stays up: reads answer, from what was acknowledged
    assert es.count(index="papers")["count"] == len(acked)
    assert es.get(index="papers", id="d0")["_source"] == acked["d0"]
    hits = es.search(index="papers", query={"match": {"title": "paper"}}, size=3)["hits"]
    assert hits["total"]["value"] == len(acked)

    # space freed: writes work again in the same process, no restart
    ballast.unlink()
    filler.unlink(missing_ok=True)
    more = _docs(10_000, 20)
    items = _bulk(es, more)
    assert [it["status"] for it in items] == [201] * 20, items[0]
    acked.update(more)
    es.indices.refresh(index="papers")
    assert _stray_files(engine) == []
    assert es.count(index="papers")["count"] == len(acked)

    # reopened by another process: every acknowledged document, exactly as acknowledged
    dump = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys\n"
            "from scholar_es.engine.rest.transport import embedded_client\n"
            "es = embedded_client(sys.argv[1])\n"
            "hits = es.search(index='papers', size=10000)['hits']['hits']\n"
            "print(json.dumps({h['_id']: h['_source'] for h in hits}))\n",
            str(engine),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert dump.returncode == 0, dump.stderr
    assert json.loads(dump.stdout) == acked


def test_served_over_http_a_full_disk_is_named_and_the_server_stays_up(small_disk):
    """The same through ``scholar-es serve`` (real HTTP, another process): the bulk's items and a
    refresh name the disk, reads answer, the server runs on, and writes resume once space is freed."""
    from elasticsearch import Elasticsearch
    from serving import serving

    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\1" * (1024 * 1024))
    engine = small_disk / "engine"
    engine.mkdir()
    with serving(engine, env={"PYTHONPATH": _env()["PYTHONPATH"]}) as server:
        es = Elasticsearch(server.url, max_retries=0, request_timeout=60)
        es.indices.create(index="papers", mappings={"properties": {"title": {"type": "text"}}})
        acked: dict[str, dict] = {}
        docs = _docs(0, 20)
        assert [it["status"] for it in _bulk(es, docs)] == [201] * 20
        acked.update(docs)
        _fill(small_disk / "filler")
        _bulk_until_refused(es, 1, acked)
        failed = _attempt(lambda: es.indices.refresh(index="papers"))
        assert failed is not None
        _assert_disk_full(*failed)
        assert server.proc.poll() is None, "the server exited on a full disk"
        assert es.count(index="papers")["count"] == len(acked)

        ballast.unlink()
        (small_disk / "filler").unlink(missing_ok=True)
        docs = _docs(5_000, 20)
        assert [it["status"] for it in _bulk(es, docs)] == [201] * 20
        acked.update(docs)
        es.indices.refresh(index="papers")
        hits = es.search(index="papers", size=10_000)["hits"]["hits"]
        assert {h["_id"]: h["_source"] for h in hits} == acked
    assert _stray_files(engine) == []


def _index_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, "index", *args, "--quiet"], capture_output=True, text=True, env=_env(), timeout=300
    )


def _one_line_naming_the_disk(done: subprocess.CompletedProcess) -> None:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "No space left on device" in lines[0], lines


def _paper_file(path: Path, ids: range) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {"id": f"p{i}", "title": f"Paper {i} on graphs", "abstract": "We propagate citations."}
            )
            + "\n"
            for i in ids
        )
    )
    return path


def test_index_cli_on_a_full_disk_prints_one_line_and_exits_non_zero(small_disk, tmp_path):
    papers = _paper_file(tmp_path / "papers.jsonl", range(3))
    _fill(small_disk / "filler")  # a new engine on a full disk: its store cannot be created
    _one_line_naming_the_disk(_index_cli(str(papers), "--es", str(small_disk / "fresh")))


def test_index_cli_stops_in_one_line_when_the_disk_fills_and_resumes_once_freed(small_disk, tmp_path):
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\1" * (1024 * 1024))
    engine = str(small_disk / "engine")
    first = _index_cli(str(_paper_file(tmp_path / "a.jsonl", range(3))), "--es", engine)
    assert first.returncode == 0, first.stderr
    _fill(small_disk / "filler")
    second = _paper_file(tmp_path / "b.jsonl", range(3, 6))
    _one_line_naming_the_disk(_index_cli(str(second), "--es", engine))
    assert _stray_files(Path(engine)) == []

    ballast.unlink()
    (small_disk / "filler").unlink(missing_ok=True)
    again = _index_cli(str(second), "--es", engine)
    assert again.returncode == 0, again.stderr
    assert embedded_client(engine).count(index="papers")["count"] == 6
