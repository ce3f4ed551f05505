"""``scholar-es indices`` and ``scholar-es delete`` on the embedded engine (issue 11)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner

from indexer.pipeline import IndexRun
from scholar_es.cli import main
from scholar_es.engine.rest.transport import embedded_client


class Bow:
    name, dims, encode_seconds = "fake-bow-8", 8, 0.0

    def encode(self, texts):
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.split():
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 8] += 1.0
            out[i, 0] += 0.01
        return out / np.linalg.norm(out, axis=1, keepdims=True)


PAPERS = [
    {
        "id": "a",
        "title": "Dense retrieval",
        "abstract": "Vectors.",
        "sections": [{"heading": "Method", "text": "x y"}],
    },
    {"id": "b", "title": "Sparse retrieval", "abstract": "BM25 ranks."},
]


@pytest.fixture
def target(tmp_path):
    src = tmp_path / "p.jsonl"
    src.write_text("".join(json.dumps(p) + "\n" for p in PAPERS))
    target = tmp_path / "engine"
    es = embedded_client(target)
    IndexRun(es, Bow()).run([src], "jsonl")
    IndexRun(es, Bow(), rebuild=True).run([src], "jsonl")
    IndexRun(es, Bow(), prefix="s-").run([src], "jsonl")
    es.indices.create(index="notes", mappings={"properties": {"t": {"type": "text"}}})
    return str(target)


def _cli(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input)


def test_indices_lists_versions_roles_counts_model_and_similarity(target):
    result = _cli("indices", "--es", target, "--json")
    assert result.exit_code == 0, result.output
    rows = {r["index"]: r for r in json.loads(result.output)}
    assert set(rows) == {"chunks-v2", "chunks-v1", "papers-v2", "papers-v1", "s-chunks-v1", "s-papers-v1"}
    assert rows["chunks-v2"]["role"] == "current" and rows["chunks-v1"]["role"] == "previous"
    assert rows["chunks-v2"]["alias"] == "chunks"
    # paper a: its abstract and one paragraph; paper b: its abstract
    assert rows["chunks-v2"]["docs"] == 3 and rows["papers-v2"]["docs"] == 2
    assert rows["chunks-v2"]["model"] == "fake-bow-8" and rows["chunks-v2"]["dims"] == 8
    assert rows["chunks-v2"]["chunking"] == "paragraph"
    assert rows["chunks-v2"]["build_state"] == "complete"
    # mappings/chunks.json sets b = 0.3; papers use Elasticsearch's defaults (k1 1.2, b 0.75)
    assert rows["chunks-v2"]["bm25"] == {"type": "BM25", "k1": 1.2, "b": 0.3}
    assert rows["papers-v2"]["bm25"] == {"type": "BM25", "k1": 1.2, "b": 0.75}
    table = _cli("indices", "--es", target).output
    line = next(line for line in table.splitlines() if " chunks-v1 " in line)
    assert line.split()[:4] == ["chunks", "chunks-v1", "previous", "3"]
    assert "notes" not in table


def test_delete_refuses_what_is_not_ours_or_serving(target):
    other = _cli("delete", "notes", "--es", target, "--yes")
    assert other.exit_code == 2 and "'notes' is not a scholar-es index" in other.output
    missing = _cli("delete", "nothing", "--es", target, "--yes")
    assert missing.exit_code == 2 and "no scholar-es index matches 'nothing'" in missing.output
    serving = _cli("delete", "chunks-v2", "--es", target, "--yes")
    assert serving.exit_code == 2 and "alias 'chunks' serves now" in serving.output
    es = embedded_client(target)
    assert es.indices.exists(index="notes") and es.indices.exists(index="chunks-v2")


def test_delete_asks_unless_yes_and_takes_aliases_prefixes_and_versions(target):
    es = embedded_client(target)
    no = _cli("delete", "chunks", "--es", target, input="n\n")
    assert no.exit_code == 1 and "chunks-v2, chunks-v1" in no.output and "nothing deleted" in no.output
    assert es.indices.exists(index="chunks-v1")
    old = _cli("delete", "chunks-v1", "--es", target, "--yes")
    assert old.exit_code == 0 and not es.indices.exists(index="chunks-v1")
    assert es.count(index="chunks")["count"] == 3  # the current version still serves
    prefix = _cli("delete", "s-", "--es", target, input="y\n")
    assert prefix.exit_code == 0, prefix.output
    assert not es.indices.exists(index="s-chunks-v1") and not es.indices.exists(index="s-papers-v1")
    assert es.indices.exists(index="papers-v2")  # "s-" never matches the unprefixed aliases
    alias = _cli("delete", "chunks", "papers", "--es", target, "--yes")
    assert alias.exit_code == 0
    assert not es.indices.exists_alias(name="chunks") and not es.indices.exists_alias(name="papers")
    assert es.indices.exists(index="notes")
    assert "no scholar-es index here" in _cli("indices", "--es", target).output
