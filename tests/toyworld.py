"""A tiny judged BEIR set for the strategy tests: 6 abstracts on distinct topics, 4 questions each
citing one, indexed under ``toy-`` in an embedded engine, with heads ``toy`` trained on its
questions for the multi-head strategies and the self-supervised adapter of ``toy-`` trained on its
titles for the adapted strategies (tests/cli/test_strategies.py, tests/serve/test_serve_strategies.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from indexer.embedder import Embedder
from indexer.pipeline import IndexRun
from scholar_es.engine.rest.transport import embedded_client

DOCS = {
    "aspirin": (
        "Low-dose aspirin and the prevention of myocardial infarction",
        "In a randomized trial of 22,000 physicians, daily low-dose aspirin reduced the risk of a first "
        "heart attack by 44 percent, with a small increase in gastrointestinal bleeding.",
    ),
    "statins": (
        "Statin therapy lowers LDL cholesterol",
        "Statins inhibit HMG-CoA reductase; across 26 trials they lowered LDL cholesterol and major "
        "vascular events in proportion to the reduction.",
    ),
    "sleep": (
        "Melatonin for primary insomnia",
        "Prolonged-release melatonin shortened sleep onset latency and improved sleep quality in "
        "older adults with primary insomnia.",
    ),
    "malaria": (
        "Artemisinin resistance in Plasmodium falciparum",
        "Mutations in the kelch13 propeller domain are associated with delayed parasite clearance "
        "after artemisinin treatment of falciparum malaria in Southeast Asia.",
    ),
    "crispr": (
        "Genome editing with CRISPR-Cas9",
        "The Cas9 endonuclease guided by a single RNA introduces double-strand breaks at targeted "
        "genomic loci, enabling efficient gene knockout in human cells.",
    ),
    "ner": (
        "Distantly supervised named entity recognition for biomedical text",
        "A BiLSTM-CRF tagger is trained on dictionary matches instead of expert annotations and "
        "reaches 81 F1 on chemical and disease mentions.",
    ),
}
QUESTIONS = {
    "q1": ("Does daily aspirin prevent heart attacks?", "aspirin"),
    "q2": ("How do statins lower cholesterol?", "statins"),
    "q3": ("Does melatonin help older people with insomnia fall asleep?", "sleep"),
    "q4": ("Which mutations make malaria parasites resistant to artemisinin?", "malaria"),
}
QUESTION, EXPECTED = QUESTIONS["q1"]
PREFIX = "toy-"
HEADS = "toy"


def build_world(root: Path) -> tuple[Path, Path, Embedder]:
    """(dataset dir, engine dir, embedder): the corpus indexed under toy-, heads ``toy`` and the
    adapter of ``toy-`` trained."""
    from scholar_es.projection.selfsup_train import train_self_supervised
    from scholar_es.projection.train import train_heads

    data = root / "toy"
    (data / "qrels").mkdir(parents=True)
    (data / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, (t, x) in DOCS.items())
    )
    (data / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _) in QUESTIONS.items())
    )
    (data / "qrels" / "train.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, d) in QUESTIONS.items())
    )
    engine = root / "engine"
    embedder = Embedder()
    es = embedded_client(engine)
    try:
        summary = IndexRun(es, embedder, prefix=PREFIX).run([data], "beir")
        assert summary.papers == len(DOCS) and not summary.rejected
        train_heads(es, data, fmt="beir", split="train", name=HEADS, embedder=embedder)
        # one-sentence abstracts: title pairs only; a third of the papers held out
        train_self_supervised(es, PREFIX, kinds=("title",), holdout=0.34, embedder=embedder, progress=False)
    finally:
        es.close()
    return data, engine, embedder
