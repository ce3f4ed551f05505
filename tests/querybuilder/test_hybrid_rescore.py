"""The default hybrid's rescore: every hit scored by BOTH signals, and its DSL as Elasticsearch's
specification defines it.

Expected scores come from the formula written out here, with the BM25 score of each chunk from a
plain BM25 search and the cosine from the test embedder's vectors in numpy:
``bm25_weight * s / (s + saturation_k) + knn_weight * (1 + cos) / 2`` (a knn query's score for a
cosine field, reference/mapping-types/dense-vector.html).
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from querybuilder.dsl import VECTOR_SCRIPT
from querybuilder.profiles import DEFAULT_PROFILE
from querybuilder.render import to_console
from querybuilder.strategies import build_body, build_search, make_plan

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_querybuilder_engine import CORPUS, EMB, build_index  # noqa: E402

QUESTION = "How is the named entity tagger trained?"

# elastic/elasticsearch-specification, specification/_global/search/_types/rescoring.ts (8.x-9.x):
# Rescore { window_size?: integer; query?: RescoreQuery; learning_to_rank?; script? (9.1) }
# RescoreQuery { rescore_query: QueryContainer; query_weight?: double; rescore_query_weight?: double;
#                score_mode?: ScoreMode }  ScoreMode = avg | max | min | multiply | total
# specification/_types/query_dsl/specialized.ts: ScriptScoreQuery { query: QueryContainer;
#   script: Script; min_score?: float } + QueryBase { boost?, _name? }
SPEC_RESCORE = {"window_size": int, "query": dict, "learning_to_rank": dict, "script": dict}
SPEC_RESCORE_QUERY = {
    "rescore_query": dict,
    "query_weight": (int, float),
    "rescore_query_weight": (int, float),
}
SPEC_SCORE_MODES = {"avg", "max", "min", "multiply", "total"}
SPEC_SCRIPT_SCORE = {"query", "script", "min_score", "boost", "_name"}


def _check(obj: dict, spec: dict) -> None:
    for key, value in obj.items():
        assert key in spec, key
        assert isinstance(value, spec[key]) and not isinstance(value, bool), (key, value)


def _script_scores(query):
    if isinstance(query, dict):
        for key, value in query.items():
            if key == "script_score":
                yield value
            yield from _script_scores(value)
    elif isinstance(query, list):
        for item in query:
            yield from _script_scores(item)


@pytest.mark.parametrize("strategy", ["hybrid", "sections", "expanded"])
@pytest.mark.parametrize("filters", [None, {"paper_ids": ["p1"]}])
def test_rescore_follows_the_specification(strategy, filters):
    vec = [0.5, -0.25, 0.125, 1.0]
    body = build_body(make_plan(QUESTION, strategy=strategy, filters=filters), vec)
    # SearchRequest.rescore?: Rescore | Rescore[]. Corpus-wide two phases (the recall formula orders
    # the window, the main one its top top_window); one inside a paper
    rescorers = body["rescore"] if isinstance(body["rescore"], list) else [body["rescore"]]
    window = max(DEFAULT_PROFILE.knn_k, 10) + DEFAULT_PROFILE.text_candidates  # kNN top k + text's best
    if filters is None:
        assert [r["window_size"] for r in rescorers] == [window, min(DEFAULT_PROFILE.top_window, window)]
    else:
        assert [r["window_size"] for r in rescorers] == [window]
    for rescore in rescorers:
        _check(rescore, SPEC_RESCORE)
        query = rescore["query"]
        _check({k: v for k, v in query.items() if k != "score_mode"}, SPEC_RESCORE_QUERY)
        assert query.get("score_mode", "total") in SPEC_SCORE_MODES
        assert query["query_weight"] == 0 and query["rescore_query_weight"] == 1
        for script_score in _script_scores(query["rescore_query"]):
            assert set(script_score) <= SPEC_SCRIPT_SCORE and {"query", "script"} <= set(script_score)
        vector_parts = [
            s for s in _script_scores(query["rescore_query"]) if s["script"]["source"] == VECTOR_SCRIPT
        ]
        assert vector_parts == [
            {
                "query": {"match_all": {}},
                "script": {
                    "source": VECTOR_SCRIPT,
                    "params": {"query_vector": vec, "w": DEFAULT_PROFILE.knn_weight},
                },
            }
        ]
    text_weights = [
        s["script"]["params"]
        for r in rescorers
        for s in _script_scores(r["query"]["rescore_query"])
        if s["script"]["source"] != VECTOR_SCRIPT
    ]
    if filters is None:
        assert text_weights == [
            {"k": DEFAULT_PROFILE.recall_saturation_k, "w": DEFAULT_PROFILE.recall_bm25_weight},
            {"k": DEFAULT_PROFILE.saturation_k, "w": DEFAULT_PROFILE.bm25_weight},
        ]
    else:
        assert text_weights == [
            {"k": DEFAULT_PROFILE.paper_scope_saturation_k, "w": DEFAULT_PROFILE.paper_scope_bm25_weight}
        ]
    assert "sort" not in body  # Elasticsearch refuses a sort other than _score with a rescore


def test_window_is_at_least_the_page_and_zero_turns_it_off():
    big = make_plan(QUESTION, strategy="hybrid", size=300)  # knn_k 300 + 100 text candidates
    windows = [r["window_size"] for r in build_body(big, [1.0, 0, 0, 0])["rescore"]]
    assert windows == [400, 300]  # the main formula scores every hit asked for
    few = DEFAULT_PROFILE.with_changes(text_candidates=0, rescore_window=1)
    body = build_body(make_plan(QUESTION, strategy="hybrid", size=300, profile=few), [1.0, 0, 0, 0])
    assert [r["window_size"] for r in body["rescore"]] == [300, 300]
    one_phase = DEFAULT_PROFILE.with_changes(top_window=0)
    single = build_body(make_plan(QUESTION, strategy="hybrid", profile=one_phase), [1.0, 0, 0, 0])
    assert single["rescore"]["window_size"] == 150
    off = make_plan(QUESTION, strategy="hybrid", profile=DEFAULT_PROFILE.with_changes(rescore_window=0))
    assert "rescore" not in build_body(off, [1.0, 0, 0, 0])
    no_text = make_plan(QUESTION, strategy="hybrid").with_changes(text="")  # kNN alone: nothing to add
    assert not no_text.has_text and "rescore" not in build_body(no_text, [1.0, 0, 0, 0])


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("hybrid-rescore"))
    build_index(client, CORPUS)
    yield client
    client.close()


def _scores(es, plan, vec):
    body = build_search(plan, vec).extra(size=100).to_dict()
    body.pop("collapse", None)
    return {h["_id"]: h["_score"] for h in es.search(index="chunks", body=body)["hits"]["hits"]}


def _cosines(es, vec):
    hits = es.search(
        index="chunks", query={"match_all": {}}, size=100, _source=["chunk_text", "section_heading"]
    )
    out = {}
    for h in hits["hits"]["hits"]:
        src = h["_source"]
        d = EMB.encode([f"{src['section_heading']}\n{src['chunk_text']}"])[0].astype(np.float64)
        out[h["_id"]] = float(d @ vec / (np.linalg.norm(d) * np.linalg.norm(vec)))
    return out


@pytest.mark.parametrize("window", [100, 0])
def test_every_hit_carries_both_signals(es, window):
    # kNN k 1 (size 1): the union gives the vector score to ONE chunk only; the rescore to all
    prof = DEFAULT_PROFILE.with_changes(knn_k=1, num_candidates=1, rescore_window=window, per_paper_cap=0)
    vec = EMB.encode([QUESTION])[0].astype(np.float64)
    plan = make_plan(QUESTION, strategy="hybrid", profile=prof, size=1)
    bm25 = _scores(es, make_plan(QUESTION, strategy="bm25", profile=prof), vec)
    cos = _cosines(es, vec)
    got = _scores(es, plan, vec)
    k, w = prof.saturation_k, prof.bm25_weight
    both = {d: (w * s / (s + k) if (s := bm25.get(d, 0.0)) else 0.0) + (1 + cos[d]) / 2 for d in cos}
    if window:
        # every candidate of the union (the BM25 matches and the kNN top 1) gets the formula
        assert set(got) == set(bm25) | {max(cos, key=cos.get)}
        assert got == pytest.approx({d: both[d] for d in got}, rel=1e-5)
        assert list(got) == sorted(got, key=lambda d: (-got[d], list(cos).index(d)))
    else:
        # without the rescore only the kNN top 1 has its vector part; the others their BM25 alone
        top = max(cos, key=cos.get)
        text_only = {d: w * bm25[d] / (bm25[d] + k) for d in bm25 if d != top}
        assert {d: s for d, s in got.items() if d != top} == pytest.approx(text_only, rel=1e-5)


@pytest.mark.parametrize("knn_k,text_candidates", [(3, 2), (2, 4), (5, 1)])
def test_window_holds_both_signals_best(es, knn_k, text_candidates):
    # the rescore window is the kNN top k AND the text query's best text_candidates among the rest,
    # however low their first-pass (BM25-only) score: every hit of it gets the formula, a hit
    # outside it query_weight 0 x its first-pass score = 0 (reference/search/search-your-data/
    # filter-search-results.html#rescore: hits beyond the window keep query_weight x score)
    prof = DEFAULT_PROFILE.with_changes(
        knn_k=knn_k,
        num_candidates=knn_k,
        text_candidates=text_candidates,
        rescore_window=1,
        per_paper_cap=0,
        top_window=0,  # one rescore phase: the whole window by the main formula
    )
    vec = EMB.encode([QUESTION])[0].astype(np.float64)
    cos = _cosines(es, vec)
    bm25 = _scores(es, make_plan(QUESTION, strategy="bm25", profile=prof), vec)
    knn_top = sorted(cos, key=lambda d: -cos[d])[:knn_k]
    text_only = [d for d in sorted(bm25, key=lambda d: -bm25[d]) if d not in knn_top][:text_candidates]
    assert text_only, "the test needs chunks only the text finds"
    plan = make_plan(QUESTION, strategy="hybrid", profile=prof, size=1)
    body = build_search(plan, vec).extra(size=100).to_dict()
    body.pop("collapse", None)
    assert body["rescore"]["window_size"] == knn_k + text_candidates
    hits = es.search(index="chunks", body=body)["hits"]["hits"]
    k, w = prof.saturation_k, prof.bm25_weight
    both = {d: (w * s / (s + k) if (s := bm25.get(d, 0.0)) else 0.0) + (1 + cos[d]) / 2 for d in cos}
    rescored = {h["_id"]: h["_score"] for h in hits if h["_score"] > 0}
    assert set(rescored) == set(knn_top) | set(text_only)
    assert rescored == pytest.approx({d: both[d] for d in rescored}, rel=1e-5)
    assert all(h["_score"] == 0 for h in hits if h["_id"] not in rescored)


@pytest.mark.parametrize("top", [1, 2, 4])
def test_two_phases_recall_formula_then_main_formula(es, top):
    # corpus-wide: the recall formula (recall_bm25_weight/recall_saturation_k) orders the window
    # (kNN top 3 + the text's best 2), the main formula scores its top `top` hits; every other
    # hit scores 0 (query_weight 0 in both phases; reference/search/search-your-data/
    # filter-search-results.html#multiple-rescores: each rescorer runs on the previous one's top)
    prof = DEFAULT_PROFILE.with_changes(
        knn_k=3,
        num_candidates=3,
        text_candidates=2,
        rescore_window=1,
        per_paper_cap=0,
        top_window=top,
        recall_bm25_weight=3.0,
        recall_saturation_k=1.0,
    )
    vec = EMB.encode([QUESTION])[0].astype(np.float64)
    cos = _cosines(es, vec)
    bm25 = _scores(es, make_plan(QUESTION, strategy="bm25", profile=prof), vec)
    knn_top = sorted(cos, key=lambda d: -cos[d])[:3]
    text_only = [d for d in sorted(bm25, key=lambda d: -bm25[d]) if d not in knn_top][:2]

    def formula(w, k):
        return {d: (w * s / (s + k) if (s := bm25.get(d, 0.0)) else 0.0) + (1 + cos[d]) / 2 for d in cos}

    recall, main = formula(3.0, 1.0), formula(prof.bm25_weight, prof.saturation_k)
    window = sorted(knn_top + text_only, key=lambda d: -recall[d])
    plan = make_plan(QUESTION, strategy="hybrid", profile=prof, size=1)
    body = build_search(plan, vec).extra(size=100).to_dict()
    body.pop("collapse", None)
    assert [r["window_size"] for r in body["rescore"]] == [5, top]
    hits = es.search(index="chunks", body=body)["hits"]["hits"]
    scored = {h["_id"]: h["_score"] for h in hits if h["_score"] > 0}
    assert set(scored) == set(window[:top])
    assert scored == pytest.approx({d: main[d] for d in scored}, rel=1e-5)
    assert [h["_id"] for h in hits[:top]] == sorted(scored, key=lambda d: -scored[d])


def test_console_text_of_the_default_hybrid_runs(es):
    from scholar_es.engine.rest.console import run_console

    vec = EMB.encode([QUESTION])[0]
    for strategy in ("hybrid", "sections"):
        plan = make_plan(QUESTION, strategy=strategy)
        text = to_console(build_search(plan, vec))
        assert '"rescore"' in text and "cosineSimilarity" in text
        out = io.StringIO()
        assert run_console(es, io.StringIO(text), out) == 0, out.getvalue()
        hits = json.loads(out.getvalue())["hits"]["hits"]
        assert hits and all(h["_score"] > 0 for h in hits)
