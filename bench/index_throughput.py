"""Indexing benchmark: chunks/s and the share of time spent outside the model's ``encode``.

Indexes the first papers of QASPER validation until ``--paragraphs`` paragraphs (default
1,000) into a fresh embedded engine with the default model, with the embedding cache off
so every chunk is really embedded. Target: time outside ``encode`` under 10% of the total.

    .venv/bin/python bench/index_throughput.py [--paragraphs 1000] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexer.embedder import Embedder  # noqa: E402
from indexer.pipeline import IndexRun  # noqa: E402
from scholar_es.engine.node import embedded_client  # noqa: E402


def sample(source: Path, paragraphs: int, out: Path) -> int:
    """Copy whole papers from ``source`` until they hold ``paragraphs`` paragraphs."""
    total = 0
    with source.open() as f, out.open("w") as w:
        for line in f:
            paper = json.loads(line)
            total += 1 + sum(len(s["paragraphs"]) for s in paper["sections"])
            w.write(line)
            if total >= paragraphs:
                break
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paragraphs", type=int, default=1000)
    ap.add_argument(
        "--data",
        default=os.environ.get(
            "SCHOLAR_ES_DATA", str(Path(__file__).resolve().parents[2] / "shared" / "data")
        ),
    )
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()
    source = Path(args.data) / "qasper" / "papers_validation.jsonl"
    if not source.exists():
        sys.exit(f"skipped: {source} not found (set --data or SCHOLAR_ES_DATA)")
    with tempfile.TemporaryDirectory() as tmp:
        sample_file = Path(tmp) / "sample.jsonl"
        n = sample(source, args.paragraphs, sample_file)
        embedder = Embedder(batch_size=args.batch_size, use_cache=False)
        embedder.encode(["warm up"])  # model load is not indexing time
        embedder.encode_seconds = 0.0
        es = embedded_client(Path(tmp) / "engine")
        t0 = time.perf_counter()
        summary = IndexRun(es, embedder).run([sample_file], "qasper")
        total = time.perf_counter() - t0
    outside = total - summary.encode_seconds
    result = {
        "paragraphs_in_sample": n,
        "chunks": summary.chunks,
        "papers": summary.papers,
        "seconds": round(total, 2),
        "encode_seconds": round(summary.encode_seconds, 2),
        "chunks_per_second": round(summary.chunks / total, 1),
        "share_outside_encode": round(outside / total, 4),
    }
    print("| chunks | seconds | chunks/s | encode s | share outside encode |")
    print("|---|---|---|---|---|")
    print(
        f"| {result['chunks']} | {result['seconds']} | {result['chunks_per_second']} | "
        f"{result['encode_seconds']} | {result['share_outside_encode']:.1%} |"
    )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "index_throughput.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
