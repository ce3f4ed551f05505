"""Indexing benchmark: chunks/s per embedding backend, and the share of time outside ``encode``.

Indexes the first papers of QASPER validation until ``--paragraphs`` paragraphs (default
1,000) into a fresh embedded engine with the default model, with the embedding cache off so every
chunk is really embedded, once per backend[:batch size] (``--backends``, default
torch,onnx,onnx-int8, each at its default batch size: 32, 8, 8; the first is the baseline) and
``--rounds`` times, the backends interleaved (t, o, i, t, o, i, ...) so each sees the same
machine load. Reports wall and CPU seconds (this process, all threads), chunks/s, and the speedup
over torch's median in the same run. Model loading and the one-off ONNX export happen before the
timed runs. Targets: time outside ``encode`` under 10% (issue 2); default backend >= 2.5x torch's
chunks/s (issue 16). ``backend:batch:0`` runs the indexer's sequential path (no embed-ahead thread),
to compare with ``backend:batch`` (``EMBED_AHEAD`` batches embedded ahead of the writes).

    .venv/bin/python bench/index_throughput.py [--paragraphs 1000] [--rounds 2] [--backends torch,onnx]
    .venv/bin/python bench/index_throughput.py --paragraphs 400 --rounds 2 --backends onnx:8:0,onnx:8
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from indexer.embedder import DEFAULT_BATCH, Embedder  # noqa: E402
from indexer.pipeline import EMBED_AHEAD, IndexRun  # noqa: E402
from scholar_es.engine.rest.transport import embedded_client  # noqa: E402


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
    ap.add_argument("--batch-size", type=int, default=None, help="[default: the backend's]")
    ap.add_argument(
        "--backends",
        default="torch,onnx,onnx-int8",
        help="backend[:batch size[:embed ahead]], comma-separated; the first is the baseline "
        "(embed ahead: batches embedded in a background thread ahead of the writes, 0 = sequential; "
        "default indexer.pipeline.EMBED_AHEAD)",
    )
    ap.add_argument("--rounds", type=int, default=1)
    args = ap.parse_args()
    source = Path(args.data) / "qasper" / "papers_validation.jsonl"
    if not source.exists():
        sys.exit(f"skipped: {source} not found (set --data or SCHOLAR_ES_DATA)")
    backends = [
        b if ":" in b else f"{b}:{args.batch_size or DEFAULT_BATCH[b]}" for b in args.backends.split(",")
    ]
    aheads = [EMBED_AHEAD if b.count(":") < 2 else int(b.rsplit(":", 1)[1]) for b in backends]
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        sample_file = Path(tmp) / "sample.jsonl"
        n = sample(source, args.paragraphs, sample_file)
        embedders = {}
        for label in backends:  # loads (and exports, the first time) before anything is timed
            name, batch = label.split(":")[:2]
            embedders[label] = Embedder(batch_size=int(batch), use_cache=False, backend=name)
            embedders[label].encode(["warm up"])
        for r in range(args.rounds):
            for backend, ahead in zip(backends, aheads, strict=True):
                embedder = embedders[backend]
                embedder.encode_seconds = 0.0
                es = embedded_client(Path(tmp) / f"engine-{backend}-{r}")
                t0, c0 = time.perf_counter(), time.process_time()
                summary = IndexRun(es, embedder, embed_ahead=ahead).run([sample_file], "qasper")
                total, cpu = time.perf_counter() - t0, time.process_time() - c0
                es.close()
                runs.append(
                    {
                        "backend": backend,
                        "round": r,
                        "chunks": summary.chunks,
                        "seconds": round(total, 2),
                        "cpu_seconds": round(cpu, 2),
                        "encode_seconds": round(summary.encode_seconds, 2),
                        "chunks_per_second": round(summary.chunks / total, 1),
                        "share_outside_encode": round((total - summary.encode_seconds) / total, 4),
                    }
                )
                print(json.dumps(runs[-1]), file=sys.stderr)
    rows = []
    base = statistics.median(r["chunks_per_second"] for r in runs if r["backend"] == backends[0])
    base_cpu = statistics.median(r["cpu_seconds"] / r["chunks"] for r in runs if r["backend"] == backends[0])
    print(f"{n} paragraphs, {runs[0]['chunks']} chunks; medians of {args.rounds} interleaved round(s)")
    print(
        f"| backend | chunks/s | x {backends[0]} | CPU ms/chunk | x {backends[0]} (CPU) | share outside encode |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for backend in backends:
        mine = [r for r in runs if r["backend"] == backend]
        cps = statistics.median(r["chunks_per_second"] for r in mine)
        cpu = statistics.median(r["cpu_seconds"] / r["chunks"] for r in mine)
        share = statistics.median(r["share_outside_encode"] for r in mine)
        rows.append({"backend": backend, "chunks_per_second": cps, "cpu_ms_per_chunk": cpu * 1000})
        print(
            f"| {backend} | {cps:.1f} | {cps / base:.2f} | {cpu * 1000:.0f} | {base_cpu / cpu:.2f} | {share:.1%} |"
        )
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "index_throughput.json").write_text(json.dumps({"summary": rows, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
