"""What the storage safety of issue 12 costs: refresh and search latency, before vs after, one run.

"Before" is the engine at a base commit (default ``af5c491``, the branch point of the storage
work: ``.npy`` files rewritten in place, one shared SQLite connection), exported with
``git archive`` and imported **in the same process** under another package name
(``scholar_es_base``: its absolute imports are renamed); "after" is this checkout. Both get the
same synthetic corpus as ``engine_latency.py`` (``mappings/chunks.json``, english analyzer,
384-dim vectors), and every measurement alternates between the two (before/after, then
after/before), so machine drift hits both alike:

* ``index_s``  -- bulk-index N chunks through the client, then one refresh
* ``write``    -- a 20-chunk bulk update; ``refresh`` -- the ``indices.refresh`` that follows it
  (publishing the new snapshot and saving it -- before: ``.npy`` files rewritten in place;
  after: a new checksummed generation, fsynced, and its commit point)
* ``bm25`` / ``hybrid`` -- the queries of ``engine_latency.py`` (``_source: false``), and
  ``bm25_src`` the BM25 query with ``_source`` (after: hits and sources from one snapshot)
* ``open_s``   -- a new engine object on the saved directory: time to its first answer
  (after: every array's CRC32 verified)

It prints p50 per measure and the ratio after/before (targets: search p50 <= 1.1x, refresh
<= 1.5x) and writes ``bench/results/storage_cost.json``.

    PYTHONPATH=. .venv/bin/python bench/storage_cost.py                  # 10,000 chunks
    PYTHONPATH=. .venv/bin/python bench/storage_cost.py --docs 3000 --queries 60 --rounds 10
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))
BASE = "af5c491"


def import_base(commit: str, into: Path):
    """``scholar_es`` at ``commit`` as the package ``scholar_es_base``; its engine modules."""
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "scholar_es"], capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    (into / "scholar_es").rename(into / "scholar_es_base")
    for py in (into / "scholar_es_base").rglob("*.py"):
        py.write_text(re.sub(r"\bscholar_es\b", "scholar_es_base", py.read_text()))
    sys.path.insert(0, str(into))
    import scholar_es_base.engine.core as base_core  # noqa: PLC0415
    import scholar_es_base.engine.node as base_node  # noqa: PLC0415

    return base_node, base_core


def run(args, tmp: Path) -> dict:
    import engine_latency as el  # noqa: PLC0415
    from elasticsearch import helpers  # noqa: PLC0415

    import scholar_es.engine.index.indices as new_core  # noqa: PLC0415
    import scholar_es.engine.rest.transport as new_node  # noqa: PLC0415

    try:
        from threadpoolctl import threadpool_limits  # noqa: PLC0415

        threadpool_limits(1)  # as engine_latency.py: one BLAS thread, for both
    except ImportError:  # pragma: no cover
        pass
    base_node, base_core = import_base(args.base, tmp / "code")
    corpus = el.Corpus(args.docs)
    queries = corpus.queries(args.queries)
    engines = {
        "before": (base_node, base_core, tmp / "before"),
        "after": (new_node, new_core, tmp / "after"),
    }
    clients = {label: node.embedded_client(path) for label, (node, _, path) in engines.items()}
    samples: dict[str, dict[str, list[float]]] = {label: {} for label in engines}

    def record(label: str, measure: str, seconds: float) -> None:
        samples[label].setdefault(measure, []).append(seconds)

    def orders(i: int) -> list[str]:
        return ["before", "after"] if i % 2 == 0 else ["after", "before"]

    for label in orders(0):
        record(label, "index_s", el.index_engine(clients[label], corpus, lambda *_: None))
    rng = np.random.default_rng(5)
    for r in range(args.rounds):
        ids = rng.choice(args.docs, 20, replace=False)
        for label in orders(r):
            es = clients[label]
            t0 = time.perf_counter()
            helpers.bulk(
                es, ({"_index": el.INDEX, "_id": str(i), "_source": corpus.doc(int(i))} for i in ids)
            )
            t1 = time.perf_counter()
            es.indices.refresh(index=el.INDEX)
            record(label, "write", t1 - t0)
            record(label, "refresh", time.perf_counter() - t1)
    bodies = {
        "bm25": lambda q: el.bm25_body(q[0]),
        "hybrid": lambda q: el.hybrid_body(q[0], q[1].tolist()),
        "bm25_src": lambda q: {**el.bm25_body(q[0]), "_source": True},
    }
    for measure, body in bodies.items():
        for i, q in enumerate(queries[:3] + queries):  # the first three warm up
            for label in orders(i):
                t0 = time.perf_counter()
                clients[label].search(index=el.INDEX, **body(q))
                if i >= 3:
                    record(label, measure, time.perf_counter() - t0)
    for i in range(3):  # a new engine object on the saved files: load (and verify) + first search
        for label in orders(i):
            _, core, path = engines[label]
            eng = core.Engine(path)
            t0 = time.perf_counter()
            eng.handle(el.INDEX).segment()
            record(label, "open_s", time.perf_counter() - t0)
            eng.store.close()
    report: dict = {"docs": args.docs, "queries": args.queries, "rounds": args.rounds, "base": args.base}
    for measure in ("refresh", "write", "bm25", "hybrid", "bm25_src", "index_s", "open_s"):
        before = float(np.median(samples["before"][measure]))
        after = float(np.median(samples["after"][measure]))
        report[measure] = {"before_p50_s": before, "after_p50_s": after, "ratio": after / before}
    report["samples"] = samples
    return report


def markdown(report: dict) -> str:
    lines = [
        f"{report['docs']} chunks, {report['queries']} queries, {report['rounds']} refresh rounds; "
        f"before = {report['base']}, same process, alternating\n",
        "| measure | before p50 | after p50 | after/before |",
        "|---|---|---|---|",
    ]
    for m in ("refresh", "write", "bm25", "hybrid", "bm25_src", "index_s", "open_s"):
        r = report[m]
        scale, unit = (1, "s") if m.endswith("_s") else (1000, "ms")
        lines.append(
            f"| {m} | {r['before_p50_s'] * scale:.3g} {unit} | {r['after_p50_s'] * scale:.3g} {unit} "
            f"| {r['ratio']:.2f}x |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--base", default=BASE, help="git commit of the 'before' engine (default %(default)s)")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="storage-cost-"))
    try:
        report = run(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(markdown(report))
    out = REPO / "bench" / "results" / "storage_cost.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
