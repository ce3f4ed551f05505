"""Appending to a large index (issue 16, write path): delta saves against full rewrites, same run.

Builds a synthetic index of N chunks (``engine_latency.py``'s generator and the project's chunk
mapping, through the official client), then, 3 repetitions interleaved, in each mode:

* ``full``  -- the pre-issue-16 save: every refresh writes the whole index as a new base
  (``SCHOLAR_ES_FULL_SAVE=1``, read by ``IndexHandle.save`` at each save)
* ``delta`` -- this checkout's save: a small delta file beside the unchanged base (merge policy
  ``core.MAX_DELTAS`` / ``MERGE_RATIO``)

adds 1,000 new chunks through the client (``helpers.bulk``) + ``indices.refresh`` and runs one
hybrid search (BM25 ``multi_match`` + ``knn``); measured: wall and CPU time from the first bulk
request to the search's answer (``add_to_answer``) and from the refresh to the answer
(``refresh_to_answer``: the part the save and the in-memory append decide), and the bytes of the
files the refresh wrote. Then a cold start, 3 times interleaved, of two copies holding the same
documents: one saved as a base plus deltas, one as a single base: a fresh Python process imports
the client, opens the engine and answers the same search (``first_answer``: wall from process
start; ``open_search``: the open + search part, wall and CPU), and, separately, a process that
only maps and verifies the newest commit point (``verify``: every array's CRC32).

    PYTHONPATH=. .venv/bin/python bench/append_latency.py                # 100,000 chunks
    PYTHONPATH=. .venv/bin/python bench/append_latency.py --docs 10000   # quick

Prints a markdown table and writes ``bench/results/append_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from engine_latency import INDEX, Corpus, hybrid_body, index_engine  # noqa: E402

ADD = 1_000
MODES = ("full", "delta")

CHILD = r"""
import json, os, sys, time
t_start = float(sys.argv[3])
what = sys.argv[2]
if what == "verify":
    from pathlib import Path
    from scholar_es.engine.index.commit import open_commit
    (folder,) = (Path(sys.argv[1]) / "segments").iterdir()
    w0, c0 = time.perf_counter(), time.process_time()
    found = open_commit(folder)
    assert found is not None
    print(json.dumps({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
                      "bytes": sum(f["size"] for f in found.files), "files": len(found.files)}))
else:
    from scholar_es.engine.rest.transport import embedded_client
    body = json.loads(sys.argv[4])
    w0, c0 = time.perf_counter(), time.process_time()
    es = embedded_client(sys.argv[1])
    resp = es.search(index=INDEX_NAME, **body)
    assert resp["hits"]["hits"]
    now = time.time()
    print(json.dumps({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0,
                      "first_answer": now - t_start}))
    os._exit(0)  # no save at exit: measure the open, not a save
