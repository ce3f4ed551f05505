"""Executable query nodes: each scores every document of a segment at once.

A node computes a ``(mask, scores)`` pair of dense arrays over the segment's documents and
keeps it, so ``explain`` can later describe any one document's score from the same numbers.
:mod:`engine.query.dsl` builds these nodes from the query DSL.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scholar_es.engine.index.segment import Segment
from scholar_es.engine.index.segment.columns import KeywordColumn, TextColumn
from scholar_es.engine.index.segment.runs import Runs
from scholar_es.engine.query import similarity as sim
from scholar_es.engine.query.sortedsearch import search_sorted
from scholar_es.engine.xcontent import java_float


@dataclass
class Ctx:
    """What a node needs while running: the segment and request-level settings."""

    seg: Segment
    analysis: dict | None
    index: str
    default_k: int = 10
    #: BM25 parameters per field (index.similarity)
    bm25: sim.FieldSimilarities = sim.FieldSimilarities()
    #: while a rescore query runs: the documents of its window (scripts are evaluated on those only)
    window: np.ndarray | None = None
    #: the same window as sorted document positions: the sparse path (engine/query/sparse.py) scores
    #: only these documents, so a rescore costs what its window holds, not the index size
    restrict: np.ndarray | None = None
    #: the search's store reader (``sources(seqs)``): phrase queries read candidates' ``_source``
    #: for positions (engine/query/phrase.py)
    reader: Any = None
    #: the sparse hits of the search's text queries, by :attr:`Node.memo_key`, kept from their
    #: first run over the whole segment, so a rescore repeating the query (the hybrid's text part)
    #: reads its window's scores from them instead of scoring the postings again
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n(self) -> int:
        return len(self.seg.seqs)


class Node:
    """A compiled query clause. ``run`` fills ``mask``/``scores`` and returns them."""

    mask: np.ndarray
    scores: np.ndarray
    #: set by the parser on a query whose hits depend only on the segment and the query's own
    #: JSON (``multi_match``, ``match``, ``term``): equal keys score every document alike
    memo_key: str | None = None

    def run(self, ctx: Ctx) -> tuple[np.ndarray, np.ndarray]:
        self.mask, self.scores = self._run(ctx)
        return self.mask, self.scores

    def _run(self, ctx: Ctx) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def explain(self, pos: int) -> dict:
        return expl(self.scores[pos], self.describe())

    def describe(self) -> str:
        return type(self).__name__


def expl(value: float | np.floating, description: str, details: list | None = None) -> dict:
    """An explanation: its value a float, shown as Elasticsearch writes one (:func:`java_float`)."""
    return {"value": java_float(value), "description": description, "details": details or []}


def expl_count(n: int, description: str) -> dict:
    """An explanation whose value is a count (Lucene's ``Explanation.match(long ...)``: BM25's
    ``n`` and ``N``), written as an integer."""
    return {"value": int(n), "description": description, "details": []}


def expl_value(e: dict) -> float:
    """An explanation's float value itself, for arithmetic (its shown decimal reads back to it)."""
    return float(np.float32(e["value"]))


def _empty(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n, dtype=bool), np.zeros(n)


# --- leaf scoring ----------------------------------------------------------------------


