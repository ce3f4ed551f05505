"""The ``rrf`` and ``linear`` retrievers, as Elasticsearch 9.x defines them (x-pack ``rank-rrf``).

* ``rrf``: ``retrievers`` holds retriever objects or (9.2, weighted RRF) ``{"retriever": ...,
  "weight": w}`` components; a document's score is the sum over result sets of
  ``weight / (rank_constant + rank)`` (``RRFRetrieverBuilder#combineInnerRetrieverResults``),
  ``rank_constant`` 60, ``rank_window_size`` 10 by default; weights must be non-negative
  (``RRFRetrieverComponent``).
* ``linear``: components ``{"retriever", "weight" (1), "normalizer"}``; normalizers ``none``,
  ``minmax`` and ``l2_norm`` (``ScoreNormalizer.valueOf``, case-insensitive); the top-level
  ``normalizer`` (9.1+) is the default of every component that names none, a component's own
  normalizer wins (linear-retriever reference). ``MinMaxScoreNormalizer``: (s - min) / (max - min),
  every score 1 when max - min < 1e-6 (a one-hit result set); ``L2ScoreNormalizer``:
  s / sqrt(sum s²), unchanged when the norm is below 1e-6. Scores are summed in float32 as
  ``LinearRankDoc.score`` is a float.
* Both: the fused list is sorted by score, ties by doc (index order), trimmed to
  ``rank_window_size``, then ``min_score`` (inclusive) applies; ``hits.total`` is the size of that
  list. ``filter`` is pushed down to every sub-retriever (``preFilterQueryBuilders``).
  ``rank_window_size`` below ``size`` fails the request validation
  (``CompoundRetrieverBuilder#validate``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
    x_content_parse_error,
)

DEFAULT_RANK_WINDOW_SIZE = 10  # RankBuilder.DEFAULT_RANK_WINDOW_SIZE
DEFAULT_RANK_CONSTANT = 60  # RRFRetrieverBuilder.DEFAULT_RANK_CONSTANT
NORMALIZERS = ("none", "minmax", "l2_norm")
_EPSILON = np.float32(1e-6)
_COMMON = {"retrievers", "rank_window_size", "filter", "_name", "min_score", "query", "fields"}
ALLOWED = {"rrf": _COMMON | {"rank_constant"}, "linear": _COMMON | {"normalizer"}}

# (child retriever spec, window, extra filters) -> (ranked positions, scores array, total)
Retrieve = Callable[[dict, int, list], tuple[np.ndarray, np.ndarray, int]]


def minmax(scores: np.ndarray) -> np.ndarray:
    """MinMaxScoreNormalizer, in float32."""
    s = scores.astype(np.float32)
    if len(s) == 0:
        return s
    lo, hi = s.min(), s.max()
    if abs(lo - hi) < _EPSILON:
        return np.ones_like(s)
    return ((s - lo) / (hi - lo)).astype(np.float32)


def l2_norm(scores: np.ndarray) -> np.ndarray:
    """L2ScoreNormalizer: the sum of squares in double, each score divided in double, cast to float."""
    s = scores.astype(np.float32)
    if len(s) == 0:
        return s
    norm = float(np.sqrt(np.sum((s * s).astype(np.float32).astype(np.float64))))
    if norm < 1e-6:
        return s
    return (s.astype(np.float64) / norm).astype(np.float32)


_NORMALIZE = {"none": lambda s: s.astype(np.float32), "minmax": minmax, "l2_norm": l2_norm}


def _normalizer(kind: str, value) -> str:
    name = str(value).lower()
    if name not in NORMALIZERS:
        raise x_content_parse_error(
            f"[{kind}] failed to parse field [normalizer]", illegal_argument(f"Unknown normalizer [{value}]")
        )
    return name


def _int_field(kind: str, p: dict, key: str, default: int) -> int:
    v = p.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int):
        try:
            return int(str(v))
        except ValueError:
            raise x_content_parse_error(
                f"[{kind}] failed to parse field [{key}]",
                illegal_argument(f'For input string: "{v}"'),
            ) from None
    return v


def java_float(v: float) -> str:
    """Java's ``Float.toString`` for the numbers that appear in messages (-0.5, -1.0)."""
    return str(np.float32(v))


