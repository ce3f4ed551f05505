"""Read-modify-write keeps the vector: ``indexer.update.update_chunk`` on the embedded engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from elasticsearch import ConflictError

from indexer.update import update_chunk
from querybuilder.strategies import search
from scholar_es.errors import ConfigError, InputError, ModelMismatchError
from scholar_es.evaluation.tune import vector_scores

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "querybuilder"))
from test_querybuilder_engine import CORPUS, EMB, FakeEmbedder, build_index  # noqa: E402

NEW_TEXT = "Zebrafish regenerate amputated fins within two weeks through blastema formation."
QUESTION = "zebrafish fin regeneration blastema"


@pytest.fixture
def es(tmp_path):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path / "engine")
    build_index(client, CORPUS)
    yield client
    client.close()


def _has_vector(es, chunk_id: str) -> bool:
    body = {
        "query": {
            "script_score": {
                "query": {"ids": {"values": [chunk_id]}},
                "script": {"source": "doc['vector'].size()"},
            }
        }
    }
    return es.search(index="chunks", body=body)["hits"]["hits"][0]["_score"] == 1.0


def test_a_plain_read_edit_write_drops_the_vector_and_search_still_finds_the_chunk(es):
    got = es.get(index="chunks", id="nmt-attn#5")
    assert "vector" not in got["_source"]  # excluded from _source by the mapping
    es.index(
        index=got["_index"],
        id="nmt-attn#5",
        document={**got["_source"], "chunk_text": NEW_TEXT},
        refresh=True,
    )
    assert not _has_vector(es, "nmt-attn#5")  # the trap update_chunk avoids
    hits = [h.chunk_id for h in search(es, QUESTION, strategy="hybrid", embedder=EMB, size=10).hits]
    assert "nmt-attn#5" in hits  # still found by its words: the rescore's vector part is guarded
    dense = [h.chunk_id for h in search(es, QUESTION, strategy="dense", embedder=EMB, size=10).hits]
    assert "nmt-attn#5" not in dense


def test_update_chunk_re_embeds_and_keeps_the_chunk_searchable(es):
    new = update_chunk(es, "nmt-attn#5", {"chunk_text": NEW_TEXT}, embedder=EMB, refresh=True)
    assert new["chunk_text"] == NEW_TEXT and "vector" not in new
    assert new["paper_id"] == "nmt-attn" and new["section_heading"] == "Approach"
    assert _has_vector(es, "nmt-attn#5")
    # the vector is that of the new text, embedded as `scholar-es index` embeds it (heading + text)
    [score] = vector_scores(es, "chunks", ["nmt-attn#5"], EMB.encode([f"Approach\n{NEW_TEXT}"])[0])
    assert score == pytest.approx(1.0, abs=1e-6)
    for strategy in ("hybrid", "rrf", "dense"):
        hits = [h.chunk_id for h in search(es, QUESTION, strategy=strategy, embedder=EMB, size=10).hits]
        assert "nmt-attn#5" in hits, strategy
    assert es.get(index="chunks", id="nmt-attn#5")["_source"]["chunk_text"] == NEW_TEXT


def test_update_chunk_refuses_what_it_cannot_do(es):
    with pytest.raises(ConfigError, match="'title'.*'chunk_text', 'section_heading', 'section_type'"):
        update_chunk(es, "nmt-attn#5", {"title": "x"}, embedder=EMB)
    with pytest.raises(ConfigError, match="'vector'"):
        update_chunk(es, "nmt-attn#5", {"vector": [1.0, 0, 0, 0]}, embedder=EMB)
    with pytest.raises(InputError, match="unknown section type 'nonsense'"):
        update_chunk(es, "nmt-attn#5", {"section_type": "nonsense"}, embedder=EMB)
    with pytest.raises(InputError, match="empty"):
        update_chunk(es, "nmt-attn#5", {"chunk_text": "  "}, embedder=EMB)
    with pytest.raises(ConfigError, match="no chunk 'nope' in 'chunks'"):
        update_chunk(es, "nope", {"chunk_text": "x"}, embedder=EMB)

    class Other(FakeEmbedder):
        name = "other-model"

    with pytest.raises(ModelMismatchError, match="other-model"):
        update_chunk(es, "nmt-attn#5", {"chunk_text": "x"}, embedder=Other())
    assert es.get(index="chunks", id="nmt-attn#5")["_source"]["chunk_text"] == CORPUS[5][4]  # unchanged


def test_a_write_between_read_and_write_back_is_a_conflict(es):
    class Racing(FakeEmbedder):
        def encode(self, texts):  # another writer changes the chunk while it is embedded
            es.update(index="chunks", id="nmt-attn#5", doc={"section_heading": "Data"}, refresh=True)
            return super().encode(texts)

    with pytest.raises(ConflictError):
        update_chunk(es, "nmt-attn#5", {"chunk_text": NEW_TEXT}, embedder=Racing())
