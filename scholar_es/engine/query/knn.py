"""k-nearest-neighbour search over dense_vector fields: exact (brute force, float32), or
through an HNSW graph for large fields mapped with an hnsw type (:mod:`engine.index.hnsw`).

Elasticsearch answers kNN approximately (HNSW, by default on int8/bbq-quantized vectors). The
embedded engine computes the exact neighbours and the exact float similarity -- what a cluster
returns for ``index_options.type: flat`` -- for flat/bbq types and for fields under
:data:`engine.index.hnsw.GRAPH_THRESHOLD` vectors; above it, hnsw/int8_hnsw/int4_hnsw fields take
``num_candidates`` candidates from the graph their last base saved (:func:`approximate`) plus
every newer row, all re-scored exactly.
The score conversions are in :func:`engine.query.similarity.knn_score`.
"""

from __future__ import annotations

import math

import numpy as np

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
    x_content_parse_error,
)
from scholar_es.engine.index import hnsw
from scholar_es.engine.query import similarity as sim
from scholar_es.engine.query.dsl import _check_params, _float
from scholar_es.engine.query.nodes import Ctx, Node, expl
from scholar_es.engine.search.hits import order_by_score

KNN_PARAMS = {
    "field",
    "query_vector",
    "k",
    "num_candidates",
    "filter",
    "similarity",
    "boost",
    "_name",
    "query_vector_builder",
    "inner_hits",
    "rescore_vector",
}
MAX_CANDIDATES = 10_000
_NO_VECTOR_SEARCH = "either [query_vector_builder] or [query_vector] must be provided"  # KnnSearchBuilder
_NO_VECTOR_QUERY = "either [query_vector] or [query_vector_builder] must be provided"  # KnnVectorQueryBuilder


def _vector_field(ctx: Ctx, field: str, qv: np.ndarray):
    """(field spec, column or None) of a kNN field; errors as Elasticsearch's for a missing or
    non-vector field and a query vector of other dimensions."""
    fs = ctx.seg.mapping.get(field)
    if fs is None:
        raise illegal_argument(f"field [{field}] does not exist in the mapping")
    if fs.type != "dense_vector":
        raise illegal_argument(
            f"[knn] queries are only supported on [dense_vector] fields, field [{field}] is of "
            f"type [{fs.type}]"
        )
    col = ctx.seg.vectors.get(field)
    dims = fs.dims or (col.dims if col is not None else None)
    if dims is not None and qv.shape[0] != dims:
        raise illegal_argument(
            f"The query vector has a different number of dimensions [{qv.shape[0]}] than the "
            f"document vectors [{dims}]."
        )
    return fs, col


def _zero_magnitude(qv: np.ndarray):
    return illegal_argument(
        "The [cosine] similarity does not support vectors with zero magnitude. "
        "Preview of invalid vector: " + str(qv[:5].tolist())
    )


