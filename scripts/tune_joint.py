"""Tune the corpus-wide hybrid defaults JOINTLY on several train splits (issue 28).

``scholar-es tune`` fits one data set; the default profile serves every collection, so its
corpus-wide numbers (``bm25_weight``, ``saturation_k``, ``text_candidates``) are chosen here on
the mean nDCG@10 of SciFact train and QASPER train (scope corpus), each data set weighing the
same. Candidates are collected once per data set (:func:`scholar_es.evaluation.tune.collect_candidates`,
with ``collapse`` simulated as the search API does it) and every grid point is re-ranked in
numpy; 5-fold cross-validation (the point chosen on the other folds of EVERY data set, scored on
the held-out fold) is the honest estimate; the chosen point is then run through the engine on the
same train queries (``check``). No validation or test split is read.

    PYTHONPATH=. python scripts/tune_joint.py --es-scifact /tmp/e/scifact --es-qasper /tmp/e/qasper-train \
        --max-loss scifact-train=0.0015
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pickle
import sys
from itertools import product

import numpy as np

from indexer.embedder import Embedder
from querybuilder.profiles import DEFAULT_PROFILE
from scholar_es.client import connect
from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.metrics import mean_scores, score_rankings
from scholar_es.evaluation.runner import ensure_index, eval_profile, run_evaluation
from scholar_es.evaluation.tune import (
    BM25_WEIGHTS,
    EXPONENTS,
    SATURATION_KS,
    STRENGTHS,
    Params,
    _freeze,
    candidate_section_counts,
    collect_candidates,
    lifts_from_counts,
    scale_multipliers,
    simulate,
    temper,
)

TEXT_CANDIDATES = (50, 100, 200)
#: the default before issue 28 (bm25_weight, saturation_k, text_candidates): the no-regression reference
BASELINE = (0.75, 100.0, 100)
#: the recall formula of the two-phase rescore (recall_bm25_weight x recall_saturation_k)
RECALL_WEIGHTS = (1.0, 1.5, 2.0, 3.0, 4.0)
RECALL_KS = (10.0, 20.0, 50.0, 100.0)
#: the tune grid, refined around the previous default (0.75, 100)
WEIGHTS = tuple(sorted({*BM25_WEIGHTS, 0.8, 0.85, 0.9}))
SATURATIONS = tuple(sorted({*SATURATION_KS, 70.0, 150.0}))
METRICS = ("ndcg@10", "mrr@10", "recall@100")


def sized(cands: dict, n: int, recall: tuple[float, float] | None = None, top: int = 0) -> dict:
    """The candidates with the rescore window of ``text_candidates`` n (the kNN top k + n) and
    the two-phase rescore set: ``recall`` weights and ``top`` window, or one phase (None)."""
    return {
        q: dataclasses.replace(
            c,
            rescore_window=max(DEFAULT_PROFILE.rescore_window, int(np.count_nonzero(c.knn)) + n),
            recall=recall,
            top_window=top,
        )
        for q, c in cands.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--es-scifact", required=True)
    ap.add_argument("--es-qasper", required=True)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--json", default=None, help="write every grid point's means here")
    ap.add_argument("--no-check", action="store_true", help="skip the engine run of the chosen point")
    ap.add_argument("--cache", default=None, help="keep the collected candidates in this pickle file")
    ap.add_argument(
        "--max-loss",
        action="append",
        default=[],
        metavar="NAME=nDCG",
        help="only points at most this much below the profile default on that data set (the same "
        "queries) qualify: no regression, e.g. scifact-train=0.002",
    )
    args = ap.parse_args()
    sets = {
        "scifact-train": (load_dataset(f"{args.data}/scifact", "beir", "train"), args.es_scifact),
        "qasper-train-corpus": (load_dataset(f"{args.data}/qasper", "qasper", "train"), args.es_qasper),
    }
    embedder = Embedder()
    # the widest window of the grid: candidates deep enough for every point
    # (the evaluation's profile: no per-paper cap, as `scholar-es eval` and `tune` rank)
    wide = eval_profile(DEFAULT_PROFILE.with_changes(text_candidates=max(TEXT_CANDIDATES)))
    cands, clients = {}, {}
    try:
        with open(args.cache or "", "rb") as fh:
            cands = pickle.load(fh)
    except OSError:
        pass
    for name, (ds, target) in sets.items():
        es = clients[name] = connect(target)
        info = ensure_index(es, ds, embedder)
        if name in cands:
            continue
        print(f"collecting candidates of {name} ({len(ds.queries)} queries)", file=sys.stderr)
        cands[name] = collect_candidates(
            es, ds, embedder, scope="corpus", profile=wide, prefix=info.prefix, progress=True
        )
        if args.cache:
            with open(args.cache, "wb") as fh:
                pickle.dump(cands, fh)
    points = []
    losses = {f.split("=")[0]: float(f.split("=")[1]) for f in args.max_loss}
    default_key = BASELINE
    for w, k, n in product(WEIGHTS, SATURATIONS, TEXT_CANDIDATES):
        p = Params(bm25_weight=w, knn_weight=DEFAULT_PROFILE.knn_weight, saturation_k=k)
        per = {}
        for name, (ds, _) in sets.items():
            per[name] = score_rankings(ds.qrels, simulate(ds, sized(cands[name], n), p))
        points.append(((w, k, n), per))
        means = {name: mean_scores(v) for name, v in per.items()}
        print(
            f"w={w:g} k={k:g} n={n}: "
            + "  ".join(
                f"{name} {means[name]['ndcg@10']:.4f}/{means[name]['recall@100']:.4f}" for name in sets
            ),
            file=sys.stderr,
        )

    def objective(per, held=None) -> float:
        """Mean nDCG@10 of the data sets (on the queries ``held`` keeps); -1 where a data set
        loses more than its ``--max-loss`` to the profile default on those queries."""
        for name, loss in losses.items():
            scores, base_scores = per[name]["ndcg@10"], base[1][name]["ndcg@10"]
            qs = [q for i, q in enumerate(scores) if held is None or held(i)]
            if np.mean([scores[q] for q in qs]) < np.mean([base_scores[q] for q in qs]) - loss:
                return -1.0
        vals = []
        for scores in per.values():
            qs = list(scores["ndcg@10"])
            if held is not None:
                qs = [q for i, q in enumerate(qs) if held(i)]
            vals.append(float(np.mean([scores["ndcg@10"][q] for q in qs])))
        return float(np.mean(vals))

    base = next(pt for pt in points if pt[0] == default_key)
    best = max(points, key=lambda pt: objective(pt[1]))
    print(
        f"\nchosen on all train queries: bm25_weight={best[0][0]:g} saturation_k={best[0][1]:g} "
        f"text_candidates={best[0][2]}  objective {objective(best[1]):.4f}"
    )
    cv = {name: [] for name in sets}
    for f in range(args.folds):
        fold_of = [
            i % args.folds != f
            for i in range(max(len(v["ndcg@10"]) for pt in points for v in pt[1].values()))
        ]
        chosen = max(points, key=lambda pt, keep=fold_of: objective(pt[1], keep.__getitem__))
        for name, scores in chosen[1].items():
            qs = [q for i, q in enumerate(scores["ndcg@10"]) if i % args.folds == f]
            cv[name].extend(scores["ndcg@10"][q] for q in qs)
        print(f"fold {f}: chose {chosen[0]}")
    for name in sets:
        b = mean_scores(base[1][name])
        t = mean_scores(best[1][name])
        print(
            f"{name}: profile default {default_key} nDCG@10 {b['ndcg@10']:.4f} R@100 {b['recall@100']:.4f}; "
            f"chosen nDCG@10 {t['ndcg@10']:.4f} R@100 {t['recall@100']:.4f}; "
            f"cross-validated nDCG@10 {np.mean(cv[name]):.4f}"
        )
    # section multipliers (corpus scope) on top of the chosen weights: QASPER train alone (every
    # SciFact chunk is an abstract, so a multiplier changes no SciFact ranking); lifts learned
    # from the candidates; cross-validated like the weights (lifts and choice from other folds)
    (w, k, n) = best[0]
    qname = "qasper-train-corpus"
    qds = sets[qname][0]
    qc = sized(cands[qname], n)
    counts = candidate_section_counts(qds, qc)
    qids = list(qc)

    def mult_points(lifts):
        grid = [
            (f"scaled a={a:g}", scale_multipliers(DEFAULT_PROFILE.section_multipliers, a)) for a in STRENGTHS
        ]
        grid += [(f"learned b={b:g}", temper(lifts, b)) for b in EXPONENTS if b > 0]
        out = []
        for label, mults in grid:
            p = Params(
                bm25_weight=w,
                knn_weight=DEFAULT_PROFILE.knn_weight,
                saturation_k=k,
                multipliers=_freeze(mults),
            )
            out.append((label, mults, score_rankings(qds.qrels, simulate(qds, qc, p))))
        return out

    mpoints = mult_points(lifts_from_counts(counts))
    for label, _, per in mpoints:
        mm = mean_scores(per)
        print(
            f"sections {label}: nDCG@10 {mm['ndcg@10']:.4f} MRR@10 {mm['mrr@10']:.4f} R@100 {mm['recall@100']:.4f}"
        )
    mbest = max(mpoints, key=lambda t: mean_scores(t[2])["ndcg@10"])
    held_scores = []
    for f in range(args.folds):
        train_q = [q for i, q in enumerate(qids) if i % args.folds != f]
        held_q = [q for i, q in enumerate(qids) if i % args.folds == f]
        fold = mult_points(lifts_from_counts(counts, queries=train_q))
        chosen = max(fold, key=lambda t: float(np.mean([t[2]["ndcg@10"][q] for q in train_q])))
        held_scores.extend(chosen[2]["ndcg@10"][q] for q in held_q)
    print(
        f"sections: chosen {mbest[0]} nDCG@10 {mean_scores(mbest[2])['ndcg@10']:.4f}; "
        f"cross-validated {np.mean(held_scores):.4f}; multipliers {json.dumps(mbest[1])}"
    )
    # the recall formula of the two-phase rescore (corpus-wide): it orders the window, the main
    # formula (chosen above) orders its top window. Chosen on the mean R@100 of the data sets (its
    # job), among the points that lose no more nDCG@10 to the main formula alone (the same
    # queries) than --max-loss allows on each data set (none where it names no loss);
    # cross-validated like the weights
    top = max(DEFAULT_PROFILE.top_window, 100)
    alone = {name: best[1][name] for name in sets}
    rpoints = []
    for rw, rk in product(RECALL_WEIGHTS, RECALL_KS):
        p = Params(bm25_weight=w, knn_weight=DEFAULT_PROFILE.knn_weight, saturation_k=k)
        per = {}
        for name, (ds, _) in sets.items():
            per[name] = score_rankings(ds.qrels, simulate(ds, sized(cands[name], n, (rw, rk), top), p))
        rpoints.append(((rw, rk), per))
        means = {name: mean_scores(v) for name, v in per.items()}
        print(
            f"recall w={rw:g} k={rk:g}: "
            + "  ".join(
                f"{name} {means[name]['ndcg@10']:.4f}/{means[name]['recall@100']:.4f}" for name in sets
            )
        )

    def recall_objective(per, held=None) -> float:
        vals = []
        for name, scores in per.items():
            qs = [q for i, q in enumerate(scores["ndcg@10"]) if held is None or held(i)]
            loss = losses.get(name, 0.0)
            ndcg = np.mean([scores["ndcg@10"][q] for q in qs])
            if ndcg < np.mean([alone[name]["ndcg@10"][q] for q in qs]) - loss:
                return -1.0
            vals.append(float(np.mean([scores["recall@100"][q] for q in qs])))
        return float(np.mean(vals))

    rbest = max(rpoints, key=lambda pt: recall_objective(pt[1]))
    rcv = {name: [] for name in sets}
    for f in range(args.folds):
        keep = [i % args.folds != f for i in range(max(len(v["ndcg@10"]) for v in alone.values()))]
        chosen = max(rpoints, key=lambda pt, keep=keep: recall_objective(pt[1], keep.__getitem__))
        for name, scores in chosen[1].items():
            rcv[name].extend(
                scores["recall@100"][q] for i, q in enumerate(scores["recall@100"]) if i % args.folds == f
            )
        print(f"recall fold {f}: chose {chosen[0]}")
    for name in sets:
        a, r = mean_scores(alone[name]), mean_scores(rbest[1][name])
        print(
            f"{name}: recall phase {rbest[0]}: nDCG@10 {a['ndcg@10']:.4f} -> {r['ndcg@10']:.4f}, "
            f"R@100 {a['recall@100']:.4f} -> {r['recall@100']:.4f} (cross-validated {np.mean(rcv[name]):.4f})"
        )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                [
                    {
                        "bm25_weight": w,
                        "saturation_k": k,
                        "text_candidates": n,
                        **{name: mean_scores(v) for name, v in per.items()},
                    }
                    for (w, k, n), per in points
                ],
                fh,
            )
    if args.no_check:
        return
    (w, k, n) = best[0]
    prof = DEFAULT_PROFILE.with_changes(
        bm25_weight=w,
        saturation_k=k,
        text_candidates=n,
        recall_bm25_weight=rbest[0][0],
        recall_saturation_k=rbest[0][1],
    )
    for name, (ds, _) in sets.items():
        run = run_evaluation(ds, ["hybrid"], clients[name], embedder, profile=prof, progress=False)
        got = run.runs["hybrid"].metrics
        sim = mean_scores(rbest[1][name])
        print(
            f"check {name}: engine nDCG@10 {got['ndcg@10']:.4f} R@100 {got['recall@100']:.4f} "
            f"vs simulated {sim['ndcg@10']:.4f} / {sim['recall@100']:.4f}"
        )


if __name__ == "__main__":
    main()
