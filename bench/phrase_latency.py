"""Cost of ``match_phrase`` (positions re-analyzed from ``_source``, engine/query/phrase.py) against
a ``match`` with ``operator: and`` on the same terms (the same candidates, no positions), in the
same run.

Generates N synthetic chunks deterministically (Zipf-sampled words from a fixed vocabulary, ~80
tokens each, standard analyzer), indexes them into a temporary embedded engine through the
official client, and times, query by query in turns (so load on a shared machine hits both alike):

* ``match_and``   -- ``match`` (operator and) of a two-word phrase
* ``phrase``      -- ``match_phrase`` of the same words
* ``phrase_slop`` -- ``match_phrase`` with ``slop: 2``

Phrases are drawn from the corpus (two adjacent words of a random chunk), so every query has
candidates; common words give many. Reported: p50/p95 wall time per method, the candidates per
query (documents holding both words: what the phrase path re-analyzes), and the ratios
``phrase / match_and`` per repetition. There is no index-time cost: the segment format is
unchanged (no positions stored), so appends and disk use are as before.

    PYTHONPATH=. .venv/bin/python bench/phrase_latency.py            # 20,000 chunks, 100 queries
    PYTHONPATH=. .venv/bin/python bench/phrase_latency.py --quick    # 2,000 chunks, 30 queries
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
from elasticsearch import helpers

from scholar_es.engine.rest.transport import embedded_client

VOCAB = [
    a + b
    for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze")
    for b in ("n", "r", "s", "t", "x")
]
VOCAB = ["the", "of", "and", "a", "in", "to", "is", "for", "on", "with"] + [
    w + s for w in VOCAB for s in ("", "a", "o")
]


def corpus(n: int, rng: np.random.Generator) -> list[str]:
    p = 1.0 / np.arange(1, len(VOCAB) + 1)
    p /= p.sum()
    return [" ".join(rng.choice(VOCAB, size=80, p=p)) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.docs, args.queries = 2_000, 30
    rng = np.random.default_rng(7)
    texts = corpus(args.docs, rng)
    with tempfile.TemporaryDirectory() as tmp:
        es = embedded_client(tmp + "/engine")
        es.indices.create(index="c", mappings={"properties": {"text": {"type": "text"}}})
        helpers.bulk(
            es, ({"_index": "c", "_id": str(i), "text": t} for i, t in enumerate(texts)), chunk_size=2000
        )
        es.indices.refresh(index="c")
        phrases: list[str] = []
        while (
            len(phrases) < args.queries
        ):  # two different adjacent words (a repeated term with slop is refused)
            words = texts[int(rng.integers(len(texts)))].split()
            i = int(rng.integers(len(words) - 1))
            if words[i] != words[i + 1]:
                phrases.append(f"{words[i]} {words[i + 1]}")
        methods = {
            "match_and": lambda q: {"match": {"text": {"query": q, "operator": "and"}}},
            "phrase": lambda q: {"match_phrase": {"text": q}},
            "phrase_slop": lambda q: {"match_phrase": {"text": {"query": q, "slop": 2}}},
        }
        cands = [es.count(index="c", query=methods["match_and"](q))["count"] for q in phrases]
        samples: dict[str, list[list[float]]] = {m: [] for m in methods}
        for _ in range(args.reps):
            rep: dict[str, list[float]] = {m: [] for m in methods}
            for q in phrases:
                for m, build in methods.items():
                    t0 = time.perf_counter()
                    es.search(index="c", query=build(q), size=10)
                    rep[m].append(time.perf_counter() - t0)
            for m in methods:
                samples[m].append(rep[m])
        print(f"docs {args.docs}, queries {args.queries}, reps {args.reps}")
        print(f"candidates per query: median {statistics.median(cands):.0f}, max {max(cands)}")
        print("| method | wall p50 (ms) | wall p95 (ms) |")
        print("|---|---|---|")
        for m in methods:
            p50 = statistics.median(float(np.percentile(r, 50)) for r in samples[m]) * 1000
            p95 = statistics.median(float(np.percentile(r, 95)) for r in samples[m]) * 1000
            print(f"| {m} | {p50:.2f} | {p95:.2f} |")
        ratios = [
            np.percentile(p, 50) / np.percentile(a, 50)
            for p, a in zip(samples["phrase"], samples["match_and"], strict=True)
        ]
        print("phrase / match_and (p50, per repetition):", ", ".join(f"{r:.2f}" for r in ratios))
        es.close()


if __name__ == "__main__":
    main()
