"""Pruned top hits against scoring every match, in one process (issue 29, engine/query/topk.py).

On an index kept by ``text_latency.py`` (``--engine-dir``), the project's requests for real
QASPER questions (``text_latency.bodies``: the text query, the bare hybrid, ``scholar-es search``'s
own request) run in blocks of all the questions, alternating the pruned path and every match
scored (``topk.ENABLED``), the order of the pair swapped from block to block; CPU time per request.
Warm caches: the in-process A/B of the same requests, beside ``text_latency.py``'s comparison with
peers (whose interleaving leaves each method cold at times).

    PYTHONPATH=. .venv/bin/python bench/topk_ab.py --index /tmp/text-bench/qasper-100000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from text_latency import INDEX, bodies, load_queries  # noqa: E402

KINDS = ("engine_text", "engine_hybrid", "engine_default")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, required=True, help="an engine directory text_latency.py kept")
    ap.add_argument("--queries", type=int, default=50, help="QASPER questions (50)")
    ap.add_argument("--blocks", type=int, default=4, help="blocks per path (4)")
    args = ap.parse_args(argv)
    from scholar_es.engine.query import topk
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(args.index)
    questions = [q for q in load_queries(args.queries, lambda m: None) if q[0] == "qasper"]
    print("| request | pruned CPU p50 ms | every match CPU p50 ms | ratio |\n|---|---:|---:|---:|")
    for kind in KINDS:
        requests = [bodies(text, vec)[kind] for _, text, vec in questions]
        for body in requests[:5]:  # warm-up
            es.search(index=INDEX, **body)
        times: dict[bool, list[float]] = {True: [], False: []}
        for block in range(args.blocks):
            for enabled in (True, False) if block % 2 == 0 else (False, True):
                topk.ENABLED = enabled
                for body in requests:
                    t0 = time.process_time()
                    es.search(index=INDEX, **body)
                    times[enabled].append(time.process_time() - t0)
        topk.ENABLED = True
        pruned, full = (1e3 * float(np.median(times[k])) for k in (True, False))
        print(f"| {kind} | {pruned:.2f} | {full:.2f} | {pruned / full:.2f} |")
    es.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