class TermNode(Node):
    """One term on one text or keyword field, scored by Elasticsearch's BM25."""

    def __init__(self, field: str, term: str, boost: float = 1.0) -> None:
        self.field, self.term, self.boost = field, term, boost
        self._stats: dict = {}

    def _run(self, ctx: Ctx):
        mask, scores = _empty(ctx.n)
        scored = self.score_postings(ctx)
        if scored is not None:
            docs, term_scores = scored
            mask[docs] = True
            scores[docs] = term_scores
        return mask, scores

    def postings_docs(self, ctx: Ctx) -> np.ndarray:
        """The documents this term matches (its postings, ascending), unscored: a filter's."""
        seg = ctx.seg
        col: TextColumn | KeywordColumn | None = seg.text.get(self.field)
        col = seg.keyword.get(self.field) if col is None else col
        found = None if col is None else col.postings.postings(self.term)
        return np.zeros(0, dtype=np.int64) if found is None else found[0]

    def score_postings(self, ctx: Ctx) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents ascending, float32 BM25 scores) of this term's postings; None if none.
        Work is proportional to the postings (the dense and the sparse path both use it)."""
        seg = ctx.seg
        if self.field in seg.text:
            col = seg.text[self.field]
            found = col.postings.postings(self.term)
            doc_count, sttf = col.doc_count, col.sum_total_term_freq
            norm_bytes = col.norms()
        elif self.field in seg.keyword:
            kcol = seg.keyword[self.field]
            found = kcol.postings.postings(self.term)
            # keyword: norms and freqs omitted -> freq 1, norm byte 1, sumTotalTermFreq = sumDocFreq
            doc_count, sttf = kcol.doc_count, kcol.sum_doc_freq
            norm_bytes = None
        else:
            return None
        if found is None or len(found[0]) == 0:
            return None
        docs, freqs = found
        df = len(docs)  # idf counts every posting, whatever the documents scored
        weight, cache, idf, avgdl = self._bm25(ctx, df, doc_count, sttf)
        if ctx.restrict is not None:  # score the postings of the restricted documents only
            at = search_sorted(docs, ctx.restrict)  # no int64 copy of int32 postings
            inside = at < len(docs)
            at = at[inside]
            at = at[docs[at] == ctx.restrict[inside]]
            docs, freqs = docs[at], freqs[at]
        if norm_bytes is None:
            norm_inv = np.full(len(docs), cache[1], dtype=np.float32)
            freqs = np.ones(len(docs), dtype=np.int32)
        else:
            norm_inv = cache.take(norm_bytes.take(docs))  # take: a 1-D gather without fancy-index overhead
        self._stats = dict(
            docs=docs,
            freqs=freqs,
            idf=idf,
            avgdl=avgdl,
            n=df,
            N=doc_count,
            norm_bytes=norm_bytes,
            params=ctx.bm25.get(self.field),
        )
        return docs, sim.bm25_scores(weight, freqs, norm_inv)

    def _bm25(
        self, ctx: Ctx, df: int, doc_count: int, sttf: int
    ) -> tuple[np.float32, np.ndarray, np.float32, np.float32]:
        """(weight, norm cache, idf, avgdl) of this term on its field: its BM25 scorer's constants
        from the field's statistics (every posting counts, whatever the documents scored)."""
        params = ctx.bm25.get(self.field)
        return sim.bm25_term_constants(float(self.boost), df, doc_count, sttf, params.k1, params.b)

    def explain(self, pos: int) -> dict:
        s = self._stats
        i = int(np.searchsorted(s["docs"], pos))
        freq = int(s["freqs"][i])
        dl = float(sim.LENGTH_TABLE[s["norm_bytes"][pos]]) if s["norm_bytes"] is not None else 1.0
        score = self.scores[pos]
        p = s["params"]
        tf = score / float(sim.bm25_weight(self.boost, s["idf"], p.k1))
        return expl(
            score,
            f"weight({self.field}:{self.term} in {pos}) [PerFieldSimilarity], result of:",
            [
                expl(
                    score,
                    f"score(freq={float(freq)}), computed as boost * idf * tf from:",
                    [
                        expl(np.float32(self.boost) * np.float32(1 + p.k1), "boost"),
                        expl(
                            s["idf"],
                            "idf, computed as log(1 + (N - n + 0.5) / (n + 0.5)) from:",
                            [
                                expl_count(s["n"], "n, number of documents containing term"),
                                expl_count(s["N"], "N, total number of documents with field"),
                            ],
                        ),
                        expl(
                            tf,
                            "tf, computed as freq / (freq + k1 * (1 - b + b * dl / avgdl)) from:",
                            [
                                expl(freq, "freq, occurrences of term within document"),
                                expl(p.k1, "k1, term saturation parameter"),
                                expl(p.b, "b, length normalization parameter"),
                                expl(dl, "dl, length of field" + (" (approximate)" if dl > 40 else "")),
                                expl(s["avgdl"], "avgdl, average length of field"),
                            ],
                        ),
                    ],
                )
            ],
        )


def score_runs(
    terms: list[TermNode], ctx: Ctx, runs: Runs
) -> tuple[np.ndarray, np.ndarray, list[tuple[np.ndarray, np.ndarray]]] | None:
    """Term queries on one text field with runs of equal rows (engine/index/segment/runs.py):
    the run numbers and float32 scores of their postings among the run heads, term after term
    in clause order, and each term's (documents, float32 scores) past the runs (empty: left
    out); None if no term has a posting. The same numbers as :meth:`TermNode.score_postings`
    gives each document (a run's documents have its head's frequency and norm; idf and avgdl
    from the whole field): each posting goes through the same float32 steps, its term's weight
    beside it, so all terms' run postings are scored in one pass."""
    col = ctx.seg.text[terms[0].field]
    norm_bytes = col.norms()
    ids, freqs, weights, tails = [], [], [], []
    cache = None
    covered = runs.covered
    for term in terms:
        found = col.postings.postings(term.term)
        if found is None or len(found[0]) == 0:
            continue
        docs, doc_freqs = found
        weight, cache, _, _ = term._bm25(ctx, len(docs), col.doc_count, col.sum_total_term_freq)
        run_ids, run_freqs = runs.postings(col.postings.vocab[term.term])
        ids.append(run_ids)
        freqs.append(run_freqs)
        weights.append(np.full(len(run_ids), weight, dtype=np.float32))
        # usually every posting is in a run: no search for the tail (the scalar in the
        # documents' type: no conversion of all of them)
        past = len(docs) if docs[-1] < covered else int(docs.searchsorted(np.asarray(covered, docs.dtype)))
        if past < len(docs):
            tail_docs = docs[past:]
            tail_norms = cache.take(norm_bytes.take(tail_docs))
            tails.append((tail_docs, sim.bm25_scores(weight, doc_freqs[past:], tail_norms)))
    if cache is None:
        return None
    flat = ids[0] if len(ids) == 1 else np.concatenate(ids)
    w = weights[0] if len(weights) == 1 else np.concatenate(weights)
    f = freqs[0] if len(freqs) == 1 else np.concatenate(freqs)
    return flat, sim.bm25_scores(w, f, cache.take(norm_bytes.take(runs.starts.take(flat)))), tails


