"""Metrics on hand-made runs, checked against values worked out by hand below."""

import math

import pytest

from scholar_es.errors import ConfigError
from scholar_es.evaluation.metrics import (
    ALL_METRICS,
    evaluate_rankings,
    latency_percentiles,
    mean_scores,
    paper_ranking,
    paragraph_ranking,
    score_rankings,
)

L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)

# Three queries, binary relevance; "x", "y", "n*" are never relevant.
QRELS = {"q1": {"a": 1, "b": 1}, "q2": {"c": 1}, "q3": {"d": 1, "e": 1, "f": 1}}
RUN = {
    "q1": ["a", "x", "b"],  # relevant at ranks 1 and 3
    "q2": ["y", "c"],  # relevant at rank 2
    "q3": [f"n{i}" for i in range(11)] + ["d"],  # relevant only at rank 12
}
# q1: DCG@10 = 1/log2(2) + 1/log2(4) = 1.5; IDCG = 1/log2(2) + 1/log2(3) = 1.63093 -> 0.919721
#     MRR 1, P@1 1, P@3 2/3, P@10 2/10, R@10 1, R@100 1
# q2: DCG@10 = 1/log2(3) = 0.630930; IDCG = 1 -> 0.630930
#     MRR 1/2, P@1 0, P@3 1/3, P@10 1/10, R@10 1, R@100 1
# q3: nothing in the top 10: nDCG@10 0, MRR@10 0, P@k 0, R@10 0; R@100 = 1/3
HAND = {
    "ndcg@10": ((L2 / L2 + 1 / L4) / (1 + 1 / L3) + 1 / L3 + 0) / 3,  # = 0.516884
    "mrr@10": (1 + 0.5 + 0) / 3,
    "p@1": (1 + 0 + 0) / 3,
    "p@3": (2 / 3 + 1 / 3 + 0) / 3,
    "p@10": (0.2 + 0.1 + 0) / 3,
    "recall@10": (1 + 1 + 0) / 3,
    "recall@100": (1 + 1 + 1 / 3) / 3,
}


def test_means_match_hand_computed_values():
    got = mean_scores(score_rankings(QRELS, RUN))
    assert set(got) == set(HAND)
    for metric, value in HAND.items():
        assert got[metric] == pytest.approx(value, abs=1e-6), metric
    assert got["ndcg@10"] == pytest.approx(0.516884, abs=1e-6)


def test_per_query_values():
    per = score_rankings(QRELS, RUN)
    assert per["ndcg@10"]["q1"] == pytest.approx(1.5 / (1 + 1 / L3))
    assert per["ndcg@10"]["q2"] == pytest.approx(1 / L3)
    assert per["mrr@10"] == {"q1": 1.0, "q2": 0.5, "q3": 0.0}
    assert per["p@3"]["q1"] == pytest.approx(2 / 3)
    assert per["recall@100"]["q3"] == pytest.approx(1 / 3)


def test_graded_relevance_uses_gain_equal_to_relevance():
    # rel a=2, b=1; ranking [b, a]: DCG = 1/log2(2) + 2/log2(3) = 2.261860
    # IDCG = 2/log2(2) + 1/log2(3) = 2.630930 -> 0.859719 (exponential gain 2^rel-1 would give 0.796711)
    per = score_rankings({"q": {"a": 2, "b": 1}}, {"q": ["b", "a"]})
    assert per["ndcg@10"]["q"] == pytest.approx((1 + 2 / L3) / (2 + 1 / L3), abs=1e-6)
    assert per["ndcg@10"]["q"] == pytest.approx(0.859719, abs=1e-6)


def test_query_with_no_hits_scores_zero_and_counts_in_the_mean():
    qrels = {**QRELS, "q4": {"g": 1}}
    got = mean_scores(score_rankings(qrels, {**RUN, "q4": []}))
    # the same sums as HAND, divided by 4 queries instead of 3
    for metric, value in HAND.items():
        assert got[metric] == pytest.approx(value * 3 / 4, abs=1e-6), metric
    missing = mean_scores(score_rankings(qrels, RUN))  # q4 absent from the run: also zero
    assert missing == pytest.approx(got)


def test_rank_order_is_the_list_order_and_duplicates_count_once():
    # ["x", "a", "x", "b"] is ["x", "a", "b"]: relevant at ranks 2 and 3
    per = score_rankings({"q": {"a": 1, "b": 1}}, {"q": ["x", "a", "x", "b"]})
    assert per["mrr@10"]["q"] == 0.5
    assert per["ndcg@10"]["q"] == pytest.approx((1 / L3 + 1 / L4) / (1 + 1 / L3))
    assert per["p@3"]["q"] == pytest.approx(2 / 3)


def test_cut_off_at_depth():
    # relevant at rank 101: outside Recall@100
    per = score_rankings({"q": {"r": 1}}, {"q": [f"n{i}" for i in range(100)] + ["r"]})
    assert per["recall@100"]["q"] == 0.0


def test_unjudged_queries_in_the_run_are_ignored_and_empty_qrels_refused():
    per = score_rankings({"q1": {"a": 1}}, {"q1": ["a"], "other": ["a"]})
    assert set(per["p@1"]) == {"q1"}
    with pytest.raises(ConfigError, match="no relevant judgment"):
        score_rankings({"q1": {"a": 0}}, {"q1": ["a"]})
    with pytest.raises(ConfigError, match="unknown metric"):
        score_rankings(QRELS, RUN, metrics=["map"])


def test_latency_percentiles_interpolate():
    # p50 of 10,20,30,40 = 25; p95: position 0.95 * 3 = 2.85 -> 30 + 0.85 * 10 = 38.5
    assert latency_percentiles([40, 10, 30, 20]) == {
        "latency_p50_ms": 25.0,
        "latency_p95_ms": pytest.approx(38.5),
    }
    assert latency_percentiles([]) == {"latency_p50_ms": 0.0, "latency_p95_ms": 0.0}


def test_evaluate_rankings_has_every_metric():
    got = evaluate_rankings(QRELS, RUN, [5.0, 7.0])
    assert tuple(got) == ALL_METRICS
    assert got["latency_p50_ms"] == 6.0


def test_paper_ranking_keeps_best_rank():
    assert paper_ranking(["p1", "p2", "p1", "p3", "p2"]) == ["p1", "p2", "p3"]


def test_paragraph_ranking_window_chunks():
    hits = [("w0", ["p1", "p2"]), ("w1", ["p2", "p3"]), ("w2", ["p4"]), ("w3", ["p3"])]
    # p2 credited to w0; w1 still covers uncredited p3; w2 covers nothing judged; w3's p3 is taken
    assert paragraph_ranking(hits, {"p2", "p3"}) == ["p2", "p3", "w2", "w3"]
    # one judged paragraph: the overlapping window after it is not relevant again
    assert paragraph_ranking(hits, {"p2"}) == ["p2", "w1", "w2", "w3"]
    per = score_rankings({"q": {"p2": 1}}, {"q": paragraph_ranking(hits, {"p2"})})
    assert per["p@3"]["q"] == pytest.approx(1 / 3)  # not 2/3: p2 counted once


def test_paragraph_ranking_paragraph_mode_is_identity():
    hits = [("x#1.0", ["x#1.0"]), ("x#abs", ["x#abs"]), ("x#2.3", ["x#2.3"])]
    assert paragraph_ranking(hits, {"x#abs"}) == ["x#1.0", "x#abs", "x#2.3"]