def raw_similarity(ctx: Ctx, field: str, qv: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """(raw similarity per doc, has-vector mask, similarity name); for l2_norm the squared distance."""
    fs, col = _vector_field(ctx, field, qv)
    if col is None or col.dims is None:
        return np.zeros(ctx.n), np.zeros(ctx.n, dtype=bool), fs.similarity or "cosine"
    m = col.matrix
    dots = m @ qv  # float32 BLAS, as Lucene's VectorUtil computes in float
    kind = fs.similarity or "cosine"
    if kind == "cosine":
        qn = np.float32(np.linalg.norm(qv))
        if qn == 0:
            raise _zero_magnitude(qv)
        with np.errstate(divide="ignore", invalid="ignore"):
            raw = dots / (col.norms() * qn)
    elif kind == "l2_norm":
        diff = m - qv
        raw = np.einsum("ij,ij->i", diff, diff)
    else:
        raw = dots
    return np.where(col.present, raw, 0.0).astype(np.float64), col.present, kind


def subset_raw(col, kind: str, qv: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """:func:`raw_similarity` of the documents at ``pos`` only, each row's value independent of
    which other rows are scored (``einsum`` per row; the full pass's BLAS product may differ from
    it in the last float32 bit, by summation order)."""
    m = col.rows(pos)
    if kind == "l2_norm":
        diff = m - qv
        raw = np.einsum("ij,ij->i", diff, diff)
    else:
        raw = np.einsum("ij,j->i", m, qv)
        if kind == "cosine":
            qn = np.float32(np.linalg.norm(qv))
            with np.errstate(divide="ignore", invalid="ignore"):
                raw = raw / (np.linalg.norm(m, axis=1).astype(np.float32) * qn)
    return raw.astype(np.float64)


#: a filtered graph search that keeps fewer than ``k`` documents is done again this much wider
WIDEN = 4
#: nodes a graph search visits per candidate it returns, roughly (its neighbours checked): a wider
#: search visiting more nodes than the filter matches costs more than scoring those exactly
VISITS_PER_CANDIDATE = 4


def approximate(
    ctx: Ctx,
    field: str,
    qv: np.ndarray,
    k: int,
    nc: int,
    filter_mask: np.ndarray | None,
    threshold: float | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, str] | None:
    """(top-k positions ascending, their unboosted scores, their raw similarity, similarity name)
    through the field's HNSW graph, or None when the exact path answers (a flat/bbq type, a field
    whose base had no graph). The rows newer than the graph (delta files, unsaved writes; at most
    ``MERGE_RATIO`` of the base) are all candidates, as if their segment were searched exactly
    and merged (docs/storage.md). Lucene's filtered search
    (AbstractKnnVectorQuery#getLeafResults): when the filter's matching count is at most
    ``num_candidates``, or so small that the graph would visit more nodes than it (here: the
    oversampled candidate count ``nc * graph size / matching in the graph`` exceeds it), the
    filtered documents are scored exactly; otherwise the graph's candidates are post-filtered.
    Where fewer than ``min(k, matching)`` survive (the documents let through lie away from the
    query), the graph is searched again :data:`WIDEN` times wider, as Lucene's search visits on
    until it has k accepted nodes, while such a search visits fewer nodes than the filter matches
    (:data:`VISITS_PER_CANDIDATE`); past that, the filtered documents are scored exactly, as
    Lucene does when its visit limit (the filter's count) is reached."""
    fs, col = _vector_field(ctx, field, qv)
    if col is None or col.dims is None:
        return None
    graph = hnsw.searchable(col, hnsw.graph_params(fs))
    if graph is None:
        return None
    kind = fs.similarity or "cosine"
    if kind == "cosine" and not np.any(qv):
        raise _zero_magnitude(qv)
    seqs = ctx.seg.seqs
    tail = int(np.searchsorted(seqs, graph.hw, side="right"))  # rows from here are not in the graph
    present = col.present
    if filter_mask is None:
        head_cost = _count(present, tail, None)
        cost = head_cost + _count(present, len(seqs), None, tail)
    else:
        head_cost = _count(present, tail, filter_mask)
        cost = head_cost + _count(present, len(seqs), filter_mask, tail)
    cand: np.ndarray | None = None
    if cost > nc and head_cost:
        count = math.ceil(nc * graph.size / head_cost)
        while count <= head_cost:
            keys = graph.search(qv, count, nc)
            pos = np.searchsorted(seqs[:tail], keys)
            ok = pos < tail
            ok[ok] = seqs[pos[ok]] == keys[ok]
            found = pos[ok]
            found = (
                found[present[found]] if filter_mask is None else found[present[found] & filter_mask[found]]
            )
            if len(found) >= min(k, head_cost):
                newer = tail + np.flatnonzero(
                    present[tail:] if filter_mask is None else present[tail:] & filter_mask[tail:]
                )
                cand = np.concatenate([np.sort(found), newer])
                break
            # too few let through near the query: wider, as Lucene's filtered search visits on
            # past rejected nodes, while it visits fewer nodes than the filter matches
            count *= WIDEN
            if count * VISITS_PER_CANDIDATE > head_cost:
                break
    if cand is None:  # exact over the allowed documents
        cand = np.flatnonzero(present if filter_mask is None else present & filter_mask)
    raw = subset_raw(col, kind, qv, cand)
    if threshold is not None:
        keep = within_threshold(kind, raw, threshold)
        cand, raw = cand[keep], raw[keep]
    score = knn_scores(kind, raw)
    if len(cand) > k:
        top = np.sort(order_by_score(np.arange(len(cand)), score, k))  # ties: lower position first
        cand, score, raw = cand[top], score[top], raw[top]
    return cand.astype(np.int64), score, raw, kind


def _count(present: np.ndarray, stop: int, mask: np.ndarray | None, start: int = 0) -> int:
    """Documents with a vector (and allowed by ``mask``) among positions ``start..stop``."""
    if mask is None:
        return int(np.count_nonzero(present[start:stop]))
    return int(np.count_nonzero(present[start:stop] & mask[start:stop]))


def knn_scores(kind: str, raw: np.ndarray) -> np.ndarray:
    """A knn query's _score from the raw similarity: :func:`engine.query.similarity.knn_score`,
    rounded to float32, cosine clamped at 0 (Lucene clamps (1 + cos) / 2 at 0)."""
    score = sim.knn_score(kind, raw).astype(np.float32).astype(np.float64)
    return np.maximum(score, 0.0) if kind == "cosine" else score


def within_threshold(kind: str, raw: np.ndarray, threshold: float) -> np.ndarray:
    """The knn ``similarity`` parameter: an l2_norm distance (``raw`` is its square) at most
    ``threshold``, any other similarity at least ``threshold``."""
    return (np.sqrt(raw) <= threshold) if kind == "l2_norm" else (raw >= threshold)


def _query_vector(spec: dict) -> np.ndarray:
    if "query_vector_builder" in spec:
        raise unsupported("knn.query_vector_builder", "embed the question client-side and send query_vector")
    qv = spec.get("query_vector")
    if qv is None:
        raise illegal_argument(_NO_VECTOR_SEARCH)
    try:
        vec = np.asarray(qv, dtype=np.float32)
    except (TypeError, ValueError):
        raise parsing_error("[knn] failed to parse field [query_vector]") from None
    if vec.ndim != 1 or not np.all(np.isfinite(vec)):
        raise parsing_error(
            "[knn] failed to parse field [query_vector]: expected a flat array of finite numbers"
        )
    return vec


class KnnNode(Node):
    """The top-k neighbours among the docs its own ``filter`` allows, scored by similarity x boost:
    exact, or from the HNSW graph's candidates (:func:`approximate`).

    Only the clause's own filter pre-filters: a ``bool`` filter beside a knn query applies
    after the top k are chosen ("Filter approximate kNN results": pre-filtering only happens
    when the filter is part of the kNN clause itself).
    """

    def __init__(
        self,
        field: str,
        qv: np.ndarray,
        k: int | None,
        num_candidates: int | None,
        filters: list[Node],
        threshold: float | None,
        boost: float,
    ) -> None:
        self.field, self.qv, self.k, self.num_candidates = field, qv, k, num_candidates
        self.filters, self.threshold, self.boost = filters, threshold, boost

    top_level = False  # the search's ``knn`` option (k defaults to size) rather than the knn query

    def limits(self, ctx: Ctx) -> tuple[int, int] | None:
        """(k, num_candidates) of this search, validated; None when the field is unmapped, which
        matches nothing (KnnVectorQueryBuilder#doToQuery: a MatchNoDocsQuery since 8.16,
        search.vectors/40_knn_search.yml "Test nonexistent field is match none")."""
        k = self.k if self.k is not None else ctx.default_k
        nc = self.num_candidates if self.num_candidates is not None else round(min(MAX_CANDIDATES, 1.5 * k))
        if self.k is None and not self.top_level:
            # the knn query without k keeps its num_candidates (given, or 1.5 x size) best documents
            # (KnnVectorQueryBuilder#doToQuery, ESKnnFloatVectorQuery with a null kParam;
            # search.vectors/140_knn_query_with_other_queries.yml "dis_max query with knn query")
            k = nc
        _validate_k(k, nc)
        if ctx.seg.mapping.get(self.field) is None:
            return None
        _vector_field(ctx, self.field, self.qv)  # field errors before filter errors
        return k, nc

    def _run(self, ctx: Ctx):
        limits = self.limits(ctx)
        if limits is None:
            self._raw, self._kind = np.zeros(ctx.n), "none"
            return np.zeros(ctx.n, dtype=bool), np.zeros(ctx.n)
        k, nc = limits
        fmask = None
        for f in self.filters:
            m = f.run(ctx)[0]
            fmask = m if fmask is None else fmask & m
        approx = approximate(ctx, self.field, self.qv, k, nc, fmask, self.threshold)
        if approx is not None:
            cand, top, raw_top, kind = approx
            mask, score, raw = np.zeros(ctx.n, dtype=bool), np.zeros(ctx.n), np.zeros(ctx.n)
            mask[cand], score[cand], raw[cand] = True, top, raw_top
            self._raw, self._kind = raw, kind
            return mask, np.where(mask, score * self.boost, 0.0)
        raw, present, kind = raw_similarity(ctx, self.field, self.qv)
        allowed = present.copy() if fmask is None else present & fmask
        if self.threshold is not None:
            allowed &= within_threshold(kind, raw, self.threshold)
        score = knn_scores(kind, raw)
        cand = np.flatnonzero(allowed)
        if len(cand) > k:
            # highest score first, ties by doc order; argpartition-based, O(n) rather than a full sort
            cand = np.sort(order_by_score(cand, score, k))
        mask = np.zeros(ctx.n, dtype=bool)
        mask[cand] = True
        self._raw, self._kind = raw, kind
        return mask, np.where(mask, score * self.boost, 0.0)

    def explain(self, pos: int) -> dict:
        base = self.scores[pos] / (self.boost or 1.0)
        e = expl(
            self.scores[pos],
            f"within top k documents (k={self.k}), similarity [{self._kind}] raw {float(self._raw[pos]):.6g}",
            [expl(base, "vector score"), expl(self.boost, "boost")],
        )
        return e


def _validate_k(k: int, nc: int) -> None:
    if k < 1:
        raise illegal_argument("[k] must be greater than 0")
    if nc < k:
        raise illegal_argument("[num_candidates] cannot be less than [k]")
    if nc > MAX_CANDIDATES:
        raise illegal_argument(f"[num_candidates] cannot exceed [{MAX_CANDIDATES}]")


def parse_knn(parser, spec: dict, top_level: bool = False) -> KnnNode:
    """A knn object, as the top-level search option or as the ``knn`` query."""
    _check_params("knn", spec, KNN_PARAMS)
    for bad in ("inner_hits", "rescore_vector"):
        if bad in spec:
            raise unsupported(f"knn.{bad}")
    if "field" not in spec:
        raise parsing_error("[knn] requires field [field]")
    k = spec.get("k")
    nc = spec.get("num_candidates")
    for name, v in (("k", k), ("num_candidates", nc)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise parsing_error(f"[knn] failed to parse field [{name}]")
    filt = spec.get("filter")
    filters = [] if filt is None else [parser.parse(f) for f in (filt if isinstance(filt, list) else [filt])]
    threshold = _float("knn", "similarity", spec["similarity"]) if "similarity" in spec else None
    node = KnnNode(
        spec["field"],
        _query_vector(spec),
        k,
        nc,
        filters,
        threshold,
        _float("knn", "boost", spec.get("boost", 1.0)),
    )
    if k is not None or nc is not None:
        _validate_k(k if k is not None else 1, nc if nc is not None else MAX_CANDIDATES)
    node.top_level = top_level
    if top_level and "_name" in spec and parser.named is not None:
        parser.named.append((str(spec["_name"]), node))  # KnnSearchBuilder#queryName
    return node


def constructor_error(e: EsError) -> EsError:
    """KnnVectorQueryBuilder's and KnnSearchBuilder's constructor checks (k, num_candidates, a
    missing query vector) fail inside their ConstructingObjectParser, which Elasticsearch reports
    as an x_content_parse_exception caused by the illegal argument
    (search.vectors/190_knn_query-with-k-param.yml "Incorrect k param")."""
    if e.type == "illegal_argument_exception" and e.reason.startswith(
        ("[k] ", "[num_candidates] ", "either [query_vector")
    ):
        return x_content_parse_error("Failed to build [knn] after last required field arrived", e)
    return e


def knn_query(parser, spec: dict) -> KnnNode:
    """The ``knn`` query (KnnVectorQueryBuilder)."""
    try:
        return parse_knn(parser, spec)
    except EsError as e:
        if e.reason == _NO_VECTOR_SEARCH:  # the query's own wording (QUERY_VECTOR_FIELD first)
            e = illegal_argument(_NO_VECTOR_QUERY)
        raise constructor_error(e) from None
