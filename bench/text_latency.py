"""Query latency of the embedded engine on real scientific text (issue 29), against peers measured
in the same run.

The corpus is real: QASPER papers (``--corpus qasper``: ``papers_train.jsonl`` and
``papers_validation.jsonl`` of ``/work/shared/data/qasper``, or ``$SCHOLAR_ES_DATA``) or SciFact
abstracts (``--corpus scifact``), read by the indexer's readers and chunked as ``scholar-es index``
chunks them (``indexer.chunker.chunk_paper``, paragraph mode), each chunk document built by
``indexer.pipeline.chunk_doc`` (title and abstract repeated in every chunk of a paper). To reach
``--docs`` chunks the papers are repeated with distinct ids (``<paper_id>~r<k>``), so postings lists
grow as a larger collection of such papers would make them grow. Vectors come from the embedding
cache (``~/.cache/scholar-es/embeddings.sqlite3``, which holds every QASPER/SciFact corpus text and
question); a repeated paper reuses its vectors. Nothing is embedded here: a chunk or question whose
vector is not cached is left out (the report counts them).

Queries are real: QASPER questions (train + validation) and SciFact claims, ``--queries`` of each
(a fixed sample), each turned into the project's requests by ``querybuilder`` (strategy
``hybrid``, default profile), one query at a time through the official client:

* ``engine_text``    -- the project's text query: ``script_score(multi_match best_fields over
  chunk_text/abstract/title with the profile's boosts and tie_breaker, saturation script)``,
  ``size`` 10, no ``_source`` (``querybuilder.dsl.saturated_text``)
* ``engine_hybrid``  -- the bare hybrid: ``querybuilder.dsl.hybrid_query`` (saturated text + knn)
* ``engine_default`` -- ``scholar-es search``'s own request (``querybuilder.strategies.build_body``:
  the hybrid + collapse on ``paper_id`` with inner_hits, rescore, ``_source``)
* ``engine_knn``     -- top-level ``knn`` (k 10, num_candidates 100)
* ``engine_hybrid_filtered``, ``engine_default_filtered`` -- the bare hybrid and the default request
  of the same question with a filter (``filters={"section_types": [...]}``: method, experiments,
  results and abstract chunks, about half of QASPER's), as ``scholar-es search --section``
  sends them (``bool.filter`` beside the text, the knn clause's own ``filter``)
* ``engine_fetch``   -- the fetch of ``engine_default``'s hits alone: an ``ids`` query for the
  documents its answer shows (the groups' heads and their inner hits, each once), ``size`` their
  number, the default's ``_source``; ``engine_fetch_bare`` is the same ``ids`` query showing 10
  hits without ``_source``, as the bare hybrid shows them
* ``bm25s``          -- the ``bm25s`` package over title + abstract + chunk text of each chunk
  (english stop words + Snowball stemming, k1 1.2, b 0.75), top 10, one thread
* ``numpy_knn``      -- exact kNN: ``matrix @ q`` + ``argpartition``, top 10 (BLAS 1 thread)

Methods take turns query by query (the order rotates from query to query: ``numpy_knn`` streams
its whole matrix and evicts the caches, so whatever always followed it would always start cold),
the pass is repeated ``--reps`` times (3); each sample is CPU
time (``time.process_time``) and wall time. Reported: CPU p50 per method (median over repetitions)
and per repetition the ratios ``engine_text / bm25s``, ``engine_hybrid / (bm25s + numpy_knn)`` and
``engine_default / engine_hybrid``, ``engine_hybrid_filtered / engine_hybrid``, and ``(engine_fetch - engine_fetch_bare) / engine_hybrid``: what
showing the default's hits alone adds, a share of the bare hybrid (a lower bound of what
``engine_default`` adds, which also collapses, scores inner hits and rescores). Several ``--docs`` values in one run give growth exponents
(log(p50 ratio) / log(size ratio)) between consecutive sizes.

    PYTHONPATH=. .venv/bin/python bench/text_latency.py --docs 10000 100000 --engine-dir /tmp/text-bench
    PYTHONPATH=. .venv/bin/python bench/text_latency.py --corpus scifact --docs 10000 --queries 50

Each size's index is kept in ``<engine-dir>/<corpus>-<docs>`` and reused by a later run (the
documents are the same for the same corpus and size). Prints markdown, writes
``bench/results/text_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from engine_latency import index_engine, time_interleaved  # noqa: E402

INDEX = "chunks"
DATA = Path(os.environ.get("SCHOLAR_ES_DATA", "/work/shared/data"))
SEED = 29
DIMS = 384


def _cache():
    from indexer.embedder import DEFAULT_MODEL, EmbeddingCache, default_cache_dir, model_key

    return EmbeddingCache(default_cache_dir() / "embeddings.sqlite3"), model_key(DEFAULT_MODEL)


def load_chunks(corpus: str, log) -> list[tuple[dict, str]]:
    """(chunk document without vector, embedding text) of every chunk of the corpus, in order."""
    from indexer.chunker import chunk_paper
    from indexer.pipeline import chunk_doc, embedding_text
    from indexer.readers.core import read_papers

    files = (
        [DATA / "qasper" / "papers_train.jsonl", DATA / "qasper" / "papers_validation.jsonl"]
        if corpus == "qasper"
        else [DATA / "scifact" / "corpus.jsonl"]
    )
    out: list[tuple[dict, str]] = []
    for f in files:
        if not f.exists():
            raise SystemExit(f"{f} is missing: this bench needs the shared data folder (set SCHOLAR_ES_DATA)")
        for paper in read_papers(f, on_warning=lambda m: None):
            if not hasattr(paper, "id"):  # an InputError: skipped, as the indexer rejects it
                continue
            for chunk in chunk_paper(paper):
                doc = chunk_doc(chunk, paper, [])
                del doc["vector"]
                out.append((doc, embedding_text(chunk, paper)))
    log(f"{corpus}: {len(out)} chunks read")
    return out


class RealCorpus:
    """``n`` chunk documents: the corpus's chunks in order, papers repeated with distinct ids."""

    def __init__(self, corpus: str, n: int, base: list[tuple[dict, str]], vectors: np.ndarray) -> None:
        self.corpus, self.n = corpus, n
        self.base, self.base_vectors = base, vectors
        self.vectors = vectors[np.arange(n) % len(base)]

    def doc(self, i: int) -> dict:
        rep, j = divmod(i, len(self.base))
        d = dict(self.base[j][0])
        if rep:
            d["paper_id"] = f"{d['paper_id']}~r{rep}"
            d["chunk_id"] = f"{d['chunk_id']}~r{rep}"
        d["vector"] = [float(x) for x in self.vectors[i]]
        return d

    def flat_text(self, i: int) -> str:
        d = self.base[i % len(self.base)][0]
        return f"{d['title']} {d['abstract'] or ''} {d['chunk_text']}"


