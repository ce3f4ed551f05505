"""Tuning: the simulated hybrid ranking must be the engine's, and the multipliers' arithmetic."""

import json
from pathlib import Path

import numpy as np
import pytest
from test_evaluation_runner import FakeEmbedder

from querybuilder.profiles import load_profile
from scholar_es.evaluation.datasets import Dataset, EvalQuery, load_dataset
from scholar_es.evaluation.runner import eval_profile, run_evaluation
from scholar_es.evaluation.tune import (
    Candidates,
    Params,
    _freeze,
    collect_candidates,
    cross_validate,
    learn_lifts,
    scale_multipliers,
    simulate,
    temper,
    tune,
)


def _jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def qasper(tmp_path) -> Path:
    root = tmp_path / "qasper"
    paras = {
        "Introduction": ["Parsing long sentences is hard and slow.", "We study transition parsers."],
        "Method": [
            "Our parser uses a transition system with a stack.",
            "How we train: beam search and dropout.",
        ],
        "Results": [
            "The transition parser scores 91 LAS on the treebank.",
            "Beam search helps long sentences.",
        ],
    }
    sections = [{"section_name": k, "paragraphs": v} for k, v in paras.items()]
    _jsonl(
        root / "papers_train.jsonl",
        [
            {
                "paper_id": "P1",
                "title": "Transition parsing",
                "abstract": "A fast transition parser.",
                "sections": sections,
            },
            {
                "paper_id": "P2",
                "title": "Parser results",
                "abstract": "We report parser scores.",
                "sections": sections,
            },
        ],
    )
    _jsonl(
        root / "questions_train.jsonl",
        [
            {"question_id": "a", "question": "how do they train the parser?", "paper_id": "P1"},
            {"question_id": "b", "question": "what score does the transition parser get?", "paper_id": "P2"},
            {"question_id": "c", "question": "why is parsing long sentences hard?", "paper_id": "P1"},
        ],
    )
    (root / "qrels_train.tsv").write_text("a\tP1#1.1\t1\nb\tP2#2.0\t1\nc\tP1#0.0\t1\n")
    return root


@pytest.mark.parametrize("window", [100, 0])  # the default rescore, and none (the union alone)
@pytest.mark.parametrize("scope", ["paper", "corpus"])
def test_simulated_hybrid_and_sections_equal_the_engine(qasper, tmp_engine, scope, window):
    ds = load_dataset(qasper, "qasper", "train")
    emb = FakeEmbedder()
    # kNN k 1: the union leaves most BM25 hits without a vector score, which the rescore adds
    prof = eval_profile(None).with_changes(rescore_window=window, knn_k=1, num_candidates=1)
    ev = run_evaluation(
        ds, ["hybrid", "sections"], tmp_engine, emb, scope=scope, profile=prof, progress=False
    )
    cands = collect_candidates(
        tmp_engine, ds, emb, scope=scope, profile=prof, prefix=ev.index.prefix, progress=False
    )
    if scope == "paper":  # inside one paper the profile's paper_scope_* weights apply
        w, k = prof.paper_scope_bm25_weight, prof.paper_scope_saturation_k
    else:
        w, k = prof.bm25_weight, prof.saturation_k
    plain = Params(w, prof.knn_weight, k)
    assert simulate(ds, cands, plain) == ev.runs["hybrid"].rankings
    with_mults = Params(
        w,
        prof.knn_weight,
        k,
        _freeze(prof.paper_scope_section_multipliers if scope == "paper" else prof.section_multipliers),
    )
    assert simulate(ds, cands, with_mults) == ev.runs["sections"].rankings
    assert cands["a"].rule == "how"


def test_learned_lift_by_hand():
    ds = Dataset(
        name="t",
        format="qasper",
        split="train",
        level="paragraph",
        corpus=Path("x"),
        queries=[EvalQuery("q", "how?", "P")],
        qrels={"q": {"P#1.0": 1}},
    )
    hits = [
        {"chunk_id": "P#1.0", "paragraph_ids": ["P#1.0"], "section_type": "method", "paper_id": "P"},
        {"chunk_id": "P#1.1", "paragraph_ids": ["P#1.1"], "section_type": "method", "paper_id": "P"},
        {"chunk_id": "P#0.0", "paragraph_ids": ["P#0.0"], "section_type": "introduction", "paper_id": "P"},
        {"chunk_id": "P#2.0", "paragraph_ids": ["P#2.0"], "section_type": "results", "paper_id": "P"},
    ]
    zeros = np.zeros(4)
    cands = {"q": Candidates(hits=hits, bm25=zeros, matched=zeros.astype(bool), knn=zeros, rule="how")}
    lifts = learn_lifts(ds, cands)
    # 1 relevant candidate; expected relevant of a type = 1 x its share of the candidates.
    # method: share 2/4, seen 1 -> (1 + 10) / (0.5 + 10) = 1.047619
    # introduction: share 1/4, seen 0 -> (0 + 10) / (0.25 + 10) = 0.975610
    assert lifts["how"]["method"] == pytest.approx(11 / 10.5)
    assert lifts["how"]["introduction"] == pytest.approx(10 / 10.25)
    assert lifts["how"]["results"] == pytest.approx(10 / 10.25)
    assert temper(lifts, 0.5)["how"]["method"] == pytest.approx((11 / 10.5) ** 0.5, abs=1e-4)
    assert temper(lifts, 0.0) == {"how": {}}


