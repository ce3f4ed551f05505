"""Measure multisection beside hybrid and sections with the evaluation harness (``evaluation/``).

    PYTHONPATH=. .venv/bin/python -m scholar_es.multisection.measure --es DIR [--prefix qasper-validation-]
        [--data ../shared/data/qasper] [--split validation] [--limit N] [--json out.json]

Scope corpus: every question searches the whole index. Only questions whose paper is in the
index are evaluated (all of them on a full ``qasper-validation-`` index; a subset index, e.g.
the first 40 papers, evaluates their questions only). hybrid and sections run exactly as in
``scholar-es eval`` (``evaluation.runner.make_searcher``, per-paper cap off, 100 hits);
multisection runs through :func:`multisection.flow.eval_searcher` with its defaults (the
candidate ranking, at most 100 chunks). ``hybrid-allknn`` (with ``--ablation``) is hybrid with
``knn_k`` = ``num_candidates`` = the number of chunks, so every chunk gets its kNN score as
every multisection candidate does at re-scoring.

Reported: the harness's paragraph-level metrics (QASPER evidence paragraphs) and latency (time
in Elasticsearch calls), paper-level metrics (the question's own paper is the one relevant
paper; a run's paper ranking is the papers of its chunk ranking, first occurrence kept, i.e. by
best chunk), multisection's end-to-end wall time (offline breakdown and cached embeddings
included), and the same metrics on the questions the offline decomposer splits into 2+ sections.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from indexer.embedder import Embedder
from scholar_es.client import connect
from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.metrics import latency_percentiles, mean_scores, score_rankings
from scholar_es.evaluation.report import markdown_table
from scholar_es.evaluation.runner import embed_questions, eval_profile, make_searcher, run_queries
from scholar_es.multisection.flow import Plan, eval_searcher

PAPER_METRICS = ["ndcg@10", "mrr@10", "p@1", "recall@10"]
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "qasper"


def paper_of(chunk_id: str) -> str:
    """QASPER paragraph chunking: ``<paper_id>#<section>.<paragraph>`` / ``<paper_id>#abs``."""
    return chunk_id.split("#", 1)[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="multisection vs hybrid vs sections (evaluation harness)")
    ap.add_argument("--es", required=True, help="engine directory or cluster URL holding the index")
    ap.add_argument("--prefix", default="qasper-validation-")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--split", default="validation")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--ablation", action="store_true", help="also run hybrid-allknn")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    es = connect(args.es)
    embedder = Embedder()
    ds = load_dataset(args.data, "qasper", args.split)
    resp = es.search(index=f"{args.prefix}papers", body={"size": 10_000, "_source": ["paper_id"]})
    indexed = {h["_source"]["paper_id"] for h in resp["hits"]["hits"]}
    kept = [q for q in ds.queries if q.paper_id in indexed]
    ds = replace(ds, queries=kept, qrels={q.id: ds.qrels[q.id] for q in kept}).limited(args.limit)
    n_chunks = int(es.count(index=f"{args.prefix}chunks")["count"])
    print(
        f"{len(ds.queries)} questions over {args.prefix}chunks ({len(indexed)} papers, {n_chunks} chunks)",
        file=sys.stderr,
    )
    profile = eval_profile(None)
    vectors = embed_questions(ds, embedder, progress=False)
    wall: list[float] = []
    plans: list[Plan] = []
    searchers = {
        "hybrid": make_searcher(es, "hybrid", profile, args.prefix, vectors),
        "sections": make_searcher(es, "sections", profile, args.prefix, vectors),
    }
    if args.ablation:
        big = min(n_chunks, 10_000)
        searchers["hybrid-allknn"] = make_searcher(
            es, "hybrid", profile.with_changes(knn_k=big, num_candidates=big), args.prefix, vectors
        )
    searchers["multisection"] = eval_searcher(
        es, prefix=args.prefix, embedder=embedder, profile=profile, wall_times_ms=wall, plans=plans
    )
    runs = {
        name: run_queries(ds, fn, scope="corpus", label=name, progress=False)
        for name, fn in searchers.items()
    }
    multi = {q.id for q, p in zip(ds.queries, plans, strict=True) if len(p.sections) > 2}
    # every kept question names an indexed paper (the filter above), so none is skipped here
    paper_qrels = {q.id: {q.paper_id: 1} for q in ds.queries if q.paper_id is not None}
    report: dict = {
        "questions": len(ds.queries),
        "papers": len(indexed),
        "chunks": n_chunks,
        "multi_section_questions": len(multi),
        "paragraph": {},
        "paper": {},
        "paragraph_multi": {},
        "paper_multi": {},
    }
    for name, run in runs.items():
        papers = {q: list(dict.fromkeys(paper_of(c) for c in r)) for q, r in run.rankings.items()}
        report["paragraph"][name] = run.metrics
        report["paper"][name] = mean_scores(score_rankings(paper_qrels, papers, PAPER_METRICS))
        if multi:
            sub = {q: d for q, d in ds.qrels.items() if q in multi}
            report["paragraph_multi"][name] = mean_scores(score_rankings(sub, run.rankings))
            report["paper_multi"][name] = mean_scores(
                score_rankings({q: d for q, d in paper_qrels.items() if q in multi}, papers, PAPER_METRICS)
            )
    report["multisection_wall_ms"] = latency_percentiles(wall)
    report["multisection_candidates_mean"] = float(np.mean([p.candidates for p in plans])) if plans else 0.0
    report["multisection_sections"] = {
        str(n): sum(1 for p in plans if len(p.sections) - 1 == n)
        for n in sorted({len(p.sections) - 1 for p in plans})
    }
    out = [
        f"{len(ds.queries)} questions, {len(indexed)} papers, {n_chunks} chunks, scope corpus",
        "",
        "paragraph level (harness):",
        markdown_table(report["paragraph"]),
        "",
        "paper level:",
        markdown_table(report["paper"], PAPER_METRICS),
    ]
    if multi:
        out += [
            "",
            f"the {len(multi)} questions split into 2+ sections, paragraph level:",
            markdown_table(report["paragraph_multi"], list(report["paragraph_multi"]["hybrid"])),
            "",
            "same questions, paper level:",
            markdown_table(report["paper_multi"], PAPER_METRICS),
        ]
    w = report["multisection_wall_ms"]
    out += [
        "",
        f"multisection end-to-end wall time: p50 {w['latency_p50_ms']:.1f} ms, p95 {w['latency_p95_ms']:.1f} ms; "
        f"{report['multisection_candidates_mean']:.0f} candidates on average; sections per question "
        f"{report['multisection_sections']}",
    ]
    print("\n".join(out))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
