"""Evaluation on the real shared data sets with the real embedding model (slow; skipped without them)."""

import pytest

from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.metrics import ALL_METRICS
from scholar_es.evaluation.runner import run_evaluation

pytestmark = pytest.mark.slow


def test_shared_datasets_load_with_their_counts(shared_data):
    scifact = load_dataset(shared_data / "scifact", "beir", "train")
    assert (len(scifact.queries), scifact.unjudged, scifact.corpus_size) == (809, [], 5183)
    assert sum(len(d) for d in scifact.qrels.values()) == 919 and scifact.unretrievable == 0
    qasper = load_dataset(shared_data / "qasper", "qasper", "validation")
    # 1,005 questions, 117 of them without evidence: skipped and counted, never averaged as zero
    assert (len(qasper.queries), len(qasper.unjudged), qasper.unretrievable) == (888, 117, 0)
    assert qasper.corpus_size == 13548 and not qasper.unknown_query_lines


def test_qasper_first_papers_scope_paper_end_to_end(shared_data, tmp_path):
    """Five validation papers and their questions, indexed with the real model and searched in
    their own paper: lexical and dense retrieval must find evidence far above chance."""
    from indexer.embedder import Embedder
    from scholar_es.engine.rest.transport import embedded_client

    ds = load_dataset(shared_data / "qasper", "qasper", "validation", check_corpus=False).first_papers(
        5, tmp_path
    )
    assert ds.default_prefix == "qasper-validation-first5-" and len(ds.queries) >= 10
    es = embedded_client(tmp_path / "engine")
    try:
        ev = run_evaluation(ds, ["bm25", "dense", "hybrid"], es, Embedder(), scope="paper", progress=False)
        again = run_evaluation(ds, ["bm25"], es, Embedder(), scope="paper", progress=False)
    finally:
        es.close()
    assert ev.index.built and not again.index.built
    for strategy, metrics in ev.metrics.items():
        assert tuple(metrics) == ALL_METRICS
        # a paper has ~50 paragraphs and ~2 evidence paragraphs: chance nDCG@10 is about 0.1
        assert metrics["ndcg@10"] > 0.25, strategy
        # scope paper: kNN returns (nearly) every paragraph; BM25 only those sharing a content word with the question
        assert metrics["recall@100"] > (0.8 if strategy == "bm25" else 0.9), strategy
    assert again.metrics["bm25"]["ndcg@10"] == pytest.approx(ev.metrics["bm25"]["ndcg@10"])