def chunk_vectors(chunks: list[tuple[dict, str]], log) -> tuple[list[tuple[dict, str]], np.ndarray, int]:
    cache, model = _cache()
    keys = [cache.key(model, text) for _, text in chunks]
    found = cache.get_many(keys)
    keep = [i for i, k in enumerate(keys) if k in found]
    missing = len(chunks) - len(keep)
    if missing:
        log(f"{missing} chunks have no cached vector: left out")
    vecs = np.stack([found[keys[i]] for i in keep]).astype(np.float32)
    return [chunks[i] for i in keep], vecs, missing


def load_queries(n: int, log) -> list[tuple[str, str, np.ndarray]]:
    """(source, text, cached vector): ``n`` QASPER questions and ``n`` SciFact claims (a fixed
    sample of those whose vector is cached)."""
    cache, model = _cache()
    rng = np.random.default_rng(SEED)
    out: list[tuple[str, str, np.ndarray]] = []
    for source, files, key in (
        (
            "qasper",
            [DATA / "qasper" / "questions_train.jsonl", DATA / "qasper" / "questions_validation.jsonl"],
            "question",
        ),
        ("scifact", [DATA / "scifact" / "queries.jsonl"], "text"),
    ):
        texts = list(
            dict.fromkeys(
                json.loads(line)[key] for f in files for line in f.read_text().splitlines() if line.strip()
            )
        )
        found = cache.get_many([cache.key(model, t) for t in texts])
        cached = [t for t in texts if cache.key(model, t) in found]
        log(f"{source}: {len(cached)}/{len(texts)} queries with a cached vector")
        pick = rng.choice(len(cached), size=min(n, len(cached)), replace=False)
        out += [(source, cached[i], found[cache.key(model, cached[i])].astype(np.float32)) for i in pick]
    return out


