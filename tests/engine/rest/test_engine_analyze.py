"""_analyze: tokens with offsets, types and positions as Elasticsearch's reference shows them
(docs: "Analyze API" examples; AnalyzeAction#simpleAnalyze for several texts)."""

from __future__ import annotations

import pytest
from elasticsearch import BadRequestError


def test_standard_analyzer_tokens(tmp_engine):
    r = tmp_engine.indices.analyze(analyzer="standard", text="Quick Brown Foxes!")
    # the reference's example output for this text and analyzer
    assert r["tokens"] == [
        {"token": "quick", "start_offset": 0, "end_offset": 5, "type": "<ALPHANUM>", "position": 0},
        {"token": "brown", "start_offset": 6, "end_offset": 11, "type": "<ALPHANUM>", "position": 1},
        {"token": "foxes", "start_offset": 12, "end_offset": 17, "type": "<ALPHANUM>", "position": 2},
    ]


def test_types_stop_gaps_and_several_texts(tmp_engine):
    r = tmp_engine.indices.analyze(
        tokenizer="standard", filter=["lowercase", "stop"], text=["The 2 fox", "x"]
    )
    toks = [(t["token"], t["type"], t["position"], t["start_offset"], t["end_offset"]) for t in r["tokens"]]
    # "the" dropped: "2" keeps position 1; the second text continues after position 2 (gap 0) and
    # offset 9 + 1
    assert toks == [("2", "<NUM>", 1, 4, 5), ("fox", "<ALPHANUM>", 2, 6, 9), ("x", "<ALPHANUM>", 3, 10, 11)]
    ws = tmp_engine.indices.analyze(tokenizer="whitespace", text="a-b c")["tokens"]
    assert [(t["token"], t["type"]) for t in ws] == [("a-b", "word"), ("c", "word")]


def test_field_and_normalizer(tmp_engine):
    tmp_engine.indices.create(
        index="a",
        settings={"analysis": {"normalizer": {"low": {"type": "custom", "filter": ["lowercase"]}}}},
        mappings={"properties": {"t": {"type": "text"}, "k": {"type": "keyword", "normalizer": "low"}}},
    )
    r = tmp_engine.indices.analyze(index="a", field="t", text=["a b", "c"])
    assert [t["position"] for t in r["tokens"]] == [0, 1, 102]  # position_increment_gap 100
    r = tmp_engine.indices.analyze(index="a", field="k", text="Hello World")
    assert r["tokens"] == [
        {"token": "hello world", "start_offset": 0, "end_offset": 11, "type": "word", "position": 0}
    ]
    r = tmp_engine.indices.analyze(index="a", normalizer="low", text="ABC")
    assert r["tokens"][0]["token"] == "abc"


def test_errors(tmp_engine):
    with pytest.raises(BadRequestError) as e:
        tmp_engine.indices.analyze(analyzer="standard")
    assert e.value.body["error"]["type"] == "action_request_validation_exception"
    assert e.value.body["error"]["reason"] == "Validation Failed: 1: text is missing;"
    with pytest.raises(BadRequestError) as e:
        tmp_engine.indices.analyze(analyzer="standard", text="x", explain=True)
    assert "[_analyze.explain]" in e.value.body["error"]["reason"]
