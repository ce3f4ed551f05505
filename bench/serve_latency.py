"""``scholar-es serve`` against the in-process API and one process per question, in one run.

Indexes the demo papers (or ``--corpus FILE``, our JSONL) into a temporary embedded engine,
starts ``scholar-es serve`` on it as a subprocess (loopback, a free port, ``--log-level warning``)
and measures, with every question's embedding already cached on both sides (warm):

* ``inproc``         -- ``querybuilder.strategies.search(es, q, strategy=..., embedder=...)`` in this
  process, one search at a time (the baseline; the methods below are interleaved with it, each
  question through every method in turn);
* ``server``         -- ``POST /_scholar/search`` over one keep-alive HTTP connection, one at a
  time (the same search: the strategy's own hits carry full chunk texts and paragraph ids);
* ``inproc_es`` / ``server_es`` -- the same search body sent with the official client in process
  (embedded transport node) and over HTTP to the server's Elasticsearch API;
* ``process``        -- ``scholar-es search Q --json`` as a new process per question (the model
  loads every time; the embedding cache is warm);
* throughput         -- 8 concurrent clients x 200 searches through the search API, then through
  the ES API: searches per second, latency under load, errors, and answers that differ from
  the in-process ones (must be 0).

Target (issue 14): server p50 and p95 under 1.3 x in-process plus a fixed few ms.

    PYTHONPATH=. .venv/bin/python bench/serve_latency.py            # 200 timed searches, 8 x 200 load
    PYTHONPATH=. .venv/bin/python bench/serve_latency.py --quick    # 40 timed, 8 x 25 load

Prints a markdown table and writes ``bench/results/serve_latency.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTIONS = [
    "How is information carried between windows of a long document?",
    "reciprocal rank fusion of rankings",
    "What datasets are used for evaluation?",
    "Which section multipliers help retrieval?",
    "How do they train the memory writer?",
    "What is the cost of full attention?",
    "How are paragraphs tagged with section types?",
    "Does dense retrieval beat BM25 on scientific questions?",
    "What baselines do they compare against?",
    "How well does the model answer questions about long reports?",
    "Which evaluation metrics are reported?",
    "What are the limitations of the approach?",
]
CLIENTS = 8


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p)) if xs else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(engine_dir: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "scholar_es.cli", "serve", "--es", str(engine_dir), "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--log-level", "warning"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/_scholar/health", timeout=5) as r:
                if json.load(r)["status"] == "green":
                    return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("the server did not start")


class Conn:
    """One keep-alive HTTP connection posting JSON."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.c = http.client.HTTPConnection(host, int(port), timeout=300)

    def post(self, path: str, body: dict) -> tuple[int, dict]:
        self.c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = self.c.getresponse()
        return resp.status, json.loads(resp.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="40 timed searches, 8 x 25 load, 2 processes")
    ap.add_argument("--searches", type=int, default=200, help="timed sequential searches per method")
    ap.add_argument("--per-client", type=int, default=200, help="searches per client in the load test")
    ap.add_argument("--processes", type=int, default=3, help="`scholar-es search` processes to time")
    ap.add_argument("--strategy", default="hybrid")
    ap.add_argument("--corpus", default=str(REPO / "scripts" / "demo_papers.jsonl"))
    args = ap.parse_args()
    if args.quick:
        args.searches, args.per_client, args.processes = 40, 25, 2

    from elasticsearch import Elasticsearch

    from indexer.embedder import Embedder
    from indexer.pipeline import IndexRun
    from querybuilder.run import embed_question
    from querybuilder.strategies import build_search, make_plan, search
    from scholar_es.engine.rest.transport import embedded_client

    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    engine_dir = tmp / "engine"
    es = embedded_client(engine_dir)
    embedder = Embedder()
    IndexRun(es, embedder).run([args.corpus], "auto")
    strategy = args.strategy
    proc, url = start_server(engine_dir)
    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"}
    results["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
    try:
        conn = Conn(url)
        es_http = Elasticsearch(url, request_timeout=300)
        bodies = {}
        reference = {}
        for q in QUESTIONS:  # warm: every embedding cached, both sides have run every question once
            reference[q] = [
                (h.chunk_id, h.score) for h in search(es, q, strategy=strategy, embedder=embedder).hits
            ]
            status, answer = conn.post("/_scholar/search", {"question": q, "strategy": strategy})
            assert status == 200 and [(h["chunk_id"], h["score"]) for h in answer["hits"]] == reference[q]
            plan = make_plan(q, strategy=strategy)
            bodies[q] = build_search(plan, embed_question(es, plan, embedder)).to_dict()
            es_http.search(index="chunks", body=bodies[q])
        order = [QUESTIONS[i % len(QUESTIONS)] for i in range(args.searches)]

        methods = {
            "inproc": lambda q: search(es, q, strategy=strategy, embedder=embedder),
            "server": lambda q: conn.post("/_scholar/search", {"question": q, "strategy": strategy}),
            "inproc_es": lambda q: es.search(index="chunks", body=bodies[q]),
            "server_es": lambda q: es_http.search(index="chunks", body=bodies[q]),
        }
        # interleaved: each question goes through every method in turn, so a burst of load from
        # elsewhere on the machine falls on all of them alike
        lat: dict[str, list[float]] = {k: [] for k in methods}
        for q in order:
            for name, fn in methods.items():
                t0 = time.perf_counter()
                fn(q)
                lat[name].append((time.perf_counter() - t0) * 1000)
        procs = []
        for q in QUESTIONS[: args.processes]:
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "scholar_es.cli", "search", q, "--es", str(engine_dir), "--json"],
                check=True,
                stdout=subprocess.DEVNULL,
            )
            procs.append((time.perf_counter() - t0) * 1000)
        lat["process"] = procs

        def load(kind: str) -> dict:
            mismatches, errors, lats = 0, 0, []
            lock = threading.Lock()

            def client(n: int) -> None:
                nonlocal mismatches, errors
                c = Conn(url) if kind == "search_api" else None
                for i in range(args.per_client):
                    q = QUESTIONS[(n + i) % len(QUESTIONS)]
                    t0 = time.perf_counter()
                    try:
                        if kind == "search_api":
                            status, answer = c.post("/_scholar/search", {"question": q, "strategy": strategy})
                            got = [(h["chunk_id"], h["score"]) for h in answer.get("hits", [])]
                            bad = status != 200 or got != reference[q]
                        else:
                            hits = es_http.search(index="chunks", body=bodies[q])["hits"]["hits"]
                            bad = [h["_id"] for h in hits] != expected_es[q]
                    except Exception:  # noqa: BLE001 - counted as an error
                        with lock:
                            errors += 1
                        continue
                    with lock:
                        lats.append((time.perf_counter() - t0) * 1000)
                        mismatches += bad

            t0 = time.perf_counter()
            with ThreadPoolExecutor(CLIENTS) as pool:
                list(pool.map(client, range(CLIENTS)))
            wall = time.perf_counter() - t0
            n = CLIENTS * args.per_client
            return {
                "searches": n,
                "seconds": round(wall, 2),
                "per_second": round(n / wall, 1),
                "p50_ms": round(pct(lats, 50), 2),
                "p95_ms": round(pct(lats, 95), 2),
                "errors": errors,
                "mismatches": mismatches,
            }

        expected_es = {
            q: [h["_id"] for h in es.search(index="chunks", body=bodies[q])["hits"]["hits"]]
            for q in QUESTIONS
        }
        results["load"] = {"search_api": load("search_api"), "es_api": load("es_api")}
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    results["latency_ms"] = {
        k: {"n": len(v), "p50": round(pct(v, 50), 2), "p95": round(pct(v, 95), 2)} for k, v in lat.items()
    }
    L = results["latency_ms"]
    results["ratios"] = {
        "server_p50_over_inproc": round(L["server"]["p50"] / L["inproc"]["p50"], 3),
        "server_p95_over_inproc": round(L["server"]["p95"] / L["inproc"]["p95"], 3),
        "server_p95_minus_1.3x_inproc_ms": round(L["server"]["p95"] - 1.3 * L["inproc"]["p95"], 2),
        "server_p50_minus_1.3x_inproc_ms": round(L["server"]["p50"] - 1.3 * L["inproc"]["p50"], 2),
        "server_es_p50_over_inproc_es": round(L["server_es"]["p50"] / L["inproc_es"]["p50"], 3),
        "server_es_p50_minus_1.3x_inproc_es_ms": round(
            L["server_es"]["p50"] - 1.3 * L["inproc_es"]["p50"], 2
        ),
        "process_p50_over_server_p50": round(L["process"]["p50"] / L["server"]["p50"], 1),
    }
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    print(
        f"\n{results['machine']}; load average {results['load_average_before'][0]} before, "
        f"{results['load_average_after'][0]} after; strategy {strategy}; corpus {Path(args.corpus).name}\n"
    )
    print("| method | n | p50 ms | p95 ms |\n|---|---:|---:|---:|")
    for k, v in L.items():
        print(f"| {k} | {v['n']} | {v['p50']} | {v['p95']} |")
    print("\n| load (8 clients) | searches | s | searches/s | p50 ms | p95 ms | errors | mismatches |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k, v in results["load"].items():
        print(
            f"| {k} | {v['searches']} | {v['seconds']} | {v['per_second']} | {v['p50_ms']} | {v['p95_ms']} "
            f"| {v['errors']} | {v['mismatches']} |"
        )
    print("\n" + json.dumps(results["ratios"], indent=2))
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "serve_latency.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