#: the section types the filtered requests keep (about half of QASPER's chunks)
FILTER_SECTIONS = ("method", "experiments", "results", "abstract")


def bodies(question: str, vector: np.ndarray) -> dict[str, dict]:
    """The engine requests of one question, built by querybuilder (strategy hybrid)."""
    from querybuilder.dsl import as_query_vector, hybrid_query, saturated_text
    from querybuilder.strategies import build_body, make_plan

    plan = make_plan(question, strategy="hybrid")
    filtered = make_plan(question, strategy="hybrid", filters={"section_types": list(FILTER_SECTIONS)})
    vec = as_query_vector(vector)
    return {
        "engine_hybrid_filtered": {
            "size": 10,
            "_source": False,
            "query": hybrid_query(filtered, vec).to_dict(),
        },
        "engine_default_filtered": build_body(filtered, vec),
        "engine_text": {"size": 10, "_source": False, "query": saturated_text(plan).to_dict()},
        "engine_hybrid": {"size": 10, "_source": False, "query": hybrid_query(plan, vec).to_dict()},
        "engine_default": build_body(plan, vec),
        "engine_knn": {
            "size": 10,
            "_source": False,
            "knn": {"field": "vector", "query_vector": vec, "k": 10, "num_candidates": 100},
        },
    }


def fetch_bodies(answer, requests: dict[str, dict]) -> dict[str, dict]:
    """``engine_fetch`` and ``engine_fetch_bare`` of one question: its default request's ``answer``
    shows these documents (each group's head and inner hits, each once, in the order shown)."""
    ids: list[str] = []
    for hit in answer["hits"]["hits"]:
        ids.append(hit["_id"])
        for inner in hit.get("inner_hits", {}).values():
            ids += [h["_id"] for h in inner["hits"]["hits"]]
    ids = list(dict.fromkeys(ids))
    query = {"ids": {"values": ids}}
    return {
        "engine_fetch": {"size": len(ids), "_source": requests["engine_default"]["_source"], "query": query},
        "engine_fetch_bare": {"size": 10, "_source": False, "query": query},
    }


