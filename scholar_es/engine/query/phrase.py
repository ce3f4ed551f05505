"""``match_phrase``: Lucene's PhraseQuery, exact (``slop`` 0) and sloppy, scored as Elasticsearch does.

The segment's postings keep no positions. A phrase is answered exactly without them:

1. candidates: the documents holding every term of the phrase (the intersection of the terms'
   postings, rarest first: what Lucene's phrase scorer iterates before it reads any position);
2. each candidate's positions: its stored ``_source`` (SQLite, the source of truth) is read and the
   field's values re-analyzed with the field's *index* analyzer, positions counted as Lucene's
   indexing chain counts them (:func:`engine.analysis.tokens.positions`; between the values of an
   array, ``position_increment_gap``, default 100);
3. the phrase frequency: exact: the number of positions where every term sits at its offset
   (ExactPhraseMatcher); sloppy: the sum of ``1 / (1 + matchLength)`` over the matches
   SloppyPhraseMatcher finds (ported below, float32 as Lucene sums it);
4. the score: BM25 with that frequency, the document's norm, and as idf the *sum* of the terms'
   idfs (BM25Similarity#idfExplain over several terms, summed in double and cast to float).

Cost: step 2 reads and analyzes the candidates' sources, so a phrase of common words costs what
its candidates' texts cost to analyze (bench/phrase_latency.py measures it against a ``match``
of the same terms). Sloppy phrases whose terms repeat (Lucene's "repeats" handling) are refused
by name.
"""

from __future__ import annotations

import heapq
import json

import numpy as np

from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.analysis.tokens import positions
from scholar_es.engine.errors import EsError, unsupported
from scholar_es.engine.index.mapping import _json_scalar_text
from scholar_es.engine.query import similarity as sim
from scholar_es.engine.query.nodes import Ctx, Node, expl, expl_count

DEFAULT_POSITION_INCREMENT_GAP = 100  # TextFieldMapper.Defaults.POSITION_INCREMENT_GAP


def source_values(source: dict, path: str) -> list:
    """The leaf values of ``path`` in ``source`` in document order (arrays flattened, objects and
    dotted keys followed, nulls skipped), as the document parser visited them."""
    out: list = []

    def walk(obj, prefix: str) -> None:
        if isinstance(obj, dict):
            for key, value in obj.items():
                name = prefix + key
                if name == path or path.startswith(name + "."):
                    walk(value, name + ".") if isinstance(value, dict) else leaf(value, name)
        # a scalar under a wanted prefix that is not the path itself holds nothing for it

    def leaf(value, name: str) -> None:
        if isinstance(value, list):
            for v in value:
                leaf(v, name)
        elif isinstance(value, dict):
            walk(value, name + ".")
        elif value is not None and name == path:
            out.append(value if isinstance(value, str) else _json_scalar_text(value))

    walk(source, "")
    return out


def sloppy_freq(plists: list[list[int]], offsets: list[int], slop: int) -> np.float32:
    """Lucene's SloppyPhraseMatcher (no repeated terms): the sum of 1/(1+matchLength), in float32,
    over the matches with matchLength <= slop. ``plists``: each term's positions, ascending."""
    # PhrasePositions: [position, offset, ord, next index]; PhraseQueue orders by position, then
    # offset, then ord
    pps = [[pl[0] - off, off, i, 1] for i, (pl, off) in enumerate(zip(plists, offsets, strict=True))]
    end = max(pp[0] for pp in pps)
    heap = [(pp[0], pp[1], pp[2]) for pp in pps]
    heapq.heapify(heap)
    freq = np.float32(0.0)
    positioned = True

    def advance(i: int) -> bool:
        nonlocal end
        pp = pps[i]
        pl = plists[i]
        if pp[3] >= len(pl):
            return False
        pp[0] = pl[pp[3]] - pp[1]
        pp[3] += 1
        if pp[0] > end:
            end = pp[0]
        return True

    while positioned:
        # nextMatch()
        _, _, i = heapq.heappop(heap)
        match_length = end - pps[i][0]
        nxt = heap[0][0]
        found = False
        while advance(i):
            if pps[i][0] > nxt:  # done minimizing the current match length
                heapq.heappush(heap, (pps[i][0], pps[i][1], i))
                if match_length <= slop:
                    found = True
                    break
                _, _, i = heapq.heappop(heap)
                nxt = heap[0][0]
                match_length = end - pps[i][0]
            else:
                match_length = min(match_length, end - pps[i][0])
        if not found:
            positioned = False
            if match_length > slop:
                break
        freq = np.float32(freq + np.float32(1.0) / (np.float32(1.0) + np.float32(match_length)))
    return freq


def exact_freq(plists: list[list[int]], offsets: list[int]) -> int:
    """ExactPhraseMatcher: the number of positions where every term sits at its offset."""
    starts = {p - offsets[0] for p in plists[0]}
    for pl, off in zip(plists[1:], offsets[1:], strict=True):
        starts &= {p - off for p in pl}
        if not starts:
            return 0
    return len(starts)