def test_scale_multipliers():
    base = {"how": {"method": 1.10, "experiments": 1.05}}
    assert scale_multipliers(base, 0) == {"how": {"method": 1.0, "experiments": 1.0}}
    assert scale_multipliers(base, 2)["how"] == pytest.approx({"method": 1.2, "experiments": 1.1})


def test_tune_writes_a_profile_that_loads(qasper, tmp_engine, tmp_path):
    ds = load_dataset(qasper, "qasper", "train")
    result = tune(ds, tmp_engine, FakeEmbedder(), scope="paper", folds=3, progress=False)
    path = tmp_path / "tuned.json"
    result.profile.save(path)
    loaded = load_profile(str(path))
    assert loaded == result.profile
    assert loaded.per_paper_cap == load_profile(None).per_paper_cap  # the cap is kept for interactive search
    assert set(result.check) == {"hybrid", "sections"}
    assert set(result.section_cv) == {"no multipliers", "hand-set multipliers", "learned on the other folds"}
    assert set(result.cv) >= {"cv_tuned_ndcg@10", "cv_base_ndcg@10"}
    # the engine, run with the tuned profile, agrees with the simulation it was chosen by
    assert result.check["hybrid"]["ndcg@10"] == pytest.approx(result.no_sections.means["ndcg@10"])
    assert result.check["sections"]["mrr@10"] == pytest.approx(result.sections.means["mrr@10"])


def test_cross_validation_picks_on_other_folds():
    from scholar_es.evaluation.tune import GridPoint

    # point A is perfect on q0 only, B on q1 only: each fold picks the point that wins the OTHER fold,
    # which scores 0 on the held-out query -> cross-validated 0, though both points average 0.5
    a = GridPoint(
        Params(),
        "A",
        {m: {"q0": 1.0, "q1": 0.0} for m in ("ndcg@10", "mrr@10", "p@3")},
        {"ndcg@10": 0.5, "mrr@10": 0.5, "p@3": 0.5},
    )
    b = GridPoint(
        Params(),
        "B",
        {m: {"q0": 0.0, "q1": 1.0} for m in ("ndcg@10", "mrr@10", "p@3")},
        {"ndcg@10": 0.5, "mrr@10": 0.5, "p@3": 0.5},
    )
    cv = cross_validate([a, b], "ndcg@10", 2, baseline=a)
    assert cv["cv_tuned_ndcg@10"] == 0.0 and cv["cv_base_ndcg@10"] == 0.5


def test_run_tune_refuses_held_out_splits_and_writes_the_profile(qasper, tmp_path):
    import io

    from scholar_es.errors import ConfigError
    from scholar_es.evaluation.command import run_tune

    with pytest.raises(ConfigError, match="Tune on --split train"):
        run_tune(
            qasper, fmt="qasper", split="validation", target=str(tmp_path / "e"), embedder=FakeEmbedder()
        )
    out = io.StringIO()
    path = tmp_path / "p.json"
    run_tune(
        qasper,
        fmt="qasper",
        split="train",
        target=str(tmp_path / "e"),
        scope="paper",
        folds=0,
        out_profile=path,
        name="mine",
        progress=False,
        out=out,
        embedder=FakeEmbedder(),
    )
    assert load_profile(str(path)).name == "mine"
    assert "hybrid weights: base nDCG@10" in out.getvalue() and f"wrote {path}" in out.getvalue()


def test_section_counts_from_papers_and_qrels(qasper):
    from scholar_es.evaluation.tune import lifts_from_counts, paper_section_counts

    ds = load_dataset(qasper, "qasper", "train")
    counts = paper_section_counts(ds)
    assert counts["a"] == (
        "how",
        {"abstract": 1.0, "introduction": 2.0, "method": 2.0, "results": 2.0},
        {"method": 1.0},
    )
    # rule "how" has question a only: 1 relevant of 7 chunks; method expected 2/7, seen 1
    lifts = lifts_from_counts(counts, ["a"])
    assert lifts["how"]["method"] == pytest.approx((1 + 10) / (2 / 7 + 10))
    assert lifts["how"]["results"] == pytest.approx(10 / (2 / 7 + 10))
    assert lifts_from_counts(counts, []) == {}


@pytest.mark.parametrize("name", ["tuned-qasper-train", "tuned-scifact-train"])
def test_shipped_tuned_profiles_load(name):
    path = Path(__file__).resolve().parents[2] / "scholar_es" / "evaluation" / "profiles" / f"{name}.json"
    assert load_profile(str(path)).name == name