def run_size(
    corpus_name: str, n: int, base, base_vectors, queries, reps: int, engine_dir: Path | None, log
) -> dict:
    import bm25s
    import Stemmer

    from scholar_es.engine.rest.transport import embedded_client

    corpus = RealCorpus(corpus_name, n, base, base_vectors)
    stemmer = Stemmer.Stemmer("english")
    t0 = time.perf_counter()
    retriever = bm25s.BM25(k1=1.2, b=0.75)
    retriever.index(
        bm25s.tokenize(
            [corpus.flat_text(i) for i in range(n)], stopwords="en", stemmer=stemmer, show_progress=False
        ),
        show_progress=False,
    )
    bm25s_index_s = time.perf_counter() - t0
    matrix = corpus.vectors

    def bm25s_query(text: str):
        tokens = bm25s.tokenize(
            [text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False
        )
        return retriever.retrieve(tokens, k=10, show_progress=False, n_threads=1)

    def numpy_query(qv: np.ndarray):
        scores = matrix @ qv
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])]

    with tempfile.TemporaryDirectory(prefix="scholar-es-text-bench-") as tmp:
        folder = (engine_dir or Path(tmp)) / f"{corpus_name}-{n}"
        es = embedded_client(folder)
        if es.indices.exists(index=INDEX) and es.count(index=INDEX)["count"] == n:
            index_s = None
            log(f"reusing the {n} chunks indexed in {folder}")
        else:
            if es.indices.exists(index=INDEX):
                es.indices.delete(index=INDEX)
            index_s = index_engine(es, corpus, log, INDEX, doc_id=lambda i, doc: doc["chunk_id"])
            log(f"engine indexed {n} chunks in {index_s:.1f}s")
        t0 = time.perf_counter()
        es.search(index=INDEX, query={"match": {"chunk_text": "model"}}, size=1)
        first_s = time.perf_counter() - t0
        items = [(src, text, vec, bodies(text, vec)) for src, text, vec in queries]
        for item in items:  # the fetch of the default's hits (outside the timing)
            item[3].update(fetch_bodies(es.search(index=INDEX, **item[3]["engine_default"]), item[3]))
        fns = {
            "bm25s": lambda it: bm25s_query(it[1]),
            "numpy_knn": lambda it: numpy_query(it[2]),
        }
        for name in (
            "engine_text",
            "engine_hybrid",
            "engine_default",
            "engine_knn",
            "engine_hybrid_filtered",
            "engine_default_filtered",
            "engine_fetch",
            "engine_fetch_bare",
        ):
            fns[name] = lambda it, name=name: es.search(index=INDEX, **it[3][name])
        per_source = {}
        for source in ("qasper", "scifact"):
            sel = [it for it in items if it[0] == source]
            if sel:
                per_source[source] = time_interleaved(fns, sel, reps)
                log(f"  {n} {source}: " + _summary(per_source[source]))
        es.close()
    return {
        "docs": n,
        "index_seconds": {"engine": index_s, "bm25s": bm25s_index_s, "engine_first_search": first_s},
        "by_queries": {src: _reduce(r, reps) for src, r in per_source.items()},
    }


def _summary(per_method: dict) -> str:
    return ", ".join(f"{k} {np.median([r['cpu']['p50_ms'] for r in v]):.2f}" for k, v in per_method.items())


def _reduce(per_method: dict, reps: int) -> dict:
    latency = {
        name: {
            "cpu_p50_ms": float(np.median([r["cpu"]["p50_ms"] for r in per_rep])),
            "cpu_p95_ms": float(np.median([r["cpu"]["p95_ms"] for r in per_rep])),
            "wall_p50_ms": float(np.median([r["wall"]["p50_ms"] for r in per_rep])),
            "cpu_p50_per_rep": [r["cpu"]["p50_ms"] for r in per_rep],
        }
        for name, per_rep in per_method.items()
    }
    ratios: dict[str, list[float]] = {
        "text_vs_bm25s": [],
        "hybrid_vs_peers": [],
        "default_vs_hybrid": [],
        "fetch_share": [],
        "filtered_vs_hybrid": [],
    }
    for i in range(reps):
        p = {name: latency[name]["cpu_p50_per_rep"][i] for name in latency}
        ratios["text_vs_bm25s"].append(p["engine_text"] / p["bm25s"])
        ratios["hybrid_vs_peers"].append(p["engine_hybrid"] / (p["bm25s"] + p["numpy_knn"]))
        ratios["default_vs_hybrid"].append(p["engine_default"] / p["engine_hybrid"])
        ratios["filtered_vs_hybrid"].append(p["engine_hybrid_filtered"] / p["engine_hybrid"])
        ratios["fetch_share"].append((p["engine_fetch"] - p["engine_fetch_bare"]) / p["engine_hybrid"])
    return {
        "latency": latency,
        "ratios": {k: {"median": float(np.median(v)), "per_repetition": v} for k, v in ratios.items()},
    }