def validate(kind: str, p: dict, size: int) -> tuple[int, list[tuple[dict, float, str | None]]]:
    """(rank_window_size, [(child retriever, weight, normalizer)]) after Elasticsearch's checks."""
    if not isinstance(p, dict):
        raise parsing_error(f"[{kind}] expects an object")
    unknown = set(p) - ALLOWED[kind]
    if unknown:
        raise EsError(400, "x_content_parse_exception", f"[{kind}] unknown field [{sorted(unknown)[0]}]")
    if "query" in p or "fields" in p:
        raise unsupported(f"{kind} multi-field query format (query/fields)", "list the sub-retrievers")
    window = _int_field(kind, p, "rank_window_size", DEFAULT_RANK_WINDOW_SIZE)
    if window < 0:
        raise illegal_argument(f"[rank_window_size] parameter cannot be negative, found [{window}]")
    if "min_score" in p and float(p["min_score"]) < 0:
        raise illegal_argument(
            f"[min_score] must be greater than or equal to 0, was: [{java_float(float(p['min_score']))}]"
        )
    children = p.get("retrievers")
    if not isinstance(children, list) or not children:
        raise EsError(
            400,
            "action_request_validation_exception",
            f"Validation Failed: 1: [{kind}] must specify [retrievers] or [query];",
        )
    top_norm = _normalizer(kind, p["normalizer"]) if p.get("normalizer") is not None else None
    legs: list[tuple[dict, float, str | None]] = []
    component = "rrf_component" if kind == "rrf" else "retriever-component"
    for child in children:
        if not isinstance(child, dict):
            raise parsing_error(f"[{kind}] [retrievers] entries must be objects")
        is_component = "retriever" in child
        if kind == "linear" and not is_component:
            raise EsError(
                400, "x_content_parse_exception", f"[{component}] unknown field [{next(iter(child), '')}]"
            )
        if not is_component:
            legs.append((child, 1.0, None))
            continue
        extra = set(child) - (
            {"retriever", "weight", "normalizer"} if kind == "linear" else {"retriever", "weight"}
        )
        if extra:
            raise EsError(
                400, "x_content_parse_exception", f"[{component}] unknown field [{sorted(extra)[0]}]"
            )
        weight = child.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise x_content_parse_error(
                f"[{kind}] failed to parse field [retrievers]",
                parsing_error(f"[{component}] failed to parse field [weight]"),
            )
        if weight < 0:
            message = (
                f"[weight] must be non-negative, found [{java_float(weight)}]"
                if kind == "rrf"
                else "[weight] must be non-negative"
            )
            raise x_content_parse_error(
                f"[{kind}] failed to parse field [retrievers]", illegal_argument(message)
            )
        norm = _normalizer(kind, child["normalizer"]) if child.get("normalizer") is not None else None
        legs.append((child["retriever"], float(weight), norm or top_norm))
    if size > window:
        raise EsError(
            400,
            "action_request_validation_exception",
            f"Validation Failed: 1: [{kind}] requires [rank_window_size: {window}] be greater than or equal to "
            f"[size: {size}];",
        )
    return window, legs


def fuse(
    kind: str, p: dict, size: int, n: int, retrieve: Retrieve, filters: list
) -> tuple[np.ndarray, np.ndarray, int]:
    """(ranked positions, scores array, total) of an rrf/linear retriever."""
    window, legs = validate(kind, p, size)
    filters = [*filters, *(_as_list(p.get("filter")))]
    fused = np.zeros(n, dtype=np.float32)
    member = np.zeros(n, dtype=bool)
    if kind == "rrf":
        k = _int_field(kind, p, "rank_constant", DEFAULT_RANK_CONSTANT)
        if k < 1:
            raise illegal_argument("[rank_constant] must be greater or equal to [1] for [rrf]")
        for spec, weight, _ in legs:
            ranked, _, _ = retrieve(spec, window, filters)
            ranks = np.arange(1, len(ranked) + 1, dtype=np.float32)
            fused[ranked] += np.float32(weight) * (np.float32(1.0) / (np.float32(k) + ranks))
            member[ranked] = True
    else:
        for spec, weight, norm in legs:
            ranked, scores, _ = retrieve(spec, window, filters)
            vals = _NORMALIZE[norm or "none"](scores[ranked])
            fused[ranked] += np.float32(weight) * vals
            member[ranked] = True
    cand = np.flatnonzero(member)
    out = fused.astype(np.float64)
    order = np.lexsort((cand, -out[cand]))
    ranked = cand[order][:window]
    if "min_score" in p:
        ranked = ranked[out[ranked] >= float(np.float32(p["min_score"]))]
    return ranked, out, len(ranked)


# Float.MIN_VALUE: the min_score RankDocsRetrieverBuilder sets when only a sub-retriever has one
_JAVA_FLOAT_MIN = float(np.nextafter(np.float32(0), np.float32(1)))


def final_matches(
    p: dict, ranked: np.ndarray, scores: np.ndarray, leaves: np.ndarray, body: dict
) -> tuple[np.ndarray, np.ndarray]:
    """(matching documents, their scores) of the search a top-level rrf/linear retriever runs last
    (``RankDocsRetrieverBuilder#extractToSearchSourceBuilder``): a ``RankDocsQuery`` that scores
    the fused top documents with their fused score and, when total hits are tracked past them
    (``track_total_hits`` unset, ``true`` or above their count) or the search has aggregations,
    also matches every document of its sub-retrievers' top-docs queries with score 0 -- so
    ``hits.total``, aggregations and collapse ``inner_hits`` count those (linear/
    10_linear_retriever.yml "should respect rank_window_size ...": total 4 with a window of 2).
    A ``min_score`` on the retriever or one of its sub-retrievers (``sourceHasMinScore``)
    becomes the search's ``min_score`` (``Float.MIN_VALUE`` when only a sub-retriever has one),
    which the score-0 documents never reach."""
    n = len(scores)
    top_scores = np.zeros(n)
    top_scores[ranked] = scores[ranked]
    mask = np.zeros(n, dtype=bool)
    mask[ranked] = True
    track = body.get("track_total_hits")
    tracked = (
        track is None
        or track is True
        or (not isinstance(track, bool) and int(track) > len(ranked))
        or "aggs" in body
        or "aggregations" in body
        or bool(body.get("explain"))
        or bool(body.get("profile"))
    )
    if tracked:
        mask |= leaves
    children = [c.get("retriever", c) for c in p.get("retrievers") or [] if isinstance(c, dict)]
    child_min = any(isinstance(v, dict) and "min_score" in v for c in children for v in c.values())
    if "min_score" in p or child_min:
        threshold = float(np.float32(p["min_score"])) if "min_score" in p else _JAVA_FLOAT_MIN
        mask &= top_scores >= threshold
    return mask, top_scores


def _as_list(v) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


__all__ = ["fuse", "validate", "final_matches", "minmax", "l2_norm", "NORMALIZERS"]
