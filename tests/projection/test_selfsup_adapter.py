"""The self-supervised adapter (issue 28) through the embedded engine (never mocked): pairs built
from an indexed corpus as documented, the in-batch loss, training lowering the held-out loss, the
stored adapter round-tripping, the adapted strategies sending the adapted vector, and the
command's errors.

Vectors come from a deterministic hashed bag-of-words embedder, so texts sharing words are close.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from indexer.pipeline import IndexRun
from querybuilder.strategies import search, show_query
from scholar_es.cli import main
from scholar_es.errors import ConfigError, ModelMismatchError
from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.runner import run_evaluation
from scholar_es.projection import adapter_store
from scholar_es.projection.adapted import resolve_adapter
from scholar_es.projection.adapter import (
    Adapter,
    fit_adapter,
    holdout_split,
    in_batch_loss,
    similar_batches,
)
from scholar_es.projection.routing import normalize
from scholar_es.projection.selfsup import (
    MAX_HEADING_PAPERS,
    build_pairs,
    count_kinds,
    read_chunks,
    split_sentences,
)
from scholar_es.projection.selfsup_train import train_self_supervised

PREFIX = "ss-"


class BowEmbedder:
    """Hashed bag of words, L2-normalized: deterministic, and close for texts sharing words."""

    dims = 48
    encode_seconds = 0.0
    encoded = 0

    def __init__(self, name: str = "fake-bow-48") -> None:
        self.name = name
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").replace(",", " ").split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims] += 1.0
            out[i, 0] += 0.01  # never all zeros
        return out / np.linalg.norm(out, axis=1, keepdims=True)


TOPICS = ["parsing", "translation", "summarization", "tagging", "retrieval", "dialogue"]
WORDS = ["corpus", "model", "neural", "baseline", "annotated", "accuracy", "encoder", "treebank"]


def _sentence(topic: str, k: int) -> str:
    w = [WORDS[(k + j) % len(WORDS)] for j in range(4)]
    return f"The {topic} {w[0]} uses a {w[1]} with {w[2]} {w[3]} number {k}."


def _paper(i: int, topic: str) -> dict:
    return {
        "paper_id": f"P{i}",
        "title": f"Learning {topic} from scratch",
        "abstract": " ".join(_sentence(topic, k) for k in range(3)),
        "sections": [
            {"section_name": "Introduction", "paragraphs": [_sentence(topic, 10)]},
            {  # a two-word heading every paper has: it names nothing, no heading pair
                "section_name": "Related Work",
                "paragraphs": [" ".join(_sentence(topic, k) for k in (20, 21))],
            },
            {
                "section_name": f"Our {topic} system",
                "paragraphs": [
                    " ".join(_sentence(topic, k) for k in (30 + 2 * j, 31 + 2 * j)) for j in range(2)
                ],
            },
        ],
    }


PAPERS = [_paper(i, t) for i, t in enumerate(TOPICS)]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    root = tmp_path_factory.mktemp("selfsup")
    data = root / "qasper"
    data.mkdir()
    (data / "papers_dev.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PAPERS))
    questions = [
        {"question_id": f"q{i}", "question": f"how is the {t} model trained?", "paper_id": f"P{i}"}
        for i, t in enumerate(TOPICS)
    ]
    (data / "questions_dev.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    (data / "qrels_dev.tsv").write_text("".join(f"q{i}\tP{i}#2.0\t1\n" for i in range(len(TOPICS))))
    es = embedded_client(root / "engine")
    emb = BowEmbedder()
    summary = IndexRun(es, emb, prefix=PREFIX).run([data / "papers_dev.jsonl"], "qasper")
    assert summary.papers == len(PAPERS) and not summary.rejected
    yield es, emb, data
    es.close()


# --- pairs -------------------------------------------------------------------------------------------
def test_sentences_are_split_at_sentence_ends_only():
    text = "We use BiLSTMs, e.g. for tagging. Results in Fig. 2 hold (see et al. 2019). Done! 3 more"
    assert split_sentences(text) == [
        "We use BiLSTMs, e.g. for tagging.",
        "Results in Fig. 2 hold (see et al. 2019).",
        "Done!",
        "3 more",
    ]
    assert split_sentences("J. R. R. Tolkien wrote it. Fine.") == ["J. R. R. Tolkien wrote it.", "Fine."]


def test_pairs_come_from_the_indexed_chunks_as_documented(world):
    es, emb, _ = world
    chunks = read_chunks(es, PREFIX)
    assert [c.chunk_id for c in chunks] == sorted(c.chunk_id for c in chunks)
    assert len(chunks) == len(PAPERS) * 5  # abstract + intro + related work + 2 system paragraphs
    by_id = {c.chunk_id: c for c in chunks}
    pairs = build_pairs(chunks, seed=3)
    # every paper: its title; every chunk of 2+ sentences: one sentence; specific headings only
    assert count_kinds(pairs) == {"title": 6, "sentence": 24, "heading": 6}
    for p in pairs:
        c = by_id[p.chunk_id]
        assert p.paper_id == c.paper_id and p.indexed_target
        assert p.target_text in emb.texts  # exactly what the indexer embedded: the index's vector
        if p.kind == "title":
            assert c.section_type == "abstract" and p.query == c.title
            assert p.target_text == f"{c.title}\n{c.text}"
        elif p.kind == "sentence":
            assert p.query in split_sentences(c.text) and len(split_sentences(c.text)) >= 2
        else:
            assert p.query == c.heading == f"Our {TOPICS[int(c.paper_id[1:])]} system"
            assert p.target_text == f"{c.heading}\n{c.text}"
    # "Related Work" is shared by more than MAX_HEADING_PAPERS papers, "Introduction" is one word
    assert len(PAPERS) > MAX_HEADING_PAPERS
    assert not any(p.query in ("Related Work", "Introduction") for p in pairs)
    # deterministic for a seed; the cap keeps a shuffled subset
    assert build_pairs(chunks, seed=3) == pairs
    capped = build_pairs(chunks, seed=3, max_pairs=10)
    assert len(capped) == 10 and set(capped) <= set(pairs)
    assert count_kinds(build_pairs(chunks, kinds=["sentence"], sentences_per_chunk=2)) == {"sentence": 48}


def test_removing_the_query_cuts_it_out_of_the_target(world):
    es, _, _ = world
    chunks = {c.chunk_id: c for c in read_chunks(es, PREFIX)}
    for p in build_pairs(list(chunks.values()), seed=1, remove_query=True):
        c = chunks[p.chunk_id]
        assert not p.indexed_target and p.query not in p.target_text
        if p.kind == "sentence":
            rest = " ".join(s for s in split_sentences(c.text) if s != p.query)
            label = c.title if c.section_type == "abstract" else c.heading
            assert p.target_text == f"{label}\n{rest}"
        else:
            assert p.target_text == c.text


def test_pair_options_are_checked():
    with pytest.raises(ConfigError, match="unknown pair kinds \\['captions'\\]"):
        build_pairs([], kinds=["captions"])
    with pytest.raises(ConfigError, match="--max-pairs must be at least 1"):
        build_pairs([], max_pairs=0)


def test_a_missing_index_names_the_command_that_builds_it(world):
    es, _, _ = world
    with pytest.raises(ConfigError, match="index 'nope-chunks' not found"):
        read_chunks(es, "nope-")


# --- the loss and the training -----------------------------------------------------------------------
def test_in_batch_loss_by_hand():
    q = np.eye(2)
    # scale 1: each row's softmax over [cos(q_i, t_i) = 1, cos(q_i, t_j) = 0]
    assert in_batch_loss(q, q, ["a", "b"], scale=1.0) == pytest.approx(math.log(1 + math.exp(-1)))
    # the same target twice: the other column is that target, masked, not a negative
    assert in_batch_loss(q, q, ["a", "a"], scale=1.0) == pytest.approx(0.0)
    # batches of one: no negatives at all
    assert in_batch_loss(q, q[::-1], ["a", "b"], scale=1.0, batch_size=1) == pytest.approx(0.0)


def _rotated_pairs(n: int = 600, d: int = 16, seed: int = 0):
    """Queries and targets related by a fixed rotation (plus noise): a map the adapter can learn."""
    rng = np.random.default_rng(seed)
    R = np.linalg.qr(rng.normal(size=(d, d)))[0]
    Q = normalize(rng.normal(size=(n, d)))
    T = normalize(0.5 * Q + 0.5 * (Q @ R) + 0.05 * rng.normal(size=(n, d)))
    return Q.astype(np.float32), T.astype(np.float32), [f"c{i}" for i in range(n)]


@pytest.mark.parametrize("rank", [None, 4])
def test_training_lowers_the_held_out_in_batch_loss(rank):
    Q, T, ids = _rotated_pairs()
    adapter, report = fit_adapter(Q, T, ids, model="m", rank=rank, epochs=15, lr=5e-3, batch_size=32, seed=0)
    train, held = holdout_split(len(ids), 0.1, 0)
    assert report.heldout_pairs == len(held) == 60 and report.train_pairs == 540
    idx = [ids[i] for i in held]
    # the report's losses are the in-batch loss of the held-out pairs, before and after
    assert report.heldout_loss_before == pytest.approx(
        in_batch_loss(Q[held], T[held], idx, batch_size=32), rel=1e-4
    )
    after = in_batch_loss(adapter.apply(Q[held]), T[held], idx, batch_size=32)
    assert report.heldout_loss_after == pytest.approx(after, rel=1e-3)
    assert after < 0.5 * report.heldout_loss_before and report.best_epoch >= 1
    if rank is not None:
        assert np.linalg.matrix_rank(adapter.weight.astype(np.float64), tol=1e-4) <= rank
    # deterministic for a seed
    again, _ = fit_adapter(Q, T, ids, model="m", rank=rank, epochs=15, lr=5e-3, batch_size=32, seed=0)
    assert np.array_equal(again.weight, adapter.weight)


def test_the_best_epoch_is_kept_and_none_better_keeps_the_identity():
    Q, T, ids = _rotated_pairs(n=120)
    _, report = fit_adapter(Q, T, ids, model="m", epochs=4, lr=5e-3, batch_size=16, patience=4)
    held = [h for _, h in report.epoch_losses]
    assert report.heldout_loss_after == pytest.approx(min([report.heldout_loss_before, *held]))
    assert report.best_epoch == 1 + held.index(min(held))
    # a learning rate that only makes it worse: no epoch beats W = 0, the identity is kept
    adapter, report = fit_adapter(Q, T, ids, model="m", epochs=2, lr=50.0, batch_size=16)
    assert report.best_epoch == 0 and not adapter.weight.any()
    assert report.heldout_loss_after == report.heldout_loss_before


def test_the_held_out_split_keeps_papers_together():
    groups = [f"P{i // 3}" for i in range(30)]
    train, held = holdout_split(30, 0.2, 0, groups)
    assert {groups[i] for i in train}.isdisjoint({groups[i] for i in held})
    assert len(held) == 6 and len(train) == 24


# --- stored, loaded, searched --------------------------------------------------------------------------
def _known_adapter(dims: int, model: str) -> Adapter:
    rng = np.random.default_rng(7)
    return Adapter((0.3 * rng.normal(size=(dims, dims))).astype(np.float32), model, dims, {"note": "test"})


def test_training_from_the_engine_stores_an_adapter_that_round_trips(world):
    es, emb, _ = world
    adapter, summary = train_self_supervised(
        es, PREFIX, embedder=emb, holdout=0.34, epochs=3, batch_size=8, progress=False
    )
    assert summary.index == f"{PREFIX}adapter-v1" and summary.pairs == {
        "title": 6,
        "sentence": 24,
        "heading": 6,
    }
    assert summary.report.heldout_loss_after <= summary.report.heldout_loss_before
    assert "36 pairs (6 title, 24 sentence, 6 heading) from 30 chunks" in summary.line()
    loaded = adapter_store.load_adapter(es, PREFIX)
    assert (
        np.array_equal(loaded.weight, adapter.weight) and loaded.model == emb.name and loaded.dims == emb.dims
    )
    assert loaded.info["pairs"] == summary.pairs and loaded.info["prefix"] == PREFIX
    # training again writes a new version and moves the alias; the old one is kept for a rollback
    known = _known_adapter(emb.dims, emb.name)
    assert adapter_store.save_adapter(es, known, PREFIX) == f"{PREFIX}adapter-v2"
    assert np.array_equal(adapter_store.load_adapter(es, PREFIX).weight, known.weight)
    assert np.array_equal(resolve_adapter(es, PREFIX).weight, known.weight)


def test_adapted_strategies_send_the_adapted_vector(world):
    es, emb, _ = world
    known = _known_adapter(emb.dims, emb.name)
    adapter_store.save_adapter(es, known, PREFIX)
    question = "how is the parsing model trained?"
    expected = known.apply(emb.encode([question])[0])
    for strategy, base in (("adapted-dense", "dense"), ("adapted-hybrid", "hybrid")):
        body = json.loads(show_query(question, strategy=strategy, es=es, embedder=emb, prefix=PREFIX))
        plain = json.loads(show_query(question, strategy=base, es=es, embedder=emb, prefix=PREFIX))
        sent = _query_vectors(body)
        assert sent and all(np.allclose(v, expected, atol=1e-6) for v in sent)
        assert not np.allclose(_query_vectors(plain)[0], expected, atol=1e-3)
        # everything else is the base strategy's request
        assert _without_vectors(body) == _without_vectors(plain)
        result = search(es, question, strategy=strategy, embedder=emb, prefix=PREFIX, size=3)
        assert result.strategy == strategy and result.hits


def _query_vectors(node) -> list[list[float]]:
    found: list[list[float]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            found.extend([v] if k == "query_vector" else _query_vectors(v))
    elif isinstance(node, list):
        for v in node:
            found.extend(_query_vectors(v))
    return found


def _without_vectors(node):
    if isinstance(node, dict):
        return {k: (None if k == "query_vector" else _without_vectors(v)) for k, v in node.items()}
    if isinstance(node, list):
        return [_without_vectors(v) for v in node]
    return node


def test_the_identity_adapter_evaluates_as_the_base_strategy(world):
    es, emb, data = world
    adapter_store.save_adapter(es, Adapter.identity(emb.name, emb.dims), PREFIX)
    ds = load_dataset(data, "qasper", "dev")
    ev = run_evaluation(
        ds, ["hybrid", "adapted-hybrid", "dense", "adapted-dense"], es, emb, prefix=PREFIX, progress=False
    )
    assert ev.runs["adapted-hybrid"].rankings == ev.runs["hybrid"].rankings
    assert ev.runs["adapted-dense"].rankings == ev.runs["dense"].rankings


def test_an_index_without_adapter_names_the_command(world):
    es, emb, data = world
    IndexRun(es, emb, prefix="bare-").run([data / "papers_dev.jsonl"], "qasper")
    with pytest.raises(
        ConfigError,
        match=r"no self-supervised adapter for the prefix 'bare-'.*heads train --self-supervised --prefix 'bare-'",
    ):
        search(es, "parsing", strategy="adapted-hybrid", embedder=emb, prefix="bare-")
    with pytest.raises(ConfigError, match="no self-supervised adapter"):
        run_evaluation(
            load_dataset(data, "qasper", "dev"), ["adapted-dense"], es, emb, prefix="bare-", progress=False
        )


def test_another_model_is_refused(world):
    es, emb, _ = world
    adapter_store.save_adapter(es, _known_adapter(emb.dims, "other-model"), PREFIX)
    with pytest.raises(ModelMismatchError, match="trained for model 'other-model'"):
        search(es, "parsing", strategy="adapted-dense", embedder=emb, prefix=PREFIX)
    adapter_store.save_adapter(es, _known_adapter(emb.dims, emb.name), PREFIX)


# --- the command -------------------------------------------------------------------------------------
def _cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_command_errors_name_the_wrong_option(tmp_path: Path, world):
    _, _, data = world
    engine = str(tmp_path / "e")
    out = _cli("heads", "train", "--self-supervised", "--es", engine)
    assert out.exit_code == 2 and "--self-supervised needs --prefix" in out.output
    out = _cli(
        "heads", "train", str(data), "--self-supervised", "--tau", "0.2", "--prefix", "x-", "--es", engine
    )
    assert out.exit_code == 2 and "takes no DATASET, --tau" in out.output
    out = _cli("heads", "train", str(data), "--rank", "8", "--max-pairs", "10", "--es", engine)
    assert out.exit_code == 2 and "--max-pairs, --rank apply only with --self-supervised" in out.output
    out = _cli("heads", "train", "--es", engine)
    assert out.exit_code == 2 and "give the judged DATASET" in out.output
    out = _cli("heads", "train", "--self-supervised", "--prefix", "x-", "--es", engine)
    assert out.exit_code == 2 and "error:" in out.output  # no engine there
    out = _cli("heads", "train", "--self-supervised", "--prefix", "x-", "--pairs", "captions", "--es", engine)
    assert out.exit_code == 2


def test_hard_batches_group_alike_targets():
    rng = np.random.default_rng(0)
    centers = normalize(rng.normal(size=(4, 16)))
    T = normalize(np.repeat(centers, 8, axis=0) + 0.05 * rng.normal(size=(32, 16)))
    order = similar_batches(T, 8, seed=1)
    assert sorted(order.tolist()) == list(range(32))  # a permutation
    # four tight clusters of eight: every batch of eight is one cluster
    assert all(len({int(i) // 8 for i in order[s : s + 8]}) == 1 for s in range(0, 32, 8))
    Q, T2, ids = _rotated_pairs(n=200)
    _, report = fit_adapter(Q, T2, ids, model="m", epochs=3, batch_size=16, hard_batches=True)
    assert report.heldout_loss_after < report.heldout_loss_before


def test_list_and_delete_name_the_adapter(tmp_path: Path):
    emb_dims = 4
    from scholar_es.engine.rest.transport import embedded_client

    engine = tmp_path / "engine"
    es = embedded_client(engine)
    try:
        adapter_store.save_adapter(es, _known_adapter(emb_dims, "fake-model"), "p-")
    finally:
        es.close()
    listed = _cli("heads", "list", "--prefix", "p-", "--es", str(engine))
    assert listed.exit_code == 0 and listed.output.splitlines() == ["self-supervised adapter p-adapter"]
    assert _cli("heads", "list", "--prefix", "q-", "--es", str(engine)).output == ""  # another prefix: none
    both = _cli("heads", "delete", "default", "--self-supervised", "--prefix", "p-", "--es", str(engine))
    assert both.exit_code == 2 and "either a heads NAME or --self-supervised, not both" in both.output
    neither = _cli("heads", "delete", "--prefix", "p-", "--es", str(engine))
    assert neither.exit_code == 2 and "not neither" in neither.output
    gone = _cli("heads", "delete", "--self-supervised", "--prefix", "p-", "--es", str(engine))
    assert gone.exit_code == 0 and gone.output.strip() == "deleted p-adapter-v1"
    assert _cli("heads", "list", "--prefix", "p-", "--es", str(engine)).output == ""
    again = _cli("heads", "delete", "--self-supervised", "--prefix", "p-", "--es", str(engine))
    assert again.output.strip() == "deleted nothing"
