"""The evaluation loop end to end on the embedded engine (never mocked) with a tiny hand-made
dataset and a deterministic bag-of-words embedder, plus the reports."""

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from scholar_es.errors import ConfigError, ModelMismatchError
from scholar_es.evaluation.command import parse_strategies, run_eval
from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.metrics import ALL_METRICS
from scholar_es.evaluation.report import markdown_table, plot, to_json
from scholar_es.evaluation.runner import ensure_index, eval_profile, evaluate, run_evaluation


class FakeEmbedder:
    """Hashed bag of words, L2-normalized: deterministic, and close for texts sharing words."""

    dims = 32
    encode_seconds = 0.0

    def __init__(self, name: str = "fake-bow-32") -> None:
        self.name = name
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dims] += 1.0
            out[i, 0] += 0.01  # never all zeros
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def _jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.fixture
def beir(tmp_path) -> Path:
    root = tmp_path / "tiny"
    _jsonl(
        root / "corpus.jsonl",
        [
            {
                "_id": "d1",
                "title": "Protein folding",
                "text": "Alpha helices and beta sheets form during protein folding.",
            },
            {
                "_id": "d2",
                "title": "Graph neural networks",
                "text": "Message passing networks learn on graphs.",
            },
            {"_id": "d3", "title": "Coral reefs", "text": "Ocean warming bleaches coral reefs worldwide."},
            {"_id": "d4", "title": "Vaccines", "text": "mRNA vaccines induce antibody responses."},
        ],
    )
    _jsonl(
        root / "queries.jsonl",
        [
            {"_id": "q1", "text": "protein folding helices"},
            {"_id": "q2", "text": "coral reefs ocean warming"},
            {"_id": "q3", "text": "graph message passing"},
            {"_id": "q4", "text": "zebra xylophone"},  # judged, but no word of it is in the corpus
            {"_id": "q5", "text": "antibody vaccines"},
        ],
    )  # no judgment: skipped
    (root / "qrels").mkdir()
    (root / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td3\t1\nq3\td2\t1\nq4\td4\t1\n"
    )
    return root


@pytest.fixture
def qasper(tmp_path) -> Path:
    root = tmp_path / "qasper"
    _jsonl(
        root / "papers_dev.jsonl",
        [
            {
                "paper_id": "P1",
                "title": "Neural parsing",
                "abstract": "We parse sentences with neural networks.",
                "sections": [
                    {"section_name": "Introduction", "paragraphs": ["Parsing is hard for long sentences."]},
                    {
                        "section_name": "Method",
                        "paragraphs": [
                            "Our parser uses a transition system.",
                            "We train the parser with beam search.",
                        ],
                    },
                ],
            },
            {
                "paper_id": "P2",
                "title": "Parser evaluation",
                "abstract": "We evaluate every parser on treebanks.",
                "sections": [
                    {"section_name": "Results", "paragraphs": ["The transition parser scores 91 LAS."]}
                ],
            },
        ],
    )
    _jsonl(
        root / "questions_dev.jsonl",
        [
            {"question_id": "a", "question": "what transition system does the parser use?", "paper_id": "P1"},
            {"question_id": "b", "question": "what does the transition parser score?", "paper_id": "P2"},
        ],
    )
    (root / "qrels_dev.tsv").write_text("a\tP1#1.0\t1\nb\tP2#0.0\t1\n")
    return root


def test_bm25_metrics_by_hand_and_all_strategies(beir, tmp_engine):
    ds = load_dataset(beir)
    emb = FakeEmbedder()
    strategies = ["bm25", "dense", "hybrid", "sections", "rrf-client"]
    results = evaluate(ds, strategies, tmp_engine, emb, progress=False)
    assert list(results) == strategies
    for values in results.values():
        assert tuple(values) == ALL_METRICS
        assert all(v >= 0 for v in values.values())
    # bm25: q1, q2, q3 find their only relevant paper at rank 1; q4 matches nothing and scores 0,
    # and still counts: the means are over 4 judged queries (q5, unjudged, is not one of them)
    bm25 = results["bm25"]
    assert bm25["ndcg@10"] == pytest.approx(3 / 4)
    assert bm25["mrr@10"] == pytest.approx(3 / 4)
    assert bm25["p@1"] == pytest.approx(3 / 4)
    assert bm25["p@3"] == pytest.approx(3 / 4 / 3)
    assert bm25["recall@100"] == pytest.approx(3 / 4)
    # dense ranks every document, so q4's paper is somewhere in the top 4: recall@100 = 1
    assert results["dense"]["recall@100"] == pytest.approx(1.0)


