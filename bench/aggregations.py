"""Cost of aggregations and highlighting in the embedded engine, as ratios to a plain search
measured in the same run.

Indexes N synthetic chunks (a paper id per 6 chunks, one of 8 section types, a year, ~60 tokens
of text drawn with a Zipf distribution from a fixed vocabulary) into a temporary engine, then
times each request one at a time (wall time of ``es.search`` through the official client):

* ``baseline``      -- ``match`` on the text, size 10
* ``terms_section`` -- the same query, size 0, ``terms`` on ``section_type`` (the Kibana first look)
* ``terms_paper``   -- ``terms`` on ``paper_id`` (N/6 distinct values), size 10, with an ``avg`` below
* ``histogram``     -- ``histogram`` on ``year`` (interval 1)
* ``stats_card``    -- ``stats`` on ``year`` and ``cardinality`` on ``paper_id``
* ``highlight``     -- the baseline query with highlighting of the text, size 10

and reports p50 per request and its ratio to the baseline's p50.

    PYTHONPATH=. .venv/bin/python bench/aggregations.py            # 100,000 chunks, 30 queries
    PYTHONPATH=. .venv/bin/python bench/aggregations.py --quick    # 5,000 chunks
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

SECTIONS = ["abstract", "introduction", "related", "method", "experiments", "results", "discussion", "other"]


def _vocab(n: int = 3000) -> list[str]:
    syll = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "do", "gra", "phy", "net", "ion"]
    rng = np.random.default_rng(1)
    words = {"".join(rng.choice(syll, size=rng.integers(2, 4))) for _ in range(n * 2)}
    return sorted(words)[:n]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="5,000 chunks, 10 queries")
    args = ap.parse_args(argv)
    if args.quick:
        args.docs, args.queries = 5_000, 10

    from elasticsearch import helpers

    from scholar_es.engine.rest.transport import embedded_client

    vocab = _vocab()
    rng = np.random.default_rng(0)
    ranks = rng.zipf(1.3, size=(args.docs, 60)) % len(vocab)
    with tempfile.TemporaryDirectory() as tmp:
        es = embedded_client(tmp)
        es.indices.create(
            index="chunks",
            mappings={
                "properties": {
                    "paper_id": {"type": "keyword"},
                    "section_type": {"type": "keyword"},
                    "year": {"type": "integer"},
                    "chunk_text": {"type": "text", "analyzer": "english"},
                }
            },
        )
        actions = (
            {
                "_index": "chunks",
                "_id": str(i),
                "_source": {
                    "paper_id": f"p{i // 6}",
                    "section_type": SECTIONS[int(rng.integers(len(SECTIONS)))],
                    "year": int(1995 + rng.integers(30)),
                    "chunk_text": " ".join(vocab[r] for r in ranks[i]),
                },
            }
            for i in range(args.docs)
        )
        helpers.bulk(es, actions, chunk_size=2000, refresh=True)
        queries = [" ".join(vocab[int(r)] for r in rng.zipf(1.3, size=3) % 200) for _ in range(args.queries)]

        def q(text):
            return {"match": {"chunk_text": text}}

        requests = {
            "baseline": lambda t: {"query": q(t)},
            "terms_section": lambda t: {
                "query": q(t),
                "size": 0,
                "aggs": {"s": {"terms": {"field": "section_type"}}},
            },
            "terms_paper": lambda t: {
                "query": q(t),
                "size": 0,
                "aggs": {"p": {"terms": {"field": "paper_id"}, "aggs": {"y": {"avg": {"field": "year"}}}}},
            },
            "histogram": lambda t: {
                "query": q(t),
                "size": 0,
                "aggs": {"h": {"histogram": {"field": "year", "interval": 1}}},
            },
            "stats_card": lambda t: {
                "query": q(t),
                "size": 0,
                "aggs": {"s": {"stats": {"field": "year"}}, "c": {"cardinality": {"field": "paper_id"}}},
            },
            "highlight": lambda t: {"query": q(t), "highlight": {"fields": {"chunk_text": {}}}},
        }
        es.search(index="chunks", **requests["baseline"](queries[0]))  # warm the segment
        p50 = {}
        for name, make in requests.items():
            times = []
            for text in queries:
                start = time.perf_counter()
                es.search(index="chunks", **make(text))
                times.append(time.perf_counter() - start)
            p50[name] = float(np.median(times)) * 1000
        es.close()
    print(f"{args.docs} chunks, {args.queries} queries\n")
    print("| request | p50 ms | / baseline |\n|---|---:|---:|")
    for name, ms in p50.items():
        print(f"| {name} | {ms:.1f} | {ms / p50['baseline']:.2f} |")


if __name__ == "__main__":
    main()
