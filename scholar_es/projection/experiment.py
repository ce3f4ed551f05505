"""The issue-7 evaluation of multi-head projection on SciFact's train split (docs/multihead.md).

    PYTHONPATH=. .venv/bin/python -m scholar_es.projection.experiment --data ../shared/data/scifact \\
        --out results.json --markdown table.md [--engine DIR --prefix scifact- [--hybrid]]

Protocol. The 809 judged train claims are split into 5 folds by query (seeded). For each fold
the heads (one per answer, :func:`projection.train.build_heads`) and the global linear
projection are fitted on the other 4 folds' (claim, cited abstract) pairs. The held-out claims
are split into (a) *paraphrase*: at least one of the claim's relevant abstracts is an answer of
the training pairs, and (b) *novel*: none is. Every tuned number -- the fallback's threshold
and α, the linear projection's ridge -- is chosen by an inner 4-fold cross-validation inside
the training folds, never on the held-out fold: the ridge by mean MRR over the inner held-out
claims, the fallback twice -- by mean MRR alone, and by mean MRR under the no-harm rule of
:mod:`projection.tuning` (no MRR loss on the inner novel claims).

Ranking. Exact cosine over the SciFact abstract vectors: the vectors of the ``<id>#abs``
chunks (``title\\nabstract``, through the cached :class:`~indexer.embedder.Embedder`, the
same text and model as the index). ``--engine`` also checks, on the first fold, that the
engine's kNN (``projection.search``: the heads stored in the engine, the ``multihead`` and
``direct`` strategies through the query builder's DSL) returns the same top 10; ``--hybrid``
adds, on every fold through the engine, the query builder's ``hybrid`` query against
``multihead-hybrid``.

Metrics (ranx): Recall@1, MRR (over the top 100), nDCG@10, pooled over the held-out claims of all
folds (each claim is held out once), with the per-fold spread and a paired bootstrap of the
difference to ``direct``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from scholar_es.projection.routing import (
    NO_THRESHOLD,
    apply_linear_projection,
    blend,
    centroid_similarities,
    fit_linear_projection,
    normalize,
    routing_weights,
)
from scholar_es.projection.train import Pair, build_heads, question_text, read_pairs
from scholar_es.projection.tuning import choose_fallback

TAUS = (0.01, 0.1, 0.5, 1.0)
FALLBACK_TAU = 0.1  # the default τ, with which heads are trained and stored
ALPHAS = (1.0, 0.75, 0.5, 0.25)  # fallback blends searched (1 = the direct vector)
RIDGES = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
METRICS = ("recall@1", "mrr", "ndcg@10")
DEPTH = 100  # ranked documents per query


@dataclass
class Data:
    doc_ids: list[str]
    D: np.ndarray  # (N, d) document vectors, rows normalized
    qids: list[str]  # judged queries, sorted
    Q: dict[str, np.ndarray]  # qid -> question vector
    qrels: dict[str, dict[str, int]]  # qid -> {doc id: 1}
    pairs: list[Pair]
    model: str


def load(data_dir: str | Path, split: str = "train", embedder=None) -> Data:
    """SciFact (any BEIR set): document vectors of the abstract chunks, questions, qrels, pairs."""
    from indexer.chunker import chunk_paper
    from indexer.embedder import Embedder
    from indexer.pipeline import embedding_text
    from indexer.readers import read_papers

    embedder = embedder or Embedder()
    ids, texts = [], []
    for paper in read_papers(Path(data_dir), "beir"):
        if isinstance(paper, Exception):
            continue
        chunks = chunk_paper(paper)
        if chunks:  # the abstract chunk <id>#abs: what multihead/direct search on <prefix>chunks
            ids.append(paper.id)
            texts.append(embedding_text(chunks[0], paper))
    D = embedder.encode(texts)
    pairs = read_pairs(data_dir, "beir", split)
    known = set(ids)
    pairs = [p for p in pairs if p.answer_id in known]
    qrels: dict[str, dict[str, int]] = {}
    questions: dict[str, str] = {}
    for p in pairs:
        qrels.setdefault(p.question_id, {})[p.answer_id] = 1
        questions[p.question_id] = p.question
    qids = sorted(qrels)
    Qm = embedder.encode([question_text(questions[q]) for q in qids])
    return Data(
        ids,
        normalize(D).astype(np.float32),
        qids,
        dict(zip(qids, Qm, strict=True)),
        qrels,
        pairs,
        embedder.name,
    )


# --- ranking and per-query scores ---------------------------------------------------------------
def top_k(V: np.ndarray, D: np.ndarray, k: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """(indices, scores) of the k best documents per row of V, best first (exact cosine)."""
    S = np.asarray(V, np.float32) @ D.T
    part = np.argpartition(-S, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(S, part, 1), axis=1, kind="stable")
    idx = np.take_along_axis(part, order, 1)
    return idx, np.take_along_axis(S, idx, 1)


def reciprocal_ranks(V: np.ndarray, D: np.ndarray, rel: Sequence[Sequence[int]]) -> np.ndarray:
    """1 / rank of the best-ranked relevant document, per row (no depth cut: for tuning)."""
    S = np.asarray(V, np.float32) @ D.T
    out = np.zeros(len(rel))
    for i, r in enumerate(rel):
        best = S[i, list(r)].max()
        out[i] = 1.0 / (1 + int((S[i] > best).sum()))
    return out


# --- methods -----------------------------------------------------------------------------------
def fit_fold(data: Data, train_qids: Sequence[str], doc_index: dict[str, int]):
    """Heads and (question, answer) matrices from the pairs of ``train_qids``."""
    tq = set(train_qids)
    pairs = [p for p in data.pairs if p.question_id in tq]
    Qp = np.vstack([data.Q[p.question_id] for p in pairs])
    Ap = np.vstack([data.D[doc_index[p.answer_id]] for p in pairs])
    answers = {a: data.D[doc_index[a]] for a in {p.answer_id for p in pairs}}
    heads = build_heads(pairs, Qp, answers, model=data.model)
    return heads, Qp, Ap


def projected(Qh: np.ndarray, heads, tau: float) -> tuple[np.ndarray, np.ndarray]:
    """(projected vectors, best centroid similarity) for a batch."""
    sims = centroid_similarities(Qh, heads.centroids)
    return normalize(routing_weights(sims, tau) @ heads.answers.astype(np.float64)).astype(
        np.float32
    ), sims.max(1)


def with_fallback(Qh, P, best, threshold: float, alpha: float) -> np.ndarray:
    return np.where((best < threshold)[:, None], blend(Qh, P, alpha), P).astype(np.float32)


def tune(data: Data, train_qids: Sequence[str], doc_index: dict[str, int], inner: int, seed: int) -> dict:
    """Inner cross-validation on the training folds: the fallback (threshold, α) at τ = 0.1 -- once
    under the no-harm constraint on the inner novel questions (:mod:`projection.tuning`), once for
    the best mean MRR alone -- and the ridge of each linear projection (mean MRR)."""
    best_sims: list[np.ndarray] = []
    novel: list[np.ndarray] = []
    rr_proj: list[np.ndarray] = []
    rr_blend: dict[float, list[np.ndarray]] = {a: [] for a in ALPHAS}
    rr_lin: dict[tuple[str, float], list[np.ndarray]] = {}
    for inner_train, inner_test in split_folds(train_qids, inner, seed + 1):
        heads, Qp, Ap = fit_fold(data, inner_train, doc_index)
        known = set(heads.answer_ids)
        novel.append(np.array([not set(data.qrels[q]) & known for q in inner_test]))
        Qh = np.vstack([data.Q[q] for q in inner_test])
        rel = [[doc_index[d] for d in data.qrels[q]] for q in inner_test]
        P, best = projected(Qh, heads, FALLBACK_TAU)
        best_sims.append(best)
        rr_proj.append(reciprocal_ranks(P, data.D, rel))
        for a in ALPHAS:
            rr_blend[a].append(reciprocal_ranks(blend(Qh, P, a), data.D, rel))
        for anchor in ("identity", "zero"):
            for lam in RIDGES:
                W = fit_linear_projection(Qp, Ap, ridge=lam, anchor=anchor)
                rr_lin.setdefault((anchor, lam), []).append(
                    reciprocal_ranks(apply_linear_projection(Qh, W), data.D, rel)
                )
    sims, proj, nov = np.concatenate(best_sims), np.concatenate(rr_proj), np.concatenate(novel)
    fallback = {a: np.concatenate(v) for a, v in rr_blend.items()}
    choices = {
        "no_harm": choose_fallback(sims, proj, fallback, nov, max_novel_loss=0.0),
        "mean": choose_fallback(sims, proj, fallback, nov, max_novel_loss=None),
    }
    ridges = {}
    for anchor in ("identity", "zero"):
        scores = {lam: float(np.concatenate(rr_lin[(anchor, lam)]).mean()) for lam in RIDGES}
        ridges[anchor] = max(scores, key=scores.__getitem__)
    return {
        "fallback": {k: asdict(v) for k, v in choices.items()},
        "ridge": ridges,
        "inner_questions": int(sims.size),
        "inner_novel": int(nov.sum()),
        "inner_mrr_direct": float(fallback[1.0].mean()),
    }


def split_folds(qids: Sequence[str], k: int, seed: int) -> list[tuple[list[str], list[str]]]:
    """k folds by query: (train qids, test qids), from a seeded permutation."""
    order = [qids[i] for i in np.random.default_rng(seed).permutation(len(qids))]
    parts = [order[i::k] for i in range(k)]
    return [([q for j, p in enumerate(parts) if j != i for q in p], sorted(parts[i])) for i in range(k)]


def method_vectors(data: Data, heads, Qp, Ap, Qh: np.ndarray, tuned: dict) -> dict[str, np.ndarray]:
    out = {"direct": Qh.astype(np.float32)}
    for anchor, label in (("identity", "global linear (ridge→I)"), ("zero", "global linear (ridge→0)")):
        W = fit_linear_projection(Qp, Ap, ridge=tuned["ridge"][anchor], anchor=anchor)
        out[label] = apply_linear_projection(Qh, W)
    for tau in TAUS:
        out[f"multihead τ={tau:g}"] = projected(Qh, heads, tau)[0]
    P, best = projected(Qh, heads, FALLBACK_TAU)
    for key, label in (("no_harm", "no-harm tuning"), ("mean", "mean-MRR tuning")):
        fb = tuned["fallback"][key]
        out[f"multihead τ={FALLBACK_TAU:g} + fallback ({label})"] = with_fallback(
            Qh, P, best, fb["threshold"], fb["alpha"]
        )
    return out


# --- evaluation ----------------------------------------------------------------------------------
def per_query(qrels: dict, runs: dict[str, dict]) -> dict[str, dict[str, dict[str, float]]]:
    """method -> metric -> qid -> score, with ranx."""
    from ranx import Qrels, Run, evaluate

    rq = Qrels(qrels)
    out = {}
    for name, run in runs.items():
        scores = evaluate(rq, Run(run), list(METRICS), return_mean=False)
        qids = list(rq.keys())
        out[name] = {m: dict(zip(qids, map(float, scores[m]), strict=True)) for m in METRICS}
    return out


def bootstrap(
    a: np.ndarray, b: np.ndarray, n: int = 10_000, seed: int = 0
) -> tuple[float, float, float, float]:
    """Paired bootstrap of mean(a - b): (mean, 2.5 %, 97.5 %, share of resamples <= 0)."""
    d = np.asarray(a) - np.asarray(b)
    if d.size == 0:
        return (float("nan"),) * 4
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(n, d.size))].mean(axis=1)
    return (
        float(d.mean()),
        float(np.percentile(means, 2.5)),
        float(np.percentile(means, 97.5)),
        float((means <= 0).mean()),
    )


def run(data: Data, folds: int = 5, seed: int = 0, inner: int = 4, log=print) -> dict:
    doc_index = {d: i for i, d in enumerate(data.doc_ids)}
    settings: dict[str, dict[str, dict[str, dict[str, float]]]] = {"paraphrase": {}, "novel": {}}
    # setting -> method -> qid -> {doc: score}
    fold_of: dict[str, int] = {}
    tuned_per_fold, counts = [], []
    for f, (train_qids, test_qids) in enumerate(split_folds(data.qids, folds, seed)):
        t0 = time.perf_counter()
        heads, Qp, Ap = fit_fold(data, train_qids, doc_index)
        tuned = tune(data, train_qids, doc_index, inner, seed + 100 * f)
        trained_answers = set(heads.answer_ids)
        para = [q for q in test_qids if set(data.qrels[q]) & trained_answers]
        novel = [q for q in test_qids if not set(data.qrels[q]) & trained_answers]
        counts.append(
            {
                "fold": f,
                "train_questions": len(train_qids),
                "train_pairs": len(Qp),
                "heads": len(heads),
                "heads_2plus": int((heads.n_questions >= 2).sum()),
                "paraphrase": len(para),
                "novel": len(novel),
            }
        )
        tuned_per_fold.append(tuned)
        for setting, qids in (("paraphrase", para), ("novel", novel)):
            if not qids:
                continue
            Qh = np.vstack([data.Q[q] for q in qids])
            for name, V in method_vectors(data, heads, Qp, Ap, Qh, tuned).items():
                idx, sc = top_k(V, data.D)
                run_ = settings[setting].setdefault(name, {})
                for q, ii, ss in zip(qids, idx, sc, strict=True):
                    run_[q] = {data.doc_ids[i]: float(s) for i, s in zip(ii, ss, strict=True)}
            fold_of.update(dict.fromkeys(qids, f))
        fb = tuned["fallback"]
        log(
            f"fold {f}: {counts[-1]} fallback no-harm t={fb['no_harm']['threshold']:.3f} "
            f"a={fb['no_harm']['alpha']}, mean-MRR t={fb['mean']['threshold']:.3f} a={fb['mean']['alpha']}; "
            f"ridge={tuned['ridge']} ({time.perf_counter() - t0:.1f} s)"
        )
    results: dict = {"folds": folds, "seed": seed, "counts": counts, "tuned": tuned_per_fold, "settings": {}}
    for setting, runs in settings.items():
        qrels = {q: data.qrels[q] for q in next(iter(runs.values()))}
        pq = per_query(qrels, runs)
        qids = sorted(qrels)
        table = {}
        for name in runs:
            row = {}
            for m in METRICS:
                vals = np.array([pq[name][m][q] for q in qids])
                per_fold = [
                    float(np.mean([pq[name][m][q] for q in qids if fold_of[q] == f]))
                    for f in range(folds)
                    if any(fold_of[q] == f for q in qids)
                ]
                base = np.array([pq["direct"][m][q] for q in qids])
                row[m] = {
                    "mean": float(vals.mean()),
                    "fold_sd": float(np.std(per_fold, ddof=1)),
                    "per_fold": per_fold,
                    "vs_direct": bootstrap(vals, base, seed=seed),
                }
            table[name] = row
        results["settings"][setting] = {"questions": len(qids), "methods": table}
    return results


def markdown(results: dict, base: str = "direct") -> str:
    lines = []
    for setting, body in results["settings"].items():
        lines += [
            f"**({'a' if setting == 'paraphrase' else 'b'}) {setting}** — {body['questions']} held-out "
            f"questions pooled over the folds; mean (± sd over folds); Δ vs {base} with the 95 % paired "
            "bootstrap interval",
            "",
            "| method | Recall@1 | MRR | nDCG@10 | Δ Recall@1 | Δ MRR | Δ nDCG@10 |",
            "|---|---|---|---|---|---|---|",
        ]
        for name, row in body["methods"].items():
            cells = [f"{row[m]['mean']:.3f} (±{row[m]['fold_sd']:.3f})" for m in METRICS]
            deltas = [
                "—"
                if name == base
                else f"{row[m]['vs_direct'][0]:+.3f} [{row[m]['vs_direct'][1]:+.3f}, {row[m]['vs_direct'][2]:+.3f}]"
                for m in METRICS
            ]
            lines.append(f"| {name} | " + " | ".join(cells + deltas) + " |")
        lines.append("")
    return "\n".join(lines)


# --- the engine check ---------------------------------------------------------------------------
def verify_engine(
    data: Data, target: str, prefix: str, seed: int = 0, folds: int = 5, limit: int | None = None, log=print
) -> dict:
    """Fold 0 through the engine: heads stored in it (``<prefix>heads-experiment-fold0``), then
    ``projection.search`` (direct, multihead τ=0.1, multihead + fallback) vs numpy's top 10."""
    from indexer.embedder import Embedder
    from scholar_es.client import connect
    from scholar_es.projection.search import search
    from scholar_es.projection.store import delete_heads, save_heads

    es = connect(target)
    doc_index = {d: i for i, d in enumerate(data.doc_ids)}
    train_qids, test_qids = split_folds(data.qids, folds, seed)[0]
    heads, _, _ = fit_fold(data, train_qids, doc_index)
    fb = tune(data, train_qids, doc_index, 4, seed)["fallback"]["no_harm"]
    heads = replace(
        heads.with_params(tau=FALLBACK_TAU, threshold=fb["threshold"], alpha=fb["alpha"]),
        name="experiment-fold0",
    )
    save_heads(es, heads, prefix=prefix)
    embedder = Embedder(data.model)
    qids = test_qids[:limit] if limit else test_qids
    Qh = np.vstack([data.Q[q] for q in qids])
    P, best = projected(Qh, heads, FALLBACK_TAU)
    expected = {
        "direct": Qh,
        "multihead": P,
        "multihead+fallback": with_fallback(Qh, P, best, heads.threshold, heads.alpha),
    }
    report: dict[str, object] = {}
    t0 = time.perf_counter()
    for label, V in expected.items():
        strategy = "direct" if label == "direct" else "multihead"
        threshold = NO_THRESHOLD if label == "multihead" else None  # None: the heads' own threshold
        idx, _ = top_k(V, data.D, 10)
        same_order = same_set = 0
        diffs: list[dict[str, object]] = []
        for q, ii in zip(qids, idx, strict=True):
            got = search(
                es,
                _question(data, q),
                strategy=strategy,
                heads="experiment-fold0",
                prefix=prefix,
                embedder=embedder,
                size=10,
                threshold=threshold,
            ).ranked_ids("paper")
            want = [data.doc_ids[i] for i in ii]
            same_order += got == want
            same_set += set(got) == set(want)
            if got != want and len(diffs) < 5:
                diffs.append({"qid": q, "engine": got, "numpy": want})
        report[label] = {
            "questions": len(qids),
            "same_top10_order": same_order,
            "same_top10_set": same_set,
            "examples": diffs,
        }
        log(
            f"engine check {label}: {same_order}/{len(qids)} identical top-10 lists, {same_set} identical sets"
        )
    report["seconds"] = time.perf_counter() - t0
    delete_heads(es, "experiment-fold0", prefix=prefix)
    return report


