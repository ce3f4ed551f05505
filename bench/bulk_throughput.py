"""Bulk write throughput of the embedded engine against bm25s + numpy, measured in the same run.

Writes N synthetic chunks (``engine_latency.py``'s deterministic generator and the project's chunk
mapping, ``mappings/chunks.json``) into a fresh embedded engine through the official client's
``elasticsearch.helpers.streaming_bulk`` (chunks of 500 actions), then refreshes, twice per
repetition: without vectors (the mapping and the documents minus ``vector``) and with the 384-dim
vectors (``int8_hnsw``; the graph is built on the first kNN search, not timed here). The peers
index the same documents in the same process and repetition:

* ``bm25s``: ``bm25s.tokenize`` (english stop words + PyStemmer) + ``BM25.index`` over title +
  abstract + chunk text as one field (what ``engine_latency.py``'s ``bm25s`` searches);
* ``numpy``: the vectors from the same JSON-ready float lists into one float32 matrix, normalized
  (what ``numpy_knn`` searches).

Each is timed in CPU seconds (``time.process_time``: this process, every thread) and wall
seconds; methods take turns within a repetition, ``--reps`` (3) repetitions, medians reported.
Ratios are docs per CPU-second of the engine over the peer's: ``no_vectors / bm25s``,
``no_vectors / (bm25s + numpy)`` (issue 16's target: >= 0.5) and ``vectors / (bm25s + numpy)``.
Engine timings cover request serialization, the in-process transport, parsing, analysis,
SQLite and the refresh (the documents searchable at the end, as the peers' are).

    PYTHONPATH=. .venv/bin/python bench/bulk_throughput.py              # 100,000 chunks
    PYTHONPATH=. .venv/bin/python bench/bulk_throughput.py --quick      # 5,000 chunks, 1 rep
    PYTHONPATH=. .venv/bin/python bench/bulk_throughput.py --docs 20000 --reps 3 --profile /tmp/p

``--profile DIR`` also writes a cProfile of each engine run (``DIR/engine_{mode}_{rep}.prof``).
Prints a markdown table and writes ``bench/results/bulk_throughput.json``.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import functools
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.engine_latency import SECTION_TYPES, Corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INDEX = "chunks"
CHUNK = 500


def timed(fn: Callable[[], object], profile: Path | None = None) -> dict[str, float]:
    prof = cProfile.Profile() if profile else None
    c0, w0 = time.process_time(), time.perf_counter()
    if prof:
        prof.enable()
    fn()
    if prof:
        prof.disable()
    out = {"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0}
    if prof and profile:
        prof.dump_stats(profile)
    return out


def source(corpus: Corpus, i: int, vectors: bool) -> dict:
    """``corpus.doc(i)``, without building the vector's float list when it is not sent."""
    pid = int(corpus.paper[i])
    doc = {
        "chunk_id": f"p{pid}#c{i}",
        "paper_id": f"p{pid}",
        "title": corpus.titles[pid],
        "abstract": corpus.abstracts[pid],
        "chunk_text": corpus.chunk_text[i],
        "section_type": SECTION_TYPES[int(corpus.section[i])],
        "position": i % 12,
    }
    if vectors:
        doc["vector"] = corpus.vectors[i].tolist()  # the same floats as float(x) for x in ...
    return doc


def engine_run(corpus: Corpus, vectors: bool, folder: Path) -> None:
    from elasticsearch import helpers

    from scholar_es.engine.rest.transport import embedded_client

    body = json.loads((REPO / "mappings" / "chunks.json").read_text())
    if not vectors:
        body = copy.deepcopy(body)
        del body["mappings"]["properties"]["vector"]
        body["mappings"]["_source"] = {"excludes": []}
    es = embedded_client(folder)
    try:
        es.indices.create(index=INDEX, **body)

        def actions() -> Iterator[dict]:
            for i in range(corpus.n):
                yield {"_index": INDEX, "_id": str(i), "_source": source(corpus, i, vectors)}

        failed = 0
        for ok, _ in helpers.streaming_bulk(
            es, actions(), chunk_size=CHUNK, max_chunk_bytes=200 * 1024 * 1024, raise_on_error=False
        ):
            failed += not ok
        if failed:
            raise RuntimeError(f"{failed} bulk items failed")
        es.indices.refresh(index=INDEX)
        assert es.count(index=INDEX)["count"] == corpus.n
    finally:
        es.close()