def test_rankings_match_the_query_builders_search(beir, tmp_engine):
    from querybuilder.strategies import search

    ds = load_dataset(beir)
    emb = FakeEmbedder()
    ev = run_evaluation(ds, ["hybrid", "rrf-client"], tmp_engine, emb, progress=False)
    prefix = ev.index.prefix
    for strategy in ("hybrid", "rrf-client"):
        for q in ds.queries:
            res = search(
                tmp_engine,
                q.text,
                strategy=strategy,
                profile=eval_profile(None),
                embedder=emb,
                size=100,
                prefix=prefix,
            )
            assert ev.runs[strategy].rankings[q.id] == list(dict.fromkeys(h.paper_id for h in res.hits))
    assert len(ev.runs["hybrid"].latencies_ms) == 4


def test_index_is_built_once_and_reused(beir, tmp_engine):
    ds = load_dataset(beir)
    emb = FakeEmbedder()
    first = ensure_index(tmp_engine, ds, emb, progress=False)
    assert first.built and (first.papers, first.chunks) == (4, 4) and first.prefix == "tiny-"
    corpus_texts = len(emb.texts)
    assert corpus_texts == 4  # each BEIR document embedded once (paper and its chunk share the text)
    ev = run_evaluation(ds, ["dense"], tmp_engine, emb, progress=False)
    assert not ev.index.built and (ev.index.papers, ev.index.chunks) == (4, 4)
    assert len(emb.texts) == corpus_texts + 4  # only the 4 judged questions were embedded
    with pytest.raises(ModelMismatchError, match="fake-bow-32"):
        ensure_index(tmp_engine, ds, FakeEmbedder("other-model"), progress=False)


def test_limit_and_option_errors(beir, tmp_engine):
    ds = load_dataset(beir)
    emb = FakeEmbedder()
    ev = run_evaluation(ds, ["bm25"], tmp_engine, emb, limit=2, progress=False)
    assert list(ev.runs["bm25"].rankings) == ["q1", "q2"]
    assert ev.metrics["bm25"]["ndcg@10"] == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="--scope paper needs queries that name their paper"):
        evaluate(ds, ["bm25"], tmp_engine, emb, scope="paper", progress=False)
    with pytest.raises(ConfigError, match="unknown --scope"):
        evaluate(ds, ["bm25"], tmp_engine, emb, scope="world", progress=False)
    with pytest.raises(ConfigError, match="unknown strategy 'bm52'"):
        evaluate(ds, ["bm52"], tmp_engine, emb, progress=False)


def test_qasper_scope_paper_filters_to_the_questions_paper(qasper, tmp_engine):
    ds = load_dataset(qasper, "qasper", "dev")
    emb = FakeEmbedder()
    paper = run_evaluation(ds, ["bm25", "dense"], tmp_engine, emb, scope="paper", progress=False)
    assert paper.index.prefix == "qasper-dev-" and paper.index.chunks == 6
    for run in paper.runs.values():
        assert all(d.startswith("P1#") for d in run.rankings["a"])
        assert all(d.startswith("P2#") for d in run.rankings["b"])
    assert len(paper.runs["dense"].rankings["a"]) == 4  # every chunk of P1, none of P2
    # b: P2 has two chunks; its evidence paragraph "The transition parser scores 91 LAS." ranks first
    assert paper.runs["bm25"].rankings["b"][0] == "P2#0.0"
    corpus = run_evaluation(ds, ["dense"], tmp_engine, emb, scope="corpus", progress=False)
    assert not corpus.index.built
    assert len(corpus.runs["dense"].rankings["a"]) == 6


