"""Inside one paper, title and abstract (shared by all its chunks) are not searched."""

from __future__ import annotations

from querybuilder.dsl import build_body
from querybuilder.plan import make_plan


def _fields(body: dict) -> list[str]:
    return body["query"]["bool"]["must"][0]["multi_match"]["fields"]


def test_single_paper_search_uses_the_chunk_text_and_heading():
    plan = make_plan("How is the tagger trained?", strategy="bm25", filters={"paper_ids": ["p1"]})
    assert "title" not in plan.field_boosts and "abstract" not in plan.field_boosts
    assert set(plan.field_boosts) == {"chunk_text", "section_heading"}
    assert plan.field_boosts["chunk_text"] == make_plan("How is the tagger trained?").field_boosts["chunk_text"]
    assert set(_fields(build_body(plan))) == {"chunk_text^2", "section_heading"}


def test_several_papers_or_none_keep_the_profile_boosts():
    for filters in (None, {"paper_ids": ["p1", "p2"]}):
        plan = make_plan("How is the tagger trained?", strategy="bm25", filters=filters)
        assert {"title", "abstract", "chunk_text"} <= set(plan.field_boosts)