def bm25s_run(corpus: Corpus) -> None:
    import bm25s
    import Stemmer

    texts = [corpus.flat_text(i) for i in range(corpus.n)]
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(
        bm25s.tokenize(texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False),
        show_progress=False,
    )


def numpy_run(corpus: Corpus) -> None:
    # the same float lists the engine's documents carry
    matrix = np.array([source(corpus, i, True)["vector"] for i in range(corpus.n)], dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)


def run(n_docs: int, reps: int, profile: Path | None, log: Callable[[str], None] = print) -> dict:
    corpus = Corpus(n_docs)
    log(f"generated {n_docs} chunks")
    samples: dict[str, list[dict[str, float]]] = {
        k: [] for k in ("bm25s", "numpy", "engine_no_vectors", "engine_vectors")
    }
    # warm-up, not timed: imports, the analyzers' caches of the stems of the vocabulary's words
    warm = Corpus(min(n_docs, 2000), seed=7)
    for vectors in (False, True):
        folder = Path(tempfile.mkdtemp(prefix="bulk-bench-"))
        try:
            engine_run(warm, vectors, folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    bm25s_run(warm)
    numpy_run(warm)
    for rep in range(reps):
        for mode in ("engine_no_vectors", "bm25s", "engine_vectors", "numpy"):
            prof = profile / f"{mode}_{rep}.prof" if profile and mode.startswith("engine") else None
            if mode.startswith("engine"):
                folder = Path(tempfile.mkdtemp(prefix="bulk-bench-"))
                try:
                    t = timed(functools.partial(engine_run, corpus, mode == "engine_vectors", folder), prof)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
            else:
                t = timed(functools.partial(bm25s_run if mode == "bm25s" else numpy_run, corpus))
            samples[mode].append(t)
            log(f"rep {rep + 1} {mode}: cpu {t['cpu']:.2f}s wall {t['wall']:.2f}s")

    ratios: dict[str, list[float]] = {
        "no_vectors/bm25s": [],
        "no_vectors/(bm25s+numpy)": [],
        "vectors/(bm25s+numpy)": [],
    }
    for r in range(reps):  # docs per CPU-s of the engine over the peer's = peer CPU / engine CPU
        bm25 = samples["bm25s"][r]["cpu"]
        both = bm25 + samples["numpy"][r]["cpu"]
        ratios["no_vectors/bm25s"].append(bm25 / samples["engine_no_vectors"][r]["cpu"])
        ratios["no_vectors/(bm25s+numpy)"].append(both / samples["engine_no_vectors"][r]["cpu"])
        ratios["vectors/(bm25s+numpy)"].append(both / samples["engine_vectors"][r]["cpu"])
    return {
        "docs": n_docs,
        "reps": reps,
        "chunk_size": CHUNK,
        "machine": f"{platform.processor() or platform.machine()}, python {platform.python_version()}",
        "samples": samples,
        "median": {
            m: {k: statistics.median(s[k] for s in v) for k in ("cpu", "wall")} for m, v in samples.items()
        },
        "ratios": ratios,
    }


def markdown(report: dict) -> str:
    n = report["docs"]
    lines = [
        f"{n} docs, {report['reps']} repetitions (medians)",
        "",
        "| method | CPU s | wall s | docs/CPU-s | docs/wall-s |",
        "|---|---:|---:|---:|---:|",
    ]
    for m, t in report["median"].items():
        lines.append(f"| {m} | {t['cpu']:.2f} | {t['wall']:.2f} | {n / t['cpu']:.0f} | {n / t['wall']:.0f} |")
    lines += ["", "| ratio (docs per CPU-s, engine / peer) | median | per repetition |", "|---|---:|---|"]
    for k, v in report["ratios"].items():
        lines.append(f"| {k} | {statistics.median(v):.3f} | {', '.join(f'{x:.3f}' for x in v)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="5,000 chunks, 1 repetition")
    ap.add_argument("--profile", type=Path, default=None, help="write cProfile stats of engine runs here")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "bulk_throughput.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.docs, args.reps = 5000, 1
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    report = run(args.docs, args.reps, args.profile)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