class PhraseNode(Node):
    """A phrase of two or more terms (with their query positions) on one text field."""

    def __init__(self, field: str, terms: list[tuple[str, int]], slop: int, boost: float) -> None:
        first = terms[0][1]
        self.field, self.slop, self.boost = field, slop, boost
        self.terms = [t for t, _ in terms]
        self.offsets = [p - first for _, p in terms]
        if slop and len(set(self.terms)) < len(self.terms):
            raise unsupported(
                "match_phrase with slop and a repeated term",
                "Lucene's sloppy matching of repeated terms is not implemented; use slop 0",
            )
        self._stats: dict = {}

    def describe(self) -> str:
        words: list[str] = []
        for t, off in zip(self.terms, self.offsets, strict=True):
            words.extend(["?"] * (off - len(words)))
            words.append(t)
        return f'{self.field}:"{" ".join(words)}"' + (f"~{self.slop}" if self.slop else "")

    def _run(self, ctx: Ctx):
        n = ctx.n
        mask, scores = np.zeros(n, dtype=bool), np.zeros(n)
        col = ctx.seg.text.get(self.field)
        if col is None:
            return mask, scores
        maybe = [col.postings.postings(t) for t in self.terms]
        found = [f for f in maybe if f is not None and len(f[0])]
        if len(found) < len(maybe):
            return mask, scores
        cand = None
        for docs, _ in sorted(found, key=lambda f: len(f[0])):
            cand = docs if cand is None else np.intersect1d(cand, docs, assume_unique=True)
        assert cand is not None
        if ctx.restrict is not None:
            cand = np.intersect1d(cand, ctx.restrict, assume_unique=True)
        freqs = self._freqs(ctx, cand)
        hit = freqs > 0
        docs, freqs = cand[hit], freqs[hit]
        params = ctx.bm25.get(self.field)
        idfs = [sim.bm25_idf(len(f[0]), col.doc_count) for f in found]
        idf = np.float32(sum(float(i) for i in idfs))  # summed in double, cast to float
        avgdl = sim.bm25_avgdl(col.sum_total_term_freq, col.doc_count)
        cache = sim.bm25_norm_cache(avgdl, params.k1, params.b)
        weight = sim.bm25_weight(self.boost, idf, params.k1)
        norms = col.norms()
        mask[docs] = True
        scores[docs] = sim.bm25_scores(weight, freqs, cache[norms[docs]])
        self._stats = dict(
            docs=docs,
            freqs=freqs,
            idf=idf,
            idfs=idfs,
            dfs=[len(f[0]) for f in found],
            N=col.doc_count,
            avgdl=avgdl,
            norms=norms,
            params=params,
        )
        return mask, scores

    def _freqs(self, ctx: Ctx, cand: np.ndarray) -> np.ndarray:
        """The phrase frequency of each candidate, from its source re-analyzed."""
        out = np.zeros(len(cand), dtype=np.float32)
        if not len(cand):
            return out
        if ctx.reader is None:  # pragma: no cover - every search binds its reader
            raise EsError(500, "illegal_state_exception", "phrase query without a source reader")
        fs = ctx.seg.mapping.fields[self.field]
        parent = self.field.rsplit(".", 1)[0] if "." in self.field else None
        path = parent if parent is not None and parent in ctx.seg.mapping.fields else self.field
        analyzer = get_analyzer(fs.analyzer, ctx.analysis)
        gap = int(fs.raw.get("position_increment_gap", DEFAULT_POSITION_INCREMENT_GAP))
        seqs = [int(s) for s in ctx.seg.seqs[cand]]
        rows = ctx.reader.sources(seqs)
        wanted = set(self.terms)
        for k, seq in enumerate(seqs):
            row = rows.get(seq)
            if row is None:
                continue
            plists: dict[str, list[int]] = {t: [] for t in wanted}
            base = 0
            for value in source_values(json.loads(row[1]), path):
                toks, width = positions(analyzer, value)
                for term, pos in toks:
                    if term in plists:
                        plists[term].append(base + pos)
                base += width + gap
            lists = [plists[t] for t in self.terms]
            if any(not pl for pl in lists):
                continue
            if self.slop:
                out[k] = sloppy_freq(lists, self.offsets, self.slop)
            else:
                out[k] = exact_freq(lists, self.offsets)
        return out

    def explain(self, pos: int) -> dict:
        s = self._stats
        i = int(np.searchsorted(s["docs"], pos))
        freq = np.float32(s["freqs"][i])
        p = s["params"]
        dl = float(sim.LENGTH_TABLE[s["norms"][pos]])
        score = self.scores[pos]
        tf = score / float(sim.bm25_weight(self.boost, s["idf"], p.k1))
        idf_details = [
            expl(
                idf,
                "idf, computed as log(1 + (N - n + 0.5) / (n + 0.5)) from:",
                [
                    expl_count(df, "n, number of documents containing term"),
                    expl_count(s["N"], "N, total number of documents with field"),
                ],
            )
            for idf, df in zip(s["idfs"], s["dfs"], strict=True)
        ]
        return expl(
            score,
            f"weight({self.describe()} in {pos}) [PerFieldSimilarity], result of:",
            [
                expl(
                    score,
                    f"score(freq={freq!s}), computed as boost * idf * tf from:",
                    [
                        expl(np.float32(self.boost) * np.float32(1 + p.k1), "boost"),
                        expl(s["idf"], "idf, sum of:", idf_details),
                        expl(
                            tf,
                            "tf, computed as freq / (freq + k1 * (1 - b + b * dl / avgdl)) from:",
                            [
                                expl(freq, f"phraseFreq={freq!s}"),
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
