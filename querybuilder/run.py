"""Send what a strategy built to a cluster or the embedded engine and shape the answer.

A strategy (:mod:`querybuilder.strategies`) builds its request; the runners here send it and
make a :class:`~querybuilder.results.SearchResult` of the answer: :func:`run_single` (one
``_search``) and :func:`run_fused` (``rrf-client``: the two searches of ONE ``_msearch``, fused
here with :func:`rrf_fuse`). Everything else is ranked inside Elasticsearch (or the embedded
engine). Before any search the index's ``_meta`` (``embedding_model``, ``dims``) is read with
``indices.get_mapping``; a query vector of another dimension, or an embedder of another model,
raises :class:`~scholar_es.errors.ModelMismatchError` (:func:`embed_question`).

Per-paper cap: ``collapse`` on ``paper_id`` with ``inner_hits`` (size = cap) for the strategies
that run one query; the chunk view flattens the inner hits of the top ``size`` papers and keeps
the best ``size`` chunks (exactly the top chunks with at most ``cap`` per paper), the paper view
returns the papers with their chunks. ``rrf``, ``linear`` and ``rrf-client`` fetch size x cap
hits instead and apply the cap here. Inside one paper there is no cap
(:func:`querybuilder.plan.per_paper_cap`).
Options that add detail never change what ranks: with ``collapse``, ``explain`` and the rescored
scores of the inner hits come from a second request on the shown chunks (:func:`detail_pass`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from elasticsearch.dsl import Search

from indexer.embedder import model_key
from querybuilder.dsl import INNER_HITS_NAME
from querybuilder.plan import MAX_RESULT_WINDOW, QueryPlan
from querybuilder.results import (
    Hit,
    PaperHit,
    ScoreParts,
    SearchResult,
    cap_hits,
    group_papers,
    parse_explanation,
    to_hit,
)
from scholar_es.errors import ConfigError, ModelMismatchError, ScholarEsError

RRF_K = 60


# --- model checks ---------------------------------------------------------------------------
def index_meta(es, index: str) -> dict:
    """``_meta`` of the index behind ``index`` (an alias), with ``dims`` from the mapping if absent."""
    from elasticsearch import NotFoundError

    missing = ConfigError(
        f"index {index!r} not found; build it with `scholar-es index` (or pass the --prefix "
        "it was built with)"
    )
    try:
        body = es.indices.get_mapping(index=index).body
    except NotFoundError:
        raise missing from None
    if not body:  # a wildcard (from a prefix such as "a*") that matches no index
        raise missing
    metas = []
    for name, m in body.items():
        mapping = m.get("mappings", {})
        meta = dict(mapping.get("_meta") or {})
        if meta.get("dims") is None:
            meta["dims"] = mapping.get("properties", {}).get("vector", {}).get("dims")
        metas.append({**meta, "index": name})
    keyed = {(m.get("embedding_model"), m.get("dims")) for m in metas}
    if len(keyed) > 1:
        raise ModelMismatchError(
            f"{index!r} points to indices built with different models {sorted(map(str, keyed))}; "
            "point it at one index"
        )
    return metas[0]


def check_model(meta: dict, *, model: str | None = None, dims: int | None = None) -> None:
    """Raise ModelMismatchError when ``model``/``dims`` differ from the index's ``_meta``."""
    index, imodel, idims = meta.get("index", "?"), meta.get("embedding_model"), meta.get("dims")
    fix = f"embed the question with {imodel!r} (--model {imodel}) or rebuild the index with your model"
    if model is not None and imodel is not None and model_key(model) != model_key(imodel):
        raise ModelMismatchError(
            f"index {index!r} holds vectors of model {imodel!r} ({idims} dims), but the "
            f"question is embedded with {model!r}; {fix}"
        )
    if dims is not None and idims is not None and int(dims) != int(idims):
        raise ModelMismatchError(
            f"the query vector has {dims} dimensions but index {index!r} holds {idims}-dim "
            f"vectors of model {imodel!r}; {fix}"
        )


def embed_question(es, plan: QueryPlan, embedder=None) -> np.ndarray:
    """The question's vector, checked against the index's model and dims before any search."""
    return embed_noted(es, plan, embedder)[0]


def model_note(embedder, question: str) -> tuple[str, ...]:
    """A note when ``question`` is longer than ``embedder``'s model reads (its ``max_seq_length``
    tokens; the rest does not reach the vector). Counted only for a question that could be that
    long (every token has at least one character), and only where the embedder can count."""
    count = getattr(embedder, "token_count", None)
    if count is None or len(question) + 2 <= 128:
        return ()
    found = count(question)
    if found is None or found[0] <= found[1]:
        return ()
    return (
        f"the embedding model {getattr(embedder, 'name', '?')!r} reads the first {found[1]} of the "
        f"question's {found[0]} tokens; the vector is made from those",
    )


