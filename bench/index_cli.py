"""``scholar-es index`` end to end, this checkout against the code the issue measured, same run.

Issue 16's target is "``scholar-es index`` with the default model >= 2.5x today's chunks/s, same
machine, same run". ``index_throughput.py`` compares backends inside one process of this
checkout; this bench runs the whole command as a user does, in fresh processes, for:

* ``baseline``: ``python -m scholar_es.cli index`` inside ``--baseline-src`` (a checkout of the
  code as the issue found it: ``git worktree add /tmp/base 7318206``, torch, batch 32);
* this checkout with its default backend (``auto``: onnx fp32), with ``--backend onnx-int8`` and
  with ``--backend torch``.

Each run indexes the same QASPER validation sample (the first papers until ``--paragraphs``
paragraphs) into a fresh engine directory with a fresh, empty embedding cache (so every chunk is
embedded; the ONNX exports are made once before timing and linked into each cache), the variants
interleaved round by round. Reported per variant, medians of ``--rounds``: wall seconds from
process start to exit (imports and model loading included, as a user waits for them), the
child's CPU seconds (user + sys), chunks/s over the wall time, and the ratio to the baseline.

    git worktree add /tmp/base 7318206
    PYTHONPATH=. .venv/bin/python bench/index_cli.py --baseline-src /tmp/base [--paragraphs 1500] [--rounds 3]

Prints a Markdown table and writes ``bench/results/index_cli.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from index_throughput import sample  # noqa: E402

COUNT = (
    "import sys; from scholar_es.engine.rest.transport import embedded_client; "
    "es = embedded_client(sys.argv[1]); print(es.count(index='chunks')['count']); es.close()"
)


def run_index(src: Path, sample_file: Path, engine: Path, cache: Path, extra: list[str]) -> dict:
    env = {**os.environ, "SCHOLAR_ES_CACHE": str(cache), "PYTHONPATH": str(src)}
    env.pop("SCHOLAR_ES_BACKEND", None)
    cmd = [sys.executable, "-m", "scholar_es.cli", "index", str(sample_file), "--format", "qasper"]
    cmd += ["--es", str(engine), "--quiet", *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} (in {src}) failed:\n{proc.stderr[-3000:]}")
    count = subprocess.run(
        [sys.executable, "-c", COUNT, str(engine)],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": round(wall, 2), "cpu": round(cpu, 2), "chunks": int(count.stdout.strip())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-src", type=Path, required=True, help="checkout of the code to compare with")
    ap.add_argument("--paragraphs", type=int, default=1500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--data",
        default=os.environ.get("SCHOLAR_ES_DATA", str(REPO.parent / "shared" / "data")),
    )
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "index_cli.json")
    args = ap.parse_args()
    cli = args.baseline_src / "scholar_es"
    if not ((cli / "cli.py").is_file() or (cli / "cli" / "__main__.py").is_file()):
        ap.error(f"--baseline-src {args.baseline_src} holds no scholar_es/cli.py or scholar_es/cli/")
    source = Path(args.data) / "qasper" / "papers_validation.jsonl"
    if not source.exists():
        sys.exit(f"skipped: {source} not found (set --data or SCHOLAR_ES_DATA)")
    variants = {
        "baseline (torch, batch 32)": (args.baseline_src, []),
        "default (auto: onnx)": (REPO, []),
        "--backend onnx-int8": (REPO, ["--backend", "onnx-int8"]),
        "--backend torch": (REPO, ["--backend", "torch"]),
    }
    runs: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sample_file = tmp / "sample.jsonl"
        paragraphs = sample(source, args.paragraphs, sample_file)
        warm = tmp / "warm.jsonl"
        sample(source, 1, warm)
        exports = tmp / "exports"  # the ONNX exports, made once here and linked into every cache
        for extra in ([], ["--backend", "onnx-int8"]):
            run_index(REPO, warm, tmp / f"warm-engine-{len(extra)}", exports, extra)
        for r in range(args.rounds):
            for label, (src, extra) in variants.items():
                cache = tmp / f"cache-{r}-{len(runs)}"
                cache.mkdir()
                (cache / "onnx").symlink_to(exports / "onnx")
                result = run_index(src, sample_file, tmp / f"engine-{r}-{len(runs)}", cache, extra)
                runs.append({"variant": label, "round": r, **result})
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    base = statistics.median(x["chunks"] / x["wall"] for x in runs if x["variant"].startswith("baseline"))
    base_cpu = statistics.median(x["cpu"] / x["chunks"] for x in runs if x["variant"].startswith("baseline"))
    chunks = runs[0]["chunks"]
    print(f"{paragraphs} paragraphs, {chunks} chunks; medians of {args.rounds} interleaved round(s)\n")
    print(
        "| `scholar-es index` | wall s | CPU s | chunks/s (wall) | x baseline | CPU ms/chunk | x baseline (CPU) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    summary = []
    for label in variants:
        mine = [x for x in runs if x["variant"] == label]
        wall = statistics.median(x["wall"] for x in mine)
        cpu = statistics.median(x["cpu"] for x in mine)
        cps = statistics.median(x["chunks"] / x["wall"] for x in mine)
        cpc = statistics.median(x["cpu"] / x["chunks"] for x in mine)
        summary.append(
            {"variant": label, "wall": wall, "cpu": cpu, "chunks_per_second": cps, "x": cps / base}
        )
        print(
            f"| {label} | {wall:.1f} | {cpu:.1f} | {cps:.1f} | {cps / base:.2f} | {cpc * 1000:.0f} | "
            f"{base_cpu / cpc:.2f} |"
        )
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(
        json.dumps({"baseline_src": str(args.baseline_src), "summary": summary, "runs": runs}, indent=2)
    )


if __name__ == "__main__":
    main()
