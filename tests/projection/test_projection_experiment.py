"""Helpers of the issue-7 experiment (projection/experiment.py): folds, ranking, tuning, bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from scholar_es.errors import ConfigError
from scholar_es.projection.experiment import Data, bootstrap, reciprocal_ranks, split_folds, top_k, tune
from scholar_es.projection.routing import NO_THRESHOLD, normalize
from scholar_es.projection.train import Pair


def test_folds_partition_the_questions():
    qids = [f"q{i}" for i in range(23)]
    folds = split_folds(qids, 5, seed=0)
    tests = [q for _, test in folds for q in test]
    assert sorted(tests) == sorted(qids) and len(set(tests)) == len(qids)
    for train, test in folds:
        assert not set(train) & set(test) and len(train) + len(test) == len(qids)
    assert split_folds(qids, 5, seed=0) == folds  # seeded


def test_ranking_and_reciprocal_ranks():
    D = normalize(np.array([[1.0, 0], [0.8, 0.6], [0, 1.0], [-1.0, 0]])).astype(np.float32)
    V = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    idx, scores = top_k(V, D, k=2)
    assert idx.tolist() == [[0, 1], [2, 1]] and scores[0].tolist() == pytest.approx([1.0, 0.8])
    assert reciprocal_ranks(V, D, [[1], [3, 1]]).tolist() == pytest.approx([0.5, 0.5])


def test_bootstrap_interval_covers_the_mean_difference():
    rng = np.random.default_rng(0)
    a, b = rng.random(200) + 0.1, rng.random(200)
    mean, lo, hi, p = bootstrap(a, b, n=2000)
    assert lo < mean < hi and mean == pytest.approx(float((a - b).mean())) and p < 0.05


def _toy(n_docs=120, d=12, seed=0):
    """Questions are a fixed rotation of their answer plus noise; half the answers are asked twice."""
    rng = np.random.default_rng(seed)
    D = normalize(rng.normal(size=(n_docs, d))).astype(np.float32)
    ids = [f"d{i}" for i in range(n_docs)]
    rot = np.roll(np.eye(d), 1, axis=0)
    pairs, Q, qrels = [], {}, {}
    for i in range(160):
        a = i % 40 if i < 80 else i - 40
        qid = f"q{i:03d}"
        Q[qid] = normalize(D[a] @ rot + 0.2 * rng.normal(size=d)).astype(np.float32)
        qrels[qid] = {ids[a]: 1}
        pairs.append(Pair(qid, qid, ids[a]))
    return Data(ids, D, sorted(Q), Q, qrels, pairs, "m")


def test_tuning_uses_only_the_training_questions():
    data = _toy()
    doc_index = {d: i for i, d in enumerate(data.doc_ids)}
    train = data.qids[:120]
    tuned = tune(data, train, doc_index, inner=4, seed=0)
    assert set(tuned) >= {"fallback", "ridge"} and set(tuned["fallback"]) == {"no_harm", "mean"}
    for choice in tuned["fallback"].values():
        t = choice["threshold"]
        assert t in (NO_THRESHOLD, np.inf) or -1 <= t <= 1
        assert choice["mrr"] >= tuned["inner_mrr_direct"] - 1e-12  # never worse than all-direct inside
    assert tuned["fallback"]["no_harm"]["novel_loss"] <= 1e-12
    assert tuned["fallback"]["mean"]["mrr"] >= tuned["fallback"]["no_harm"]["mrr"]
    # the held-out questions play no part: changing their vectors changes nothing
    data.Q.update({q: -data.Q[q] for q in data.qids[120:]})
    assert tune(data, train, doc_index, inner=4, seed=0) == tuned


def test_choose_fallback_never_hurts_novel_questions_unless_told():
    from scholar_es.projection.tuning import choose_fallback

    # 4 paraphrase questions (high similarity, projection helps), 4 novel ones (projection hurts);
    # novel question 7 looks like a paraphrase (sim 0.8), so any threshold <= 0.8 hurts it.
    sims = np.array([0.95, 0.9, 0.85, 0.75, 0.8, 0.5, 0.45, 0.4])
    novel = np.array([0, 0, 0, 0, 1, 1, 1, 1], dtype=bool)
    direct = np.array([0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0])
    proj = np.array([1.0, 1.0, 1.0, 1.0, 0.8, 0.1, 0.1, 0.1])
    mean_best = choose_fallback(sims, proj, {1.0: direct}, novel, max_novel_loss=None)
    assert (
        mean_best.threshold == pytest.approx(0.75) and mean_best.novel_loss > 0
    )  # loses 0.2 on novel 4, gains 0.5 on paraphrase 3
    safe = choose_fallback(sims, proj, {1.0: direct}, novel)
    assert safe.threshold == pytest.approx(0.85) and safe.novel_loss <= 0 and safe.projected_share == 3 / 8
    blended = choose_fallback(sims, proj, {1.0: direct, 0.5: np.full(8, 1.0)}, novel)
    assert blended.alpha == 0.5 and blended.mrr == 1.0  # a blend as good as the best of both
    with pytest.raises(ConfigError, match="needs alpha 1.0"):
        choose_fallback(sims, proj, {0.5: direct}, novel)