def evaluate_hybrid(
    data: Data, target: str, prefix: str, results: dict, seed: int = 0, folds: int = 5, log=print
) -> dict:
    """Every fold through the engine with the query builder's hybrid query: ``hybrid`` (question
    vector) vs ``multihead-hybrid`` (projected vector; with the fold's no-harm fallback and
    without a fallback). The fold's heads are stored in the engine and searched by name."""
    from indexer.embedder import Embedder
    from querybuilder.strategies import search as qb_search
    from scholar_es.client import connect
    from scholar_es.projection.search import search
    from scholar_es.projection.store import delete_heads, save_heads

    es = connect(target)
    embedder = Embedder(data.model)
    doc_index = {d: i for i, d in enumerate(data.doc_ids)}
    runs: dict[str, dict[str, dict]] = {"paraphrase": {}, "novel": {}}
    fold_of: dict[str, int] = {}
    t0 = time.perf_counter()
    for f, (train_qids, test_qids) in enumerate(split_folds(data.qids, folds, seed)):
        heads, _, _ = fit_fold(data, train_qids, doc_index)
        fb = results["tuned"][f]["fallback"]["no_harm"]
        name = f"experiment-fold{f}"
        save_heads(
            es,
            replace(
                heads.with_params(tau=FALLBACK_TAU, threshold=fb["threshold"], alpha=fb["alpha"]), name=name
            ),
            prefix=prefix,
        )
        known = set(heads.answer_ids)
        for q in test_qids:
            setting = "paraphrase" if set(data.qrels[q]) & known else "novel"
            fold_of[q] = f
            text = _question(data, q)
            ranked = {
                "hybrid": qb_search(
                    es, text, strategy="hybrid", prefix=prefix, embedder=embedder, size=DEPTH
                ).hits,
                "multihead-hybrid τ=0.1 + fallback (no-harm tuning)": search(
                    es,
                    text,
                    strategy="multihead-hybrid",
                    heads=name,
                    prefix=prefix,
                    embedder=embedder,
                    size=DEPTH,
                ).result.hits,
                "multihead-hybrid τ=0.1 (no fallback)": search(
                    es,
                    text,
                    strategy="multihead-hybrid",
                    heads=name,
                    prefix=prefix,
                    embedder=embedder,
                    size=DEPTH,
                    threshold=NO_THRESHOLD,
                ).result.hits,
            }
            for label, hits in ranked.items():
                ids = list(dict.fromkeys(h.paper_id for h in hits))
                runs[setting].setdefault(label, {})[q] = {d: 1.0 / (r + 1) for r, d in enumerate(ids)}
        delete_heads(es, name, prefix=prefix)
        log(f"hybrid fold {f} done ({time.perf_counter() - t0:.0f} s)")
    out = {}
    for setting, by_label in runs.items():
        qids = sorted(next(iter(by_label.values())))
        pq = per_query({q: data.qrels[q] for q in qids}, by_label)
        table = {}
        for label in by_label:
            row = {}
            for m in METRICS:
                vals = np.array([pq[label][m][q] for q in qids])
                base = np.array([pq["hybrid"][m][q] for q in qids])
                per_fold = [
                    float(np.mean([pq[label][m][q] for q in qids if fold_of[q] == f])) for f in range(folds)
                ]
                row[m] = {
                    "mean": float(vals.mean()),
                    "fold_sd": float(np.std(per_fold, ddof=1)),
                    "per_fold": per_fold,
                    "vs_direct": bootstrap(vals, base, seed=seed),
                }
            table[label] = row
        out[setting] = {"questions": len(qids), "methods": table}
    return out


