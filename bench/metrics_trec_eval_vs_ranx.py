"""Our metrics (trec_eval / MS MARCO code through ir-measures) against ranx's, value for value.

``scholar_es.evaluation.metrics.score_rankings`` moved from ranx to ir-measures because ranx's
numba functions are compiled on first use (40-60 s CPU per fresh environment). This script is
the evidence that nothing changed: random judged runs (binary and graded relevance, empty and
short rankings, relevant documents past every cut-off), every per-query value compared with
``==``. Not a test because importing ranx's metrics is the very compile we avoid.

    .venv/bin/python bench/metrics_trec_eval_vs_ranx.py [--trials 30]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from scholar_es.evaluation.metrics import METRICS, RUN_DEPTH, score_rankings

RANX = {
    "ndcg@10": "ndcg@10",
    "mrr@10": "mrr@10",
    "p@1": "precision@1",
    "p@3": "precision@3",
    "p@10": "precision@10",
    "recall@10": "recall@10",
    "recall@100": "recall@100",
}


def ranx_scores(qrels: dict, rankings: dict) -> dict[str, dict[str, float]]:
    """The former implementation: ranx on the same strictly decreasing scores."""
    from ranx import Qrels, Run, evaluate

    out = {m: dict.fromkeys(qrels, 0.0) for m in METRICS}
    ranked = {q: list(dict.fromkeys(rankings.get(q) or ()))[:RUN_DEPTH] for q in qrels}
    scored = [q for q, docs in ranked.items() if docs]
    run = Run({q: {d: float(len(ranked[q]) - i) for i, d in enumerate(ranked[q])} for q in scored})
    evaluate(
        Qrels({q: qrels[q] for q in scored}), run, list(RANX.values()), threads=1, save_results_in_run=True
    )
    for m in METRICS:
        for q, v in run.scores[RANX[m]].items():
            out[m][q] = float(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=30)
    args = ap.parse_args()
    rng = random.Random(0)
    compared = differ = 0
    worst = 0.0
    ours_s = ranx_s = 0.0
    for trial in range(args.trials):
        docs = [f"d{i}" for i in range(300)]
        qrels: dict[str, dict[str, int]] = {}
        runs: dict[str, list[str]] = {}
        for q in range(50):
            rel = rng.sample(docs, rng.randint(1, 12))
            qrels[f"q{q}"] = {d: rng.choice([1, 1, 2, 3]) if trial % 2 else 1 for d in rel}
            pool = rng.sample(docs, rng.randint(0, 150)) + rng.sample(rel, rng.randint(0, len(rel)))
            rng.shuffle(pool)
            runs[f"q{q}"] = pool
        t0 = time.perf_counter()
        ours = score_rankings(qrels, runs)
        t1 = time.perf_counter()
        theirs = ranx_scores(qrels, runs)
        t2 = time.perf_counter()
        ours_s, ranx_s = ours_s + t1 - t0, ranx_s + t2 - t1
        for m in METRICS:
            for q in qrels:
                compared += 1
                differ += ours[m][q] != theirs[m][q]
                worst = max(worst, abs(ours[m][q] - theirs[m][q]))
    print(
        f"{compared} per-query values compared: {differ} differ (max |diff| {worst:g}); "
        f"ir-measures {ours_s:.2f} s, ranx {ranx_s:.2f} s (first call compiles unless cached)"
    )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
