"""The ``rescore`` phase of ``_search``: Elasticsearch's query rescorer on the top hits.

Semantics, from Elasticsearch's source (server/src/main/java/org/elasticsearch/search/rescore/:
``RescorerBuilder``, ``QueryRescorerBuilder``, ``QueryRescorer``, ``QueryRescoreMode``,
``RescorePhase``; ``DefaultSearchContext.preProcess``) and the rescore docs
(reference/search/search-your-data/filter-search-results.html#rescore):

* ``rescore`` is one rescorer object or a list of them, applied in order. Each has a
  ``window_size`` (default 10, ``RescorerBuilder.DEFAULT_WINDOW_SIZE``) and a ``query`` rescorer:
  ``rescore_query`` (required), ``query_weight`` and ``rescore_query_weight`` (default 1) and
  ``score_mode`` (``total`` = sum, the default; ``multiply``, ``avg``, ``max``, ``min``).
* The query phase collects ``max(from + size, window_size)`` top hits (the embedded engine has
  one shard, so "per shard" is the whole index). Each rescorer takes the top ``window_size`` of
  them and runs its rescore query on those documents only. A document the rescore query
  matches scores ``score_mode(first * query_weight, second * rescore_query_weight)``; one it
  does not match, and every hit beyond the window, scores ``first * query_weight``. All hits
  are then sorted again (score descending, ties by document order), in float32 as Lucene does.
* ``size: 0`` skips the phase (``RescorePhase.execute``). A ``sort`` other than ``_score``
  descending is refused ("Cannot use [sort] option in conjunction with [rescore].");
  a ``window_size`` above ``index.max_rescore_window`` (10,000) is refused.
* With ``collapse`` (Elasticsearch 8.15+): the group heads are chosen on the first-pass score,
  then the heads are rescored and reordered (rest-api-spec ``112_field_collapsing_with_rescore``);
  inner hits keep their first-pass scores (they are separate searches of the original query).
* ``max_score`` is the score of the first hit after rescoring (``RescorePhase``).
* The ``script`` rescorer (Elasticsearch 8.19/9.1+) is not implemented: refused by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.query import sparse
from scholar_es.engine.query.nodes import Node, expl, expl_value

DEFAULT_WINDOW_SIZE = 10  # RescorerBuilder.DEFAULT_WINDOW_SIZE
MAX_RESCORE_WINDOW = 10_000  # index.max_rescore_window defaults to index.max_result_window
#: QueryRescoreMode: name -> (combine, the explanation's word: its toString)
SCORE_MODES = ("total", "multiply", "avg", "max", "min")
_MODE_WORD = {"total": "sum", "multiply": "product", "avg": "avg", "max": "max", "min": "min"}
_QUERY_KEYS = ("rescore_query", "query_weight", "rescore_query_weight", "score_mode")


def combine(mode: str, primary: np.ndarray, secondary: np.ndarray) -> np.ndarray:
    """``QueryRescoreMode.combine`` in float32 (primary and secondary already weighted)."""
    p, s = primary.astype(np.float32), secondary.astype(np.float32)
    if mode == "total":
        out = p + s
    elif mode == "multiply":
        out = p * s
    elif mode == "avg":
        out = (p + s) / np.float32(2)
    elif mode == "max":
        out = np.maximum(p, s)
    else:
        out = np.minimum(p, s)
    return out.astype(np.float32)


@dataclass
class QueryRescorer:
    """One parsed ``query`` rescorer."""

    window_size: int
    query: dict
    query_weight: float = 1.0
    rescore_query_weight: float = 1.0
    score_mode: str = "total"
    node: Node | None = None
    rescored: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def _float(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise parsing_error(f"[query] {key} doesn't support values of type: {type(value).__name__}")
    try:
        return float(np.float32(float(value)))
    except ValueError:
        raise EsError(400, "x_content_parse_exception", f"[query] failed to parse field [{key}]") from None


def parse_rescore(spec, parser=None) -> list[QueryRescorer]:
    """The body's ``rescore`` (an object or a list of objects) -> rescorers, validated; with
    ``parser`` (the request's query parser) each rescore query is parsed here, so a bad one is a
    400 whether or not the search finds anything (Elasticsearch parses it with the request)."""
    items = spec if isinstance(spec, list) else [spec]
    out: list[QueryRescorer] = []
    for item in items:
        if not isinstance(item, dict):
            raise parsing_error(f"[rescore] must be an object or an array of objects, got [{item!r}]")
        window = DEFAULT_WINDOW_SIZE
        kinds = [k for k, v in item.items() if isinstance(v, dict)]
        for key, value in item.items():
            if isinstance(value, dict):
                continue
            if key != "window_size":
                raise parsing_error(f"rescore doesn't support [{key}]")
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                raise parsing_error(f"[window_size] failed to parse value [{value}] as an integer")
            try:
                window = int(value)
            except ValueError:
                raise parsing_error(f"[window_size] failed to parse value [{value}] as an integer") from None
        if len(kinds) > 1:
            raise parsing_error("you can either define [query] or [script], not both.")
        if not kinds:
            raise parsing_error("missing rescore type")
        kind = kinds[0]
        if kind == "script":
            raise unsupported("rescore.script", "use a query rescorer with a script_score rescore_query")
        if kind != "query":
            raise parsing_error(f"unknown rescorer [{kind}]; the query rescorer is [query]")
        if window < 0:  # Elasticsearch fails on this with a server error; refused here with a 400
            raise illegal_argument(f"[window_size] must be greater than or equal to 0, got [{window}]")
        if window > MAX_RESCORE_WINDOW:
            raise illegal_argument(
                f"Rescore window [{window}] is too large. It must be less than [{MAX_RESCORE_WINDOW}]. "
                "This prevents allocating massive heaps for storing the results to be rescored. This "
                "limit can be set by changing the [index.max_rescore_window] index level setting."
            )
        q = item["query"]
        unknown = [k for k in q if k not in _QUERY_KEYS]
        if unknown:
            raise parsing_error(f"[query] unknown field [{unknown[0]}]")
        if not isinstance(q.get("rescore_query"), dict):
            raise illegal_argument("rescore_query cannot be null")
        mode = q.get("score_mode", "total")
        if not isinstance(mode, str) or mode.lower() not in SCORE_MODES:
            raise EsError(
                400,
                "x_content_parse_exception",
                "[query] failed to parse field [score_mode]",
                caused_by={"type": "illegal_argument_exception", "reason": f"illegal score_mode [{mode}]"},
            )
        out.append(
            QueryRescorer(
                window_size=window,
                query=q["rescore_query"],
                query_weight=_float("query_weight", q.get("query_weight", 1.0)),
                rescore_query_weight=_float("rescore_query_weight", q.get("rescore_query_weight", 1.0)),
                score_mode=mode.lower(),
                node=parser.parse(q["rescore_query"]) if parser is not None else None,
            )
        )
    return out


def check_sort(sort) -> None:
    """Refuse a sort other than ``_score`` descending (``sort`` is a parsed SortSpec or None)."""
    if sort is not None and not sort.by_score_only:
        raise illegal_argument("Cannot use [sort] option in conjunction with [rescore].")


def collect_size(rescorers: list[QueryRescorer], from_size: int) -> int:
    """How many top hits the query phase keeps: ``max(from + size, every window_size)``."""
    return max([from_size, *(r.window_size for r in rescorers)])


def rescore(
    run, rescorers: list[QueryRescorer], ordered: np.ndarray, current: np.ndarray, dense: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Apply ``rescorers`` in order to the top hits ``ordered`` (positions, best first), whose
    query scores are ``current`` (aligned with ``ordered``).

    ``run`` is the :class:`~scholar_es.engine.search.execute.SearchRun` (its parser and context).
    ``dense``: run each rescore query over every document (the reference path, which ``explain``
    reads); otherwise only the window's documents are scored (engine/query/sparse.py).
    Returns (the hits in their new order, their new scores in that order): the work follows the
    hits, not the index's size.
    """
    ordered = np.asarray(ordered, dtype=np.int64)
    current = np.asarray(current).astype(np.float64)
    for r in rescorers:
        if len(ordered) == 0:
            break
        window = ordered[: r.window_size]
        r.rescored = window
        node = r.node if r.node is not None else run.parser.parse(r.query)
        r.node = node
        matched, second = score_window(node, run.ctx, window, dense=dense)
        qw, rw = np.float32(r.query_weight), np.float32(r.rescore_query_weight)
        first = current.astype(np.float32) * qw
        new = first.copy()
        head = slice(0, len(window))
        weighted = second.astype(np.float32) * rw
        new[head] = np.where(matched, combine(r.score_mode, first[head], weighted), first[head])
        order = np.lexsort((ordered, -new))  # score descending, ties by document order
        ordered, current = ordered[order], new[order].astype(np.float64)
    return ordered, current


def score_window(node: Node, ctx, window: np.ndarray, dense: bool) -> tuple[np.ndarray, np.ndarray]:
    """(does ``node`` match each ``window`` document, its score there, 0.0 where not).

    The sparse way restricts every leaf to the window (``Ctx.restrict``): a term scores only its
    postings among the window's documents, ``match_all`` yields the window, so the cost follows
    the window, as Elasticsearch's ``QueryRescorer`` scores only the top docs. The dense way runs
    the query over the whole index (the reference, and what ``explain`` reads back)."""
    in_window = np.zeros(ctx.n, dtype=bool)
    in_window[window] = True
    if dense:
        mask, second = run_on(node, ctx, in_window)
        return mask[window], second[window]
    prev = ctx.window, ctx.restrict
    ctx.window, ctx.restrict = in_window, np.unique(window)
    try:
        docs, scores = sparse.run_sparse(node, ctx)
    finally:
        ctx.window, ctx.restrict = prev
    return sparse.gather((docs, scores), window)


def run_on(node: Node, ctx, window: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Run ``node`` with its scripts evaluated on the ``window`` documents only (what a rescore
    costs in Elasticsearch); its mask is restricted to the window."""
    prev = ctx.window
    ctx.window = window
    try:
        mask, scores = node.run(ctx)
    finally:
        ctx.window = prev
    return mask & window, np.where(mask & window, scores, 0.0)


def explain(rescorers: list[QueryRescorer], pos: int, first: dict) -> dict:
    """``QueryRescorer.explain`` for each rescorer in order, wrapped around ``first``."""
    out = first
    for r in rescorers:
        prim = expl(
            expl_value(out) * float(np.float32(r.query_weight)),
            "product of:",
            [out, expl(r.query_weight, "primaryWeight")],
        )
        node = r.node
        if node is not None and pos in set(r.rescored.tolist()) and node.mask[pos]:
            sec = expl(
                float(np.float32(node.scores[pos])) * float(np.float32(r.rescore_query_weight)),
                "product of:",
                [node.explain(pos), expl(r.rescore_query_weight, "secondaryWeight")],
            )
            value = combine(r.score_mode, np.array([expl_value(prim)]), np.array([expl_value(sec)]))[0]
            out = expl(float(value), f"{_MODE_WORD[r.score_mode]} of:", [prim, sec])
        else:
            out = prim
    return out


__all__ = [
    "DEFAULT_WINDOW_SIZE",
    "MAX_RESCORE_WINDOW",
    "QueryRescorer",
    "check_sort",
    "collect_size",
    "combine",
    "explain",
    "parse_rescore",
    "rescore",
]