def test_window_chunking_gets_its_own_index(qasper, tmp_engine):
    ds = load_dataset(qasper, "qasper", "dev")
    emb = FakeEmbedder()
    ev = run_evaluation(ds, ["bm25"], tmp_engine, emb, scope="paper", chunking="window", progress=False)
    assert ev.index.prefix == "qasper-dev-window-"
    # one window per section here, so the method window covers P1#1.0 and is credited with it
    assert ev.runs["bm25"].rankings["a"][0] == "P1#1.0"
    with pytest.raises(ConfigError, match="built with 'window' chunking"):
        ensure_index(tmp_engine, ds, emb, prefix="qasper-dev-window-", chunking="paragraph", progress=False)


def test_command_prints_and_writes_reports(beir, tmp_path):
    out = io.StringIO()
    json_path, png_path = tmp_path / "out.json", tmp_path / "out.png"
    run_eval(
        beir,
        strategies="bm25,dense",
        target=str(tmp_path / "engine"),
        json_out=json_path,
        plot_out=png_path,
        progress=False,
        out=out,
        embedder=FakeEmbedder(),
    )
    text = out.getvalue()
    assert "4 judged queries evaluated" in text and "1 queries skipped: no relevant judgment" in text
    assert "| strategy | nDCG@10 | MRR@10 | P@1 | P@3 | P@10 | R@10 | R@100 | p50 ms | p95 ms |" in text
    assert "| bm25 | 0.750 |" in text
    data = json.loads(json_path.read_text())
    assert list(data) == ["bm25", "dense"] and all(tuple(v) == ALL_METRICS for v in data.values())
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out2 = io.StringIO()
    run_eval(
        beir,
        strategies=["bm25"],
        target=str(tmp_path / "engine"),
        progress=False,
        out=out2,
        embedder=FakeEmbedder(),
    )
    assert "(reused)" in out2.getvalue()


def test_markdown_json_and_plot_from_results(tmp_path):
    results = {
        "bm25": dict.fromkeys(ALL_METRICS, 0.5),
        "hybrid": {**dict.fromkeys(ALL_METRICS, 0.6), "latency_p50_ms": 12.345},
    }
    table = markdown_table(results).splitlines()
    assert table[0].startswith("| strategy | nDCG@10 |") and table[1].startswith("|---|---:|")
    assert table[2] == "| bm25 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.5 | 0.5 |"
    assert table[3].startswith("| hybrid | **0.600** |") and table[3].endswith("| 12.3 | 0.6 |")
    assert json.loads(to_json(results)) == results
    plot(results, tmp_path / "p.png", title="t")
    assert (tmp_path / "p.png").stat().st_size > 10_000
    with pytest.raises(ConfigError, match="nothing to plot"):
        plot({}, tmp_path / "q.png")


def test_parse_strategies():
    assert parse_strategies("bm25, dense,,hybrid") == ["bm25", "dense", "hybrid"]
    assert parse_strategies(["bm25,dense", "rrf-client"]) == ["bm25", "dense", "rrf-client"]
    assert parse_strategies(None) == ["bm25", "dense", "hybrid"]


def test_multisection_is_evaluated_by_its_own_flow(beir, tmp_engine):
    from scholar_es.multisection.flow import multisection_search

    ds = load_dataset(beir)
    emb = FakeEmbedder()
    ev = run_evaluation(ds, ["multisection"], tmp_engine, emb, progress=False)
    run = ev.runs["multisection"]
    assert len(run.latencies_ms) == 4
    for q in ds.queries[:2]:
        res = multisection_search(
            tmp_engine, q.text, embedder=emb, profile=eval_profile(None), prefix=ev.index.prefix
        )
        assert run.rankings[q.id] == list(dict.fromkeys(h.paper_id for h in res.hits))[:100]
