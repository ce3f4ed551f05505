"""Stored mustache search templates on the embedded engine."""

from __future__ import annotations

import pytest
from elasticsearch import BadRequestError, NotFoundError

from scholar_es.engine.rest.transport import embedded_client
from scholar_es.engine.search.templates import render_string


@pytest.fixture()
def es(tmp_path):
    client = embedded_client(tmp_path)
    client.indices.create(
        index="docs",
        mappings={
            "properties": {
                "text": {"type": "text"},
                "v": {"type": "dense_vector", "dims": 2, "similarity": "cosine"},
            }
        },
    )
    client.index(index="docs", id="a", document={"text": "sliding window memory", "v": [1.0, 0.0]})
    client.index(index="docs", id="b", document={"text": "rank fusion", "v": [0.0, 1.0]})
    return client


def test_render_escapes_strings_as_json_and_keeps_json_values():
    out = render_string(
        '{"q": "{{q}}", "v": {{#toJson}}v{{/toJson}}, "n": {{n}}}',
        {"q": 'say "hi" \\ now', "v": [0.5, 1], "n": 3},
    )
    assert out == '{"q": "say \\"hi\\" \\\\ now", "v": [0.5, 1], "n": 3}'


def test_sections_inverted_sections_and_join():
    assert render_string("{{#xs}}<{{.}}>{{/xs}}{{^none}}empty{{/none}}", {"xs": [1, 2]}) == "<1><2>empty"
    assert render_string("{{#join}}xs{{/join}}", {"xs": ["a", "b"]}) == "a,b"


def test_stored_template_runs_a_hybrid_search(es):
    es.put_script(
        id="hybrid",
        script={
            "lang": "mustache",
            "source": (
                '{"query": {"match": {"text": "{{query_text}}"}}, '
                '"knn": {"field": "v", "query_vector": {{#toJson}}query_vector{{/toJson}}, "k": {{size}}, '
                '"num_candidates": 10}, "size": {{size}}}'
            ),
        },
    )
    resp = es.search_template(
        index="docs",
        id="hybrid",
        params={"query_text": 'rank "fusion"', "query_vector": [0.0, 1.0], "size": 2},
    )
    hits = resp["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["b", "a"]
    assert hits[1]["_score"] == pytest.approx(0.5)  # knn only: (1 + cos 90deg) / 2


def test_missing_template_and_bad_render_are_clear_errors(es):
    with pytest.raises(NotFoundError) as e:
        es.search_template(index="docs", id="nope", params={})
    assert "nope" in e.value.body["error"]["reason"]
    es.put_script(id="broken", script={"lang": "mustache", "source": '{"size": {{size}}'})
    with pytest.raises(BadRequestError) as e:
        es.search_template(index="docs", id="broken", params={"size": 1})
    assert e.value.body["error"]["type"] == "x_content_parse_exception"
