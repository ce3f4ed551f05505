"""Multi-head projection through the embedded engine (never mocked): training from a judged BEIR
set, heads stored in and loaded from the engine, the three search strategies, model checks.

Vectors come from a deterministic fake embedder: a hand-made table of 6-d vectors, so the
geometry of the example is explicit (see WORLD).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from indexer.pipeline import IndexRun
from scholar_es.errors import ConfigError, InputError, ModelMismatchError
from scholar_es.projection import store
from scholar_es.projection.heads import Heads
from scholar_es.projection.routing import normalize
from scholar_es.projection.search import base_strategy, build_request, knn_ids, project_vectors, search
from scholar_es.projection.train import answer_texts, build_heads, read_pairs, train_heads

E = np.eye(6)
# The hand-made example. Questions about aspirin are worded like the "heart rhythm" papers
# (their vectors lie along e2) while the paper that answers them lies along e1: a direct kNN
# query finds the two distractors D1, D2 first; the training questions map the e2 region to A.
DOCS = {  # id: (title, text, vector)
    "A": ("Salicylate cohort", "Low dose salicylate lowers infarction incidence", E[0]),
    "D1": ("Rhythm study", "Atrial arrhythmia in athletes", normalize(E[1] + 0.3 * E[0])),
    "D2": ("Rhythm registry", "Ventricular ectopy registry", normalize(E[1] + 0.3 * E[2])),
    "B": ("Statin trial", "Statins and LDL cholesterol", E[4]),
    "C": ("Sleep paper", "Melatonin and sleep latency", E[5]),
}
QUESTIONS = {  # id: (text, vector, answer)
    "q1": ("does aspirin prevent heart attacks", normalize(E[1] + 0.1 * E[2]), "A"),
    "q2": ("aspirin and myocardial events", normalize(E[1] - 0.1 * E[2]), "A"),
    "q3": ("do statins lower cholesterol", normalize(E[4] + 0.1 * E[3]), "B"),
}
HELD_OUT = ("can a daily aspirin stop a heart attack", normalize(E[1] + 0.05 * E[3]))
UNLIKE_ANY = ("melatonin for insomnia", normalize(E[5] + 0.1 * E[3]))


class FakeEmbedder:
    """Texts -> fixed vectors: the table above (by full text, or by a document's title line),
    anything else a hash-seeded random unit vector."""

    def __init__(self, name: str = "fake-6d", dims: int = 6) -> None:
        self.name, self.dims, self.encode_seconds = name, dims, 0.0
        self.table = {t: v for t, v, _ in QUESTIONS.values()} | dict([HELD_OUT, UNLIKE_ANY])
        self.table |= {title: v for title, _, v in DOCS.values()}
        self.calls: list[str] = []

    def encode(self, texts):
        out = []
        for t in texts:
            self.calls.append(t)
            v = self.table.get(t, self.table.get(t.split("\n", 1)[0]))
            if v is None:
                seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
                v = normalize(np.random.default_rng(seed).normal(size=self.dims))
            out.append(np.asarray(v, dtype=np.float32)[: self.dims])
        return np.vstack(out).astype(np.float32)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    root = tmp_path_factory.mktemp("projection")
    data = root / "toy"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, (t, x, _) in DOCS.items())
    )
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _, _) in QUESTIONS.items())
    )
    (data / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(f"{q}\t{a}\t1\n" for q, (_, _, a) in QUESTIONS.items())
        + "q3\tC\t0\n"
    )
    es = embedded_client(root / "engine")
    emb = FakeEmbedder()
    summary = IndexRun(es, emb, prefix="t-").run([data], "beir")
    assert summary.papers == len(DOCS) and not summary.rejected
    yield es, emb, data
    es.close()


@pytest.fixture(scope="module")
def trained(world):
    es, emb, data = world
    summary = train_heads(
        es, data, fmt="beir", split="train", name="toy", prefix="t-", embedder=emb, threshold=0.5
    )
    return summary


def test_answer_texts_are_what_the_indexer_embedded(world):
    es, emb, _ = world
    texts = answer_texts(es, ["A", "B", "nope"], prefix="t-")
    assert texts == {
        "A": "Salicylate cohort\nLow dose salicylate lowers infarction incidence",
        "B": "Statin trial\nStatins and LDL cholesterol",
    }
    assert set(texts.values()) <= set(emb.calls)  # the exact strings the index run embedded
    assert answer_texts(es, ["A#abs"], prefix="t-") == {"A#abs": texts["A"]}  # a chunk id works too


def test_training_clusters_questions_by_answer(world, trained):
    es, _, _ = world
    assert trained.heads == 2 and trained.pairs == 3 and trained.multi_question_heads == 1
    assert trained.index == "t-heads-toy-v1" and "2 heads from 3 pairs" in trained.line()
    heads = store.load_heads(es, "toy", prefix="t-")
    assert heads.answer_ids == ("A", "B") and heads.n_questions.tolist() == [2, 1]
    assert heads.model == "fake-6d" and heads.dims == 6 and heads.threshold == 0.5 and heads.tau == 0.1
    expected_a = normalize(QUESTIONS["q1"][1] + QUESTIONS["q2"][1])
    assert heads.centroids[0] == pytest.approx(expected_a, abs=1e-6)
    assert heads.answers[0] == pytest.approx(E[0], abs=1e-6)
    assert heads.info["split"] == "train" and heads.info["pairs"] == 3


def test_projected_query_finds_the_answer_direct_query_misses(world, trained):
    es, emb, _ = world
    direct = search(es, HELD_OUT[0], strategy="direct", prefix="t-", embedder=emb, size=2)
    assert direct.ranked_ids("paper") == ["D1", "D2"]  # A missed
    multi = search(es, HELD_OUT[0], strategy="multihead", heads="toy", prefix="t-", embedder=emb, size=2)
    assert multi.ranked_ids("paper")[0] == "A" and multi.ranked_ids("chunk")[0] == "A#abs"
    assert not multi.routing.fallback and multi.routing.top_heads[0][0] == 0
    assert multi.result.strategy == "multihead"
    hybrid = search(
        es, HELD_OUT[0], strategy="multihead-hybrid", heads="toy", prefix="t-", embedder=emb, size=2
    )
    assert hybrid.ranked_ids("paper")[0] == "A"
    assert "script_score" in json.dumps(hybrid.result.request)  # the query builder's hybrid DSL
    explained = search(
        es, HELD_OUT[0], strategy="multihead", heads="toy", prefix="t-", embedder=emb, size=2, explain=True
    )
    assert (
        explained.ranked_ids() == multi.ranked_ids() and explained.result.hits[0].explanation.knn is not None
    )
    req = build_request(es, HELD_OUT[0], strategy="multihead", heads="toy", prefix="t-", embedder=emb, size=2)
    assert req.search().to_dict() == multi.result.request and req.routing.top_heads == multi.routing.top_heads
    # the raw knn ranking agrees with the strategy's
    assert knn_ids(es, multi.routing.vector, index="t-chunks", k=2) == multi.ranked_ids("paper")


def test_fallback_keeps_unlike_questions_on_the_direct_vector(world, trained):
    es, emb, _ = world
    direct = search(es, UNLIKE_ANY[0], strategy="direct", prefix="t-", embedder=emb, size=3)
    multi = search(es, UNLIKE_ANY[0], strategy="multihead", heads="toy", prefix="t-", embedder=emb, size=3)
    assert multi.routing.fallback and multi.routing.max_similarity < 0.5
    assert multi.ranked_ids() == direct.ranked_ids() and direct.ranked_ids("paper")[0] == "C"
    forced = search(
        es,
        UNLIKE_ANY[0],
        strategy="multihead",
        heads="toy",
        prefix="t-",
        embedder=emb,
        size=3,
        threshold=-1.0,
    )  # no fallback: routed to a training answer, C is lost
    assert not forced.routing.fallback and forced.ranked_ids("paper")[0] != "C"


def test_heads_refuse_another_model_or_dimension(world, trained):
    es, emb, _ = world
    heads = store.load_heads(es, "toy", prefix="t-")
    with pytest.raises(ModelMismatchError, match="trained with model 'fake-6d'.*embedded with 'other-model'"):
        heads.route(E[0], model="other-model")
    with pytest.raises(ModelMismatchError, match="query vector has 5 dimensions but heads 'toy' hold 6-dim"):
        heads.route(np.ones(5) / np.sqrt(5))
    # heads of another model stored next to an index of this one: search refuses before embedding
    other = Heads(
        answer_ids=("A",),
        centroids=E[:1].astype(np.float32),
        answers=E[:1].astype(np.float32),
        n_questions=np.array([1]),
        model="other-model",
        dims=6,
        name="other",
    )
    store.save_heads(es, other, prefix="t-")
    calls = len(emb.calls)
    with pytest.raises(ModelMismatchError, match="heads 'other' were trained with model 'other-model'"):
        search(es, HELD_OUT[0], strategy="multihead", heads="other", prefix="t-", embedder=emb)
    assert len(emb.calls) == calls
    store.delete_heads(es, "other", prefix="t-")


def test_store_round_trip_paging_versions_and_listing(world, trained, monkeypatch):
    es, _, _ = world
    rng = np.random.default_rng(3)
    n = 7
    heads = Heads(
        answer_ids=tuple(f"p{i}" for i in range(n)),
        centroids=normalize(rng.normal(size=(n, 6))).astype(np.float32),
        answers=normalize(rng.normal(size=(n, 6))).astype(np.float32),
        n_questions=np.arange(1, n + 1),
        model="fake-6d",
        dims=6,
        tau=0.5,
        alpha=0.25,
        name="paged",
        info={"dataset": "x"},
    )
    monkeypatch.setattr(store, "PAGE", 3)  # 3 pages
    assert store.save_heads(es, heads, prefix="t-") == "t-heads-paged-v1"
    assert (
        store.save_heads(es, heads, prefix="t-") == "t-heads-paged-v2"
    )  # retrain: new version, previous kept
    assert store.save_heads(es, heads, prefix="t-") == "t-heads-paged-v3"
    assert not es.indices.exists(index="t-heads-paged-v1") and es.indices.exists(index="t-heads-paged-v2")
    back = store.load_heads(es, "paged", prefix="t-")
    assert back.answer_ids == heads.answer_ids and np.array_equal(back.centroids, heads.centroids)
    assert np.array_equal(back.answers, heads.answers) and back.n_questions.tolist() == list(range(1, n + 1))
    assert (back.tau, back.alpha, back.threshold, back.info) == (0.5, 0.25, float("-inf"), {"dataset": "x"})
    meta = store.read_meta(es, "paged", prefix="t-")
    assert meta["embedding_model"] == "fake-6d" and meta["dims"] == 6 and meta["threshold"] is None
    assert {"paged", "toy"} <= set(store.list_heads(es, prefix="t-"))
    assert store.delete_heads(es, "paged", prefix="t-") == ["t-heads-paged-v2", "t-heads-paged-v3"]
    with pytest.raises(ConfigError, match="no heads named 'paged'.*heads train.*'toy'"):
        store.load_heads(es, "paged", prefix="t-")
    for bad in ("Bad Name", "paged-v2", ""):
        with pytest.raises(ConfigError, match=f"invalid heads name '{bad}'"):
            store.load_heads(es, bad, prefix="t-")


def test_training_errors_name_the_fix(world, tmp_path):
    es, emb, data = world
    with pytest.raises(
        ConfigError, match="qrels of split 'test' file .* does not exist; splits found: 'train'"
    ):
        train_heads(es, data, fmt="beir", split="test", prefix="t-", embedder=emb)
    from scholar_es.engine.rest.transport import embedded_client

    other = embedded_client(tmp_path / "e2")  # the corpus without the judged papers
    IndexRun(other, emb, prefix="t-").run([_corpus_without(tmp_path, data, "A", "B")], "beir")
    with pytest.raises(ConfigError, match="none of the 3 answer ids.*index the dataset's corpus"):
        train_heads(other, data, fmt="beir", prefix="t-", embedder=emb)
    other.close()
    with pytest.raises(ConfigError, match="index 'y-chunks' not found"):
        train_heads(es, data, fmt="beir", prefix="y-", embedder=emb)
    with pytest.raises(ConfigError, match="index 'toy-chunks' not found"):  # eval's prefix for the dataset
        train_heads(es, data, embedder=emb)
    with pytest.raises(ModelMismatchError, match="holds vectors of model 'fake-6d'"):
        train_heads(es, data, fmt="beir", prefix="t-", embedder=FakeEmbedder(name="other-model"))


def _corpus_without(tmp_path, data, *ids):
    out = tmp_path / "partial"
    out.mkdir()
    lines = [
        ln for ln in (data / "corpus.jsonl").read_text().splitlines() if json.loads(ln)["_id"] not in ids
    ]
    (out / "corpus.jsonl").write_text("\n".join(lines) + "\n")
    return out


def test_read_pairs_beir_and_qasper(world, tmp_path):
    _, _, data = world
    pairs = read_pairs(data, "beir", "train")
    assert [(p.question_id, p.answer_id) for p in pairs] == [
        ("q1", "A"),
        ("q2", "A"),
        ("q3", "B"),
    ]  # score 0 out
    q = tmp_path / "qasper"
    q.mkdir()
    for split in ("train", "validation"):
        (q / f"papers_{split}.jsonl").write_text(
            json.dumps({"paper_id": "P", "title": "T", "abstract": "A"}) + "\n"
        )
    (q / "questions_train.jsonl").write_text(
        json.dumps({"question_id": "x1", "question": "What is it?", "paper_id": "P"}) + "\n"
    )
    (q / "qrels_train.tsv").write_text(
        "query-id\tcorpus-id\tscore\nx1\tP#1.0\t1\nx1\tP#abs\t1\nzz\tP#2.0\t1\n"
    )
    warnings: list[str] = []
    pairs = read_pairs(q, "qasper", "train", on_warning=warnings.append)
    assert [(p.question, p.answer_id) for p in pairs] == [("What is it?", "P#1.0"), ("What is it?", "P#abs")]
    assert warnings and "1 qrels lines name questions" in warnings[0] and "'zz'" in warnings[0]
    (q / "questions_validation.jsonl").write_text('{"question_id": "x2"}\n')
    (q / "qrels_validation.tsv").write_text("x2\tP#1.0\t1\n")
    with pytest.raises(
        InputError, match=r"questions_validation.jsonl:1: field 'question': query 'x2' has no text"
    ):
        read_pairs(q, "qasper", "validation")
    with pytest.raises(ConfigError, match="unknown dataset format 'csv'"):
        read_pairs(q, "csv")


def test_build_heads_is_pure_and_skips_answers_without_vectors():
    from scholar_es.projection.train import Pair

    pairs = [Pair("a", "x", "D1"), Pair("b", "y", "D2"), Pair("c", "z", "D1")]
    Q = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    heads = build_heads(pairs, Q, {"D1": np.array([3.0, 4.0, 0.0])}, model="m")
    assert heads.answer_ids == ("D1",) and heads.n_questions.tolist() == [2]
    assert heads.centroids[0] == pytest.approx(normalize(np.array([1, 0, 1.0])))
    assert heads.answers[0] == pytest.approx([0.6, 0.8, 0.0])
    with pytest.raises(ConfigError, match="heads 'default' are empty"):
        build_heads(pairs, Q, {}, model="m")


def test_tuned_training_stores_the_chosen_fallback(world, trained):
    es, emb, data = world
    progress: list[tuple[int, int]] = []
    summary = train_heads(
        es,
        data,
        fmt="beir",
        name="tuned",
        prefix="t-",
        embedder=emb,
        tune=True,
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert progress[-1] == (3, 3) and summary.tuning is not None
    heads = store.load_heads(es, "tuned", prefix="t-")
    assert (
        heads.threshold == pytest.approx(min(summary.tuning.threshold, 2.0)) and heads.alpha == summary.alpha
    )
    assert (
        heads.info["tuning"]["mrr"] == pytest.approx(summary.tuning.mrr)
        and heads.info["answer_level"] == "paper"
    )
    with pytest.raises(ConfigError, match="either --threshold .* or --tune"):
        train_heads(es, data, fmt="beir", name="tuned", prefix="t-", embedder=emb, tune=True, threshold=0.3)
    store.delete_heads(es, "tuned", prefix="t-")


def test_loaded_heads_are_reused_until_retrained(world, trained):
    from scholar_es.projection.search import resolve_heads

    es, emb, data = world
    first = resolve_heads(es, "toy", prefix="t-")
    assert resolve_heads(es, "toy", prefix="t-") is first
    train_heads(es, data, fmt="beir", name="toy", prefix="t-", embedder=emb, threshold=0.25)  # new version
    again = resolve_heads(es, "toy", prefix="t-")
    assert again is not first and again.threshold == 0.25
    train_heads(
        es, data, fmt="beir", name="toy", prefix="t-", embedder=emb, threshold=0.5
    )  # as the fixture had it


def test_project_vectors_for_eval_match_search(world, trained):
    es, emb, _ = world
    heads = store.load_heads(es, "toy", prefix="t-")
    vectors = {HELD_OUT[0]: HELD_OUT[1], UNLIKE_ANY[0]: UNLIKE_ANY[1]}
    out = project_vectors(heads, vectors, model=emb.name)
    for question in vectors:
        routed = search(es, question, strategy="multihead", heads=heads, prefix="t-", embedder=emb).routing
        assert out[question] == pytest.approx(routed.vector, abs=1e-6)
    assert project_vectors(heads, vectors, strategy="direct") == vectors
    assert (base_strategy("multihead"), base_strategy("multihead-hybrid"), base_strategy("direct")) == (
        "dense",
        "hybrid",
        "dense",
    )
    with pytest.raises(ModelMismatchError):
        project_vectors(heads, vectors, model="other-model")
    with pytest.raises(ConfigError, match="unknown heads strategy 'multi'"):
        base_strategy("multi")
