"""``scholar-es serve``'s memory under concurrent large bodies: peak and held RSS, in one run.

Starts ``scholar-es serve`` (a fresh empty engine, loopback, a free port), waits until its
model is loaded, and sends CLIENTS concurrent ``POST /missing/_search`` requests of MB megabytes
each: a JSON body holding a list of small documents (a title, a number, eight floats), parsed
whole and then answered 404 (no such index): the memory measured is what the HTTP layer and the
parser hold, not what a search or an index costs.
Configurations, each a server of its own, measured in turn:

* ``base``       -- the server of ``--base DIR`` (an older checkout, e.g. ``git archive 66be419``),
  if given: the baseline;
* ``no-breaker`` -- this checkout with ``--max-in-flight 1024gb`` (the breaker never trips);
* ``breaker``    -- this checkout with ``--max-in-flight`` twice two bodies (two in flight at once;
  the others are answered 429).

For each: the server's RSS before, its peak (``VmHWM``) and its RSS a second after the last
answer, the statuses. Ratios are against the total body bytes sent.

    PYTHONPATH=. .venv/bin/python bench/serve_memory.py --mb 30 --clients 8 [--base /tmp/base]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


DOC = {"title": "a title of a paper on retrieval", "n": 12345, "v": [0.125, -0.5, 0.75, 1.5] * 2}


def body_of(mb: int, shape: str = "json") -> bytes:
    """``json``: one document holding a list of DOCs; ``ndjson``: ``_msearch`` lines, each
    search's body a ``terms`` query over 20 DOC-sized strings."""
    if shape == "json":
        docs = [DOC] * (mb * 1024 * 1024 // (len(json.dumps(DOC)) + 1))
        return json.dumps({"query": {"match_all": {}}, "docs": docs}).encode()
    terms = [json.dumps(DOC)[:60] + str(i) for i in range(20)]
    pair = json.dumps({"index": "missing"}) + "\n" + json.dumps({"query": {"terms": {"t": terms}}}) + "\n"
    return (pair * (mb * 1024 * 1024 // len(pair))).encode()


def send(port: int, data: bytes, shape: str) -> int:
    path, ctype = (
        ("/missing/_search", "application/json") if shape == "json" else ("/_msearch", "application/x-ndjson")
    )
    with socket.create_connection(("127.0.0.1", port), timeout=600) as s:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        with contextlib.suppress(OSError):  # refused early (429) and closed
            s.sendall(head.encode() + data)
        answer = s.recv(64)
    return int(answer.split(b" ")[1]) if answer else 0


def measure(name: str, pythonpath: Path, extra: list[str], data: bytes, clients: int, shape: str) -> dict:
    port = free_port()
    engine = Path(tempfile.mkdtemp(prefix="serve-mem-")) / "engine"
    cmd = [sys.executable, "-m", "scholar_es.cli", "serve", "--es", str(engine), "--port", str(port)]
    cmd += ["--max-body", "1gb", "--log-level", "warning", *extra]
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        while time.monotonic() < deadline:  # the model loaded (in a thread at startup) first
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_scholar/health", timeout=5) as r:
                    if json.load(r)["status"] != "starting":
                        break
            except OSError:
                pass
            time.sleep(0.2)
        time.sleep(1.0)
        before = rss(proc.pid)["VmRSS"]
        t0 = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            statuses = list(pool.map(lambda _: send(port, data, shape), range(clients)))
        took = time.perf_counter() - t0
        time.sleep(1.0)
        after = rss(proc.pid)
    finally:
        proc.terminate()
        proc.wait(60)
    sent = len(data) * clients
    return {
        "config": name,
        "statuses": dict(Counter(statuses)),
        "rss_before_mb": round(before / 2**20),
        "peak_mb": round(after["VmHWM"] / 2**20),
        "held_after_mb": round(after["VmRSS"] / 2**20),
        "peak_growth_over_body_bytes": round((after["VmHWM"] - before) / sent, 2),
        "seconds": round(took, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=30, help="megabytes per body")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--shape", choices=["json", "ndjson"], default="json")
    ap.add_argument("--base", type=Path, default=None, help="an older checkout to measure first")
    args = ap.parse_args()
    data = body_of(args.mb, args.shape)
    configs = []
    if args.base is not None:
        configs.append(("base", args.base, []))
    configs.append(("no-breaker", REPO, ["--max-in-flight", "1024gb"]))
    configs.append(("breaker", REPO, ["--max-in-flight", str(2 * 2 * len(data))]))
    rows = [measure(name, path, extra, data, args.clients, args.shape) for name, path, extra in configs]
    print(
        f"{args.shape}: {args.clients} concurrent bodies of {len(data) / 2**20:.1f} MB ({args.clients * len(data) / 2**20:.0f} MB sent)\n"
    )
    print("| config | statuses | RSS before MB | peak MB | held after MB | peak growth / bytes sent | s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['config']} | {r['statuses']} | {r['rss_before_mb']} | {r['peak_mb']} | "
            f"{r['held_after_mb']} | {r['peak_growth_over_body_bytes']} | {r['seconds']} |"
        )
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"serve_memory_{args.shape}.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
