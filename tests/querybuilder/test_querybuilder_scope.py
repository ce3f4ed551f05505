"""Inside one paper: title and abstract (shared by all its chunks) are not searched, the
chunk's text and heading are, their scores summed (multi_match most_fields); question words
leave the text query everywhere."""

from __future__ import annotations

import pytest
from test_querybuilder_engine import CORPUS, EMB, build_index

from querybuilder.profiles import DEFAULT_PROFILE, Profile
from querybuilder.strategies import build_body, make_plan, search
from scholar_es.errors import ConfigError

QUESTION = "How is the tagger trained?"
PAPER = {"paper_ids": ["ner-distant"]}


def test_single_paper_search_body():
    plan = make_plan(QUESTION, strategy="bm25", filters=PAPER)
    assert plan.text == "the tagger trained?"
    assert build_body(plan)["query"]["bool"]["must"] == [
        {
            "multi_match": {
                "query": "the tagger trained?",
                "fields": ["chunk_text", "section_heading"],
                "type": "most_fields",
            }
        }
    ]


def test_several_papers_or_none_keep_the_profile_boosts():
    for filters in (None, {"paper_ids": ["p1", "p2"]}):
        plan = make_plan(QUESTION, strategy="bm25", filters=filters)
        assert plan.match_type == "best_fields"
        assert plan.field_boosts == DEFAULT_PROFILE.field_boosts["section"]


def test_single_paper_scores_are_text_plus_heading(tmp_engine):
    build_index(tmp_engine, CORPUS)
    profile = DEFAULT_PROFILE.with_changes(per_paper_cap=0)
    hits = search(tmp_engine, QUESTION, strategy="bm25", embedder=EMB, profile=profile, filters=PAPER).hits
    # the method paragraph's heading "Model and Training" matches "trained": it comes first
    assert [h.chunk_id for h in hits][0] == "ner-distant#2"

    def field_scores(field: str) -> dict[str, float]:
        body = {
            "query": {
                "bool": {
                    "must": [{"match": {field: "tagger trained"}}],
                    "filter": [{"term": {"paper_id": "ner-distant"}}],
                }
            },
            "size": 10,
        }
        return {h["_id"]: h["_score"] for h in tmp_engine.search(index="chunks", body=body)["hits"]["hits"]}

    text, heading = field_scores("chunk_text"), field_scores("section_heading")
    assert heading and set(heading) < set(text)  # some headings match, not all
    for h in hits:
        assert h.score == pytest.approx(text.get(h.chunk_id, 0.0) + heading.get(h.chunk_id, 0.0), rel=1e-5)


def test_question_words_can_be_kept():
    keep = DEFAULT_PROFILE.with_changes(drop_question_words=False)
    assert make_plan(QUESTION, profile=keep).text == QUESTION
    assert make_plan(QUESTION).text == "the tagger trained?"
    assert make_plan(QUESTION).intent.form == "how"  # the intent still reads the whole question


@pytest.mark.parametrize(
    ("boosts", "message"),
    [
        ({}, "paper_scope_boosts is empty"),
        ({"body": 1.0}, "unknown field 'body'; valid fields: "),
        ({"chunk_text": 0}, "boosts must be greater than 0"),
    ],
)
def test_bad_paper_scope_boosts(boosts, message):
    with pytest.raises(ConfigError, match=message):
        Profile.from_dict({"paper_scope_boosts": boosts})


def test_sections_inside_one_paper_use_the_paper_scope_multipliers():
    q = "How is the tagger trained?"  # intent rule "how"
    one = make_plan(q, strategy="sections", filters={"paper_ids": ["p1"]})
    two = make_plan(q, strategy="sections", filters={"paper_ids": ["p1", "p2"]})
    assert one.section_multipliers == DEFAULT_PROFILE.paper_scope_section_multipliers["how"]
    assert (
        two.section_multipliers
        == DEFAULT_PROFILE.section_multipliers["how"]
        == {
            "method": 1.05,
            "experiments": 1.025,
        }
    )
    # the learned ones: evidence of "how" questions is less often in the abstract than its share
    assert one.section_multipliers["abstract"] < 1 < one.section_multipliers["method"]
    functions = build_body(one, [1.0, 0.0])["query"]["function_score"]["functions"]
    assert {f["filter"]["term"]["section_type"]: f["weight"] for f in functions} == one.section_multipliers
    mine = Profile(paper_scope_section_multipliers={"how": {"method": 1.2}})
    assert make_plan(
        q, strategy="sections", profile=mine, filters={"paper_ids": ["p1"]}
    ).section_multipliers == {"method": 1.2}
    with pytest.raises(ConfigError, match="paper_scope_section_multipliers"):
        Profile(paper_scope_section_multipliers={"how": {"methods": 1.2}})


def test_hybrid_inside_one_paper_uses_the_paper_scope_weights():
    prof = Profile(
        bm25_weight=1.5, saturation_k=200.0, paper_scope_bm25_weight=1.0, paper_scope_saturation_k=20.0
    )
    one = make_plan(QUESTION, strategy="hybrid", profile=prof, filters=PAPER)
    many = make_plan(QUESTION, strategy="hybrid", profile=prof)
    for plan, params in ((one, {"k": 20.0, "w": 1.0}), (many, {"k": 200.0, "w": 1.5})):
        body = build_body(plan, [1.0, 0.0, 0.0, 0.0])
        text = body["query"]["bool"]["should"][0]["script_score"]["script"]["params"]
        main = body["rescore"][-1] if isinstance(body["rescore"], list) else body["rescore"]  # the last phase
        rescored = main["query"]["rescore_query"]["bool"]["should"][0]["script_score"]
        # the first pass only picks the window (text weight 1e-6: the kNN top k, then the text's
        # best); the rescore carries the scope's weights
        assert text == {**params, "w": 1e-06} and rescored["script"]["params"] == params
