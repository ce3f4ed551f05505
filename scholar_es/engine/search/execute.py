"""Executing a ``_search`` body on one index: query + knn, retrievers, collapse, paging."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
)
from scholar_es.engine.index import versioning
from scholar_es.engine.query import sparse, topk
from scholar_es.engine.query.functions import parse_function_score
from scholar_es.engine.query.knn import constructor_error, knn_query, parse_knn
from scholar_es.engine.query.nodes import Ctx, Node, expl, expl_value
from scholar_es.engine.query.sortedsearch import search_sorted
from scholar_es.engine.query.text import TextQueryParser
from scholar_es.engine.search import fetch_fields, fusion, highlight, profile, search_after
from scholar_es.engine.search.aggregations.parser import parse_aggs
from scholar_es.engine.search.aggregations.tree import AggContext, run_aggs
from scholar_es.engine.search.collapse import (
    NO_VALUE,
    CollapseKeys,
    collapse_keys,
    heads_by_score,
    heads_in_order,
)
from scholar_es.engine.search.hits import (
    TRACK_TOTAL_HITS,
    SortSpec,
    filter_source,
    kept_scores,
    order_by_score,
    shown_source,
    stored_source,
    total_hits,
    union_docs,
)
from scholar_es.engine.search.named import NamedQueries
from scholar_es.engine.search.rescore import check_sort, collect_size, parse_rescore, rescore
from scholar_es.engine.search.rescore import explain as explain_rescore
from scholar_es.engine.validate import flag, with_flags
from scholar_es.engine.xcontent import java_float

SEARCH_KEYS = {
    "query",
    "knn",
    "size",
    "from",
    "_source",
    "sort",
    "collapse",
    "track_total_hits",
    "explain",
    "min_score",
    "retriever",
    "post_filter",
    "timeout",
    "track_scores",
    "version",
    "stats",
    "seq_no_primary_term",
    "terminate_after",
    "profile",
    "aggs",
    "aggregations",
    "highlight",
    "fields",
    "docvalue_fields",
    "stored_fields",
    "rescore",
    "search_after",
}
_UNSUPPORTED_KEYS = {
    "suggest",
    "rank",
    "script_fields",
    "runtime_mappings",
    "indices_boost",
    "pit",
    "slice",
    "ext",
}
MAX_RESULT_WINDOW = 10_000
#: request keys under which the hits are the query's best ``from + size`` by score and nothing
#: else reads every match's score: such a search may prune (engine/query/topk.py)
_TOP_K_KEYS = frozenset(
    {
        "query",
        "size",
        "from",
        "_source",
        "track_total_hits",
        "explain",
        "profile",
        "timeout",
        "track_scores",
        "version",
        "stats",
        "seq_no_primary_term",
        "highlight",
        "fields",
        "docvalue_fields",
        "stored_fields",
        "collapse",  # the best groups: pruned by group (their inner hits scored after, in full)
        "rescore",  # its window is the best window_size hits (or groups)
    }
)
RETRIEVERS = ("standard", "knn", "rrf", "linear")
#: what a collapse's inner hits render from their own options (InnerHitBuilder; ExpandSearchPhase
#: copies these into each group's search, and nothing else of the request)
_INNER_HITS_SHOWN = ("_source", "fields", "docvalue_fields", "version", "seq_no_primary_term")
_INNER_HITS_KEYS = frozenset({"name", "size", "from", "sort", "track_scores", *_INNER_HITS_SHOWN})

#: collapse groups' matches: (collapse keys, group codes) -> per code, (its matching documents
#: ascending, their query scores)
GroupsOf = Callable[[CollapseKeys, list[int]], list[tuple[np.ndarray, np.ndarray]]]


def _dense_groups(mask: np.ndarray, scores: np.ndarray) -> GroupsOf:
    """:data:`GroupsOf` over a full scoring: per document of the index, ``mask`` (matches) and
    ``scores``."""

    def groups_of(keys: CollapseKeys, codes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        groups = [keys.group(code, mask) for code in codes]
        return [(group, scores[group]) for group in groups]

    return groups_of


def _int(body: dict, key: str, default: int) -> int:
    v = body.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            return int(str(v))
        except ValueError:
            raise parsing_error(f"[{key}] failed to parse value [{v}] as an integer") from None
    return v


def validate_body(body: dict, pit: bool = False) -> None:
    """``pit``: the REST layer took the body's ``pit`` and runs the search on its snapshot."""
    if not isinstance(body, dict):
        raise parsing_error("request body must be a JSON object")
    for key in body:
        if key in _UNSUPPORTED_KEYS:
            if key == "pit":  # only _search itself (engine/rest/scroll.py) resolves a point in time
                raise unsupported("pit here", "send a point-in-time search to _search or _msearch")
            raise unsupported(key)
        if key not in SEARCH_KEYS:
            raise parsing_error(f"Unknown key for a START_OBJECT in [{key}].", line=1, col=1)
    if "retriever" in body and flag(body.get("explain")):
        # Elasticsearch explains each hit through the retriever tree (RRFRankDoc/LinearRankDoc
        # explanations); the engine has no such explanation, so it refuses rather than answer one
        raise unsupported("explain with a retriever", "leave [explain] out")
    found = search_after.problems(body, pit=pit, scroll=False)
    if found:
        raise versioning.validation_error(found)
    if body.get("search_after") is not None:
        for key in ("retriever", "collapse", "rescore"):
            if key in body:
                raise unsupported(f"search_after with {key}")
    if "retriever" in body and "rescore" in body:
        raise unsupported("rescore with a retriever", "put the rescore in a standard retriever on a cluster")
    if "retriever" in body and ("query" in body or "knn" in body):
        raise parsing_error(
            "cannot specify [retriever] and [query]"
            if "query" in body
            else "cannot specify [retriever] and [knn]"
        )