def embed_noted(es, plan: QueryPlan, embedder=None) -> tuple[np.ndarray, tuple[str, ...]]:
    """(:func:`embed_question`'s vector, :func:`model_note` of the question)."""
    meta = index_meta(es, plan.index)
    if embedder is None:
        from indexer.embedder import DEFAULT_MODEL, Embedder, default_backend

        # an index of int8 vectors gets int8 questions unless a backend was chosen
        held = meta.get("embedding_backend")
        backend = held if default_backend() == "auto" and held == "onnx-int8" else None
        embedder = Embedder(meta.get("embedding_model") or DEFAULT_MODEL, backend=backend)
    check_model(meta, model=getattr(embedder, "name", None))
    vector = np.asarray(embedder.encode([plan.question])[0], dtype=np.float32)
    check_model(meta, dims=int(vector.shape[0]))
    return vector, model_note(embedder, plan.question)


# --- fusion ---------------------------------------------------------------------------------
def rrf_fuse(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    """Reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009): score(d) = sum over the
    rankings that contain d of 1 / (k + rank), rank 1-based, k = 60 as in the paper. Ties keep
    the order in which the documents are first met going down the rankings in parallel."""
    if k < 1:
        raise ConfigError(f"the RRF rank constant must be at least 1, got {k}")
    scores: dict[str, float] = {}
    first: dict[str, int] = {}
    seen: list[set[str]] = [set() for _ in rankings]
    for depth in range(max((len(r) for r in rankings), default=0)):
        for ranking, met in zip(rankings, seen, strict=True):
            if depth < len(ranking):
                doc = ranking[depth]
                if doc in met:
                    continue  # a duplicate within one ranking counts once, at its best rank
                met.add(doc)
                scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + depth + 1)
                first.setdefault(doc, len(first))
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


def _collapsed(
    plan: QueryPlan, raw_hits: list[dict], detail: dict[str, dict] | None = None
) -> tuple[list[Hit], list[PaperHit]]:
    """(chunk view, paper view) of a collapsed answer; ``detail`` (:func:`detail_pass`): each
    chunk's final score and explanation, the chunks of a paper ordered by it. A paper's score is
    its head's (what ranked it)."""

    def chunk(raw: dict) -> Hit:
        found = detail.get(raw["_id"]) if detail is not None else None
        if found is None:
            return to_hit(raw)
        return to_hit({**raw, "_score": found.get("_score"), **_explained(found)})

    papers = []
    for raw in raw_hits:
        inner = raw.get("inner_hits", {}).get(INNER_HITS_NAME, {}).get("hits", {}).get("hits", [])
        chunks = sorted((chunk(h) for h in inner), key=lambda h: -h.score) or [chunk(raw)]
        top = to_hit(raw)
        papers.append(PaperHit(paper_id=top.paper_id, title=top.title, score=top.score, chunks=chunks))
    flat = [h for p in papers for h in p.chunks]
    if plan.sort == "relevance":
        flat.sort(key=lambda h: -h.score)  # stable: paper order on ties
    return flat[: plan.size], papers


def _explained(raw: dict) -> dict:
    return {"_explanation": raw["_explanation"]} if "_explanation" in raw else {}


def _total(resp: dict) -> int | None:
    t = resp.get("hits", {}).get("total")
    return t.get("value") if isinstance(t, dict) else t


def check_item(resp: dict) -> dict:
    if "error" in resp:
        err = resp["error"]
        reason = err.get("reason") if isinstance(err, dict) else err
        raise ScholarEsError(f"_msearch item failed ({resp.get('status')}): {reason}")
    return resp


def _common(plan: QueryPlan, strategy_name: str | None) -> dict:
    return {
        "question": plan.question,
        "strategy": strategy_name or plan.strategy,
        "intent_rule": plan.intent.rule,
        "search_type": plan.search_type,
        "index": plan.index,
        "notes": list(plan.notes),
    }


