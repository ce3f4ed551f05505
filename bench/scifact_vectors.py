"""Issue 15, "another signal?": does a vector covering the whole abstract lift SciFact hybrid?

all-MiniLM-L6-v2 reads at most 256 word pieces, and many SciFact abstracts are longer: the
indexed vector of a long abstract sees its first part only. This replays the default hybrid
(first pass + rescore, ``evaluation.tune.simulate``) on the engine's own candidates (BM25 + kNN
top 100 of the paragraph-chunked index, as ``scholar-es tune`` collects them) with the vector
similarity of each candidate replaced by one of several whole-abstract variants built from the
window chunks (150 words, 30 overlap; ``indexer.chunker`` window mode). The first row reproduces
the engine's hybrid. Prints a Markdown table: dense alone over the corpus, hybrid with the
default weights, and the best of a small weight grid (chosen on train, so optimistic).

    SCHOLAR_ES_BACKEND=onnx PYTHONPATH=. .venv/bin/python bench/scifact_vectors.py \
        --data ../shared/data/scifact --es /tmp/eval/scifact

``--es`` must hold the paragraph-chunked SciFact index (``scholar-es eval ... --es DIR`` builds
it); window embeddings come from the embedding cache or are computed (~10k windows).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Callable

import numpy as np

from indexer.chunker import chunk_paper
from indexer.embedder import DEFAULT_MODEL, Embedder
from indexer.pipeline import embedding_text
from indexer.readers.core import read_papers
from querybuilder.plan import clean_question
from scholar_es.client import connect
from scholar_es.evaluation import tune
from scholar_es.evaluation.datasets import load_dataset
from scholar_es.evaluation.metrics import mean_scores, score_rankings
from scholar_es.evaluation.runner import embed_questions


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/scifact")
    ap.add_argument("--es", required=True, help="engine directory holding the scifact- index")
    args = ap.parse_args()

    ds = load_dataset(args.data, "beir", "train")
    es = connect(args.es)
    emb = Embedder(DEFAULT_MODEL)
    cands = tune.collect_candidates(
        es, ds, emb, scope="corpus", profile=None, prefix="scifact-", progress=False
    )
    qtext = {q.id: clean_question(q.text)[0] for q in ds.queries}
    qv = embed_questions(ds, emb, progress=False)

    whole_text: dict[str, str] = {}
    win_text: list[str] = []
    owner: list[str] = []
    for p in read_papers(args.data, "beir"):
        if isinstance(p, Exception):
            continue
        whole_text[p.id] = embedding_text(chunk_paper(p, "paragraph")[0], p)
        for c in chunk_paper(p, "window"):
            win_text.append(embedding_text(c, p))
            owner.append(p.id)
    ids = list(whole_text)
    whole_m = emb.encode([whole_text[i] for i in ids])
    win_m = emb.encode(win_text)
    rows: dict[str, list[int]] = {}
    for i, o in enumerate(owner):
        rows.setdefault(o, []).append(i)
    whole = {pid: whole_m[i] for i, pid in enumerate(ids)}
    print(f"{len(ids)} abstracts, {len(win_text)} windows, {len(cands)} claims", file=sys.stderr)

    def wmax(pid: str, q: np.ndarray) -> float:
        return float((win_m[rows[pid]] @ q).max())

    variants: dict[str, Callable[[str, np.ndarray], float]] = {
        "whole abstract (truncated at 256 word pieces; today)": lambda pid, q: float(whole[pid] @ q),
        "max over windows (= `--chunking window`)": wmax,
        "mean of the windows' vectors": lambda pid, q: float(_unit(win_m[rows[pid]].mean(0)) @ q),
        "max(whole, windows)": lambda pid, q: max(float(whole[pid] @ q), wmax(pid, q)),
        "mean of whole + windows' vectors": lambda pid, q: float(
            _unit(np.vstack([whole[pid][None], win_m[rows[pid]]]).mean(0)) @ q
        ),
        "(whole + max over windows) / 2": lambda pid, q: (float(whole[pid] @ q) + wmax(pid, q)) / 2,
    }
    default = tune.Params(bm25_weight=0.75, knn_weight=1.0, saturation_k=100.0)
    grid = [
        tune.Params(bm25_weight=w, knn_weight=1.0, saturation_k=k)
        for w in (0.5, 0.75, 1.0, 1.5, 2.0)
        for k in (5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
    ]

    def ndcg(run: dict[str, list[str]]) -> float:
        return mean_scores(score_rankings(ds.qrels, run))["ndcg@10"]

    print(
        "| vector of an abstract | dense nDCG@10 | hybrid nDCG@10 (default w 0.75, k 100) | best on the grid (w, k) |"
    )
    print("|---|---:|---:|---:|")
    for name, sim in variants.items():
        replaced = {}
        dense_run = {}
        for qid, c in cands.items():
            q = qv[qtext[qid]]
            s = np.array([(1 + sim(h["paper_id"], q)) / 2 for h in c.hits])
            c2 = copy.copy(c)
            c2.vec = s
            c2.knn = np.where(c.knn > 0, s, 0.0)
            replaced[qid] = c2
            every = np.array([sim(pid, q) for pid in ids])
            dense_run[qid] = [ids[i] for i in np.argsort(-every, kind="stable")[:100]]
        base = ndcg(tune.simulate(ds, replaced, default))
        best = max((ndcg(tune.simulate(ds, replaced, p)), p.bm25_weight, p.saturation_k) for p in grid)
        print(
            f"| {name} | {ndcg(dense_run):.4f} | {base:.4f} | {best[0]:.4f} ({best[1]:g}, {best[2]:g}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
