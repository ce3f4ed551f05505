"""Approximate kNN through the engine's HNSW graph (engine/index/hnsw.py): recall and latency.

Two parts, measured in the same run:

* ``real`` -- recall@10 against the exact top 10 on real embeddings: the QASPER validation
  chunks and questions (``../shared/data/qasper``), embedded with the bundled model through the
  onnx backend (cached in ~/.cache/scholar-es/embeddings.sqlite3), indexed into an embedded
  engine twice -- without ``index_options`` (int8_hnsw, Elasticsearch 8.14+'s default) and with
  ``hnsw`` (float graph) -- and searched with the top-level ``knn`` (k 10) at several
  ``num_candidates``. The exact top 10 is numpy's, in float64.
* ``synthetic`` -- ``--docs`` (100,000) 384-dim unit vectors and queries from
  bench/engine_latency.py's generator, indexed as int8_hnsw, and per query (methods interleaved
  query by query, ``--reps`` 3 passes, wall and CPU time): ``engine_hnsw`` (top-level knn, k 10,
  num_candidates 100, through the official client), ``usearch`` (usearch alone: an i8 cosine
  index with the same m 16 / ef_construction 100, expansion 100, top 10, one thread) and
  ``numpy_exact`` (``matrix @ q`` + ``argpartition``). Recall@10 of the first two against the
  third. Apart: the bulk time, the refresh that writes the base and builds the graph on every core
  (``hnsw.build_threads()``), usearch alone building the same graph on as many threads (the
  baseline of that ratio), and a fresh process opening the saved index: the time to its first
  kNN answer and the graphs it built (0: the saved graph is restored, never rebuilt).

    PYTHONPATH=. .venv/bin/python bench/knn_hnsw.py                      # QASPER + 100k synthetic
    PYTHONPATH=. .venv/bin/python bench/knn_hnsw.py --docs 1000000 --queries 100 --skip-real  # 1M

Prints a markdown table and writes ``bench/results/knn_hnsw.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from engine_latency import Corpus, time_interleaved  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "qasper"
K = 10


def exact_top(m: np.ndarray, q: np.ndarray, k: int = K) -> set[int]:
    s = m.astype(np.float64) @ q.astype(np.float64)
    top = np.argpartition(-s, k)[:k]
    return {int(i) for i in top}


def bulk_vectors(es, index: str, vecs: np.ndarray, index_options: dict | None) -> tuple[float, float]:
    """(bulk seconds, refresh seconds): the refresh writes the base and builds its graph."""
    from elasticsearch import helpers

    v: dict = {"type": "dense_vector", "dims": int(vecs.shape[1]), "similarity": "cosine"}
    if index_options:
        v["index_options"] = index_options
    es.indices.create(index=index, mappings={"properties": {"v": v}})
    t0 = time.perf_counter()
    helpers.bulk(
        es,
        ({"_index": index, "_id": str(i), "v": [float(x) for x in vecs[i]]} for i in range(len(vecs))),
        chunk_size=2000,
    )
    t1 = time.perf_counter()
    es.indices.refresh(index=index)
    return t1 - t0, time.perf_counter() - t1


COLD = """
import json, sys, time
t0 = time.perf_counter()
from scholar_es.engine.index import hnsw
from scholar_es.engine.rest.transport import embedded_client
es = embedded_client(sys.argv[1])
q = json.loads(sys.argv[3])
es.search(index=sys.argv[2], knn={"field": "v", "query_vector": q, "k": 10, "num_candidates": 100}, size=10)
first = time.perf_counter() - t0
print(json.dumps({"first_knn_s": first, "graphs_built": hnsw.counts["build"], "cpu_s": time.process_time()}))
"""


def cold_open(path: str, index: str, q: np.ndarray) -> dict:
    """A fresh process opens the saved index and answers one kNN: its time and graph builds."""
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", COLD, path, index, json.dumps(q.tolist())],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_top(es, index: str, q: np.ndarray, nc: int) -> list[int]:
    resp = es.search(
        index=index,
        knn={"field": "v", "query_vector": q.tolist(), "k": K, "num_candidates": nc},
        size=K,
        source=False,
    )
    return [int(h["_id"]) for h in resp["hits"]["hits"]]


def real_part(es, n_queries: int, log) -> dict:
    from indexer.embedder import Embedder

    chunks = [json.loads(line) for line in (DATA / "chunks_validation.jsonl").open()]
    questions = [json.loads(line) for line in (DATA / "questions_validation.jsonl").open()][:n_queries]
    emb = Embedder(backend="onnx")
    t0 = time.perf_counter()
    docs = emb.encode([c["text"] for c in chunks])
    qs = emb.encode([q.get("question") or q.get("text") or "" for q in questions])
    log(f"embedded {len(docs)} chunks + {len(qs)} questions in {time.perf_counter() - t0:.0f}s")
    out: dict = {"docs": len(docs), "queries": len(qs), "dims": int(docs.shape[1]), "recall@10": {}}
    truth = [exact_top(docs, q) for q in qs]
    for name, opts in (("int8_hnsw (default)", None), ("hnsw", {"type": "hnsw"})):
        index = "real-" + ("i8" if opts is None else "f32")
        _, refresh_s = bulk_vectors(es, index, docs, opts)
        out.setdefault("refresh_s (graph build)", {})[name] = refresh_s
        for nc in (15, 50, 100, 200):
            rec = [len(set(engine_top(es, index, q, nc)) & t) / K for q, t in zip(qs, truth, strict=True)]
            out["recall@10"][f"{name}, num_candidates {nc}"] = float(np.mean(rec))
            log(f"real {name} nc={nc}: recall@10 {np.mean(rec):.4f}")
    return out


def synthetic_part(es, path: str, n_docs: int, n_queries: int, reps: int, log) -> dict:
    from usearch.index import Index

    from scholar_es.engine.index import hnsw

    t0 = time.perf_counter()
    corpus = Corpus(n_docs)
    vecs = corpus.vectors
    queries = [q for _, q in corpus.queries(n_queries)]
    log(f"generated {n_docs} vectors in {time.perf_counter() - t0:.0f}s")
    threads = hnsw.build_threads()
    index_s, refresh_s = bulk_vectors(es, "syn", vecs, {"type": "int8_hnsw", "m": 16, "ef_construction": 100})
    log(f"bulk {index_s:.0f}s, refresh (graph built on {threads} threads) {refresh_s:.0f}s")
    t0 = time.perf_counter()
    engine_top(es, "syn", queries[0], 100)
    first_knn = time.perf_counter() - t0
    t0 = time.perf_counter()
    ux = Index(ndim=vecs.shape[1], metric="cos", dtype="i8", connectivity=16, expansion_add=100)
    ux.add(np.arange(n_docs, dtype=np.uint64), vecs, threads=threads)
    ux.expansion_search = 100
    usearch_build = time.perf_counter() - t0
    log(f"usearch alone built in {usearch_build:.0f}s on {threads} threads")
    es.indices.refresh(index="syn")  # nothing changed: writes nothing
    cold = cold_open(path, "syn", queries[1])
    log(f"fresh process: first kNN after {cold['first_knn_s']:.2f}s, graphs built {cold['graphs_built']}")

    def numpy_exact(q):
        s = vecs @ q
        top = np.argpartition(-s, K)[:K]
        return top[np.argsort(-s[top])]

    fns = {
        "engine_hnsw": lambda q: engine_top(es, "syn", q, 100),
        "usearch": lambda q: ux.search(q, K, threads=1).keys,
        "numpy_exact": numpy_exact,
    }
    timings = time_interleaved(fns, queries, reps)
    truth = [exact_top(vecs, q) for q in queries]
    recall = {
        name: float(
            np.mean(
                [len({int(i) for i in fns[name](q)} & t) / K for q, t in zip(queries, truth, strict=True)]
            )
        )
        for name in ("engine_hnsw", "usearch")
    }
    return {
        "docs": n_docs,
        "queries": n_queries,
        "reps": reps,
        "index_s": index_s,
        "build_threads": threads,
        "graph_build_s": {"engine (refresh writing the base)": refresh_s, "usearch alone": usearch_build},
        "first_knn_after_refresh_s": first_knn,
        "cold_open": cold,
        "recall@10": recall,
        "timings": timings,
    }


def markdown(report: dict) -> str:
    lines = []
    real = report.get("real")
    if real:
        lines += [
            f"QASPER validation: {real['docs']} chunks, {real['queries']} questions, {real['dims']} dims",
            "",
            "| index / num_candidates | recall@10 vs exact |",
            "|---|---|",
        ]
        lines += [f"| {k} | {v:.4f} |" for k, v in real["recall@10"].items()]
        lines += [""]
    syn = report["synthetic"]
    lines += [
        f"synthetic: {syn['docs']} x 384 unit vectors, {syn['queries']} queries, {syn['reps']} reps "
        f"(p50 ms: median over reps [min-max]); recall@10 engine {syn['recall@10']['engine_hnsw']:.4f}, "
        f"usearch {syn['recall@10']['usearch']:.4f}",
        "",
        "| method | wall p50 ms | CPU p50 ms |",
        "|---|---|---|",
    ]
    for name, reps in syn["timings"].items():
        w = [r["wall"]["p50_ms"] for r in reps]
        c = [r["cpu"]["p50_ms"] for r in reps]
        lines.append(
            f"| {name} | {np.median(w):.3f} [{min(w):.3f}-{max(w):.3f}] | "
            f"{np.median(c):.3f} [{min(c):.3f}-{max(c):.3f}] |"
        )
    t = syn["timings"]
    for kind in ("wall", "cpu"):
        per_rep = [
            t["engine_hnsw"][i][kind]["p50_ms"] / t["usearch"][i][kind]["p50_ms"] for i in range(syn["reps"])
        ]
        lines.append(
            f"\nengine_hnsw / usearch ({kind} p50): {np.median(per_rep):.2f} "
            f"(per repetition {', '.join(f'{r:.2f}' for r in per_rep)})"
        )
    b = syn["graph_build_s"]
    lines += [
        "",
        f"graph build on {syn['build_threads']} threads: engine refresh {b['engine (refresh writing the base)']:.1f} s "
        f"(bulk before it {syn['index_s']:.1f} s), usearch alone {b['usearch alone']:.1f} s "
        f"(ratio {b['engine (refresh writing the base)'] / b['usearch alone']:.2f}); first kNN after the "
        f"refresh {syn['first_knn_after_refresh_s'] * 1000:.1f} ms; fresh process: first kNN "
        f"{syn['cold_open']['first_knn_s']:.2f} s after start, graphs built {syn['cold_open']['graphs_built']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--real-queries", type=int, default=1005)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-real", action="store_true")
    args = ap.parse_args(argv)
    from scholar_es.engine.rest.transport import embedded_client

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    report: dict = {"machine": platform.platform(), "python": platform.python_version()}
    with tempfile.TemporaryDirectory() as tmp:
        es = embedded_client(tmp)
        try:
            if not args.skip_real:
                report["real"] = real_part(es, args.real_queries, log)
            report["synthetic"] = synthetic_part(es, tmp, args.docs, args.queries, args.reps, log)
        finally:
            es.close()
    out = REPO / "bench" / "results" / "knn_hnsw.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
