"""``eval --limit`` bounds the indexed corpus; output paths are checked before any work (issue 11)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from scholar_es.cli import main
from scholar_es.engine.rest.transport import embedded_client
from scholar_es.errors import ConfigError
from scholar_es.evaluation.command import run_eval, run_tune


class FakeEmbedder:
    """Hashed bag of words, L2-normalized; remembers what it embedded."""

    dims, encode_seconds = 16, 0.0

    def __init__(self) -> None:
        self.name = "fake-bow-16"
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims] += 1.0
            out[i, 0] += 0.01
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def beir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("SCHOLAR_ES_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "tiny"
    words = [
        "protein",
        "coral",
        "graph",
        "vaccine",
        "parser",
        "galaxy",
        "enzyme",
        "glacier",
        "neuron",
        "soil",
    ]
    _jsonl(
        root / "corpus.jsonl",
        [
            {"_id": f"d{i}", "title": f"{words[i % 10]} study {i}", "text": f"{words[i % 10]} results"}
            for i in range(50)
        ],
    )
    _jsonl(root / "queries.jsonl", [{"_id": f"q{i}", "text": f"{words[i]} study {i}"} for i in range(10)])
    (root / "qrels").mkdir()
    (root / "qrels" / "train.tsv").write_text("".join(f"q{i}\td{i}\t1\n" for i in range(10)))
    return root


def _smallest_hashes(ids: list[str], n: int) -> set[str]:
    """Independent statement of the sample: the n ids with the smallest SHA-1 (first 8 bytes)."""
    return set(sorted(ids, key=lambda d: hashlib.sha1(d.encode()).digest()[:8])[:n])


def test_limit_indexes_the_judged_documents_plus_a_fixed_sample(beir, tmp_path):
    target = str(tmp_path / "engine")
    out = io.StringIO()
    ev = run_eval(
        beir,
        strategies="bm25",
        target=target,
        limit=2,
        corpus_sample=5,
        progress=False,
        out=out,
        embedder=FakeEmbedder(),
    )
    assert ev.index.prefix == "tiny-train-limit2-sample5-" and ev.index.papers == 7
    report = out.getvalue()
    assert "the 2 documents these queries need + 5 sampled of the other 48" in report
    assert "--full-corpus" in report
    es = embedded_client(target)
    hits = es.search(index=f"{ev.index.prefix}papers", size=50, _source=False)["hits"]["hits"]
    others = [f"d{i}" for i in range(2, 50)]
    assert {h["_id"] for h in hits} == {"d0", "d1"} | _smallest_hashes(others, 5)
    assert ev.metrics["bm25"]["mrr@10"] == pytest.approx(1.0)  # the judged documents are in
    assert not es.indices.exists_alias(name="tiny-chunks")  # the part never takes the whole's name

    again = run_eval(
        beir,
        strategies="bm25",
        target=target,
        limit=2,
        corpus_sample=5,
        progress=False,
        out=io.StringIO(),
        embedder=FakeEmbedder(),
    )
    assert not again.index.built  # the same part next time: reused

    full = run_eval(
        beir,
        strategies="bm25",
        target=target,
        limit=2,
        full_corpus=True,
        progress=False,
        out=io.StringIO(),
        embedder=FakeEmbedder(),
    )
    assert full.index.prefix == "tiny-" and full.index.papers == 50
    # once the whole corpus is indexed, a --limit run uses it (nothing to build, exact numbers)
    reuse = io.StringIO()
    whole = run_eval(
        beir, strategies="bm25", target=target, limit=3, progress=False, out=reuse, embedder=FakeEmbedder()
    )
    assert whole.index.prefix == "tiny-" and not whole.index.built
    assert "corpus bounded" not in reuse.getvalue()


@pytest.mark.parametrize(
    ("option", "path", "message"),
    [
        ("json_out", "missing/out.json", "does not exist; create it first"),
        ("plot_out", "missing/out.png", "does not exist; create it first"),
        ("plot_out", "out.txt", "end it with one of"),
        ("json_out", ".", "is a directory"),
    ],
)
def test_bad_output_paths_fail_before_any_work(beir, tmp_path, option, path, message):
    emb = FakeEmbedder()
    target = tmp_path / "engine"
    with pytest.raises(ConfigError, match=message):
        run_eval(beir, target=str(target), progress=False, embedder=emb, **{option: str(tmp_path / path)})
    assert emb.texts == [] and not target.exists()  # nothing embedded, nothing indexed


def test_tune_checks_out_before_work_and_its_split_advice_exists(beir, tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        run_tune(
            beir,
            target=str(tmp_path / "engine"),
            out_profile=tmp_path / "no" / "p.json",
            progress=False,
            embedder=FakeEmbedder(),
        )
    assert not (tmp_path / "engine").exists()
    refused = CliRunner().invoke(
        main, ["tune", str(beir), "--split", "validation", "--es", str(tmp_path / "e")]
    )
    assert refused.exit_code == 2 and "--allow-any-split" in refused.output
    assert "--allow-any-split" in CliRunner().invoke(main, ["tune", "--help"]).output
    # the advice works: past the split check, the next problem is the split's missing qrels
    allowed = CliRunner().invoke(
        main, ["tune", str(beir), "--split", "validation", "--allow-any-split", "--es", str(tmp_path / "e")]
    )
    assert allowed.exit_code == 2 and "qrels of split 'validation'" in allowed.output


def test_cli_eval_limit_options(beir, tmp_path):
    help_text = CliRunner().invoke(main, ["eval", "--help"]).output
    assert "--corpus-sample" in help_text and "--full-corpus" in help_text and "--quiet" in help_text
    bad = CliRunner().invoke(main, ["eval", str(beir), "--json", str(tmp_path / "x" / "y.json")])
    assert bad.exit_code == 2 and "does not exist; create it first" in bad.output


@pytest.mark.slow  # many seconds: left out of make test-fast
def test_cli_eval_chunking_window_gets_its_own_index(beir, tmp_path):
    """`eval --chunking window` indexes windows under their own prefix (the real bundled model on
    50 tiny documents); an unknown mode exits 2 naming the modes; --help lists the option."""
    assert "--chunking" in CliRunner().invoke(main, ["eval", "--help"]).output
    target = str(tmp_path / "engine")
    args = ["eval", str(beir), "--format", "beir", "--split", "train", "--strategy", "bm25", "--es", target]
    ok = CliRunner().invoke(main, [*args, "--chunking", "window", "--quiet"])
    assert ok.exit_code == 0, ok.output
    assert "index tiny-window-chunks: 50 chunks, 50 papers" in ok.output
    # each query names its own document's unique number: BM25 puts it first
    assert "| bm25 | 1.000 |" in ok.output
    bad = CliRunner().invoke(main, [*args, "--chunking", "sentence", "--quiet"])
    assert bad.exit_code == 2 and "unknown chunking 'sentence'" in bad.output and "window" in bad.output
