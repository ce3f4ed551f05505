"""Run a question against a cluster or the embedded engine and return ranked, typed results.

Everything is ranked inside Elasticsearch (or the embedded engine) except ``rrf-client``, whose
fusion (:func:`rrf_fuse`) runs here over the two rankings of ONE ``_msearch``. Before any search
the index's ``_meta`` (``embedding_model``, ``dims``) is read with ``indices.get_mapping``; a
query vector of another dimension, or an embedder of another model, raises
:class:`~scholar_es.errors.ModelMismatchError`.

Per-paper cap: ``collapse`` on ``paper_id`` with ``inner_hits`` (size = cap) for the strategies
that run one query; the chunk view flattens the inner hits of the top ``size`` papers and keeps
the best ``size`` chunks (exactly the top chunks with at most ``cap`` per paper), the paper view
returns the papers with their chunks. ``rrf``, ``linear`` and ``rrf-client``, and any search with
``explain`` (Elasticsearch explains only the top hit of each collapsed group), fetch size x cap
hits instead and apply the cap here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from indexer.embedder import model_key
from querybuilder.dsl import INNER_HITS_NAME, build_one, build_search
from querybuilder.plan import Filters, QueryPlan, get_strategy
from querybuilder.profiles import Profile
from scholar_es.errors import ConfigError, ModelMismatchError, ScholarEsError

SNIPPET_CHARS = 300
RRF_K = 60


class ScoreParts(BaseModel):
    """A hit's score taken apart from Elasticsearch's ``_explanation``."""

    total: float
    #: BM25 per field: the sum of the field's term scores (field boost included, before
    #: dis_max tie-breaking and saturation)
    bm25: dict[str, float] = {}
    #: what the text part adds to the score (hybrid: bm25_weight * saturation(BM25, k))
    text: float | None = None
    #: what the kNN part adds (similarity score x knn weight)
    knn: float | None = None
    #: the section multiplier applied (1.0 when no function matched)
    section_multiplier: float | None = None
    #: rrf-client: the hit's 1-based rank in each leg it appears in
    ranks: dict[str, int] = {}


class Hit(BaseModel):
    chunk_id: str
    paper_id: str
    section_type: str = ""
    section_heading: str = ""
    title: str = ""
    year: int | None = None
    venue: str | None = None
    score: float
    snippet: str = ""
    #: the whole chunk text (``snippet`` is its first ~300 characters)
    chunk_text: str = ""
    #: the source paragraphs the chunk covers (``<paper>#<section>.<paragraph>``, ``<paper>#abs``)
    paragraph_ids: list[str] = []
    explanation: ScoreParts | None = None


class PaperHit(BaseModel):
    paper_id: str
    title: str = ""
    score: float
    chunks: list[Hit]


class SearchResult(BaseModel):
    question: str
    strategy: str
    intent_rule: str
    search_type: str
    index: str
    total: int | None
    took_ms: int
    hits: list[Hit]
    papers: list[PaperHit] = []
    request: dict | list


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
    return vector


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


# --- explanations ---------------------------------------------------------------------------
_WEIGHT = re.compile(r"^weight\((?:Synonym\()?([^:\s()]+):")


def parse_explanation(expl: dict) -> ScoreParts:
    """Score parts from an ``_explanation`` tree (Elasticsearch's and the engine's wording)."""
    parts = ScoreParts(total=float(expl.get("value", 0.0)))
    bm25: dict[str, float] = {}

    def walk(node: dict, factor: float = 1.0) -> None:
        desc, value = str(node.get("description", "")), float(node.get("value", 0.0))
        details = node.get("details") or []
        m = _WEIGHT.match(desc)
        if m:
            bm25[m[1]] = bm25.get(m[1], 0.0) + value * factor
            return
        boosts = [d for d in details if d.get("description") == "boost"]
        if desc.startswith("product of") and len(boosts) == 1:
            # a query boost shown as its own factor (the engine's style; Elasticsearch folds field
            # boosts into each term's BM25 "boost" node instead)
            for d in details:
                if d is not boosts[0]:
                    walk(d, factor * float(boosts[0].get("value", 1.0)))
            return
        if desc.startswith("within top k"):
            parts.knn = (parts.knn or 0.0) + value
            return
        if any(d.get("description") == "primaryWeight" and not d.get("value") for d in details):
            return  # a rescored hit's first pass, weighted 0 (hybrid's rescore replaces it)
        if desc.startswith("script score function") and "cosineSimilarity" in desc:
            parts.knn = (parts.knn or 0.0) + value  # the rescore's vector part
            return
        if desc.startswith("script score function") and parts.text is None:
            parts.text = value
        if desc.startswith("min of") and any(str(d.get("description")) == "maxBoost" for d in details):
            parts.section_multiplier = value
        for d in details:
            walk(d, factor)

    walk(expl)
    parts.bm25 = bm25
    return parts


# --- hits -----------------------------------------------------------------------------------
def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    cut = text[:limit]
    return (cut[: cut.rfind(" ")] if " " in cut[limit // 2 :] else cut) + " …"


def to_hit(raw: dict, score: float | None = None) -> Hit:
    src = raw.get("_source") or {}
    return Hit(
        chunk_id=str(src.get("chunk_id") or raw.get("_id")),
        paper_id=str(src.get("paper_id", "")),
        section_type=src.get("section_type") or "",
        section_heading=src.get("section_heading") or "",
        title=src.get("title") or "",
        year=src.get("year"),
        venue=src.get("venue"),
        score=float(score if score is not None else (raw.get("_score") or 0.0)),
        snippet=snippet(src.get("chunk_text", "")),
        chunk_text=src.get("chunk_text") or "",
        paragraph_ids=[str(p) for p in src.get("paragraph_ids") or []],
        explanation=parse_explanation(raw["_explanation"]) if "_explanation" in raw else None,
    )


def group_papers(hits: list[Hit], n: int, cap: int) -> list[PaperHit]:
    """The first ``n`` papers in hit order, each with at most ``cap`` chunks (0 = all)."""
    papers: dict[str, PaperHit] = {}
    for h in hits:
        p = papers.get(h.paper_id)
        if p is None:
            if len(papers) >= n:
                continue
            p = papers[h.paper_id] = PaperHit(paper_id=h.paper_id, title=h.title, score=h.score, chunks=[])
        if cap == 0 or len(p.chunks) < cap:
            p.chunks.append(h)
    return list(papers.values())


def cap_hits(hits: list[Hit], size: int, cap: int) -> list[Hit]:
    counts: dict[str, int] = {}
    out = []
    for h in hits:
        if cap and counts.get(h.paper_id, 0) >= cap:
            continue
        counts[h.paper_id] = counts.get(h.paper_id, 0) + 1
        out.append(h)
        if len(out) >= size:
            break
    return out


def _collapsed(plan: QueryPlan, raw_hits: list[dict]) -> tuple[list[Hit], list[PaperHit]]:
    papers = []
    for raw in raw_hits:
        inner = raw.get("inner_hits", {}).get(INNER_HITS_NAME, {}).get("hits", {}).get("hits", [])
        chunks = [to_hit(h) for h in inner] or [to_hit(raw)]
        top = to_hit(raw)
        papers.append(PaperHit(paper_id=top.paper_id, title=top.title, score=top.score, chunks=chunks))
    flat = sorted(
        (h for p in papers for h in p.chunks), key=lambda h: -h.score
    )  # stable: paper order on ties
    return flat[: plan.size], papers


def _total(resp: dict) -> int | None:
    t = resp.get("hits", {}).get("total")
    return t.get("value") if isinstance(t, dict) else t


def check_item(resp: dict) -> dict:
    if "error" in resp:
        err = resp["error"]
        reason = err.get("reason") if isinstance(err, dict) else err
        raise ScholarEsError(f"_msearch item failed ({resp.get('status')}): {reason}")
    return resp


def search(
    es,
    question: str,
    *,
    strategy: str = "hybrid",
    profile: Profile | str | None = None,
    embedder=None,
    size: int = 10,
    papers: bool = False,
    filters: Filters | dict | None = None,
    explain: bool = False,
    prefix: str = "",
    search_type: str | None = None,
    heads=None,
    show_plan: bool = False,
    crossencoder=None,
) -> SearchResult:
    """Rank ``question`` with ``strategy`` (any name of the registry, ``querybuilder.strategies``)
    on ``<prefix>chunks`` through the client ``es``.

    ``heads``: the heads of ``multihead``/``multihead-hybrid`` (a name or a ``Heads``);
    ``show_plan``/``crossencoder``: ``multisection`` only. An option given to a strategy that
    does not take it, and an empty or whitespace-only question, raise ConfigError.
    """
    from querybuilder import strategies

    return strategies.search(
        es,
        question,
        strategy=strategy,
        profile=profile,
        embedder=embedder,
        size=size,
        papers=papers,
        filters=filters,
        explain=explain,
        prefix=prefix,
        search_type=search_type,
        heads=heads,
        show_plan=show_plan,
        crossencoder=crossencoder,
    )


def run_plan(
    es, plan: QueryPlan, vector=None, *, explain: bool = False, strategy_name: str | None = None
) -> SearchResult:
    """Send ``plan``'s request with an already made ``vector`` and shape the answer (the plan's
    strategy runs it: :meth:`querybuilder.strategies.PlanStrategy.run`).

    ``strategy_name`` is what the result reports (callers that route the vector themselves,
    such as the multi-head strategies, name theirs; default: the plan's strategy).
    """
    return get_strategy(plan.strategy).run(es, plan, vector, explain=explain, strategy_name=strategy_name)


def _common(plan: QueryPlan, strategy_name: str | None) -> dict:
    return {
        "question": plan.question,
        "strategy": strategy_name or plan.strategy,
        "intent_rule": plan.intent.rule,
        "search_type": plan.search_type,
        "index": plan.index,
    }


def run_fused(
    es, plan: QueryPlan, vector=None, *, explain: bool = False, strategy_name: str | None = None
) -> SearchResult:
    """``rrf-client``: the two searches in ONE ``_msearch``, fused here with :func:`rrf_fuse`."""
    built = build_search(plan, vector)
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


def run_single(
    es, plan: QueryPlan, vector=None, *, explain: bool = False, strategy_name: str | None = None
) -> SearchResult:
    """One ``_search`` for ``plan``; the per-paper cap from ``collapse`` or applied here."""
    if explain and plan.collapse:  # Elasticsearch explains only each group's top hit: cap client-side
        plan = plan.with_changes(collapse=False)
    built = build_one(plan, vector)
    body = built.extra(explain=True).to_dict() if explain else built.to_dict()
    resp = es.search(index=plan.index, body=body).body
    raw_hits = resp["hits"]["hits"]
    common = {**_common(plan, strategy_name), "total": _total(resp), "took_ms": int(resp.get("took", 0))}
    if plan.collapse and plan.cap > 0:
        flat, paper_hits = _collapsed(plan, raw_hits)
        return SearchResult(**common, hits=flat, papers=paper_hits if plan.papers else [], request=body)
    hits = [to_hit(h) for h in raw_hits]
    return SearchResult(
        **common,
        hits=cap_hits(hits, plan.size, plan.cap),
        papers=group_papers(hits, plan.size, plan.cap) if plan.papers else [],
        request=body,
    )
