"""The best hits of a score-ordered search without scoring every match (issue 29).

A search that wants only its best ``from + size`` hits by score, and counts its matches no further
than ``track_total_hits`` (10,000 by default), does not need the score of every document it
matches. Lucene's collectors skip the documents whose best possible score cannot reach the k-th
best found so far (MaxScore and block-max WAND over blocks of postings, with each block's maximum
impact). Here the blocks are the segment's runs of equal rows (:mod:`engine.index.segment.runs`):
in a ``multi_match`` over a chunk's title, abstract and text, the title and abstract fields score
every document of a run alike, so within a *piece* (a range of documents over which every
run-scored field is constant) the query's score grows with the one per-document field's score
alone, and the piece's best document is the one where that field scores highest. Its score is
known from one pass over that field's sums (:func:`_piece_maxima`), without the combination, the
script or the ordering of every matched document.

1. Each piece's maximum, in float64 from the same float32 term scores as the sparse path
   (:mod:`engine.query.sparse`; the per-document field's sums in float32, a bound only), through
   the query's monotone wrappers (a ``script_score`` whose script only grows with ``_score``,
   boosts, the hybrid ``bool``'s boost).
2. A threshold: the k-th largest of those maxima, each the score of a distinct document, lowered
   by a margin (:data:`MARGIN`): at least k documents score that much (the other clauses of a
   hybrid ``bool`` only add scores >= 0), so the k-th best score is at least the threshold.
3. The candidates: the documents of the pieces whose maximum, raised by the same margin, reaches
   the threshold (each checked against its own bound too), and every document of the other
   clauses of a hybrid ``bool`` (its ``knn`` hits); any other document scores less than k others
   and is not among the best k, ties included. The candidates are scored exactly: the sparse
   path's operations in its order (:func:`_core_scores`: the run-scored fields' run sums, the
   per-document field's sum from 0.0 in clause order, the dis_max combination; then the script,
   the boosts and the bool's sum), so the same numbers. A rescore that repeats the text query
   reads its window's scores the same way (a ``sparse.Among`` memo entry).

A collapsed search (``collapse``) wants its best k *groups*: the threshold is then the k-th
largest, over distinct groups, of the maxima of the pieces that hold one group only (a piece of
several groups counts for none: its best document's group is unknown), so at least k groups have
a head scoring that much, and a document under it heads no group among the best k. The shown
groups' inner hits need every match of their group: :meth:`Top.score` scores those afterwards. A
rescore's window is the best ``window_size`` hits (or groups): they are among the candidates.

A ``bool`` holding the text (optional beside knn clauses, with ``minimum_should_match`` 1, or its one
``must`` clause) may hold ``filter`` and ``must_not`` clauses (the project's filtered requests,
``querybuilder.dsl.hybrid_query`` and ``bm25_query``): the documents they let through are found
once (:func:`_allowed`), a piece's best document is the best of those, a piece with none of them
matches nothing, the candidates and the other clauses' hits are those let through, and the count
is of matches let through (:func:`_at_least`).

The margins cover the rounding differences between the float64 bound and the exact float32
steps (each a relative 6e-8; :data:`MARGIN` is 1e-5). ``hits.total`` is then the number of
matches up to the count limit: the largest field's match count already exceeds it, so the
answer is ``{"value": limit, "relation": "gte"}`` as Elasticsearch gives it; where it does not,
or where the total must be exact (``track_total_hits: true``, ``rest_total_hits_as_int``), the
full path answers. Scripts are trusted only in a known monotone, non-negative form
(:func:`monotone_script`): ``saturation(_score, k)`` (the project's), products and sums with
non-negative constants or params; any other script, negative boost or tie_breaker outside [0, 1]
takes the full path.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scholar_es.engine.index.segment.runs import Runs
from scholar_es.engine.query import sparse
from scholar_es.engine.query.functions import FunctionScoreNode, ScriptScoreNode
from scholar_es.engine.query.knn import KnnNode
from scholar_es.engine.query.nodes import BoolNode, BoostNode, Ctx, DisMaxNode, Node, TermNode
from scholar_es.engine.script.parse import Node as ScriptNode

#: off: every search scores all its matches (the reference the tests compare the pruned path with)
ENABLED = True

#: relative margin between the float64 bound and the exact float32 scores (their rounding
#: differences are ~1e-7 relative, the scripts' monotonicity holds within a few ulps)
MARGIN = 1e-5

#: the per-document field's approximate sums are float32 up to this many terms: the relative
#: error of a float32 sum of m positive terms is at most m * 2**-24 (6e-8), well within MARGIN
MAX_FLOAT32_TERMS = 64

#: candidates above which each one's own bound is checked before it is scored exactly
MIN_DOC_BOUNDS = 256

#: pieces per document above which pruning reads about as much as scoring every document
MAX_PIECES_PER_DOC = 0.5


#: what may wrap a query's text core: a script that grows with ``_score`` (with its bound
#: function, :func:`_bound_function`, compiled once per search), a boost (None)
Wrapped = tuple["ScriptScoreNode | BoostNode", "ScoreFunction | None"]


@dataclass
class Top:
    """Documents (ascending) holding the best k, their exact scores (float64, as
    :func:`sparse.run_sparse` gives them), a lower bound of the number of matches (above the count
    limit), and :meth:`score` for any other documents (a collapse's inner hits)."""

    docs: np.ndarray
    scores: np.ndarray
    at_least: int
    _scorer: _Scorer

    def score(self, docs: np.ndarray) -> sparse.Hits:
        """The documents of ``docs`` (ascending) the query matches, and their exact scores."""
        return self._scorer.score(docs)


@dataclass
class _Scorer:
    """What scores any document exactly: the core's fields, its wrappers, the hybrid bool and
    the hits of its other clauses."""

    ctx: Ctx
    fields: Fields
    chain: list[Wrapped]
    outer: BoolNode | None
    others: list[Node]
    other_hits: list[sparse.Hits]
    #: the documents the outer bool's filter and must_not clauses let through (None: all)
    allowed: np.ndarray | None = None
    #: a function_score of weight functions around it all (:func:`_factor_range`)
    function: FunctionScoreNode | None = None
    #: the documents of the first :meth:`score` (the candidates) and the core's hits among them
    scored: tuple[np.ndarray, sparse.Hits] | None = None

    def score(self, docs: np.ndarray) -> sparse.Hits:
        """As the sparse path scores ``docs``: the core's operations (:func:`_core_scores`), the
        wrappers' (``sparse._script_score``, ``sparse._boost``), the bool's sum in clause order
        (``sparse._bool_of``) with the other clauses' hits among ``docs``; the documents its
        filters do not let through are not matches (``_bool_of`` drops them: here, before);
        then the function_score's factors (``sparse.function_values``)."""
        hit, scores = self._query_scores(docs)
        if self.function is None:
            return hit, scores
        return hit, sparse.function_values(self.function, self.ctx, hit, scores)

    def _query_scores(self, docs: np.ndarray) -> sparse.Hits:
        """:meth:`score` before the function_score."""
        if self.allowed is not None:
            docs = docs[self.allowed[docs]]
        hit, scores = _core_scores(self.fields, docs)
        if self.scored is None:
            self.scored = (docs, (hit, scores))
        scores = _through(self.chain, self.ctx, hit, scores)
        outer = self.outer
        if outer is None:
            return hit, scores
        scoring = BoolNode(outer.must, outer.should, [], [], outer.msm, outer.boost)  # filtered above
        if outer.must:
            return sparse._bool_of(scoring, self.ctx, [(hit, scores)], [])
        known = {
            id(q): sparse._among(hits, docs) for q, hits in zip(self.others, self.other_hits, strict=True)
        }
        should = [known.get(id(q), (hit, scores)) for q in outer.should]
        return sparse._bool_of(scoring, self.ctx, [], should)


def top_k(
    root: Node,
    ctx: Ctx,
    k: int,
    limit: int,
    groups: np.ndarray | None = None,
    group_runs: np.ndarray | None = None,
) -> Top | None:
    """The best ``k`` hits of ``root`` (with ``groups``, the collapse codes of every document, and
    ``group_runs``, each document's number of the run of equal codes it is in: the best ``k``
    group heads) and its matches counted past ``limit``; None: the query has no such form here
    (or is not worth it), and the full path must answer."""
    if not ENABLED or k <= 0 or ctx.restrict is not None:
        return None
    function = root if isinstance(root, FunctionScoreNode) else None
    factors = None  # the function's factors' range, where there is one
    if function is not None:  # the section multipliers around the hybrid (the sections strategy)
        factors = _factor_range(function)
        if factors is None:
            return None
        root = function.query
    shape = _shape(root)
    if shape is None:
        return None
    chain, core, outer, others = shape
    fields = _fields(core, ctx)
    if fields is None:
        return None
    other_hits = [sparse.run_sparse(q, ctx) for q in others]
    if any(len(s) and not s.min() >= 0 for _, s in other_hits):
        return None
    allowed = _allowed(outer, ctx)
    at_least = _at_least(fields, other_hits, allowed, limit)
    if at_least <= limit:
        return None  # the total must be exact: the full path counts every match
    pieces = _pieces(fields.per_run, ctx.n)
    if pieces is None:
        return None
    starts, ends = pieces.starts, pieces.ends
    acc = fields.approximate_sums(ctx.n)
    if allowed is not None:
        # the full path scores every text match before its filters apply: a script's NaN or an
        # overflow among the documents they drop is its error too, so the bounds of every match
        # must be representable as well (Elasticsearch, scoring only what the filters let through,
        # would answer; the engine's paths agree with each other)
        every = _bound(chain, outer, ctx, _piece_maxima(fields, acc, pieces) * (1 + MARGIN))
        if function is not None:
            every = _function_bounds(function, factors, every, every)[1]
        if not _representable(every):
            return None
        if acc is not None:
            acc[~allowed] = 0  # a piece's best document is one its filters let through
    best = _piece_maxima(fields, acc, pieces)
    if allowed is not None:  # a piece none of whose documents are let through matches nothing
        best[~np.logical_or.reduceat(allowed, starts)] = 0.0
    low, high = np.split(
        _bound(chain, outer, ctx, np.concatenate([best * (1 - MARGIN), best * (1 + MARGIN)])), 2
    )
    if function is not None:  # each document's factor lies within the function's range
        low, high = _function_bounds(function, factors, low, high)
    if not _representable(high):
        return None  # a NaN (the full path's error) or scores a float cannot hold: score every match
    # each matched piece's best document scores at least its low bound (the other clauses add
    # scores >= 0), and they are distinct documents: the k-th best score is at least the threshold
    matched = np.flatnonzero(best > 0)
    if groups is None:
        bounds = low[matched]
        if len(bounds) < k:
            return None
        kth: float | None = float(np.partition(bounds, len(bounds) - k)[len(bounds) - k])
    else:
        assert group_runs is not None
        kth = _kth_group_bound(groups, group_runs, starts, ends, matched, low, k)
    if kth is None:
        return None
    threshold = kth * (1 - MARGIN)
    if not threshold > 0:
        return None
    # a document outside the kept pieces scores at most its piece's high bound; inside them, at
    # most its own (the same bound from its own approximate sum), unless another clause matches
    # it too: those documents are candidates of their own
    keep = matched[high[matched] * (1 + MARGIN) >= threshold]
    cand = _ranges(starts[keep], ends[keep])
    if allowed is not None:
        cand = cand[allowed[cand]]
    if len(cand) > MIN_DOC_BOUNDS:
        own = _bound(chain, outer, ctx, _doc_bounds(fields, acc, cand) * (1 + MARGIN))
        if function is not None:  # each candidate's own factor: its bound through the function
            own = sparse.function_values(function, ctx, cand, own)
        if not _representable(own):
            return None
        cand = cand[own * (1 + MARGIN) >= threshold]
    if other_hits:
        extra = np.unique(np.concatenate([d for d, _ in other_hits]).astype(np.int64))
        extra = extra[~sparse._member(cand, extra)[0]]
        if allowed is not None:
            extra = extra[allowed[extra]]
        cand = np.insert(cand, np.searchsorted(cand, extra), extra)
    scorer = _Scorer(ctx, fields, chain, outer, others, other_hits, allowed, function)
    docs, scores = scorer.score(cand)
    if core.memo_key is not None and sparse.MEMO:  # a rescore repeating the text query reads it
        ctx.memo[core.memo_key] = sparse.Among(lambda among: _core_among(scorer, among))
    return Top(docs, scores, at_least, scorer)


def _core_among(scorer: _Scorer, among: np.ndarray) -> sparse.Hits:
    """The core's hits among ``among`` (ascending): read from the candidates' (each document's
    core score is its own, whatever else is scored with it) when they hold every one of
    ``among`` (a rescore window of the best hits), else scored (:func:`_core_scores`)."""
    if scorer.scored is not None:
        cand, hits = scorer.scored
        if not len(among) or sparse._member(cand, among)[0].all():
            return sparse._among(hits, among)
    return _core_scores(scorer.fields, among)


#: a function_score's score modes whose factor is one function's weight, or 1 where none applies
_ONE_WEIGHT_MODES = ("max", "min", "first")


def _factor_range(node: FunctionScoreNode) -> tuple[float, float] | None:
    """The smallest and largest factor a ``function_score`` of weight functions can give a
    document (1 where no function applies; capped at ``max_boost``), where its score only grows
    with its query's (``boost_mode`` multiply, a factor and boost >= 0, no ``min_score``); None:
    anything else, which the full path scores. Without functions the score is the query's as
    it is (FunctionFactorScorer.score): a factor of 1."""
    if node.min_score is not None or not node.boost >= 0:
        return None
    if not node.functions:
        return 1.0, 1.0
    if node.boost_mode != "multiply" or node.score_mode not in _ONE_WEIGHT_MODES:
        return None
    if any(kind != "weight" for _, kind, _, _ in node.functions):
        return None
    values = [1.0] + [1.0 if w is None else float(w) for _, _, _, w in node.functions]
    capped = [min(v, float(node.max_boost)) for v in values]
    if not all(v >= 0 for v in capped):  # NaN fails too
        return None
    return min(capped), max(capped)


def _function_bounds(
    node: FunctionScoreNode, factors: tuple[float, float] | None, low: np.ndarray, high: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the function_score's scores from bounds of its query's: the smallest of its
    ``factors`` (:func:`_factor_range`) times the low ones, the largest times the high ones, with
    the same float roundings as ``sparse.function_values`` (each monotone, so bounds stay bounds)."""
    assert factors is not None  # top_k took such functions only
    lo, hi = factors

    def through(scores: np.ndarray, factor: float) -> np.ndarray:
        sub = (scores * node.boost).astype(np.float32).astype(np.float64)
        return (sub * factor).astype(np.float32).astype(np.float64)

    return through(low, lo), through(high, hi)


def _allowed(outer: BoolNode | None, ctx: Ctx) -> np.ndarray | None:
    """The documents the outer bool's ``filter`` clauses all match and its ``must_not`` clauses
    do not, as a mask (None: it has neither; :func:`sparse.clause_mask`)."""
    if outer is None or not (outer.filter or outer.must_not):
        return None
    allowed: np.ndarray | None = None
    for q in outer.filter:
        mask = sparse.clause_mask(q, ctx)
        allowed = mask if allowed is None else np.logical_and(allowed, mask, out=allowed)
    if allowed is None:
        allowed = np.ones(ctx.n, dtype=bool)
    for q in outer.must_not:
        allowed &= ~sparse.clause_mask(q, ctx)
    return allowed


def _at_least(fields: Fields, other_hits: list[sparse.Hits], allowed: np.ndarray | None, limit: int) -> int:
    """A lower bound of the number of matches: the most any one field (or other clause) matches,
    among the documents let through (``allowed``); the run-scored fields' counts are only
    computed where the others do not already pass ``limit``."""
    if allowed is None:
        counts = [r.matches() for r, _ in fields.per_run] + [len(d) for d, _ in other_hits]
        counts += [len(d) for d, _ in fields.per_doc] if fields.per_doc is not None else []
        return max(counts, default=0)
    hits = other_hits + (fields.per_doc or [])
    best = max((int(np.count_nonzero(allowed[d])) for d, _ in hits), default=0)
    for r, _ in fields.per_run:
        if best > limit:
            break
        best = max(best, _allowed_matches(r, allowed))
    return best


def _allowed_matches(r: sparse.RunSums, allowed: np.ndarray) -> int:
    """:meth:`sparse.RunSums.matches` among the documents ``allowed`` lets through."""
    starts = r.runs.starts  # each run's first document, then the first past the runs
    in_runs = 0
    if len(starts) > 1 and r.matched.any():
        per_run = np.add.reduceat(allowed[: int(starts[-1])], starts[:-1], dtype=np.int64)
        in_runs = int(per_run[r.matched].sum())
    return in_runs + int(np.count_nonzero(allowed[r.past_docs()]))


#: bounds at or above this are not trusted: the scores are floats, and past the largest one the
#: full path's roundings (to infinity, or NaN from infinity) decide the order, not the bounds
_FLOAT_MAX = float(np.finfo(np.float32).max) / (1 + MARGIN) ** 2


def _representable(bounds: np.ndarray) -> bool:
    """Whether every bound is a number below the largest float (with the margins): NaN from a
    script (``saturation`` of an infinite value) or an overflow leaves pruning to the full path."""
    return not len(bounds) or bool(np.all(bounds < _FLOAT_MAX))  # NaN compares False


def _kth_group_bound(
    codes: np.ndarray,
    runs: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    matched: np.ndarray,
    low: np.ndarray,
    k: int,
) -> float | None:
    """The k-th largest, over distinct groups, of each group's highest low bound among the matched
    pieces that hold that group alone (None: fewer than k groups have one): at least k distinct
    groups have a document scoring that much (a piece of several groups counts for none: its best
    document's group is not known; a piece holds one group when its first and last documents are
    in the same run of equal codes, ``runs``).

    Only the pieces at or above the m-th best low bound of all matched pieces are looked at (m =
    4k, grown until k groups are among them): a group whose best piece is below that cut is below
    every group above it, whatever the cut, so once k groups are above the cut, the k-th best group
    is the one over all pieces. Which pieces hold one group is asked of those above the cut only
    (two gathers of the runs per piece: ~0.6 ms at 1M chunks when asked of every matched piece)."""
    lows_all = low[matched]
    m = 4 * k
    while True:
        if m < len(lows_all):
            top = matched[lows_all >= np.partition(lows_all, len(lows_all) - m)[len(lows_all) - m]]
        else:
            top = matched
        top = top[runs[starts[top]] == runs[ends[top] - 1]]  # the pieces of one group
        lows = low[top]
        order = np.argsort(-lows, kind="stable")
        _, first = np.unique(codes[starts[top[order]]], return_index=True)  # each group's best
        best = lows[order[first]]
        if len(best) >= k:
            return float(np.partition(best, len(best) - k)[len(best) - k])
        if m >= len(lows_all):
            return None
        m *= 4


# --- the query's shape ---------------------------------------------------------------------------


def _shape(root: Node) -> tuple[list[Wrapped], Node, BoolNode | None, list[Node]] | None:
    """(wrappers outermost first, each with a script's bound function, the text core, the hybrid
    bool or None, its other clauses)."""
    outer: BoolNode | None = None
    others: list[Node] = []
    node = root
    if isinstance(node, BoolNode) and not _core_field(node):
        if not node.boost >= 0:
            return None
        if node.must:  # bool.must = [text] with filters (bm25_query): the text's matches, let through
            if len(node.must) != 1 or node.should or node.msm != 0:
                return None
            outer, node = node, node.must[0]
        else:  # the hybrid: text and knn optional, filters beside them (hybrid_query)
            # with a filter, minimum_should_match 0 would match every filtered document
            if node.msm > 1 or ((node.filter or node.must_not) and node.msm != 1):
                return None
            texts = [q for q in node.should if not isinstance(q, KnnNode)]
            if len(texts) != 1:
                return None
            outer, others, node = node, [q for q in node.should if isinstance(q, KnnNode)], texts[0]
    chain: list[Wrapped] = []
    while isinstance(node, (ScriptScoreNode, BoostNode)):
        if not node.boost >= 0:
            return None
        f = None
        if isinstance(node, ScriptScoreNode):
            f = _bound_function(node)
            if node.min_score is not None or f is None:
                return None
        chain.append((node, f))
        node = node.query if isinstance(node, ScriptScoreNode) else node.inner
    if isinstance(node, DisMaxNode):
        if not node.queries or not 0 <= node.tie <= 1 or not node.boost >= 0:
            return None
        if not all(_core_field(q) for q in node.queries):
            return None
    elif not _core_field(node):
        return None
    return chain, node, outer, others


def _core_field(node: Node) -> bool:
    """A term query, or a bool of optional term queries on one field (a multi_match's field)."""
    if type(node) is TermNode:
        return node.boost >= 0
    return (
        isinstance(node, BoolNode)
        and sparse._optional_only(node)
        and node.boost >= 0
        and all(type(c) is TermNode and c.boost >= 0 for c in node.should)
        and len({c.field for c in node.should}) == 1
    )


def monotone_script(node: ScriptScoreNode) -> bool:
    """Whether the script's value never decreases as ``_score`` grows and is never negative for
    a non-negative ``_score``, whatever the document: ``_score``, non-negative number literals and
    params, ``saturation(x, k)`` with k > 0, ``a * b`` and ``a + b`` of such (not of two
    constants), ``a / c`` with c > 0 constant (nothing read from the document)."""
    return _bound_function(node) is not None


#: a script's value as a function of ``_score`` (float64 arrays), for bounds only
ScoreFunction = Callable[[np.ndarray], np.ndarray | float]


def _bound_function(node: ScriptScoreNode) -> ScoreFunction | None:
    """The script of a :func:`monotone_script` as a numpy function of ``_score`` (the same double
    operations as Painless; used for bounds only: candidates' scores come from the script engine
    itself); None: not such a script."""
    script = node.script
    got = _compile(script._root, script.params)
    return None if got is None else got[1]


def _compile(n: ScriptNode, params: dict) -> tuple[str, ScoreFunction] | None:
    """('score', f) for a value that grows with _score (>= 0), ('const', f) for a constant >= 0,
    None for anything else."""
    if n.op == "score":
        return "score", lambda x: x
    value = _constant(n, params)
    if value is not None:
        return ("const", lambda x: value) if value >= 0 else None
    if n.op == "func" and n.a[0] == "saturation":
        x, kk = n.a[1]
        k, inner = _constant(kk, params), _compile(x, params)
        if k is None or not k > 0 or inner is None:
            return None
        f = inner[1]
        return "score", lambda s: _saturation(f(s), k)
    if n.op == "arith" and len(n.a) == 3 and n.a[0] in ("*", "+", "/"):
        left, right = _compile(n.a[1], params), _compile(n.a[2], params)
        if left is None or right is None or left[0] == right[0] == "const":
            return None  # (Java arithmetic of two constants may overflow to a negative int)
        lf, rf = left[1], right[1]
        if n.a[0] == "/":
            d = _constant(n.a[2], params)
            return ("score", lambda s: lf(s) / d) if d is not None and d > 0 else None
        if n.a[0] == "*":
            return "score", lambda s: lf(s) * rf(s)  # non-negative, each nondecreasing
        return "score", lambda s: lf(s) + rf(s)
    return None


def _saturation(x, k: float):
    """Painless's ``saturation(value, k)``: value / (k + value), in double."""
    return x / (k + x)


def _constant(n: ScriptNode, params: dict) -> float | None:
    """A number literal's or a top-level numeric param's value (None: anything else)."""
    if n.op == "const" and n.a[0] in ("int", "long", "float", "double"):
        return float(n.a[1])
    if n.op == "param" and len(n.a) == 1 and len(n.a[0]) == 1 and n.a[0][0][0] == "field":
        value = params.get(n.a[0][0][1]) if isinstance(params, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and np.isfinite(value):
            return float(value)
    return None


# --- fields and pieces -----------------------------------------------------------------------------

RunField = tuple[sparse.RunSums, float]


@dataclass
class Fields:
    """A core's fields: those scored per run (their sums, the field's boost), at most one scored
    per document (its terms' hits, the field's boost; a term query's boost is in its scores), and
    the dis_max's tie_breaker and boost (0.0 and 1.0 for a single field)."""

    per_run: list[RunField]
    per_doc: list[sparse.Hits] | None
    per_doc_boost: float
    #: per field in clause order: its index in per_run, or -1 for the per-document field
    order: list[int]
    tie: float
    boost: float

    def approximate_sums(self, n: int) -> np.ndarray | None:
        """Per document: the per-document field's term scores summed in float32 (within
        :data:`MARGIN` of the exact sums for up to :data:`MAX_FLOAT32_TERMS` terms; float64
        beyond), unboosted; None: no such field. A bound only: half the bytes of the exact sums."""
        if self.per_doc is None:
            return None
        acc: np.ndarray = np.zeros(
            n, dtype=np.float32 if len(self.per_doc) <= MAX_FLOAT32_TERMS else np.float64
        )
        for docs, scores in self.per_doc:
            # a term's documents are distinct: ``acc[docs] += scores``, element for element, in one
            # pass (ufunc.at's fast path) instead of a gather, an add and a scatter (~2x at 1M)
            np.add.at(acc, docs, scores)
        return acc

    def exact_sums(self, cand: np.ndarray) -> np.ndarray:
        """Per candidate: 0.0 plus the per-document field's term scores there, added in clause
        order in float64 (what ``sparse._summed``'s ``bincount`` gives each document)."""
        assert self.per_doc is not None
        out = np.zeros(len(cand))
        for docs, scores in self.per_doc:
            hit, at = sparse._member(docs, cand)
            out[hit] += scores[at[hit]]
        return out


def _fields(core: Node, ctx: Ctx) -> Fields | None:
    """The core's fields (None: two fields scored per document, or a score or boost that is not
    positive, where a document's best score and whether it matches part ways)."""
    if isinstance(core, DisMaxNode):
        clauses, tie, boost = core.queries, float(core.tie), float(core.boost)
    else:
        clauses, tie, boost = [core], 0.0, 1.0
    per_run: list[RunField] = []
    per_doc: list[sparse.Hits] | None = None
    per_doc_boost = 1.0
    order: list[int] = []
    for q in clauses:
        terms = q.should if isinstance(q, BoolNode) else [q]
        field_boost = float(q.boost) if isinstance(q, BoolNode) else 1.0
        got = sparse._run_sums(terms, ctx)
        if got is not None:
            order.append(len(per_run))
            per_run.append((got, field_boost))
            continue
        if per_doc is not None:
            return None  # two fields scored per document: a piece's best is not one document's
        per_doc = [sparse._leaf(c, ctx) for c in terms]
        per_doc_boost = field_boost
        order.append(-1)
    if not per_run or not all(b > 0 for b in [boost, per_doc_boost] + [b for _, b in per_run]):
        return None
    lowest = [r.lowest for r, _ in per_run] + [float(s.min()) for _, s in per_doc or [] if len(s)]
    if not min(lowest) > 0:
        return None
    return Fields(per_run, per_doc, per_doc_boost, order, tie, boost)


@dataclass(frozen=True)
class Pieces:
    """[starts, ends) of the ranges over which every run-scored field is constant, and per such
    field (in ``Fields.per_run``'s order) each range's run number (-1: past the field's runs)."""

    starts: np.ndarray
    ends: np.ndarray
    runs_at: tuple[np.ndarray, ...]


#: pieces by the identities of the runs they refine (with the document count they were made for:
#: appends past the runs replace them): the runs of a segment's fields do not change, so neither do
#: its pieces. Entries hold the runs weakly (an identity reused by other runs does not match) and go
#: when any of their runs does.
_PIECES: dict[tuple, tuple[tuple[weakref.ref, ...], int, Pieces | None]] = {}
_PIECES_LOCK = threading.Lock()


def _pieces(per_run: list[RunField], n: int) -> Pieces | None:
    """The pieces of the fields' runs over ``n`` documents (None: too many to be worth it),
    computed once per segment's runs and document count."""
    runs = tuple(r.runs for r, _ in per_run)
    key = tuple(id(x) for x in runs)
    with _PIECES_LOCK:
        kept = _PIECES.get(key)
    if kept is not None and kept[1] == n and all(a() is b for a, b in zip(kept[0], runs, strict=True)):
        return kept[2]
    pieces = _refine(runs, n)
    with _PIECES_LOCK:
        if key not in _PIECES:
            for r in runs:  # the entry goes when any of its runs does
                weakref.finalize(r, _forget, key)
        _PIECES[key] = (tuple(weakref.ref(x) for x in runs), n, pieces)  # weak: runs die as before
    return pieces


def _forget(key: tuple) -> None:
    with _PIECES_LOCK:
        _PIECES.pop(key, None)


def _refine(runs: tuple[Runs, ...], n: int) -> Pieces | None:
    """The runs' common refinement, then each document past the shortest coverage on its own."""
    covered = min(r.covered for r in runs)
    if (len(runs[0].starts) + n - covered) > MAX_PIECES_PER_DOC * n:
        return None
    bounds = [r.starts[: int(np.searchsorted(r.starts, covered))] for r in runs]
    if all(len(b) == len(bounds[0]) and np.array_equal(b, bounds[0]) for b in bounds[1:]):
        inner = bounds[0]  # the fields' runs coincide (a paper's chunks): no refinement to compute
    else:  # sorted runs merged (a stable sort finds them), then each boundary once
        merged = np.sort(np.concatenate(bounds), kind="stable")
        inner = merged[np.concatenate(([True], merged[1:] != merged[:-1]))]
    starts = np.concatenate([inner, np.arange(covered, n)]).astype(np.int64, copy=False)
    if not len(starts) or starts[0] != 0 or len(starts) > MAX_PIECES_PER_DOC * n:
        return None
    ends = np.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1:] = n
    return Pieces(starts, ends, tuple(_run_numbers(r, starts) for r in runs))


def _run_numbers(runs: Runs, docs: np.ndarray) -> np.ndarray:
    """Per document of ``docs`` (ascending), the run holding it; -1 past the runs."""
    at = np.full(len(docs), -1, dtype=np.int64)
    inside = docs < runs.covered
    at[inside] = np.searchsorted(runs.starts, docs[inside], side="right") - 1
    return at


def _piece_maxima(fields: Fields, acc: np.ndarray | None, pieces: Pieces) -> np.ndarray:
    """Per piece, the core's score of its best document (0.0: none matched), in float64."""
    per_doc = None if acc is None else np.maximum.reduceat(acc, pieces.starts).astype(np.float64)
    return _core(fields, per_doc, lambda i: _run_values(*fields.per_run[i], pieces.starts, pieces.runs_at[i]))


def _core(fields: Fields, per_doc: np.ndarray | None, per_run: Callable[[int], np.ndarray]) -> np.ndarray:
    """The core's dis_max (``sparse.dis_max_of``) of its fields' values in clause order: the
    per-document field's (float64, unboosted: boosted here as ``sparse._dis_max_dense`` does) and
    ``per_run(i)`` for the i-th run-scored field (boosted); each a fresh array."""

    def values():
        for i in fields.order:
            if i >= 0:
                yield per_run(i)
            else:
                assert per_doc is not None
                yield per_doc * fields.per_doc_boost if fields.per_doc_boost != 1.0 else per_doc

    return sparse.dis_max_of(values(), fields.tie, fields.boost)[0]


def _run_values(
    r: sparse.RunSums, boost: float, docs: np.ndarray, at: np.ndarray | None = None
) -> np.ndarray:
    """A field scored per run, at ``docs`` (ascending; ``at``: their run numbers, -1 past the
    runs, when known): its run's sum, or past the runs its own (0.0 where none), times the
    boost, as ``RunSums.scores`` gives each document."""
    at = _run_numbers(r.runs, docs) if at is None else at
    value = np.zeros(len(docs))
    inside = at >= 0
    value[inside] = r.sums[at[inside]]
    if r.tail and not inside.all():
        past = np.flatnonzero(~inside)
        lo, hi = int(docs[past[0]]), int(docs[-1]) + 1
        tail = [sparse._within(h, lo, hi) for h in r.tail]
        value[past] = 0.0 + sparse._summed(tail, lo, hi - lo)[docs[past] - lo]
    return value * boost if boost != 1.0 else value


def _doc_bounds(fields: Fields, acc: np.ndarray | None, cand: np.ndarray) -> np.ndarray:
    """Per candidate, the core's score from the per-document field's approximate sum (float64,
    within :data:`MARGIN` of its exact score)."""
    per_doc = None if acc is None else acc[cand].astype(np.float64)
    return _core(fields, per_doc, lambda i: _run_values(*fields.per_run[i], cand))


def _core_scores(fields: Fields, cand: np.ndarray) -> sparse.Hits:
    """The candidates the core matches and their exact scores (float64), computed as the sparse
    path computes them for every document."""
    per_doc = fields.exact_sums(cand) if fields.per_doc is not None else None
    scores = _core(fields, per_doc, lambda i: _run_values(*fields.per_run[i], cand))
    hit = scores > 0  # every score is positive (_fields): matched where the best score is
    return cand[hit], scores[hit]


def _through(chain: list[Wrapped], ctx: Ctx, docs: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """The core's ``scores`` of ``docs`` through its wrappers, innermost first, as
    ``sparse._script_score`` and ``sparse._boost`` give them."""
    for node, _ in reversed(chain):
        if isinstance(node, ScriptScoreNode):
            scores = sparse.script_values(node, ctx, docs, scores)
        else:
            scores = scores * node.boost
    return scores


def _bound(chain: list[Wrapped], outer: BoolNode | None, ctx: Ctx, scores: np.ndarray) -> np.ndarray:
    """Core scores through the wrappers and the hybrid bool's boost, for bounds: a monotone
    script as its numpy function (:func:`_bound_function`), with the same float roundings as
    ``sparse.script_values``."""
    for node, f in reversed(chain):
        if isinstance(node, ScriptScoreNode):
            assert f is not None  # _shape took monotone scripts only
            sub = scores.astype(np.float32).astype(np.float64)
            with np.errstate(all="ignore"):  # as the script engine: overflow and NaN are values
                values = np.broadcast_to(np.asarray(f(sub), dtype=np.float64), sub.shape)
            scores = values.astype(np.float32).astype(np.float64)
            if node.boost != 1.0:
                scores = (scores * node.boost).astype(np.float32).astype(np.float64)
        else:
            scores = scores * node.boost
    return scores * outer.boost if outer is not None else scores


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The documents of the ranges [starts, ends), ascending (the ranges are sorted, disjoint)."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    step = np.ones(total, dtype=np.int64)
    first = np.cumsum(lengths)[:-1]
    step[0] = starts[0]
    step[first] = starts[1:] - ends[:-1] + 1
    return np.cumsum(step)
