"""What fsync per acknowledged write request costs: bulk throughput with
``index.translog.durability: request`` (SQLite ``synchronous=FULL``: the WAL is fsynced before each
bulk answers) against ``async`` (``synchronous=NORMAL``, the WAL fsynced every
``index.translog.sync_interval``, 5 s), measured in the same run.

Each repetition writes the same documents into two fresh engines (one index each, the two
settings), through the official client's ``bulk`` in requests of ``--per-bulk`` documents, the
two modes taking turns request by request so that load from other jobs on the machine hits both
alike. Timed in wall seconds (an fsync waits for the disk; CPU time does not show it), medians over
``--reps``. The ratio is docs/s of ``request`` over docs/s of ``async`` (1.0: durability is free).
Small bulks show the cost per request, large ones how it is amortized, so two sizes are run.

    PYTHONPATH=. .venv/bin/python bench/durability.py              # 2 sizes x 3 reps
    PYTHONPATH=. .venv/bin/python bench/durability.py --quick      # CI-sized

Prints a markdown table and writes ``bench/results/durability.json``. The disk matters: a disk
with a volatile write cache that honours flushes (most SSDs) costs far more per fsync than tmpfs,
where the two modes are equal; ``--dir`` picks where the engines live (default: the system's
temporary directory; the results record its filesystem).
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scholar_es.engine.rest.transport import embedded_client  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
]


def _doc(n: int) -> dict:
    words = [WORDS[(n * 7 + k * 3) % len(WORDS)] for k in range(40)]
    return {"title": f"paper {n}", "text": " ".join(words), "n": n}


def _ops(start: int, count: int) -> list[dict]:
    ops: list[dict] = []
    for n in range(start, start + count):
        ops += [{"index": {"_index": "bench", "_id": str(n)}}, _doc(n)]
    return ops


def run_once(base: Path, bulks: int, per_bulk: int) -> dict[str, float]:
    """Seconds each mode spent in its bulk requests (one fresh engine per mode)."""
    clients, spent = {}, {}
    for mode in ("request", "async"):
        es = embedded_client(base / mode)
        es.indices.create(index="bench", settings={"index.translog.durability": mode})
        clients[mode], spent[mode] = es, 0.0
    for b in range(bulks):
        ops = _ops(b * per_bulk, per_bulk)
        for mode in ("request", "async") if b % 2 == 0 else ("async", "request"):
            t0 = time.perf_counter()
            resp = clients[mode].bulk(operations=ops)
            spent[mode] += time.perf_counter() - t0
            assert resp["errors"] is False
    return spent


def _filesystem(path: Path) -> str:
    try:
        out = subprocess.run(["df", "-T", str(path)], capture_output=True, text=True, check=True).stdout
        return out.splitlines()[-1].split()[1]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1 repetition, fewer requests")
    ap.add_argument("--dir", type=Path, default=None, help="where the engines are written")
    args = ap.parse_args()
    reps = 1 if args.quick else args.reps
    sizes = [(40, 10), (6, 500)] if args.quick else [(300, 10), (20, 500)]  # (requests, docs per request)
    rows, bases = [], []
    for bulks, per_bulk in sizes:
        samples: dict[str, list[float]] = {"request": [], "async": []}
        ratios = []
        for _ in range(reps):
            base = Path(tempfile.mkdtemp(prefix="bench-durability-", dir=args.dir))
            bases.append(base)
            spent = run_once(base, bulks, per_bulk)
            docs = bulks * per_bulk
            for mode in spent:
                samples[mode].append(docs / spent[mode])
            ratios.append(spent["async"] / spent["request"])  # = (docs/s request) / (docs/s async)
        rows.append(
            {
                "requests": bulks,
                "docs_per_request": per_bulk,
                "request_docs_per_s": statistics.median(samples["request"]),
                "async_docs_per_s": statistics.median(samples["async"]),
                "ratio_request_over_async": statistics.median(ratios),
                "ratios": ratios,
            }
        )
    where = Path(args.dir or tempfile.gettempdir())
    result = {
        "machine": platform.platform(),
        "python": platform.python_version(),
        "filesystem": _filesystem(where),
        "reps": reps,
        "rows": rows,
    }
    print(f"filesystem of {where}: {result['filesystem']}, {reps} repetition(s), wall time, medians\n")
    print("| requests x docs | request docs/s | async docs/s | request / async |")
    print("|---|---:|---:|---:|")
    for r in rows:
        each = ", ".join(f"{x:.2f}" for x in r["ratios"])
        print(
            f"| {r['requests']} x {r['docs_per_request']} | {r['request_docs_per_s']:.0f} | "
            f"{r['async_docs_per_s']:.0f} | {r['ratio_request_over_async']:.2f} [{each}] |"
        )
    out = REPO / "bench" / "results" / "durability.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    # the engines stay open until exit (the process-wide cache): without this, removing their
    # directories makes the exit's save log, rightly, that the files were deleted underneath
    logging.getLogger("scholar_es.engine").disabled = True
    for base in bases:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