class SearchRun:
    """One search on one index's segment; keeps the nodes for explain."""

    def __init__(
        self, handle, body: dict, typed_keys: bool = False, pit: bool = False, scroll: bool = False
    ) -> None:
        validate_body(body, pit=pit)
        self.handle, self.body = handle, with_flags(body)  # "false" read as false by every reader
        self.typed_keys = typed_keys  # the typed_keys URL parameter (aggregation names)
        #: a scroll keeps every hit in order (``_kept``) for the pages after the first
        self.scroll = scroll
        self._kept: tuple | None = None
        self.size = _int(body, "size", 10)
        self.from_ = _int(body, "from", 0)
        self.terminated_early: bool | None = None
        #: a pruned search (:meth:`_top_k`): a lower bound of its matches, above the count limit
        self.at_least = 0
        self._top: topk.Top | None = None
        self._collapse_keys: CollapseKeys | None = None
        self._collapse_field: str | None = None
        if _int(body, "terminate_after", 0) < 0:  # SearchSourceBuilder#terminateAfter
            raise illegal_argument("terminateAfter must be > 0")
        if _int(body, "terminate_after", 0) and "retriever" in body:
            raise unsupported("terminate_after with a retriever", "leave [terminate_after] out")
        if self.size < 0 or self.from_ < 0:
            # SearchSourceBuilder#size / #from
            raise illegal_argument(
                f"[size] parameter cannot be negative, found [{self.size}]"
                if self.size < 0
                else f"[from] parameter cannot be negative but was [{self.from_}]"
            )
        if scroll and self.size > MAX_RESULT_WINDOW:  # SearchService: a scroll's batch
            raise illegal_argument(
                f"Batch size is too large, size must be less than or equal to: [{MAX_RESULT_WINDOW}] but was "
                f"[{self.size}]. Scroll batch sizes cost as much memory as result windows so they are controlled "
                "by the [index.max_result_window] index level setting."
            )
        if not scroll and self.from_ + self.size > MAX_RESULT_WINDOW:
            raise illegal_argument(
                f"Result window is too large, from + size must be less than or equal to: [{MAX_RESULT_WINDOW}] but "
                f"was [{self.from_ + self.size}]. See the scroll api for a more efficient way to request large data "
                "sets. This limit can be set by changing the [index.max_result_window] index level setting."
            )

    def bind(self, seg, reader) -> None:
        """Search ``seg`` and read ``_source`` through ``reader``: one snapshot, one SQLite state."""
        handle = self.handle
        self.seg, self.reader = seg, reader
        self._collapse_keys, self._top, self.at_least = None, None, 0  # of another segment, if any
        #: seq -> (id, source JSON, version) read for this search's hits: the top hits and the
        #: collapse's inner hits (a group's head is its first inner hit) read each row once
        self._rows: dict[int, tuple[str, str, int]] = {}
        self.ctx = Ctx(
            seg, handle.analysis, handle.name, default_k=self.size, bm25=handle.similarities, reader=reader
        )
        self.parser = TextQueryParser(self.ctx, parse_function_score, knn_query)
        self.rescorers = parse_rescore(self.body["rescore"], self.parser) if "rescore" in self.body else []

    # --- scoring ---------------------------------------------------------------------
    def score(self) -> tuple[np.ndarray, np.ndarray, list[Node]]:
        """(mask, scores, scoring nodes) of query + top-level knn (a SHOULD union, summed)."""
        mask, scores, nodes = self._score(dense_arrays=True)
        assert mask is not None and scores is not None
        return mask, scores, nodes

    def _score(self, dense_arrays: bool) -> tuple[np.ndarray | None, np.ndarray | None, list[Node]]:
        """:meth:`score`; ``dense_arrays`` False: a pruned search (``_top_k``) answers (None,
        None, nodes) instead of making the two arrays of the index's size (its hits are
        ``self.matched`` and ``self.matched_scores`` alone)."""
        nodes: list[Node] = []
        knn_spec = self.body.get("knn")
        profiling = self.body.get("profile") is True  # timings per node: the dense path (search/profile.py)
        dense = not sparse.sparse_enabled() or bool(self.body.get("explain")) or profiling
        parts: list[tuple[np.ndarray, np.ndarray]] = []  # (documents ascending, scores) per leg
        self.parser.named = []  # the query's and the top-level knn's named queries (matched_queries)
        parse_start = time.perf_counter_ns()
        try:
            if "query" in self.body or knn_spec is None:
                nodes.append(self.parser.parse(self.body.get("query", {"match_all": {}})))
            if knn_spec is not None:
                specs = knn_spec if isinstance(knn_spec, list) else [knn_spec]
                nodes.extend(_top_level_knn(self.parser, spec) for spec in specs)
            self.named = self.parser.named
        finally:
            self.parser.named = None
        self.rewrite_ns = time.perf_counter_ns() - parse_start
        if profiling:
            for node in nodes:
                profile.instrument(node)
        top = None if dense or knn_spec is not None else self._top_k(nodes[0])
        if top is not None:  # the candidates holding the best hits, scored exactly
            parts.append((top.docs, top.scores))
            self.at_least, self._top = top.at_least, top
        for node in nodes if top is None else []:
            # the sparse path (engine/query/sparse.py) unless explain needs every node's own arrays
            if dense:
                m, s = node.run(self.ctx)
                docs = np.flatnonzero(m)
                parts.append((docs, s[docs]))
            else:
                parts.append(sparse.run_sparse(node, self.ctx))
        # summed over the legs in order, from 0.0, as a dense ``scores += where(m, s, 0)`` sums them
        if len(parts) == 1:  # one leg: its documents, its scores from 0.0 (as the sum below gives them)
            docs, total = parts[0][0], 0.0 + parts[0][1]
        else:
            docs = union_docs([d for d, _ in parts])
            total = np.zeros(len(docs))
            for d, s in parts:
                total[np.searchsorted(docs, d)] += s
        if "min_score" in self.body:  # a float score against a float (SearchSourceBuilder.minScore)
            keep = total.astype(np.float32) >= np.float32(float(self.body["min_score"]))
            docs, total = docs[keep], total[keep]
        rounded = total.astype(np.float32)
        if not dense_arrays and (top is not None or (not dense and self._answers_from_matches())):
            self.matched, self.matched_scores = docs, rounded
            return None, None, nodes
        mask, scores = np.zeros(self.ctx.n, dtype=bool), np.zeros(self.ctx.n)
        mask[docs] = True
        scores[docs] = rounded
        # the same documents as ``mask``, ascending, and their scores (``scores[docs]``): no second
        # pass over the mask, no gather of the scores again
        self.matched, self.matched_scores = docs, rounded
        return mask, scores, nodes

    def _reads_only_best_hits(self) -> bool:
        """Whether the request reads nothing but its best hits (the keys of :data:`_TOP_K_KEYS`,
        no scroll or named queries, a well-formed ``collapse``: the full path gives its error):
        what a pruned search, and one answered from its matches, may answer."""
        body = self.body
        if self.scroll or self.named or any(key not in _TOP_K_KEYS for key in body):
            return False
        spec = body.get("collapse")
        return spec is None or _collapse_error(spec) is None

    def _answers_from_matches(self) -> bool:
        """Whether a search that scored every match (no pruning: a filter, ``ids``, a
        ``function_score``...) is answered from those matches alone, as a pruned search is
        (:meth:`_run_pruned`: no two arrays of the index's size, ~9 MB at 1M documents), where
        the request allows (:meth:`_reads_only_best_hits`). ``topk.ENABLED`` off is the
        reference: arrays of the index's size."""
        return topk.ENABLED and self._reads_only_best_hits()

    def _top_k(self, node: Node) -> topk.Top | None:
        """The query's best hits (with ``collapse``, groups; with ``rescore``, its window) without
        scoring every match, where the request reads nothing else (no aggregations, sort,
        min_score, post_filter, named queries, scroll: :data:`_TOP_K_KEYS`) and counts its
        matches up to a limit (engine/query/topk.py); None: score all."""
        body = self.body
        if not self._reads_only_best_hits():
            return None
        track = body.get("track_total_hits")
        if track is True:
            return None
        limit = 0 if track is False else TRACK_TOTAL_HITS if track is None else int(track)
        spec = body.get("collapse")
        keys = self._keys(spec["field"]) if spec is not None else None
        # the hits the search orders: its page, or the rescore window (collect_size, as _run)
        want = collect_size(self.rescorers if self.size > 0 else [], self.from_ + self.size)
        if keys is None:
            return topk.top_k(node, self.ctx, want, limit)
        return topk.top_k(node, self.ctx, want, limit, keys.codes, keys.runs)

    def _keys(self, field: str) -> CollapseKeys:
        """The collapse codes of ``field``, computed once per search."""
        if self._collapse_keys is None or self._collapse_field != field:
            self._collapse_keys, self._collapse_field = collapse_keys(self.seg, field), field
        return self._collapse_keys

    def run(self) -> dict:
        """Run on a snapshot pinned for the whole search (hits and ``_source`` agree)."""
        with self.handle.reading() as (seg, reader):
            self.bind(seg, reader)
            return self._run()

    def _run(self) -> dict:
        start = time.perf_counter()
        body = self.body
        if "retriever" in body:
            self._leaf_masks: list[np.ndarray] = []
            ranked, scores, total = self.retrieve(body["retriever"], window=None, top=True)
            self.nodes: list[Node] = []
            # aggregations see every document a leaf retriever matched (its query with the pushed-down
            # filters; a knn leg's top k), not only the fused top window (rrf/700_rrf_retriever_aggs)
            leaves = (
                np.logical_or.reduce(self._leaf_masks) if self._leaf_masks else np.zeros(self.ctx.n, bool)
            )
            kind, spec = next(iter(body["retriever"].items()))
            if kind in fusion.ALLOWED:  # the last search of a compound retriever (fusion.final_matches)
                leaves, scores = fusion.final_matches(spec, ranked, scores, leaves, body)
                ranked = ranked[leaves[ranked]]
                total = int(leaves.sum())
            self.aggregations = self.aggregate(leaves, scores)
            collapse = body.get("collapse")
            if collapse:  # the groups of the retriever's ranked hits (linear/10_linear_retriever.yml)
                ranked, _ = self.collapse(ranked, collapse, scores, presorted=True)
            page = ranked[self.from_ : self.from_ + self.size]
            hits = self.render(page, scores[page], sort_values=None)
            if collapse:
                self.add_collapse(hits, page, collapse, _dense_groups(leaves, scores))
            max_score = java_float(scores[ranked[0]]) if len(ranked) else None
            return self.response(hits, total, max_score, start)
        dense_mask, dense_scores, self.nodes = self._score(dense_arrays=False)
        if dense_mask is None or dense_scores is None:
            return self._run_pruned(start)
        mask, scores = dense_mask, dense_scores
        post = None
        if "post_filter" in body:
            self.parser.named = self.named  # post_filter's named queries count too (MatchedQueriesPhase)
            try:
                post = self.parser.parse(body["post_filter"]).run(self.ctx)[0]
            finally:
                self.parser.named = None
        self.named_queries = NamedQueries(self.named)
        terminate_after = _int(body, "terminate_after", 0)
        if terminate_after > 0:
            # QueryPhaseCollector: docs are collected in index order; the count runs after min_score
            # and post_filter, and the doc past terminate_after stops collection, aggregations included
            # ("terminated_early": true); a set terminate_after not reached answers false
            kept = np.flatnonzero(mask if post is None else mask & post)
            self.terminated_early = len(kept) > terminate_after
            if self.terminated_early:
                mask = mask.copy()
                mask[kept[terminate_after] :] = False
        self.aggregations = self.aggregate(mask, scores)  # aggregations ignore post_filter
        if post is not None:
            mask = mask & post
        # the scored documents as they are, unless post_filter or terminate_after took some away
        as_scored = post is None and not self.terminated_early
        cand = self.matched if as_scored else np.flatnonzero(mask)
        cand_scores = self.matched_scores if as_scored else None  # scores[cand], when known
        total = max(len(cand), self.at_least)  # at_least: matches counted past the limit, unscored
        sort = SortSpec(body["sort"]) if "sort" in body else None
        if body.get("search_after") is not None:  # after total and aggregations: they count every match
            cand = search_after.keep_after(self.seg, sort, cand, scores, body["search_after"])
            cand_scores = None
        sort_values = None
        collapse = body.get("collapse")
        rescorers = self.rescorers if self.size > 0 else []  # RescorePhase: nothing to do for size 0
        if self.rescorers:
            check_sort(sort)
        limit = None if self.scroll else collect_size(rescorers, self.from_ + self.size)
        head_at = None  # with collapse and a sort: each kept head's index in the sorted hits
        if sort is not None and not sort.by_score_only:
            ordered, sort_values = sort.order(self.seg, cand, scores)
            if collapse:
                ordered, head_at = self.collapse(ordered, collapse, scores, presorted=True, limit=limit)
        elif collapse:
            ordered, _ = self.collapse(cand, collapse, scores, presorted=False, limit=limit)
        else:
            ordered = order_by_score(cand, scores, limit, cand_scores)
        if rescorers:  # the hits' new scores, in their new order (``scores`` stays the query's)
            dense = not sparse.sparse_enabled() or bool(body.get("explain"))  # explain reads dense arrays
            ordered, ordered_scores = rescore(self, rescorers, ordered, scores[ordered], dense=dense)
        else:
            ordered_scores = scores[ordered]
        show_scores, max_tracked = kept_scores(sort, flag(body.get("track_scores")))
        shown_scores = ordered_scores if show_scores else None
        if self.scroll:
            self._kept = (ordered, shown_scores, sort_values, total)
        page, hits = self._page(ordered, shown_scores, sort_values, head_at, self.from_)
        if collapse:  # inner hits: the query's scores (a rescore rescored the heads only)
            self.add_collapse(hits, page, collapse, _dense_groups(mask, scores))
        # size 0 collects no top docs: Elasticsearch answers "max_score": null
        if not (len(cand) and max_tracked and self.size):
            max_score = None
        elif rescorers and len(ordered):
            max_score = java_float(ordered_scores[0])
        else:
            max_score = java_float((scores[cand] if cand_scores is None else cand_scores).max())
        return self.response(hits, total, max_score, start)

    def _run_pruned(self, start: float) -> dict:
        """:meth:`_run` for a pruned search (its keys are in :data:`_TOP_K_KEYS`: no
        aggregations, post_filter, sort, search_after, terminate_after or scroll): the same
        answer from the candidates' own scores, without arrays of the index's size (two per
        search: ~0.9 MB at 100k documents, 9 MB at 1M). ``collapse`` orders the candidates'
        groups; a shown group's other matches are scored for its inner hits
        (:meth:`_pruned_groups`); ``rescore`` reads its window's query scores."""
        self.named_queries = NamedQueries(self.named)
        self.aggregations = None
        body = self.body
        cand, cand_scores = self.matched, self.matched_scores  # ascending, scored exactly
        total = max(len(cand), self.at_least)
        collapse = body.get("collapse")
        rescorers = self.rescorers if self.size > 0 else []  # RescorePhase: nothing to do for size 0
        limit = collect_size(rescorers, self.from_ + self.size)
        if collapse:
            ordered, _ = self.collapse(
                cand, collapse, cand_scores, presorted=False, limit=limit, aligned=True
            )
        else:
            ordered = order_by_score(cand, cand_scores, limit, cand_scores)
        ordered_scores = cand_scores[search_sorted(cand, ordered)]
        if rescorers:  # explain and profile never prune: the window is scored the sparse way
            ordered, ordered_scores = rescore(self, rescorers, ordered, ordered_scores, dense=False)
        page, hits = self._page(ordered, ordered_scores, None, None, self.from_)
        if collapse:
            self.add_collapse(hits, page, collapse, self._pruned_groups)
        if not (len(cand) and self.size):
            max_score = None
        elif rescorers and len(ordered):
            max_score = java_float(ordered_scores[0])
        else:
            max_score = java_float(cand_scores.max())
        return self.response(hits, total, max_score, start)

    def _pruned_groups(self, keys: CollapseKeys, codes: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        """:data:`GroupsOf` for a pruned search: the candidates' own scores, the groups' other
        members scored now, all at once (:meth:`topk.Top.score`), so that inner hits see every
        match, as :func:`_dense_groups` does after a full scoring."""
        members = [keys.members(code) for code in codes]
        if not members:
            return []
        # the groups are distinct (their documents too): one sort orders all of them at once
        joined = np.concatenate(members)
        order = np.argsort(joined, kind="stable")
        everyone = joined[order]
        cand, cand_scores = self.matched, self.matched_scores
        known, at = sparse._member(cand, everyone)
        if self._top is None:  # every match is among the candidates: the others do not match
            rest, found = everyone[:0], np.zeros(0)
        else:
            rest, found = self._top.score(everyone[~known])
        values = np.zeros(len(everyone))
        values[known] = cand_scores[at[known]]
        # the others the query matches, rounded as score() rounds a search's scores
        hit, where = sparse._member(everyone, rest)
        assert hit.all()
        values[where] = (0.0 + found).astype(np.float32)
        matched = known.copy()
        matched[where] = True
        # back in the groups' order (each group ascending), then split per group
        in_joined = np.empty_like(matched)
        in_joined[order] = matched
        joined_values = np.empty_like(values)
        joined_values[order] = values
        out = []
        start = 0
        for group in members:
            end = start + len(group)
            keep = in_joined[start:end]
            out.append((group[keep], joined_values[start:end][keep]))
            start = end
        return out

    def _page(self, ordered, scores, sort_values, head_at, start: int) -> tuple[np.ndarray, list[dict]]:
        """The hits ``ordered[start : start + size]``, rendered with their ``scores`` (aligned with
        ``ordered``; None: not shown)."""
        page = ordered[start : start + self.size]
        shown = None
        if sort_values is not None:
            picks = range(start, start + len(page))
            rows = [int(head_at[i]) for i in picks] if head_at is not None else list(picks)
            shown = _shown_sort_values(sort_values, rows)
        return page, self.render(page, None if scores is None else scores[start : start + self.size], shown)

    def scroll_page(self, start: int) -> tuple[dict, int]:
        """A later page of a scroll, from its kept hits: (response, hits in it). Aggregations
        come with the first page only; ``max_score`` is the page's (null when nothing is left)."""
        begin = time.perf_counter()
        assert self._kept is not None, "scroll_page after a run with scroll=True"
        ordered, scores, sort_values, total = self._kept
        self._rows = {}  # only this page's rows are kept
        page, hits = self._page(ordered, scores, sort_values, None, start)
        self.aggregations = None
        shown = None if scores is None else scores[start : start + len(page)]
        max_score = java_float(shown.max()) if shown is not None and len(page) else None
        return self.response(hits, total, max_score, begin), len(page)

    def run_on(self, seg, reader) -> dict:
        """Run on a snapshot the caller pinned (a scroll's or a point in time's)."""
        self.bind(seg, reader)
        return self._run()

    def response(self, hits: list[dict], total: int, max_score, start: float) -> dict:
        out_hits: dict = {}
        t = total_hits(total, self.body.get("track_total_hits"))
        if t is not None:
            out_hits["total"] = t
        out_hits["max_score"] = max_score
        out_hits["hits"] = hits
        out = {
            "took": int((time.perf_counter() - start) * 1000),
            "timed_out": False,
            **({"terminated_early": self.terminated_early} if self.terminated_early is not None else {}),
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": out_hits,
        }
        if getattr(self, "aggregations", None) is not None:
            out["aggregations"] = self.aggregations
        if self.body.get("profile") is True:
            spent = int((time.perf_counter() - start) * 1e9)
            scored = sum(int(getattr(n, "_profile_ns", 0)) for n in self.nodes)
            rewrite = getattr(self, "rewrite_ns", 0)
            out["profile"] = profile.result(
                self.handle.name, self.nodes, rewrite, max(spent - scored - rewrite, 0)
            )
        return out

    # --- aggregations ------------------------------------------------------------------------
    def aggregate(self, mask: np.ndarray, scores: np.ndarray) -> dict | None:
        spec = self.body.get("aggs", self.body.get("aggregations"))
        if spec is None:
            return None
        if "aggs" in self.body and "aggregations" in self.body:
            raise parsing_error("Found two aggregation definitions: [aggs] and [aggregations]")
        tree = parse_aggs(spec)

        def top_hits(params: dict, bucket: np.ndarray) -> dict:
            """TopHitsAggregator: sorted by a field, its hits show their ``sort`` values and (no
            ``track_scores``, no ``_score`` key: no MaxScoreCollector) a null ``_score`` and
            ``max_score``, as a sorted search and a collapse's inner hits do."""
            group = np.flatnonzero(bucket)
            from_, size = int(params.get("from", 0)), int(params.get("size", 3))
            sort = SortSpec(params["sort"]) if "sort" in params else None
            by_field = sort if sort is not None and not sort.by_score_only else None
            _, show_scores = kept_scores(sort, flag(params.get("track_scores")))  # as max_score
            sort_values = None
            if by_field is not None:
                ordered, values = by_field.order(self.seg, group, scores)
                sort_values = _shown_sort_values(values, range(from_, min(from_ + size, len(ordered))))
            else:
                ordered = order_by_score(group, scores)
            shown = ordered[from_ : from_ + size]
            sub = SearchRun.__new__(SearchRun)
            sub.__dict__.update(self.__dict__)
            sub.body = {"_source": params.get("_source", True), "version": flag(params.get("version"))}
            best = java_float(scores[group].max()) if len(group) and show_scores else None
            return {
                "hits": {
                    "total": {"value": len(group), "relation": "eq"},
                    "max_score": best,
                    "hits": sub.render(shown, scores[shown] if show_scores else None, sort_values),
                }
            }

        ctx = AggContext(
            self.seg,
            self.handle.name,
            lambda q: self.parser.parse(q).run(self.ctx)[0],
            scores,
            top_hits,
            typed_keys=self.typed_keys,
        )
        return run_aggs(tree, ctx, mask)

    # --- hits --------------------------------------------------------------------------
    def render(self, page: np.ndarray, scores: np.ndarray | None, sort_values) -> list[dict]:
        """The hits of the documents ``page`` (positions), with ``scores`` (aligned with ``page``;
        None: ``_score`` null) and ``sort_values`` (aligned, or None)."""
        seg = self.seg
        seqs = [int(seg.seqs[p]) for p in page]
        show_id, show_source = fetch_fields.check_stored_fields(self.body)
        show_source = show_source and self.handle.mapping.source_enabled  # _source: {enabled: false}
        want_fields = (
            fetch_fields.parse_field_list("fields", self.body["fields"]) if "fields" in self.body else None
        )
        if want_fields is not None:
            fetch_fields.check_source_enabled(self.handle.mapping, self.handle.name)
        stored = fetch_fields.stored_field_requests(self.handle.mapping, self.body)
        if stored:
            want_fields = [*(want_fields or []), *stored]

        want_dv = (
            fetch_fields.parse_field_list("docvalue_fields", self.body["docvalue_fields"])
            if "docvalue_fields" in self.body
            else None
        )
        highlight_fields = (
            highlight.parse_highlight(self.body["highlight"]) if "highlight" in self.body else None
        )
        terms_for = self._highlight_terms()
        wanted = show_source or want_fields or highlight_fields or self.body.get("version")
        rows = self._sources(seqs) if wanted else {}
        body = self.body
        version, seq_no, explain = body.get("version"), body.get("seq_no_primary_term"), body.get("explain")
        source_spec, excludes = body.get("_source"), self.handle.mapping.source_excludes
        named = getattr(self, "named_queries", None)
        hits = []
        for i, p in enumerate(page):
            hit: dict = {"_index": self.handle.name}
            if show_id:
                hit["_id"] = seg.ids[p]
            hit["_score"] = java_float(scores[i]) if scores is not None else None
            if version:
                hit["_version"] = rows[seqs[i]][2] if seqs[i] in rows else 1
            if seq_no:  # what if_seq_no/if_primary_term compare with
                hit["_seq_no"] = versioning.seq_no(int(seqs[i]))
                hit["_primary_term"] = versioning.PRIMARY_TERM
            if seqs[i] in rows and show_source and want_fields is None and not highlight_fields:
                shown_src = shown_source(rows[seqs[i]][1], excludes, source_spec)  # all it reads
                if shown_src is not None:
                    hit["_source"] = shown_src
            elif seqs[i] in rows:
                src = stored_source(rows[seqs[i]][1], excludes)
                filtered = filter_source(src, source_spec) if show_source else None
                if filtered is not None:
                    hit["_source"] = filtered
                if want_fields is not None:
                    hit["fields"] = fetch_fields.source_fields(
                        self.handle.mapping, src, want_fields, self.handle.analysis
                    )
            if highlight_fields and seqs[i] in rows:
                hl = highlight.highlight_hit(seg, self.handle.analysis, highlight_fields, terms_for, src)
                if hl:
                    hit["highlight"] = hl
            if want_dv is not None:
                hit.setdefault("fields", {}).update(
                    fetch_fields.docvalue_fields(seg, self.handle.name, int(p), want_dv)
                )
            if not hit.get("fields", True):
                del hit["fields"]  # Elasticsearch leaves an empty "fields" out
            if sort_values is not None:
                hit["sort"] = sort_values[i]
            if named:
                matched = named.matched(self.ctx, int(p))
                if matched:
                    hit["matched_queries"] = matched
            if explain:
                hit["_shard"] = f"[{self.handle.name}][0]"
                hit["_node"] = "embedded"
                hit["_explanation"] = self.explain(int(p), None if scores is None else float(scores[i]))
            hits.append(hit)
        return hits

    def _sources(self, seqs: list[int]) -> dict[int, tuple[str, str, int]]:
        """``reader.sources(seqs)``, each row read once per search (:attr:`_rows`, which the
        sub-runs rendering inner hits and top_hits share; a scroll page starts it afresh)."""
        kept = self._rows
        missing = [s for s in seqs if s not in kept]
        if missing:
            kept.update(self.reader.sources(missing))
        return {s: kept[s] for s in seqs if s in kept}

    def _note_leaf(self, mask: np.ndarray) -> None:
        leaves = getattr(self, "_leaf_masks", None)
        if leaves is not None:
            leaves.append(mask)

    def _highlight_terms(self):
        """highlight options -> the query terms to mark (``highlight_query`` or the search's query)."""
        cache: dict[str, highlight._Terms] = {}
        queries = (
            [self.body["query"]] if "query" in self.body else _retriever_queries(self.body.get("retriever"))
        )

        def terms_for(opts: dict):
            q = opts.get("highlight_query")
            key = repr(q)
            if key not in cache:
                cache[key] = highlight.query_terms(
                    q if q is not None else {"bool": {"should": queries}}, self.seg, self.handle.analysis
                )
            return cache[key]

        return terms_for

    def explain(self, pos: int, score: float | None) -> dict:
        parts = [nd.explain(pos) for nd in self.nodes if nd.mask[pos]]
        if self.rescorers:
            value = float(sum(expl_value(p) for p in parts))
            first = parts[0] if len(parts) == 1 else expl(value, "sum of:", parts)
            return explain_rescore(self.rescorers, pos, first)
        value = score if score is not None else 0.0
        return parts[0] if len(parts) == 1 else expl(value, "sum of:", parts)

    # --- collapse ------------------------------------------------------------------------
    def collapse(
        self,
        ordered: np.ndarray,
        spec: dict,
        scores: np.ndarray,
        presorted: bool,
        limit: int | None = None,
        aligned: bool = False,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The first ``limit`` (default ``from + size``; a rescore asks for its window) group heads,
        and (``presorted``) their indexes in ``ordered``; without ``presorted``, ``ordered`` is the
        unordered candidates, ordered by score here (``aligned``: ``scores`` are the candidates'
        own, one per candidate, instead of one per document of the index)."""
        error = _collapse_error(spec)
        if error is not None:
            raise error
        keys = self._keys(spec["field"])
        limit = self.from_ + self.size if limit is None else limit
        if presorted:
            return heads_in_order(ordered, keys.codes, limit)
        if aligned:
            return heads_by_score(ordered, scores, keys.codes, limit, cand_scores=scores), None
        return heads_by_score(ordered, scores, keys.codes, limit), None

    def add_collapse(self, hits: list[dict], page: np.ndarray, spec: dict, groups_of: GroupsOf) -> None:
        """Each hit's collapse value under ``fields``, and its group's inner hits: ``groups_of``
        gives the groups' matches, ascending, and their query scores (:func:`_dense_groups`,
        :meth:`_pruned_groups`)."""
        field = spec["field"]
        keys = self._keys(field)
        inner = spec.get("inner_hits")
        # {} is one inner hit with the defaults (InnerHitBuilder), as each {} of a list is
        inner_specs = inner if isinstance(inner, list) else ([inner] if inner is not None else [])
        for ih in inner_specs:  # refused whether or not there are hits to expand
            unknown = set(ih) - _INNER_HITS_KEYS
            if unknown:
                raise unsupported(f"collapse.inner_hits.{next(iter(unknown))}")
        sorts = [SortSpec(ih["sort"]) if "sort" in ih else None for ih in inner_specs]
        codes: list[int] = []
        for hit, p in zip(hits, page, strict=True):
            fields = hit.setdefault("fields", {})  # beside what `fields`/`docvalue_fields` asked for
            code = int(keys.codes[p])
            if code != NO_VALUE:
                fields[field] = [keys.label(code)]
            if inner_specs:
                codes.append(code)
                hit["inner_hits"] = {}
        if not codes:
            return
        groups = groups_of(keys, codes)
        for ih, sort in zip(inner_specs, sorts, strict=True):
            name = ih.get("name", field)
            size, from_ = int(ih.get("size", 3)), int(ih.get("from", 0))
            # ExpandSearchPhase: each group is searched with the inner hit's own options alone
            # (sort, track_scores, _source, fields, version...), none of the request's
            by_field = sort if sort is not None and not sort.by_score_only else None  # shows "sort"
            show_scores, max_tracked = kept_scores(sort, flag(ih.get("track_scores")))
            pages, page_scores = [], []
            page_sorts: list[list] = []
            for group, group_scores in groups:
                if by_field is not None:
                    ordered, values = by_field.order(self.seg, group, group_scores, aligned=True)
                    page_sorts.extend(
                        _shown_sort_values(values, range(from_, min(from_ + size, len(ordered))))
                    )
                else:
                    ordered = order_by_score(group, group_scores, from_ + size, group_scores)
                shown_here = ordered[from_ : from_ + size]
                pages.append(shown_here)
                page_scores.append(group_scores[search_sorted(group, shown_here)])
            sub = SearchRun.__new__(SearchRun)
            sub.__dict__.update(self.__dict__)
            sub.body = with_flags({key: ih[key] for key in _INNER_HITS_SHOWN if key in ih})
            # every group's inner hits rendered at once: one read of their sources, not one per group
            shown = np.concatenate(pages)
            rendered = sub.render(
                shown,
                np.concatenate(page_scores) if show_scores else None,
                page_sorts if by_field is not None else None,
            )
            at = 0
            for hit, (group, group_scores), inner_page in zip(hits, groups, pages, strict=True):
                # a search of size 0 collects no top docs: "max_score": null, as at the top level
                best = java_float(group_scores.max()) if len(group) and max_tracked and size else None
                hit["inner_hits"][name] = {
                    "hits": {
                        "total": {"value": len(group), "relation": "eq"},
                        "max_score": best,
                        "hits": rendered[at : at + len(inner_page)],
                    }
                }
                at += len(inner_page)

    # --- retrievers -------------------------------------------------------------------
    def retrieve(
        self, spec: dict, window: int | None, filters: list | None = None, top: bool = False
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """(ranked positions, scores array, total) for a retriever tree; ``filters`` are a
        compound parent's filters, pushed down (Elasticsearch's preFilterQueryBuilders)."""
        filters = filters or []
        if not isinstance(spec, dict) or len(spec) != 1:
            raise parsing_error("[retriever] must be an object with exactly one retriever")
        kind, p = next(iter(spec.items()))
        if kind not in RETRIEVERS:
            raise parsing_error(f"unknown retriever [{kind}]")
        n = self.ctx.n
        if kind == "standard":
            allowed = {"query", "filter", "min_score", "sort", "collapse", "_name"}
            if set(p) - allowed:
                raise parsing_error(f"[standard] unknown field [{next(iter(set(p) - allowed))}]")
            if "sort" in p or "collapse" in p:
                raise unsupported(f"standard retriever {'sort' if 'sort' in p else 'collapse'}")
            q = self.parser.parse(p.get("query", {"match_all": {}}))
            mask, scores = q.run(self.ctx)
            for f in [*_as_list(p.get("filter")), *filters]:
                mask = mask & self.parser.parse(f).run(self.ctx)[0]
            if "min_score" in p:  # float against float, as the search's own min_score
                mask = mask & (scores.astype(np.float32) >= np.float32(float(p["min_score"])))
            scores = np.where(mask, scores.astype(np.float32).astype(np.float64), 0.0)
            cand = np.flatnonzero(mask)
            self._note_leaf(mask)
            return order_by_score(cand, scores, window), scores, len(cand)
        if kind == "knn":
            allowed = {
                "field",
                "query_vector",
                "k",
                "num_candidates",
                "filter",
                "similarity",
                "_name",
                "query_vector_builder",
                "rescore_vector",
            }
            if set(p) - allowed:
                raise parsing_error(f"[knn] unknown field [{next(iter(set(p) - allowed))}]")
            for required in ("k", "num_candidates"):
                if required not in p:
                    raise parsing_error(f"[knn] retriever requires [{required}]")
            if filters:
                p = {**p, "filter": [*_as_list(p.get("filter")), *filters]}
            node = parse_knn(self.parser, p)
            mask, scores = node.run(self.ctx)
            cand = np.flatnonzero(mask)
            self._note_leaf(mask)
            return order_by_score(cand, scores, window), scores, len(cand)
        return fusion.fuse(
            kind,
            p,
            self.size if top else 0,
            n,
            lambda child, w, f: self.retrieve(child, w, f),
            filters,
        )


def _collapse_error(spec) -> EsError | None:
    """What is wrong with a ``collapse`` object itself (CollapseBuilder's parser: found before
    anything about its field), or None."""
    if not isinstance(spec, dict) or "field" not in spec:
        return parsing_error("[collapse] requires [field]")
    unknown = set(spec) - {"field", "inner_hits", "max_concurrent_group_searches"}
    if unknown:
        return parsing_error(f"[collapse] unknown field [{next(iter(unknown))}]")
    return None


def _top_level_knn(parser, spec):
    """The search's ``knn`` option: KnnSearchBuilder's constructor checks (k, num_candidates) fail
    inside its ConstructingObjectParser, which Elasticsearch reports as an x_content_parse_exception
    ("Failed to build [knn] after last required field arrived") caused by the illegal argument."""
    try:
        return parse_knn(parser, spec, top_level=True)
    except EsError as e:
        raise constructor_error(e) from None


def _retriever_queries(spec) -> list:
    """The queries of the standard retrievers in a retriever tree (for highlighting)."""
    if not isinstance(spec, dict):
        return []
    out = []
    for kind, p in spec.items():
        if not isinstance(p, dict):
            continue
        if kind == "standard" and "query" in p:
            out.append(p["query"])
        for child in p.get("retrievers") or []:
            out.extend(_retriever_queries(child.get("retriever", child) if isinstance(child, dict) else None))
    return out


def _as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _shown_sort_values(values: list, rows) -> list[list]:
    """Each of ``rows``'s ``sort`` values (``values``: per key, as SortSpec.order gives them)."""
    return [[_json_value(vals[i]) for vals in values] for i in rows]


def _json_value(v):
    """A sort value as Elasticsearch writes it (hits.SortSpec.order types them by the field's sort
    type): a float (np.float32: a score, a float field) as a Java float, a double as itself (2.0
    stays 2.0), a long as an integer."""
    if isinstance(v, np.float32):
        return java_float(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.integer):
        return int(v)
    return v


def count(handle, body: dict | None) -> int:
    body = body or {}
    unknown = set(body) - {"query", "min_score"}
    if unknown:
        raise parsing_error(f"request does not support [{next(iter(unknown))}]")
    run = SearchRun(handle, {"query": body.get("query", {"match_all": {}}), "size": 0})
    with handle.reading() as (seg, reader):
        run.bind(seg, reader)
        mask, scores, _ = run.score()
    if "min_score" in body:
        mask &= scores >= float(body["min_score"])
    return int(mask.sum())


__all__ = ["SearchRun", "count", "EsError"]