def run_fused(
    es, plan: QueryPlan, built: Sequence[Search], *, explain: bool = False, strategy_name: str | None = None
) -> SearchResult:
    """``rrf-client``: the searches ``built`` for ``plan`` in ONE ``_msearch``, fused here with
    :func:`rrf_fuse`."""
    bodies = [s.extra(explain=True).to_dict() if explain else s.to_dict() for s in built]
    resp = es.msearch(index=plan.index, searches=[x for b in bodies for x in ({}, b)]).body
    legs = [check_item(r) for r in resp["responses"]]
    by_id: dict[str, tuple[dict, dict[str, int], list[dict]]] = {}
    for leg_name, leg in zip(("bm25", "dense"), legs, strict=True):
        for rank, raw in enumerate(leg["hits"]["hits"], start=1):
            entry = by_id.setdefault(raw["_id"], (raw, {}, []))
            entry[1].setdefault(leg_name, rank)
            if "_explanation" in raw:
                entry[2].append(raw["_explanation"])
    fused = rrf_fuse([[h["_id"] for h in leg["hits"]["hits"]] for leg in legs], k=plan.profile.rank_constant)
    hits = []
    for doc_id, score in fused:
        raw, ranks, expls = by_id[doc_id]
        hit = to_hit({k: v for k, v in raw.items() if k != "_explanation"}, score=score)
        if explain:
            parts = [parse_explanation(e) for e in expls]
            hit.explanation = ScoreParts(
                total=score,
                ranks=ranks,
                bm25={k: v for p in parts for k, v in p.bm25.items()},
                knn=next((p.knn for p in parts if p.knn is not None), None),
            )
        hits.append(hit)
    return SearchResult(
        **_common(plan, strategy_name),
        total=_total(legs[0]),
        took_ms=max(int(leg.get("took", 0)) for leg in legs),
        hits=cap_hits(hits, plan.size, plan.cap),
        papers=group_papers(hits, plan.size, plan.cap) if plan.papers else [],
        request=bodies,
    )


def detail_pass(es, plan: QueryPlan, body: dict, ids: list[str], *, explain: bool) -> dict[str, dict]:
    """The hits ``ids`` scored again by the very request ``body`` (its query and rescore, no
    ``collapse``), restricted to them by an ``ids`` filter, with ``explain`` if asked: ``_id`` ->
    raw hit.

    Elasticsearch neither rescores nor (without ``inner_hits.explain``) explains a collapsed
    group's inner hits: they keep their first-pass scores while the group's head is rescored
    (reference/search/search-your-data/collapse-search-results.html, "Rescore collapse results":
    the rescorer runs on the top document of each group). This pass gives every shown chunk the
    score of the formula that ranked its paper: the same query (filters, knn pre-filter and BM25
    statistics unchanged; the ``ids`` filter only restricts) and the same rescore, its window
    widened to cover every id (a hit's rescored score does not depend on the window it is in)."""
    detail = {k: v for k, v in body.items() if k not in ("collapse", "from", "size")}
    detail["query"] = {"bool": {"must": [body["query"]], "filter": [{"ids": {"values": ids}}]}}
    detail["size"] = len(ids)

    def widened(rescorer: dict) -> dict:
        window = max(int(rescorer.get("window_size", 10)), len(ids))
        return {**rescorer, "window_size": min(window, MAX_RESULT_WINDOW)}

    if isinstance(detail.get("rescore"), dict):
        detail["rescore"] = widened(detail["rescore"])
    elif isinstance(detail.get("rescore"), list):  # every phase covers every id: the last one scores them
        detail["rescore"] = [widened(r) for r in detail["rescore"]]
    if explain:
        detail["explain"] = True
    resp = es.search(index=plan.index, body=detail).body
    return {h["_id"]: h for h in resp["hits"]["hits"]}


def _collapsed_ids(raw_hits: list[dict]) -> list[str]:
    ids = []
    for raw in raw_hits:
        ids.append(raw["_id"])
        inner = raw.get("inner_hits", {}).get(INNER_HITS_NAME, {}).get("hits", {}).get("hits", [])
        ids.extend(h["_id"] for h in inner)
    return list(dict.fromkeys(ids))


def run_single(
    es, plan: QueryPlan, built: Search, *, explain: bool = False, strategy_name: str | None = None
) -> SearchResult:
    """The one ``_search`` ``built`` for ``plan``; the per-paper cap from ``collapse`` or applied
    here. ``explain`` never changes what is sent for ranking: without ``collapse`` the body
    carries ``explain`` (which changes no score); with ``collapse`` the ranking request is sent as
    it is and the shown chunks are explained by :func:`detail_pass`, which also gives the inner
    hits of a rescored search their rescored scores."""
    collapsed = plan.collapse and plan.cap > 0
    body = built.extra(explain=True).to_dict() if explain and not collapsed else built.to_dict()
    resp = es.search(index=plan.index, body=body).body
    raw_hits = resp["hits"]["hits"]
    common = {**_common(plan, strategy_name), "total": _total(resp), "took_ms": int(resp.get("took", 0))}
    if collapsed:
        detail = None
        if raw_hits and (explain or "rescore" in body):
            detail = detail_pass(es, plan, body, _collapsed_ids(raw_hits), explain=explain)
        flat, paper_hits = _collapsed(plan, raw_hits, detail)
        return SearchResult(**common, hits=flat, papers=paper_hits if plan.papers else [], request=body)
    hits = [to_hit(h) for h in raw_hits]
    return SearchResult(
        **common,
        hits=cap_hits(hits, plan.size, plan.cap),
        papers=group_papers(hits, plan.size, plan.cap) if plan.papers else [],
        request=body,
    )