def growth(sizes: list[dict]) -> list[dict]:
    """Exponent e of p50 ~ N^e between consecutive sizes, per query source and method."""
    out = []
    for a, b in zip(sizes, sizes[1:], strict=False):
        for src in a["by_queries"]:
            la, lb = a["by_queries"][src]["latency"], b["by_queries"][src]["latency"]
            out.append(
                {
                    "from": a["docs"],
                    "to": b["docs"],
                    "queries": src,
                    "exponents": {
                        m: math.log(lb[m]["cpu_p50_ms"] / la[m]["cpu_p50_ms"])
                        / math.log(b["docs"] / a["docs"])
                        for m in la
                    },
                }
            )
    return out


def markdown(report: dict) -> str:
    lines = [
        f"corpus {report['corpus']} ({report['base_chunks']:,} distinct chunks), {report['queries']} queries per "
        f"source x {report['reps']} interleaved repetitions, CPU time, {report['machine']['cpus']} CPUs",
        "",
    ]
    for size in report["sizes"]:
        for src, r in size["by_queries"].items():
            lines += [
                f"**{size['docs']:,} chunks, {src} queries** (CPU p50 ms, median of repetitions)",
                "",
                "| method | CPU p50 | CPU p95 | wall p50 |",
                "|---|---:|---:|---:|",
            ]
            for name, lat in r["latency"].items():
                lines.append(
                    f"| {name} | {lat['cpu_p50_ms']:.2f} | {lat['cpu_p95_ms']:.2f} | {lat['wall_p50_ms']:.2f} |"
                )
            lines += ["", "| ratio | median | per repetition |", "|---|---:|---|"]
            for key, label in (
                ("text_vs_bm25s", "engine_text / bm25s"),
                ("hybrid_vs_peers", "engine_hybrid / (bm25s + numpy_knn)"),
                ("default_vs_hybrid", "engine_default / engine_hybrid"),
                ("filtered_vs_hybrid", "engine_hybrid_filtered / engine_hybrid"),
                ("fetch_share", "(engine_fetch - engine_fetch_bare) / engine_hybrid"),
            ):
                v = r["ratios"][key]
                lines.append(
                    f"| {label} | {v['median']:.2f} | {', '.join(f'{x:.2f}' for x in v['per_repetition'])} |"
                )
            lines.append("")
    for g in report["growth"]:
        ex = ", ".join(f"{m} {e:.2f}" for m, e in g["exponents"].items())
        lines.append(f"growth {g['from']:,} -> {g['to']:,} ({g['queries']}): {ex}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", choices=["qasper", "scifact"], default="qasper")
    ap.add_argument(
        "--docs", type=int, nargs="+", default=[10_000, 100_000], help="chunk counts (default 10000 100000)"
    )
    ap.add_argument(
        "--queries", type=int, default=100, help="queries per source: QASPER questions, SciFact claims (100)"
    )
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--engine-dir", type=Path, default=None, help="keep (and reuse) each size's index here")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "text_latency.json")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    from threadpoolctl import threadpool_limits

    chunks = load_chunks(args.corpus, log)
    base, base_vectors, missing = chunk_vectors(chunks, log)
    queries = load_queries(args.queries, log)
    sizes = []
    with threadpool_limits(limits=1, user_api="blas"):
        for n in args.docs:
            sizes.append(
                run_size(args.corpus, n, base, base_vectors, queries, args.reps, args.engine_dir, log)
            )
    report = {
        "corpus": args.corpus,
        "base_chunks": len(base),
        "chunks_without_vector": missing,
        "queries": args.queries,
        "reps": args.reps,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "load_avg_at_end": os.getloadavg(),
        },
        "sizes": sizes,
        "growth": growth(sizes),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