def _question(data: Data, qid: str) -> str:
    return next(p.question for p in data.pairs if p.question_id == qid)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data", default=str(Path(__file__).resolve().parents[3] / "shared" / "data" / "scifact")
    )
    ap.add_argument("--split", default="train")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--engine", help="embedded engine directory (or URL) holding the corpus, for the engine check"
    )
    ap.add_argument("--prefix", default="", help="index prefix of the corpus in --engine")
    ap.add_argument(
        "--hybrid",
        action="store_true",
        help="with --engine: also hybrid vs multihead-hybrid on every fold, through the engine",
    )
    ap.add_argument("--out", help="write all results as JSON here")
    ap.add_argument("--markdown", help="write the results tables here")
    args = ap.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.perf_counter()
    data = load(args.data, args.split)
    log(
        f"loaded {len(data.doc_ids)} documents, {len(data.qids)} judged questions, {len(data.pairs)} pairs "
        f"({time.perf_counter() - t0:.1f} s)"
    )
    results = run(data, args.folds, args.seed, log=log)
    if args.engine:
        results["engine_check"] = verify_engine(
            data, args.engine, args.prefix, args.seed, args.folds, log=log
        )
    if args.engine and args.hybrid:
        results["hybrid"] = evaluate_hybrid(
            data, args.engine, args.prefix, results, args.seed, args.folds, log=log
        )
    table = markdown(results)
    if "hybrid" in results:
        table += "\n**Through the engine, hybrid query** (Δ vs `hybrid`)\n\n" + markdown(
            {"settings": results["hybrid"]}, base="hybrid"
        )
    print(table)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    if args.markdown:
        Path(args.markdown).write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
