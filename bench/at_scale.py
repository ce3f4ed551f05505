"""Issue 16's at-scale targets on an index that ``engine_latency.py --engine-dir DIR`` built.

Building a 1M-chunk index takes most of an hour on 2 cores, so this bench reuses the one
``engine_latency.py`` keeps (``--engine-dir``; index ``bench-chunks``, its deterministic corpus)
and measures, for the N chunks found there:

* **cold start**: a fresh process (``python -c``) that imports the client, opens the engine and
  answers one hybrid query (``engine_latency.hybrid_body``, the HNSW path on an ``int8_hnsw``
  field of 10,000+ vectors); reported: seconds from process start to the answer, the child's CPU
  seconds, and its peak RSS (``VmHWM``; ``ru_maxrss`` would count the parent's size at the fork)
  against the raw vectors + postings it must hold
  (target: first answer <= 3 s, peak RSS <= 1.5x raw vectors + postings);
* **append**: 1,000 new chunks through ``helpers.bulk``, a refresh and the same hybrid answered,
  CPU and wall from the first bulk request to the answer (target <= 1.5 s), ``--reps`` times;
* **disk**: the engine folder against the raw text (title + abstract + chunk text of every chunk,
  UTF-8) plus float32 vectors (target <= 1.3x).

It adds ``--reps`` x 1,000 chunks to the index (a later ``engine_latency.py`` run with the same
``--docs`` then finds more documents than it expects and rebuilds). ::

    PYTHONPATH=. .venv/bin/python bench/engine_latency.py --docs 1000000 --queries 60 --engine-dir /tmp/e1m
    PYTHONPATH=. .venv/bin/python bench/at_scale.py --engine-dir /tmp/e1m

Prints a Markdown table and writes ``bench/results/at_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from engine_latency import DIMS, INDEX, Corpus, hybrid_body  # noqa: E402

ADD = 1_000

CHILD = r"""
import json, os, resource, sys, time
def peak_rss_mb():
    # VmHWM: this process's own peak. ru_maxrss is not: Linux keeps it across fork + exec, so a
    # child of a big parent reports at least the parent's resident size at the fork
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t_start = float(sys.argv[2])
from scholar_es.engine.rest.transport import embedded_client
body = json.loads(sys.argv[3])
c0 = time.process_time()
es = embedded_client(sys.argv[1])
resp = es.search(index=INDEX_NAME, **body)
assert resp["hits"]["hits"]
import scholar_es
print(json.dumps({"src": os.path.dirname(os.path.dirname(scholar_es.__file__)), "first_answer": time.time() - t_start, "cpu": time.process_time() - c0,
                  "cpu_process": sum(os.times()[:2]),
                  "peak_rss_mb": peak_rss_mb(),
                  "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
os._exit(0)  # no save at exit: measure the open and the answer, not a save
""".replace("INDEX_NAME", repr(INDEX))


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def cold_start(path: Path, body: dict, src: Path = REPO) -> dict:
    """One fresh process opening the engine of ``src`` (a checkout: this one, or a baseline's).
    It runs in ``src``: ``python -c`` puts the working directory first on ``sys.path``."""
    env = {**os.environ, "PYTHONPATH": str(src), "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path.resolve()), repr(time.time()), json.dumps(body)],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def raw_sizes(corpus: Corpus, n: int) -> tuple[int, int]:
    """(UTF-8 bytes of title + abstract + chunk text of every chunk, float32 vector bytes)."""
    title = [len(t.encode()) for t in corpus.titles]
    abstract = [len(a.encode()) for a in corpus.abstracts]
    text = 0
    for i in range(n):
        pid = int(corpus.paper[i])
        text += title[pid] + abstract[pid] + len(corpus.chunk_text[i].encode())
    return text, n * DIMS * 4


def postings_bytes(path: Path) -> int:
    """Bytes of the text and keyword columns of the newest commit point's base (vocabularies,
    postings in both directions, lengths: what a search holds besides the vectors)."""
    from scholar_es.engine.index.commit import open_commit

    total = 0
    for folder in (path / "segments").iterdir():
        found = open_commit(folder)
        if found is None:
            continue
        desc = found.meta["segment"]
        refs = [
            ref
            for kind in ("text", "keyword")
            for _name, *parts in desc.get(kind, [])
            for ref in _ints(parts)
        ]
        total += sum(int(found.arrays[r].nbytes) for r in refs)
    return total


def _ints(parts: list) -> list[int]:
    out: list[int] = []
    for p in parts:
        if isinstance(p, int):
            out.append(p)
        elif isinstance(p, list):
            out.extend(_ints(p))
    return out


def run(path: Path, reps: int, out: Path, log, baseline_src: Path | None = None) -> dict:
    from elasticsearch import helpers

    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(path)
    n = int(es.count(index=INDEX)["count"])
    log(f"{path}: {n} chunks in {INDEX}")
    corpus = Corpus(n + ADD * reps)
    text, vec = corpus.queries(1)[0]
    body = hybrid_body(text, [float(x) for x in vec])
    body["_source"] = False
    es.close()

    raw_text, raw_vectors = raw_sizes(corpus, n)
    disk = folder_bytes(path)
    postings = postings_bytes(path)
    cold, base_cold = [], []
    for rep in range(reps):  # with a baseline checkout: alternating, the same index and page cache
        cold.append(cold_start(path, body))
        log(f"cold {rep}: {cold[-1]}")
        if baseline_src is not None:
            base_cold.append(cold_start(path, body, baseline_src))
            log(f"cold {rep} (baseline {baseline_src}): {base_cold[-1]}")

    es = embedded_client(path)
    es.search(index=INDEX, **body)  # open outside the timed part
    appends = []
    next_doc = n
    for rep in range(reps):
        ids = range(next_doc, next_doc + ADD)
        next_doc += ADD
        w0, c0 = time.perf_counter(), time.process_time()
        helpers.bulk(es, ({"_index": INDEX, "_id": str(i), "_source": corpus.doc(i)} for i in ids))
        es.indices.refresh(index=INDEX)
        resp = es.search(index=INDEX, **body)
        appends.append({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0})
        assert resp["hits"]["total"]["value"] >= 1
        log(f"append {rep}: {appends[-1]}")
    es.close()

    def med(rows: list[dict], key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    report: dict = {
        "chunks": n,
        "reps": reps,
        "cold": cold,
        "append": appends,
        "disk_bytes": disk,
        "raw_text_bytes": raw_text,
        "raw_vector_bytes": raw_vectors,
        "postings_bytes": postings,
        "medians": {
            "first_answer_s": med(cold, "first_answer"),
            "cold_cpu_s": med(cold, "cpu_process"),
            "peak_rss_mb": med(cold, "peak_rss_mb"),
            "append_1k_wall_s": med(appends, "wall"),
            "append_1k_cpu_s": med(appends, "cpu"),
        },
    }
    if base_cold:
        report["baseline"] = {
            "src": str(baseline_src),
            "cold": base_cold,
            "ratios": {  # per repetition, this checkout / the baseline, then their median
                key: statistics.median(a[key] / b[key] for a, b in zip(cold, base_cold, strict=True))
                for key in ("first_answer", "cpu_process", "peak_rss_mb")
            },
            "medians": {
                "first_answer_s": med(base_cold, "first_answer"),
                "cold_cpu_s": med(base_cold, "cpu_process"),
                "peak_rss_mb": med(base_cold, "peak_rss_mb"),
            },
        }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    return report


def markdown(r: dict) -> str:
    m = r["medians"]
    mb = 1024 * 1024
    held = (r["raw_vector_bytes"] + r["postings_bytes"]) / mb
    raw = (r["raw_text_bytes"] + r["raw_vector_bytes"]) / mb
    rows = [
        f"{r['chunks']:,} chunks, medians of {r['reps']}:",
        "",
        "| measure | value | target |",
        "|---|---:|---|",
        f"| fresh process -> first hybrid answer | {m['first_answer_s']:.2f} s | <= 3 s |",
        f"| that process's CPU | {m['cold_cpu_s']:.2f} s | |",
        f"| its peak RSS | {m['peak_rss_mb']:.0f} MB = {m['peak_rss_mb'] / held:.2f}x raw vectors + "
        f"postings ({held:.0f} MB) | <= 1.5x |",
        f"| 1,000 chunks bulk + refresh + answer, wall | {m['append_1k_wall_s']:.2f} s | <= 1.5 s |",
        f"| the same, CPU | {m['append_1k_cpu_s']:.2f} s | |",
        f"| disk | {r['disk_bytes'] / mb:.0f} MB = {r['disk_bytes'] / mb / raw:.2f}x raw text + vectors "
        f"({raw:.0f} MB) | <= 1.3x |",
    ]
    b = r.get("baseline")
    if b:
        q, bm = b["ratios"], b["medians"]
        rows += [
            "",
            f"Cold start against the baseline checkout {b['src']} (alternating, medians of {r['reps']}):",
            "",
            "| measure | this checkout | baseline | ratio |",
            "|---|---:|---:|---:|",
            f"| first answer | {m['first_answer_s']:.2f} s | {bm['first_answer_s']:.2f} s | {q['first_answer']:.2f} |",
            f"| CPU | {m['cold_cpu_s']:.2f} s | {bm['cold_cpu_s']:.2f} s | {q['cpu_process']:.2f} |",
            f"| peak RSS | {m['peak_rss_mb']:.0f} MB | {bm['peak_rss_mb']:.0f} MB | {q['peak_rss_mb']:.2f} |",
        ]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--engine-dir", type=Path, required=True, help="a folder engine_latency.py --engine-dir kept"
    )
    ap.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "at_scale.json")
    ap.add_argument(
        "--baseline-src",
        type=Path,
        help="another checkout (e.g. a git worktree of an earlier commit): its cold start is measured "
        "alternately with this one's on the same index, and the ratios reported",
    )
    args = ap.parse_args(argv)
    if args.baseline_src is not None and not (args.baseline_src / "scholar_es").is_dir():
        ap.error(f"--baseline-src {args.baseline_src} holds no scholar_es package")
    if not (args.engine_dir / "segments").is_dir():
        ap.error(f"{args.engine_dir} holds no engine index; build one with engine_latency.py --engine-dir")
    report = run(
        args.engine_dir,
        args.reps,
        args.out,
        lambda m: print(m, file=sys.stderr, flush=True),
        baseline_src=args.baseline_src,
    )
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
