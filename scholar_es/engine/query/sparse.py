"""The sparse query path: scoring work proportional to the matching postings, not to N.

:mod:`engine.query.nodes` scores every clause over dense per-document arrays (N-length mask and
float64 scores per term, field and compound). Here the same node tree is evaluated as *candidate
sets*: a term yields its postings' documents and their float32 BM25 scores (the exact steps of
:mod:`engine.query.similarity`, shared with :class:`~engine.query.nodes.TermNode`), and ``bool``, ``dis_max``,
``constant_score``, boosts, ``function_score`` (filter/weight functions) and ``script_score``
combine the sorted candidate arrays of their clauses (eager sparse scoring as in bm25s; Lucene
scorers iterate postings the same way). ``bool`` and ``dis_max`` combine them over dense arrays
spanning their matches (``np.bincount`` in clause order) when the matches are dense enough in that
span (:data:`DENSE_SPAN`), else by sorted merges; a ``dis_max`` of should-only ``bool`` clauses (a
``multi_match`` of type ``best_fields``) adds every field's term postings in one such pass
(issue 29). Such a bool of term queries on a text field whose consecutive documents repeat (a
paper's title and abstract in each of its chunks) scores its terms once per run of equal rows
(:mod:`engine.index.segment.runs`) and spreads each run's sum over its documents
(:class:`RunSums`). Every element goes through the same float operations, in
the same order, as in the dense path, so the answers are bit-identical (tests/engine/query/test_engine_sparse.py
and tests/engine/query/test_engine_runs.py check it on random corpora and queries).

A clause with no sparse form (a filter-like ``range``/``exists``/``terms`` matcher, ``match_all``,
``knn``, a pure-negative or filter-only ``bool``, other function kinds) runs densely and is turned
into a candidate set; the combination above it stays sparse. The dense path stays the reference
(:func:`use_sparse` off) and is what ``explain`` uses, since explanations read each node's arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from scholar_es.engine.errors import EsError
from scholar_es.engine.index.segment.runs import Runs
from scholar_es.engine.query.functions import (
    FunctionScoreNode,
    ScriptScoreNode,
    SegmentScriptContext,
    _combine,
)
from scholar_es.engine.query.knn import (
    KnnNode,
    approximate,
    knn_scores,
    raw_similarity,
    within_threshold,
)
from scholar_es.engine.query.nodes import (
    BoolNode,
    BoostNode,
    ConstantScoreNode,
    ConstNode,
    Ctx,
    DisMaxNode,
    MatchNoneNode,
    Node,
    TermNode,
    score_runs,
)
from scholar_es.engine.query.sortedsearch import search_sorted
from scholar_es.engine.search.hits import order_by_score, union_docs

#: (documents ascending, unique, int64; their scores, float64)
Hits = tuple[np.ndarray, np.ndarray]

_ENABLED = True


#: keep text queries' hits for the rest of the search (``Node.memo_key``); off: every run scores
#: again (the reference the tests compare the memo with)
MEMO = True


@dataclass(frozen=True)
class Among:
    """A memo entry (``Ctx.memo``) for a query that was not scored over the whole segment: its
    hits among any sorted documents, on demand (a pruned search's text query, read by a rescore
    that repeats it; the same numbers as scoring it restricted to them)."""

    among: Callable[[np.ndarray], Hits]


@dataclass(frozen=True)
class Within:
    """A memo entry (``Ctx.memo``) for a query scored among some documents only (a rescore's
    window): its hits among ``docs`` (sorted), which answer any later run restricted to a subset of
    them (a second rescore phase's window, the first's best): each document's score is its own,
    whatever else the restriction holds."""

    docs: np.ndarray
    hits: Hits

    def covers(self, restrict: np.ndarray) -> bool:
        return bool(len(restrict) == 0 or _member(self.docs, restrict)[0].all())


def use_sparse(enabled: bool) -> None:
    """Switch the sparse path on or off (off: every query runs densely; for reference tests)."""
    global _ENABLED
    _ENABLED = enabled


def sparse_enabled() -> bool:
    return _ENABLED


def _empty() -> Hits:
    return np.zeros(0, dtype=np.int64), np.zeros(0)


def run_sparse(node: Node, ctx: Ctx) -> Hits:
    """The documents ``node`` matches and their scores, as the dense ``node.run`` would give them.

    With ``ctx.restrict`` (a rescore's window, sorted positions) only those documents: each leaf
    scores just its postings among them (idf and avgdl still count the whole index), so a
    compound combines window-sized sets and the rescore costs what its window holds.

    A node with a ``memo_key`` (a text query, see ``Node.memo_key``) run over the whole segment
    keeps its hits in ``ctx.memo``; the same query run again in the search (a rescore's) reads them
    -- restricted to the window -- instead of scoring again: the same numbers either way. Run
    restricted, it keeps its hits among the restriction (:class:`Within`) for a later run
    restricted to a subset of it (the second rescore phase repeating a script of the first)."""
    key = node.memo_key if MEMO else None
    if key is not None:
        kept = ctx.memo.get(key)
        if isinstance(kept, Among):  # scored on demand for a restriction (engine/query/topk.py)
            if ctx.restrict is not None:
                return kept.among(ctx.restrict.astype(np.int64, copy=False))
            kept = None
        if isinstance(kept, Within):
            if ctx.restrict is not None and kept.covers(ctx.restrict):
                return _among(kept.hits, ctx.restrict)
            kept = None
        if kept is not None:  # copies where unrestricted: a caller may work on its hits in place
            return _restricted(kept, ctx) if ctx.restrict is not None else (kept[0].copy(), kept[1].copy())
        out = _run_sparse(node, ctx)
        if ctx.restrict is None:
            ctx.memo[key] = out
        else:  # copies: see above
            ctx.memo[key] = Within(ctx.restrict.copy(), (out[0].copy(), out[1].copy()))
        return out
    return _run_sparse(node, ctx)


def _run_sparse(node: Node, ctx: Ctx) -> Hits:
    handler = _HANDLERS.get(type(node))
    if handler is not None:
        out = handler(node, ctx)
        if out is not None:
            return out
    restrict, ctx.restrict = ctx.restrict, None  # a dense node computes every document, as before
    try:
        mask, scores = node.run(ctx)
    finally:
        ctx.restrict = restrict
    docs = np.flatnonzero(mask) if restrict is None else restrict[mask[restrict]]
    return docs, scores[docs]


def _restricted(hits: Hits, ctx: Ctx) -> Hits:
    """``hits`` among ``ctx.restrict``'s documents (all of them when there is no restriction);
    each restricted document is looked up in the hits, so the work follows the (small) window."""
    return hits if ctx.restrict is None else _among(hits, ctx.restrict)


def densify(hits: Hits, n: int) -> tuple[np.ndarray, np.ndarray]:
    docs, scores = hits
    mask, dense = np.zeros(n, dtype=bool), np.zeros(n)
    mask[docs] = True
    dense[docs] = scores
    return mask, dense


def _member(docs: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(is each candidate in ``docs``, its index there, clipped): both arrays ascending."""
    if not len(docs):
        return np.zeros(len(cand), dtype=bool), np.zeros(len(cand), dtype=np.int64)
    idx = np.minimum(search_sorted(docs, cand), len(docs) - 1)  # no int64 copy of int32 postings
    return docs[idx] == cand, idx


def gather(hits: Hits, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask, scores) of ``hits`` over the candidates (0.0 where a candidate is not matched)."""
    docs, scores = hits
    hit, idx = _member(docs, cand)
    return hit, np.where(hit, scores[idx] if len(docs) else 0.0, 0.0)


# --- leaves --------------------------------------------------------------------------------------


def _term(node: TermNode, ctx: Ctx) -> Hits | None:
    per_run = _run_sums([node], ctx)  # a word of a field whose documents repeat: scored per run
    found = None if per_run is None else _spread(per_run, 1.0)  # 0.0 + score, times 1: the score
    return found if found is not None else _term_hits(node, ctx)


def _term_hits(node: Node, ctx: Ctx) -> Hits:
    """A term query's hits per document (its postings as they are scored)."""
    assert isinstance(node, TermNode)
    scored = node.score_postings(ctx)
    if scored is None:
        return _empty()
    return scored[0].astype(np.int64), scored[1].astype(np.float64)


def _none(node: MatchNoneNode, ctx: Ctx) -> Hits | None:
    return _empty()


def _const(node: ConstNode, ctx: Ctx) -> Hits | None:
    """A constant-score filter with a sparse form (``terms`` on text/keyword: its values'
    postings), or ``match_all`` under a restriction (the restricted documents), each document
    scoring the boost as ConstNode does; other matchers read whole columns and run densely."""
    if node.docs is not None:
        docs = node.docs(ctx)
    elif node.matches_all and ctx.restrict is not None:
        docs = ctx.restrict
    else:
        return None
    return _restricted((docs, np.full(len(docs), node.boost, dtype=np.float64)), ctx)


# --- compound ------------------------------------------------------------------------------------


def _bool(node: BoolNode, ctx: Ctx) -> Hits | None:
    if not node.should and node.msm > 0:
        return _empty()  # BoolNode: no optional clause can satisfy minimum_should_match
    if not node.must and (not node.should or node.msm == 0):
        return None  # filter-only / must_not-only / empty bool / optional should: bounded by N
    if _optional_only(node):  # e.g. a match on a field whose documents repeat: scored per run
        per_run = _run_sums(node.should, ctx)
        found = None if per_run is None else _spread(per_run, node.boost)
        if found is not None:
            return found
    return _bool_of(
        node, ctx, [run_sparse(q, ctx) for q in node.must], [run_sparse(q, ctx) for q in node.should]
    )


def _bool_of(node: BoolNode, ctx: Ctx, must: list[Hits], should: list[Hits]) -> Hits:
    """``node``'s hits from its scoring clauses' hits (its filters and must_not run here)."""
    dense = _bool_dense(node, ctx, must, should)
    if dense is not None:
        return dense
    if must:
        cand = must[0][0]
        for docs, _ in must[1:]:
            cand = cand[_member(docs, cand)[0]]
    else:
        cand = union_docs([docs for docs, _ in should])
    for q in node.filter:
        cand = cand[_member(run_sparse(q, ctx)[0], cand)[0]]
    for q in node.must_not:
        cand = cand[~_member(run_sparse(q, ctx)[0], cand)[0]]
    scores = np.zeros(len(cand))
    for hits in must:
        scores += gather(hits, cand)[1]
    if should:
        count = np.zeros(len(cand), dtype=np.int32)
        for hits in should:
            m, s = gather(hits, cand)
            count += m
            scores += s
        if node.msm > 0:
            keep = count >= node.msm
            cand, scores = cand[keep], scores[keep]
    return cand, scores * node.boost


def _dis_max(node: DisMaxNode, ctx: Ctx) -> Hits | None:
    if not node.queries:
        return _empty()
    # a clause that is a bool of optional clauses only (a field of a multi_match) hands over its
    # clauses' hits, so that all fields are combined in one pass (:func:`_dis_max_dense`); on a
    # text field whose documents repeat (runs), its terms are scored once per run (:func:`_run_sums`)
    clauses: list[tuple[list[Hits] | RunSums, BoolNode | None]] = []
    for q in node.queries:
        if isinstance(q, BoolNode) and _optional_only(q):
            per_run = _run_sums(q.should, ctx)
            clauses.append((per_run if per_run is not None else [_leaf(c, ctx) for c in q.should], q))
        else:  # a one-word field of a multi_match is a term query: per run too where it can be
            per_run = _run_sums([q], ctx) if type(q) is TermNode else None
            clauses.append((per_run if per_run is not None else [run_sparse(q, ctx)], None))
    dense = _dis_max_dense(node, clauses)
    if dense is not None:
        return dense
    results: list[Hits] = []
    for q, (parts, field) in zip(node.queries, clauses, strict=True):
        # the merge path reads every document's hits: a clause scored per run is scored per document
        if field is None:
            results.append(_term_hits(q, ctx) if isinstance(parts, RunSums) else parts[0])
        else:
            per_doc = [_leaf(c, ctx) for c in field.should] if isinstance(parts, RunSums) else parts
            results.append(_bool_of(field, ctx, [], per_doc))
    cand = union_docs([docs for docs, _ in results])
    stack = np.stack([gather(r, cand)[1] for r in results])
    best = stack.max(axis=0)
    total = best + node.tie * (stack.sum(axis=0) - best)  # DisjunctionMaxScorer, as DisMaxNode
    return cand, total * node.boost


# --- term queries of a field scored once per run of equal rows -------------------------------


@dataclass
class RunSums:
    """A should-only ``bool`` of term queries on one text field, scored per run of documents with
    equal rows (:mod:`engine.index.segment.runs`): per run, 0.0 plus its head's term scores in
    clause order (what ``bincount`` gives each of its documents), whether any term matches it,
    and each term's postings past the runs (documents appended since), in clause order."""

    runs: Runs
    sums: np.ndarray
    matched: np.ndarray
    tail: list[Hits]
    #: the smallest term score (inf: none), for :func:`_dis_max_dense`'s sign check
    lowest: float

    def span(self) -> tuple[int, int] | None:
        """[lo, hi) of the documents matched: those of the matched runs and past them (None: none)."""
        hit = np.flatnonzero(self.matched)
        spans = [(int(self.runs.starts[hit[0]]), int(self.runs.starts[hit[-1] + 1]))] if len(hit) else []
        past = _span(self.tail)
        spans += [past] if past is not None else []
        if not spans:
            return None
        return min(a for a, _ in spans), max(b for _, b in spans)

    def matches(self) -> int:
        """The number of documents matched (of the matched runs, and past them)."""
        return int(self.runs.lengths[self.matched].sum()) + len(self.past_docs())

    def past_docs(self) -> np.ndarray:
        """The documents matched past the runs, ascending, each once however many of the terms it
        holds."""
        return union_docs([d for d, _ in self.tail])

    def scores(self, lo: int, n: int, boost: float) -> np.ndarray:
        """Per position of [lo, lo + n): the sum there (its run's, or its own past the runs; 0.0
        where none) times ``boost``, as ``_summed(...) * boost`` gives each document. Without
        documents past the runs the boost is applied per run before spreading (the same product
        for each of its documents, one pass over the range less)."""
        if not self.tail:
            return self._expand(self.sums if boost == 1.0 else self.sums * boost, lo, n)
        score = self._expand(self.sums, lo, n)
        score += _summed(self.tail, lo, n)  # each position has a value from one side, 0.0 from the other
        if boost != 1.0:
            score *= boost
        return score

    def matched_at(self, lo: int, n: int) -> np.ndarray:
        """Per position of [lo, lo + n): whether a term matches it."""
        matched = self._expand(self.matched, lo, n)
        if self.tail:
            matched |= _counts(self.tail, lo, n) > 0
        return matched

    def _expand(self, values: np.ndarray, lo: int, n: int) -> np.ndarray:
        """Per position of [lo, lo + n): the value of the run holding it (0 past the runs), in an
        array of its own (written in place by the callers)."""
        starts = self.runs.starts
        hi = min(lo + n, self.runs.covered)
        if hi <= lo:
            return np.zeros(n, dtype=values.dtype)
        a = int(np.searchsorted(starts, lo, side="right")) - 1
        b = int(np.searchsorted(starts, hi, side="left"))
        spread = np.repeat(values[a:b], np.diff(starts[a : b + 1]))
        first = lo - int(starts[a])
        if hi == lo + n:
            return spread[first : first + n]  # the runs cover the range (the usual case): a view
        out = np.zeros(n, dtype=values.dtype)
        out[: hi - lo] = spread[first : first + hi - lo]
        return out


def _spread(per_run: RunSums, boost: float) -> Hits | None:
    """The hits of terms scored per run (a should-only bool's, or one term query's with boost 1):
    each document of a matched run (and each matched document past the runs) with its sum times
    the boost, as :func:`_bool_dense` gives them (None: a few matches spread over a wide range,
    where per document costs less)."""
    span = per_run.span()
    if span is None:
        return _empty()
    lo, hi = span
    if hi - lo > DENSE_SPAN * max(1, per_run.matches()):
        return None
    at = np.flatnonzero(per_run.matched_at(lo, hi - lo))
    return at + lo, per_run.scores(lo, hi - lo, boost)[at]


def _run_sums(terms: list[Node], ctx: Ctx) -> RunSums | None:
    """``terms`` (a bool's should clauses, or one term query) scored per run (None: they are not
    term queries on one text field with runs worth it, or a restriction asks for a few documents
    only)."""
    if ctx.restrict is not None or not terms or not all(type(c) is TermNode for c in terms):
        return None
    fields = {c.field for c in terms}  # type: ignore[attr-defined]
    if len(fields) != 1:
        return None
    col = ctx.seg.text.get(next(iter(fields)))
    if col is None:
        return None
    runs = col.runs()
    if runs.view is None:
        return None
    got = score_runs(terms, ctx, runs)  # type: ignore[arg-type]
    if got is None:
        zero = np.zeros(runs.count)
        return RunSums(runs, zero, zero.astype(bool), [], np.inf)
    flat, w, tail = got
    lowest = min((float(s.min()) for s in [w] + [t[1] for t in tail] if len(s)), default=np.inf)
    # float64 even when no term has a posting among the heads (bincount of nothing gives int64)
    sums = np.bincount(flat, weights=w, minlength=runs.count).astype(np.float64, copy=False)
    matched = np.bincount(flat, minlength=runs.count) > 0
    return RunSums(runs, sums, matched, tail, lowest)


# --- dense accumulators over a document range ----------------------------------------------------
# A compound clause whose clauses' matches are many for the documents they span combines them in
# arrays indexed by position within that span (``acc[docs - lo] += scores``, one pass per clause)
# instead of sorted merges (``searchsorted`` of every clause against the union): work proportional
# to the postings plus the span, with no log factor. Every document receives the same float
# operations in the same order as in the merge path and the dense reference (a clause that does
# not match a document adds 0.0 there, which changes nothing), so the scores are bit-identical.

#: the dense combination is taken when the span of documents is at most this many times the
#: matches it combines (beyond, a few scattered matches: the sorted merge reads less)
DENSE_SPAN = 32


def _span(parts: list[Hits]) -> tuple[int, int] | None:
    """[lo, hi) of the documents of ``parts`` (None: no document)."""
    live = [d for d, _ in parts if len(d)]
    if not live:
        return None
    return int(min(d[0] for d in live)), int(max(d[-1] for d in live)) + 1


def _worth_dense(lo: int, hi: int, parts: list[Hits]) -> bool:
    return hi - lo <= DENSE_SPAN * max(1, sum(len(d) for d, _ in parts))


def _within(hits: Hits, lo: int, hi: int) -> Hits:
    docs, scores = hits
    if not len(docs) or (docs[0] >= lo and docs[-1] < hi):
        return hits
    a, b = search_sorted(docs, [lo, hi])
    return docs[a:b], scores[a:b]


def _range_mask(docs: np.ndarray, lo: int, hi: int) -> np.ndarray:
    mask = np.zeros(hi - lo, dtype=bool)
    mask[_within((docs, docs), lo, hi)[0] - lo] = True
    return mask


def _bool_dense(node: BoolNode, ctx: Ctx, must: list[Hits], should: list[Hits]) -> Hits | None:
    """:func:`_bool` over dense arrays spanning the candidates' range (None: not worth it)."""
    if must:
        if any(not len(d) for d, _ in must):
            return None  # no candidate: the merge path answers at once
        lo, hi = max(int(d[0]) for d, _ in must), min(int(d[-1]) for d, _ in must) + 1
        if lo >= hi:
            return _empty()
        must = [_within(h, lo, hi) for h in must]
        should = [_within(h, lo, hi) for h in should]
    else:
        span = _span(should)
        if span is None:
            return _empty()
        lo, hi = span
    if not _worth_dense(lo, hi, must + should):
        return None
    n = hi - lo
    # the must clauses' scores first, then the should clauses', each in clause order: bincount adds
    # the weights in the order given, from 0.0, as ``acc[docs] += scores`` clause by clause would
    acc = _summed(must + should, lo, n)
    keep = np.ones(n, dtype=bool)
    if must:
        keep = _counts(must, lo, n) == len(must)
    if should and (node.msm > 1 or (must and node.msm > 0)):
        keep &= _counts(should, lo, n) >= node.msm
    elif should and not must:
        keep = _counts(should, lo, n) > 0  # the candidates are the should clauses' union
    for q in node.filter:
        keep &= _range_mask(run_sparse(q, ctx)[0], lo, hi)
    for q in node.must_not:
        keep &= ~_range_mask(run_sparse(q, ctx)[0], lo, hi)
    at = np.flatnonzero(keep)
    return at + lo, acc[at] * node.boost


def _optional_only(node: BoolNode) -> bool:
    """A bool whose hits are the union of its should clauses, scored by their sum times its boost."""
    return bool(node.should) and not (node.must or node.filter or node.must_not) and node.msm <= 1


def _leaf(node: Node, ctx: Ctx) -> Hits:
    """``run_sparse(node)``; a term's postings as they are scored (int32 documents, float32 scores:
    the dense combination reads them without converting them first)."""
    if type(node) is TermNode:
        scored = node.score_postings(ctx)
        return _empty() if scored is None else scored
    return run_sparse(node, ctx)


def _dis_max_dense(
    node: DisMaxNode, clauses: list[tuple[list[Hits] | RunSums, BoolNode | None]]
) -> Hits | None:
    """:func:`_dis_max` over dense arrays spanning the clauses' documents (None: not worth it, or a
    negative score or boost, where the 0.0 of a clause that does not match could be the maximum).

    A clause is (its hits, None), (the hits of a bool's should clauses, the bool) or (the bool's
    terms scored per run, the bool): the bool's score for each position is the sum of its clauses'
    there from 0.0 times its boost, which is 0.0 where none matches, as the merge path's gather
    gives it; a run's documents get the run's sum, the same number."""
    parts = [h for hits, _ in clauses if not isinstance(hits, RunSums) for h in hits]
    per_run = [hits for hits, _ in clauses if isinstance(hits, RunSums)]
    spans = [sp for sp in [_span(parts), *(r.span() for r in per_run)] if sp is not None]
    if not spans:
        return _empty()
    lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
    matches = sum(len(d) for d, _ in parts) + sum(r.matches() for r in per_run)
    if hi - lo > DENSE_SPAN * max(1, matches) or any(q is not None and not q.boost >= 0 for _, q in clauses):
        return None
    lowest = min([float(s.min()) for _, s in parts if len(s)] + [r.lowest for r in per_run], default=0.0)
    if not lowest >= 0:
        return None
    n = hi - lo

    def clause_scores():
        for hits, q in clauses:
            boost = 1.0 if q is None else q.boost
            if isinstance(hits, RunSums):
                yield hits.scores(lo, n, boost)
            elif q is None:
                docs, scores = hits[0]
                score = np.zeros(n)
                score[docs - lo] = scores
                yield score
            else:
                score = _summed(hits, lo, n)
                if boost != 1.0:
                    score *= boost
                yield score

    # over the range in place (fewer passes than gathering both arrays first when most match)
    total, best = dis_max_of(clause_scores(), node.tie, node.boost)
    positive = lowest > 0 and all(q is None or q.boost > 0 for _, q in clauses)
    # every score positive: a position is matched where its best score is (no count needed)
    if positive:
        matched = best > 0
    else:
        matched = _counts(parts, lo, n) > 0
        for r in per_run:
            matched |= r.matched_at(lo, n)
    at = np.flatnonzero(matched)
    return (at + lo if lo else at), total[at]


def dis_max_of(values: Iterable[np.ndarray], tie: float, boost: float) -> tuple[np.ndarray, np.ndarray]:
    """Lucene's ``DisjunctionMaxScorer`` over clause scores per position (at least one clause):
    (best + tie * (total - best), times the boost; the best), the total summed from 0.0 in clause
    order as ``DisMaxNode`` sums its stack. In place: the first array becomes the best (pass
    arrays of your own), the others are read once each (a generator keeps one at a time)."""
    it = iter(values)
    best = next(it)
    total = np.add(best, 0.0)
    for score in it:
        total += score
        np.maximum(best, score, out=best)
    np.subtract(total, best, out=total)
    total *= tie
    total += best
    if boost != 1.0:
        total *= boost
    return total, best


def _among(hits: Hits, docs: np.ndarray) -> Hits:
    """``hits`` of the documents of ``docs`` (both ascending); each of ``docs`` is looked up in the
    hits, so the work follows ``docs`` (a window, a candidate set)."""
    hit, idx = _member(hits[0], docs)
    return docs[hit].astype(np.int64, copy=False), hits[1][idx[hit]]


def _offsets(parts: list[Hits], lo: int) -> np.ndarray:
    docs = [d for d, _ in parts if len(d)]
    if not docs:
        return np.zeros(0, dtype=np.int64)
    return (docs[0] if len(docs) == 1 else np.concatenate(docs)) - lo


def _summed(parts: list[Hits], lo: int, n: int) -> np.ndarray:
    """Per position of [lo, lo + n): 0.0 plus the scores of ``parts`` there, added in part order."""
    weights = [s for d, s in parts if len(d)]
    if not weights:
        return np.zeros(n)
    w = weights[0] if len(weights) == 1 else np.concatenate(weights)
    return np.bincount(_offsets(parts, lo), weights=w, minlength=n)


def _counts(parts: list[Hits], lo: int, n: int) -> np.ndarray:
    """Per position of [lo, lo + n): how many of ``parts`` match it."""
    return np.bincount(_offsets(parts, lo), minlength=n)


def _constant_score(node: ConstantScoreNode, ctx: Ctx) -> Hits | None:
    docs, _ = run_sparse(node.inner, ctx)
    return docs, np.full(len(docs), node.boost, dtype=np.float64)


def _boost(node: BoostNode, ctx: Ctx) -> Hits | None:
    docs, scores = run_sparse(node.inner, ctx)
    return docs, scores * node.boost


class _SubsetScriptContext(SegmentScriptContext):
    """A score script's view of the candidate documents only (their doc values, vectors, scores)."""

    def __init__(self, ctx: Ctx, scores: np.ndarray, docs: np.ndarray) -> None:
        super().__init__(ctx, scores)
        self._docs = docs
        self.n = len(docs)

    def doc_values(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        vals, has = super().doc_values(field)  # its checks; zeros of the subset's length when absent
        if field in self._ctx.seg.numeric:
            return vals[self._docs], has[self._docs]
        return vals, has

    def doc_value_count(self, field: str) -> np.ndarray:
        seg = self._ctx.seg
        col = seg.vectors.get(field)
        if col is not None and field not in seg.numeric and field not in seg.keyword:
            return col.present[self._docs].astype(np.int64)  # the candidates' only, not all N
        counts = super().doc_value_count(field)
        if field in seg.numeric or field in seg.keyword or field in seg.vectors:
            return counts[self._docs]
        return counts

    def vectors(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        col = self._ctx.seg.vectors.get(field)
        if col is not None:  # the candidates' rows only (a split matrix is not joined)
            return col.rows(self._docs), col.present[self._docs]
        return super().vectors(field)  # its errors, or zeros of the subset's length


def _script_score(node: ScriptScoreNode, ctx: Ctx) -> Hits | None:
    docs, qscore = run_sparse(node.query, ctx)
    return _at_least_min_score(docs, script_values(node, ctx, docs, qscore), node.min_score)


def _at_least_min_score(docs: np.ndarray, scores: np.ndarray, min_score: float | None) -> Hits:
    """The hits scoring at least ``min_score`` (a float, as both scores are): all without one."""
    if min_score is None:
        return docs, scores
    keep = scores >= min_score
    return docs[keep], scores[keep]


def script_values(node: ScriptScoreNode, ctx: Ctx, docs: np.ndarray, qscore: np.ndarray) -> np.ndarray:
    """The boosted script scores of ``docs`` whose query scores are ``qscore`` (float64): the
    query score as a float, the script's value as a float, times the boost as a float."""
    sub = qscore.astype(np.float32).astype(np.float64)
    raw = node.script.evaluate(_SubsetScriptContext(ctx, sub, docs))
    values = np.broadcast_to(np.asarray(raw, dtype=np.float64), docs.shape)
    values = values.astype(np.float32).astype(np.float64)
    if len(values) and not values.min() >= 0:  # a negative score or NaN (min is NaN, no comparison holds)
        i = int(np.flatnonzero(~(values >= 0))[0])
        raise EsError(
            400,
            "illegal_argument_exception",
            f"script_score script returned an invalid score [{values[i]}] for doc [{int(docs[i])}]. "
            "Must be a non-negative score!",
        )
    # values are floats widened to doubles: times a boost of 1 and rounded to float, they stay
    return values if node.boost == 1.0 else (values * node.boost).astype(np.float32).astype(np.float64)


def _function_score(node: FunctionScoreNode, ctx: Ctx) -> Hits | None:
    if any(kind != "weight" for _, kind, _, _ in node.functions):
        return None  # field_value_factor / script functions read whole columns: dense
    docs, qscore = run_sparse(node.query, ctx)
    return _at_least_min_score(docs, function_values(node, ctx, docs, qscore), node.min_score)


def function_values(node: FunctionScoreNode, ctx: Ctx, docs: np.ndarray, qscore: np.ndarray) -> np.ndarray:
    """A ``function_score`` of weight functions: the scores of ``docs`` (ascending) whose query
    scores are ``qscore`` (before ``min_score``), as FunctionScoreNode computes them."""
    n = len(docs)
    sub = (qscore * node.boost).astype(np.float32).astype(np.float64)
    if not node.functions:  # FunctionFactorScorer.score: no function, the sub-query's score
        return sub
    mode = node.score_mode
    factor = np.ones(n)
    total, weight_sum = np.zeros(n), np.zeros(n)
    best = np.full(n, -np.inf if mode == "max" else np.inf)
    first_done = np.zeros(n, dtype=bool)
    for filt, _kind, _spec, weight in node.functions:  # FunctionScoreNode._run, on the candidates
        applies = np.ones(n, dtype=bool) if filt is None else _member(filter_docs(filt, ctx), docs)[0]
        value = np.ones(n)
        if weight is not None:
            value = value * weight
        if mode == "multiply":
            factor = np.where(applies, factor * value, factor)
        elif mode == "first":
            factor = np.where(applies & ~first_done, value, factor)
            first_done |= applies
        elif mode == "max":
            best = np.where(applies, np.maximum(best, value), best)
        elif mode == "min":
            best = np.where(applies, np.minimum(best, value), best)
        else:
            total = np.where(applies, total + value, total)
            weight_sum = np.where(applies, weight_sum + (weight if weight is not None else 1.0), weight_sum)
    if mode in ("max", "min"):
        factor = np.where(np.isfinite(best), best, 1.0)
    elif mode in ("sum", "avg"):
        has = weight_sum != 0
        factor = np.where(has, total / np.where(has, weight_sum, 1.0) if mode == "avg" else total, 1.0)
    capped = np.minimum(factor, node.max_boost)
    final = _combine(node.boost_mode, sub, capped).astype(np.float32).astype(np.float64)
    bad = (final < 0) | np.isnan(final)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise EsError(
            400,
            "illegal_argument_exception",
            f"function score query returned an invalid score: {final[i]} for doc: {int(docs[i])}",
        )
    return final


def filter_docs(node: Node, ctx: Ctx) -> np.ndarray:
    """The documents a filter clause matches, ascending (its scores are not needed): a term's
    postings unscored (a section multiplier's filter: ~280k postings at 1M QASPER chunks), else
    its sparse hits."""
    if type(node) is TermNode:
        return node.postings_docs(ctx)
    return run_sparse(node, ctx)[0]


def clause_mask(node: Node, ctx: Ctx) -> np.ndarray:
    """The documents a filter clause matches, as a fresh mask of the index's size: a
    constant-score filter's own matcher (a ``terms`` query marks its values' postings, no sorted
    union of them: ~3 ms less at 1M documents for half of them), else its documents marked
    (:func:`filter_docs`: a term's postings unscored)."""
    if isinstance(node, ConstNode):
        return node.matcher(ctx)
    mask = np.zeros(ctx.n, dtype=bool)
    mask[filter_docs(node, ctx)] = True
    return mask


def _knn(node: KnnNode, ctx: Ctx) -> Hits | None:
    """KnnNode's top k of the whole index (its filters unrestricted), then the documents a
    restriction keeps."""
    restrict, ctx.restrict = ctx.restrict, None
    try:
        hits = _knn_top(node, ctx)
    finally:
        ctx.restrict = restrict
    return _restricted(hits, ctx)


def _knn_top(node: KnnNode, ctx: Ctx) -> Hits:
    """KnnNode's top k: the graph's (:func:`engine.query.knn.approximate`) where it applies, else the
    exact top k, scoring only the documents near the k-th similarity.

    The score is a non-decreasing function of the raw similarity (of minus the squared distance
    for l2_norm) after float32 rounding, so the top k by score are among the documents whose raw
    value is at least the k-th largest minus a margin, provided the score just below the margin is
    strictly lower than the k-th score (then no tie at the cut-off lies outside); else all are scored.
    """
    limits = node.limits(ctx)
    if limits is None:
        return _empty()
    k, nc = limits
    fmask = None
    for f in node.filters:
        m = clause_mask(f, ctx)
        fmask = m if fmask is None else np.logical_and(fmask, m, out=fmask)
    approx = approximate(ctx, node.field, node.qv, k, nc, fmask, node.threshold)
    if approx is not None:
        return approx[0], approx[1] * node.boost
    raw, present, kind = raw_similarity(ctx, node.field, node.qv)
    allowed = present if fmask is None else present & fmask
    if node.threshold is not None:
        allowed = allowed & within_threshold(kind, raw, node.threshold)
    cand = np.flatnonzero(allowed)
    sign = -1.0 if kind == "l2_norm" else 1.0
    if len(cand) > k:
        key = sign * raw[cand]
        kth = float(np.partition(key, len(key) - k)[len(key) - k])
        margin = 1e-5 * max(1.0, abs(kth))
        kth_score = knn_scores(kind, np.array([sign * kth]))[0]
        below = knn_scores(kind, np.array([sign * (kth - margin)]))[0]
        if np.isfinite(kth) and not np.isnan(key).any() and below < kth_score:
            cand = cand[key >= kth - margin]
        score = knn_scores(kind, raw[cand])
        top = np.sort(order_by_score(np.arange(len(cand)), score, k))  # ties: lower position first
        cand, score = cand[top], score[top]
    else:
        score = knn_scores(kind, raw[cand])
    return cand.astype(np.int64), score * node.boost


_HANDLERS: dict = {
    KnnNode: _knn,
    TermNode: _term,
    MatchNoneNode: _none,
    ConstNode: _const,
    BoolNode: _bool,
    DisMaxNode: _dis_max,
    ConstantScoreNode: _constant_score,
    BoostNode: _boost,
    ScriptScoreNode: _script_score,
    FunctionScoreNode: _function_score,
}

__all__ = ["Hits", "densify", "gather", "run_sparse", "sparse_enabled", "use_sparse"]
