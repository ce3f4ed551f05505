"""What checking URL parameters at dispatch costs on the query path (issue 26).

Indexes N small documents into a temporary embedded engine and times, one request at a time,
the same ``_search`` through the official client (request serialization and the in-process
transport included) in three variants that take turns request by request:

* ``plain``     -- no URL parameters;
* ``params``    -- the parameters a client typically sends (``size``, ``typed_keys``,
  ``rest_total_hits_as_int``, ``filter_path``), checked against the specification table;
* ``unchecked`` -- the same request with :func:`engine.rest.spec.check` replaced by a no-op:
  the baseline for what the check itself costs.

Also times ``spec.check`` alone (ns per call). Reported: p50 per variant (median over ``--reps``)
and the ratios ``params / unchecked`` (what validation adds to a search) and ``params / plain``.

    PYTHONPATH=. .venv/bin/python bench/rest_params.py            # 2,000 docs, 300 requests
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from elasticsearch import helpers

from scholar_es.engine.rest import handler, spec
from scholar_es.engine.rest.transport import embedded_client

WORDS = [f"w{i}" for i in range(12)]  # 12 terms, each in a known share of the documents
PARAMS = {
    "size": "10",
    "typed_keys": "true",
    "rest_total_hits_as_int": "true",
    "filter_path": "hits.hits._id",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=2000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        es = embedded_client(Path(d) / "engine")
        es.indices.create(index="b", mappings={"properties": {"t": {"type": "text"}}})
        docs = (
            {"_index": "b", "_id": str(i), "t": " ".join(WORDS[(i * k) % 12] for k in range(1, 9))}
            for i in range(args.docs)
        )
        helpers.bulk(es, docs, refresh=True)
        body = {"query": {"match": {"t": "w0 w3"}}}
        real_check = spec.check

        def run(variant: str) -> float:
            params = {} if variant == "plain" else PARAMS
            handler.spec.check = (lambda *a: None) if variant == "unchecked" else real_check  # type: ignore[assignment]
            t0 = time.perf_counter()
            es.perform_request(
                "POST",
                "/b/_search",
                params=params,
                body=body,
                headers={"content-type": "application/json", "accept": "application/json"},
            )
            return time.perf_counter() - t0

        reps: dict[str, list[float]] = {"plain": [], "params": [], "unchecked": []}
        for _ in range(args.reps):
            samples: dict[str, list[float]] = {k: [] for k in reps}
            for _ in range(args.queries):
                for v in samples:
                    samples[v].append(run(v))
            for v, xs in samples.items():
                reps[v].append(statistics.median(xs))
        handler.spec.check = real_check  # type: ignore[assignment]
        declared = next(dcl for m, rx, _, dcl in handler._ROUTES if m == "POST" and rx.match("/b/_search"))
        n = 100_000
        t0 = time.perf_counter()
        for _ in range(n):
            spec.check(declared, "/b/_search", PARAMS)
        check_ns = (time.perf_counter() - t0) / n * 1e9
        p50 = {v: statistics.median(xs) * 1e3 for v, xs in reps.items()}
        print(
            json.dumps(
                {
                    "docs": args.docs,
                    "queries": args.queries,
                    "p50_ms": {k: round(v, 3) for k, v in p50.items()},
                    "params_vs_unchecked": round(p50["params"] / p50["unchecked"], 3),
                    "params_vs_plain": round(p50["params"] / p50["plain"], 3),
                    "check_ns_per_call": round(check_ns),
                },
                indent=1,
            )
        )
        es.close()


if __name__ == "__main__":
    main()