class ConstNode(Node):
    """A filter that scores a constant (terms, range, exists, ids, match_all, ...).
    ``matches_all``: the matcher is true for every document (``match_all``), which the sparse
    path uses to skip it; ``docs``: the same documents as positions (see below)."""

    #: ``name`` is the Lucene query's toString (prefix, wildcard: engine/search/profile.py shows it)
    lucene = False

    def __init__(self, name: str, matcher, boost: float = 1.0, matches_all: bool = False, docs=None) -> None:
        self.name, self.matcher, self.boost, self.matches_all = name, matcher, boost, matches_all
        #: optional sparse form of ``matcher``: ctx -> the matching positions, ascending and unique,
        #: in time proportional to the matches (a ``terms`` query reads its values' postings)
        self.docs = docs

    def _run(self, ctx: Ctx):
        mask = self.matcher(ctx)
        return mask, np.where(mask, self.boost, 0.0)

    def describe(self) -> str:
        return self.name


class MatchNoneNode(Node):
    def _run(self, ctx: Ctx):
        return _empty(ctx.n)

    def describe(self) -> str:
        return "MatchNoDocsQuery"


# --- compound ----------------------------------------------------------------------------


class BoolNode(Node):
    def __init__(self, must, should, filter_, must_not, msm: int, boost: float) -> None:
        self.must, self.should, self.filter, self.must_not = must, should, filter_, must_not
        self.msm, self.boost = msm, boost

    def _run(self, ctx: Ctx):
        n = ctx.n
        mask = np.ones(n, dtype=bool)
        scores = np.zeros(n)
        for q in self.must:
            m, s = q.run(ctx)
            mask &= m
            scores += np.where(m, s, 0.0)
        for q in self.filter:
            mask &= q.run(ctx)[0]
        for q in self.must_not:
            mask &= ~q.run(ctx)[0]
        if self.should:
            count = np.zeros(n, dtype=np.int32)
            for q in self.should:
                m, s = q.run(ctx)
                count += m
                scores += np.where(m, s, 0.0)
            if self.msm > 0:
                mask &= count >= self.msm
        elif self.msm > 0:
            mask[:] = False
        if not (self.must or self.should or self.filter or self.must_not):
            return mask, np.where(mask, self.boost, 0.0)  # empty bool = match_all
        return mask, np.where(mask, scores * self.boost, 0.0)

    def explain(self, pos: int) -> dict:
        details = [q.explain(pos) for q in self.must + self.should if q.mask[pos]]
        return _boosted(expl(_unboosted(self.scores[pos], self.boost), "sum of:", details), self.boost)

    def describe(self) -> str:
        return "sum of:"


class DisMaxNode(Node):
    def __init__(self, queries: list[Node], tie_breaker: float, boost: float) -> None:
        self.queries, self.tie, self.boost = queries, tie_breaker, boost

    def _run(self, ctx: Ctx):
        n = ctx.n
        if not self.queries:
            return _empty(n)
        results = [q.run(ctx) for q in self.queries]
        mask = np.logical_or.reduce([m for m, _ in results])
        stack = np.stack([np.where(m, s, 0.0) for m, s in results])
        best = stack.max(axis=0)
        # Lucene DisjunctionMaxScorer: max + tieBreaker * (sum of the others)
        total = best + self.tie * (stack.sum(axis=0) - best)
        return mask, np.where(mask, total * self.boost, 0.0)

    def explain(self, pos: int) -> dict:
        details = [q.explain(pos) for q in self.queries if q.mask[pos]]
        desc = f"max plus {self.tie:g} times others of:" if self.tie else "max of:"
        return _boosted(expl(_unboosted(self.scores[pos], self.boost), desc, details), self.boost)


class ConstantScoreNode(Node):
    def __init__(self, inner: Node, boost: float) -> None:
        self.inner, self.boost = inner, boost

    def _run(self, ctx: Ctx):
        m, _ = self.inner.run(ctx)
        return m, np.where(m, self.boost, 0.0)

    def describe(self) -> str:
        return "ConstantScore"


class BoostNode(Node):
    """A query's ``boost`` on a clause whose own scoring ignores it (e.g. knn inside bool)."""

    def __init__(self, inner: Node, boost: float) -> None:
        self.inner, self.boost = inner, boost

    def _run(self, ctx: Ctx):
        m, s = self.inner.run(ctx)
        return m, s * self.boost

    def explain(self, pos: int) -> dict:
        return _boosted(self.inner.explain(pos), self.boost)


def _unboosted(value: float, boost: float) -> float:
    return value / boost if boost else 0.0


def _boosted(e: dict, boost: float) -> dict:
    if boost == 1.0:
        return e
    return expl(expl_value(e) * boost, "product of:", [e, expl(boost, "boost")])


# --- parsing -----------------------------------------------------------------------------
