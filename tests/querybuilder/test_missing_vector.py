"""A chunk without a vector (another tool indexed it, or a backend wrote it back without one) never
breaks a search: the generated DSL guards every vector function, and the chunk stays searchable by
its words. On the embedded engine, no mocks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from querybuilder.dsl import MISSING_VECTOR_SCORE, VECTOR_FIELD, VECTOR_SCRIPT
from querybuilder.strategies import BUILDER_STRATEGIES, build_body, make_plan, search
from scholar_es.evaluation.tune import vector_scores

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_querybuilder_engine import CORPUS, EMB, build_index  # noqa: E402

QUESTION = "How does zebrafish fin regeneration work?"
NO_VECTOR = {
    "chunk_id": "zebra#0",
    "paper_id": "zebra",
    "title": "Fin regrowth",
    "abstract": "",
    "chunk_text": "Zebrafish regenerate amputated fins within two weeks through blastema formation.",
    "section_heading": "Method",
    "section_type": "method",
    "paragraph_ids": ["zebra#0"],
    "position": 0,
    "year": 2020,
    "venue": "Nature",
    "authors": ["B. Author"],
}


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("missing-vector"))
    build_index(client, CORPUS)
    client.index(index="chunks", id=NO_VECTOR["chunk_id"], document=NO_VECTOR, refresh=True)
    yield client
    client.close()


def _scripts(body):
    if isinstance(body, dict):
        for key, value in body.items():
            if key == "script" and isinstance(value, dict) and isinstance(value.get("source"), str):
                yield value["source"]
            yield from _scripts(value)
    elif isinstance(body, list):
        for item in body:
            yield from _scripts(item)


VECTOR_FUNCTIONS = ("cosineSimilarity", "dotProduct", "l1norm", "l2norm", "hamming", ".magnitude")


@pytest.mark.parametrize("strategy", list(BUILDER_STRATEGIES))
def test_every_generated_vector_function_is_guarded(strategy):
    body = build_body(make_plan(QUESTION, strategy=strategy), [0.5, -0.25, 0.125, 1.0])
    for source in _scripts(body):
        assert isinstance(source, str)  # scripts are strings in the specification (Script.source)
        if any(f in source for f in VECTOR_FUNCTIONS):
            assert source.startswith(f"doc['{VECTOR_FIELD}'].size() == 0 ? "), source


@pytest.mark.parametrize("strategy", list(BUILDER_STRATEGIES))
def test_a_chunk_without_a_vector_breaks_no_strategy(es, strategy):
    res = search(es, QUESTION, strategy=strategy, embedder=EMB, size=10)
    found = [h.chunk_id for h in res.hits]
    assert found, strategy
    if BUILDER_STRATEGIES[strategy].uses_text:
        assert NO_VECTOR["chunk_id"] in found, (strategy, found)  # found by its words
    else:
        assert NO_VECTOR["chunk_id"] not in found  # kNN alone cannot see it


@pytest.mark.parametrize("strategy", ["hybrid", "sections", "expanded"])
def test_paper_view_and_explain_keep_the_vectorless_chunk(es, strategy):
    papers = search(es, QUESTION, strategy=strategy, embedder=EMB, size=10, papers=True)
    assert "zebra" in [h.paper_id for h in papers.hits]
    explained = search(es, QUESTION, strategy=strategy, embedder=EMB, size=10, explain=True)
    hit = next(h for h in explained.hits if h.chunk_id == NO_VECTOR["chunk_id"])
    assert hit.score > 0


def test_the_vector_part_falls_back_to_the_documented_score(es):
    got = vector_scores(es, "chunks", [NO_VECTOR["chunk_id"], f"{CORPUS[0][0]}#0"], EMB.encode([QUESTION])[0])
    assert got[0] == MISSING_VECTOR_SCORE and 0.5 < got[1] <= 1.0
    assert "cosineSimilarity" in VECTOR_SCRIPT
