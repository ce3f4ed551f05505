"""What the storage safety of issue 12 costs: refresh and search latency, before vs after, one run.

"Before" is the engine at a base commit (default ``af5c491``, the branch point of the storage
work), exported with ``git archive`` into a temporary folder; "after" is this checkout. Each is
timed in its own fresh interpreter (the two engines share module names), one after the other
and then again in the other order, on the same machine in the same run, with the same
synthetic corpus as ``engine_latency.py`` (``mappings/chunks.json``, english analyzer, 384-dim
vectors). Per engine:

* ``index_s``   -- bulk-index N chunks through the client, then one refresh
* ``refresh``   -- R rounds of: bulk-update 20 chunks (timed as ``write``), then
  ``indices.refresh`` (timed as ``refresh``: publishing the new snapshot and saving it --
  before: ``.npy`` files rewritten in place; after: a new checksummed generation, fsynced,
  and its commit point)
* ``bm25`` / ``hybrid`` -- Q queries each (``_source: false``), and ``bm25_src`` the BM25 query
  with ``_source`` (hits and sources read from one snapshot after the change)
* ``open_s``    -- a new engine on the saved directory: time to the first search answer
  (after: every file's CRC32 is verified)

and prints p50 per measure and the ratio after/before (targets: search p50 <= 1.1x, refresh
<= 1.5x). Results go to ``bench/results/storage_cost.json``.

    PYTHONPATH=. .venv/bin/python bench/storage_cost.py                  # 10,000 chunks
    PYTHONPATH=. .venv/bin/python bench/storage_cost.py --docs 3000 --queries 60 --rounds 10
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = "af5c491"


def worker(code_root: str, engine_dir: str, n_docs: int, n_queries: int, rounds: int) -> dict:
    """Runs in a fresh interpreter whose ``scholar_es`` comes from ``code_root``."""
    sys.path.insert(0, str(REPO / "bench"))
    import engine_latency as el  # noqa: PLC0415 - the corpus and queries of the latency bench

    sys.path.insert(0, code_root)
    import numpy as np  # noqa: PLC0415
    from elasticsearch import helpers  # noqa: PLC0415

    import scholar_es  # noqa: PLC0415
    from scholar_es.engine.node import embedded_client  # noqa: PLC0415

    assert Path(scholar_es.__file__).resolve().is_relative_to(Path(code_root).resolve()), scholar_es.__file__
    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415

        threadpool_limits(1)
    except ImportError:  # pragma: no cover
        pass
    corpus = el.Corpus(n_docs)
    queries = corpus.queries(n_queries)
    es = embedded_client(engine_dir)
    out: dict = {"index_s": el.index_engine(es, corpus, lambda *_: None)}
    rng = np.random.default_rng(5)
    writes, refreshes = [], []
    for _ in range(rounds):
        ids = rng.choice(n_docs, 20, replace=False)
        t0 = time.perf_counter()
        helpers.bulk(es, ({"_index": el.INDEX, "_id": str(i), "_source": corpus.doc(int(i))} for i in ids))
        t1 = time.perf_counter()
        es.indices.refresh(index=el.INDEX)
        t2 = time.perf_counter()
        writes.append(t1 - t0)
        refreshes.append(t2 - t1)
    out["write"], out["refresh"] = el.percentiles(writes), el.percentiles(refreshes)

    def search(body):
        return lambda item: es.search(index=el.INDEX, **body(item))

    out["bm25"] = el.percentiles(el.time_each(search(lambda q: el.bm25_body(q[0])), queries))
    out["hybrid"] = el.percentiles(
        el.time_each(search(lambda q: el.hybrid_body(q[0], q[1].tolist())), queries)
    )
    out["bm25_src"] = el.percentiles(
        el.time_each(search(lambda q: {**el.bm25_body(q[0]), "_source": True}), queries)
    )
    es.close()
    return out


def _open_time(code_root: str, engine_dir: str) -> float:
    """A new process: time from opening the saved engine to its first search answer."""
    code = (
        f"import sys, time; sys.path.insert(0, {code_root!r})\n"
        "from scholar_es.engine.node import embedded_client\n"
        f"es = embedded_client({engine_dir!r}); t0 = time.perf_counter()\n"
        "es.search(index='bench-chunks', query={'match': {'chunk_text': 'the'}}, size=1)\n"
        "print(time.perf_counter() - t0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(proc.stdout.strip().splitlines()[-1])


def run_one(code_root: str, args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        engine_dir = str(Path(tmp) / "engine")
        cmd = [sys.executable, __file__, "--worker", code_root, engine_dir]
        cmd += ["--docs", str(args.docs), "--queries", str(args.queries), "--rounds", str(args.rounds)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(proc.stderr[-3000:])
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        out["open_s"] = min(_open_time(code_root, engine_dir) for _ in range(3))
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--base", default=BASE, help="git commit of the 'before' engine (default %(default)s)")
    ap.add_argument("--worker", nargs=2, metavar=("CODE_ROOT", "ENGINE_DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker, args.docs, args.queries, args.rounds)))
        return 0
    with tempfile.TemporaryDirectory() as base_root:
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.base, "scholar_es"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base_root], input=archive, check=True)
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for order in (("before", "after"), ("after", "before")):  # both orders: drift cancels
            for label in order:
                root = base_root if label == "before" else str(REPO)
                print(f"timing {label} ...", file=sys.stderr, flush=True)
                runs[label].append(run_one(root, args))
    measures = ["refresh", "write", "bm25", "hybrid", "bm25_src"]
    report: dict = {"docs": args.docs, "queries": args.queries, "rounds": args.rounds, "base": args.base}
    rows = []
    for m in measures:
        before = min(r[m]["p50_ms"] for r in runs["before"])
        after = min(r[m]["p50_ms"] for r in runs["after"])
        report[m] = {"before_p50_ms": before, "after_p50_ms": after, "ratio": after / before}
        rows.append(f"| {m} p50 | {before:.2f} ms | {after:.2f} ms | {after / before:.2f}x |")
    for m in ("index_s", "open_s"):
        before = min(r[m] for r in runs["before"])
        after = min(r[m] for r in runs["after"])
        report[m] = {"before": before, "after": after, "ratio": after / before}
        rows.append(f"| {m} | {before:.3f} s | {after:.3f} s | {after / before:.2f}x |")
    report["runs"] = runs
    print(f"{args.docs} chunks, {args.queries} queries, {args.rounds} refresh rounds; before = {args.base}\n")
    print("| measure | before | after | after/before |\n|---|---|---|---|")
    print("\n".join(rows))
    out = REPO / "bench" / "results" / "storage_cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