""".replace("INDEX_NAME", repr(INDEX))


def _sizes(path: Path) -> dict[str, int]:
    return {str(p): p.stat().st_size for p in (path / "segments").rglob("*") if p.is_file()}


def _child(path: Path, what: str, body: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SCHOLAR_ES_FULL_SAVE", None)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), what, repr(time.time()), json.dumps(body)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(n_docs: int, reps: int, out: Path, log) -> dict:
    from elasticsearch import helpers

    from scholar_es.engine.rest.transport import embedded_client

    corpus = Corpus(n_docs + ADD * (2 * reps + 1))
    text, vec = corpus.queries(1)[0]
    body = hybrid_body(text, [float(x) for x in vec])
    body["_source"] = False
    tmp = Path(tempfile.mkdtemp(prefix="append-bench-"))
    try:
        path = tmp / "engine"
        es = embedded_client(path)
        corpus_n, corpus.n = corpus.n, n_docs
        log(f"indexing {n_docs} chunks ...")
        index_s = index_engine(es, corpus, log)
        corpus.n = corpus_n
        log(f"indexed in {index_s:.0f}s; base {sum(_sizes(path).values()) / 1e6:.0f} MB")
        es.search(index=INDEX, **body)
        samples: dict[str, list[dict]] = {m: [] for m in MODES}
        next_doc = n_docs
        for rep in range(reps):
            for mode in MODES if rep % 2 == 0 else MODES[::-1]:
                if mode == "full":
                    os.environ["SCHOLAR_ES_FULL_SAVE"] = "1"
                else:
                    os.environ.pop("SCHOLAR_ES_FULL_SAVE", None)
                before = _sizes(path)
                ids = range(next_doc, next_doc + ADD)
                next_doc += ADD
                w0, c0 = time.perf_counter(), time.process_time()
                helpers.bulk(es, ({"_index": INDEX, "_id": str(i), "_source": corpus.doc(i)} for i in ids))
                w1, c1 = time.perf_counter(), time.process_time()
                es.indices.refresh(index=INDEX)
                resp = es.search(index=INDEX, **body)
                w2, c2 = time.perf_counter(), time.process_time()
                assert resp["hits"]["hits"]
                after = _sizes(path)
                written = sum(s for p, s in after.items() if before.get(p) != s)
                samples[mode].append(
                    {
                        "add_to_answer_wall": w2 - w0,
                        "add_to_answer_cpu": c2 - c0,
                        "refresh_to_answer_wall": w2 - w1,
                        "refresh_to_answer_cpu": c2 - c1,
                        "bytes_written": written,
                        "files_listed": len([p for p in after if p.endswith(".seg")]),
                    }
                )
                log(f"rep {rep} {mode}: {samples[mode][-1]}")
        os.environ.pop("SCHOLAR_ES_FULL_SAVE", None)
        # two copies with the same documents: base + deltas, and one base
        extra = {"_index": INDEX, "_id": str(next_doc), "_source": corpus.doc(next_doc)}
        helpers.bulk(es, [extra])
        es.indices.refresh(index=INDEX)  # a delta (the last rep may have been a full save)
        helpers.bulk(es, [{**extra, "_id": str(next_doc + 1)}])
        es.indices.refresh(index=INDEX)
        es.close()
        layouts = {"deltas": path, "one_base": tmp / "one-base"}
        shutil.copytree(path, layouts["one_base"])
        os.environ["SCHOLAR_ES_FULL_SAVE"] = "1"
        from scholar_es.engine.index.indices import Engine

        eng = Engine(layouts["one_base"])
        h = eng.handle(INDEX)
        h.segment()  # opened from base + deltas
        h._saved_gen = -2  # force one save of the same state: with the switch, a full base
        h.save()
        eng.store.close()
        os.environ.pop("SCHOLAR_ES_FULL_SAVE", None)
        cold: dict[str, list[dict]] = {k: [] for k in layouts}
        verify: dict[str, list[dict]] = {k: [] for k in layouts}
        for rep in range(reps):
            order = list(layouts) if rep % 2 == 0 else list(layouts)[::-1]
            for k in order:
                cold[k].append(_child(layouts[k], "first_answer", body))
                verify[k].append(_child(layouts[k], "verify", body))
                log(f"cold {k}: {cold[k][-1]} verify {verify[k][-1]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    report = {
        "docs": n_docs,
        "add": ADD,
        "reps": reps,
        "index_s": index_s,
        "python": sys.version.split()[0],
        "machine": os.uname().machine,
        "cpus": os.cpu_count(),
        "append": samples,
        "cold": cold,
        "verify": verify,
        "summary": {
            **{
                f"{m}_{k}": med(samples[m], k)
                for m in MODES
                for k in (
                    "add_to_answer_wall",
                    "add_to_answer_cpu",
                    "refresh_to_answer_wall",
                    "refresh_to_answer_cpu",
                    "bytes_written",
                )
            },
            **{f"cold_{k}_{x}": med(cold[k], x) for k in cold for x in ("first_answer", "wall", "cpu")},
            **{f"verify_{k}_{x}": med(verify[k], x) for k in verify for x in ("wall", "bytes", "files")},
        },
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1))
    return report


def markdown(report: dict) -> str:
    s = report["summary"]
    rows = [
        f"{report['docs']:,} chunks + {report['add']:,} per refresh, medians of {report['reps']} interleaved reps",
        "",
        "| measure | full rewrite | delta | delta/full |",
        "|---|---|---|---|",
    ]
    for key, unit in [
        ("add_to_answer_wall", "s"),
        ("add_to_answer_cpu", "s"),
        ("refresh_to_answer_wall", "s"),
        ("refresh_to_answer_cpu", "s"),
        ("bytes_written", "MB"),
    ]:
        a, b = s[f"full_{key}"], s[f"delta_{key}"]
        scale = 1e6 if unit == "MB" else 1
        rows.append(f"| {key} | {a / scale:.3f} {unit} | {b / scale:.3f} {unit} | {b / a:.3f}x |")
    rows += ["", "| cold start | one base | base + deltas |", "|---|---|---|"]
    for x in ("first_answer", "wall", "cpu"):
        label = "process start -> first answer" if x == "first_answer" else f"open + first search ({x})"
        rows.append(f"| {label} | {s[f'cold_one_base_{x}']:.3f} s | {s[f'cold_deltas_{x}']:.3f} s |")
    rows.append(
        f"| map + CRC32 of every array (wall) | {s['verify_one_base_wall']:.3f} s "
        f"({s['verify_one_base_bytes'] / 1e6:.0f} MB, {s['verify_one_base_files']:.0f} file) | "
        f"{s['verify_deltas_wall']:.3f} s ({s['verify_deltas_bytes'] / 1e6:.0f} MB, "
        f"{s['verify_deltas_files']:.0f} files) |"
    )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000, help="chunks in the index (default 100000)")
    ap.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "append_latency.json")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    with threadpool_limits(limits=1, user_api="blas"):
        report = run(args.docs, args.reps, args.out, log)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
