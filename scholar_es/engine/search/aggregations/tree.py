"""The parsed aggregation tree, what it runs against, and running it.

An :class:`Agg` is one named aggregation of a request's ``aggs`` body, parsed by
:mod:`~scholar_es.engine.search.aggregations.parser`, which also binds the function that computes it
(``Agg.run``, as an ``AggregationBuilder`` knows its aggregator). :func:`run_aggs` runs a level of the
tree over a mask of documents; bucket aggregations call it again for each bucket's sub-aggregations
(:func:`sub_aggs`, :func:`sub_aggs_of`). The parameter readers shared by every aggregation type
(unknown keys, numbers, integers) give Elasticsearch's parse errors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from scholar_es.engine.errors import illegal_argument, x_content_parse_error

Runner = Callable[["Agg", "AggContext", np.ndarray], dict]


class AggContext:
    """What aggregations need from the search: the segment, a query parser, hit rendering."""

    def __init__(
        self,
        seg,
        index: str,
        parse_query: Callable[[dict], np.ndarray],
        scores: np.ndarray,
        render_hits: Callable[[dict, np.ndarray], dict],
        typed_keys: bool = False,
    ) -> None:
        self.seg, self.index = seg, index
        self.parse_query = parse_query  # query body -> mask of matching docs
        self.scores = scores
        self.render_hits = render_hits  # (top_hits body, bucket mask) -> {"hits": ...}
        self.typed_keys = typed_keys  # the typed_keys URL parameter: "sterms#name"


class Agg:
    """One aggregation of the request: its name, type, parameters, sub-aggregations, ``meta`` and
    the function that computes it."""

    def __init__(
        self, name: str, kind: str, params: Any, subs: dict[str, Agg], meta: Any, run: Runner
    ) -> None:
        self.name, self.kind, self.params, self.subs, self.meta = name, kind, params, subs, meta
        self.run = run


def run_aggs(aggs: dict[str, Agg], ctx: AggContext, mask: np.ndarray) -> dict:
    """The ``aggregations`` object of one level of the tree over the documents in ``mask``."""
    out = {}
    for name, agg in aggs.items():
        result = agg.run(agg, ctx, mask)
        if agg.meta is not None:
            result = {"meta": agg.meta, **result}
        typed = result.pop("_type", agg.kind)
        out[f"{typed}#{name}" if ctx.typed_keys else name] = result
    return out


def sub_aggs(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    """The sub-aggregations of one bucket, given as a mask."""
    return run_aggs(agg.subs, ctx, mask) if agg.subs else {}


def sub_aggs_of(agg: Agg, ctx: AggContext, size: int, docs: np.ndarray) -> dict:
    """The sub-aggregations of one bucket, given as its doc positions among ``size`` docs."""
    if not agg.subs:
        return {}
    sub_mask = np.zeros(size, dtype=bool)
    sub_mask[docs] = True
    return run_aggs(agg.subs, ctx, sub_mask)


# --- parameters ----------------------------------------------------------------------------


def check_keys(agg: Agg, allowed: set[str]) -> None:
    """A key the aggregation type does not declare is ObjectParser's 400."""
    unknown = set(agg.params) - allowed
    if unknown:
        raise x_content_parse_error(f"[{agg.kind}] unknown field [{sorted(unknown)[0]}]")


def num(agg: Agg, v: Any) -> float:
    """A number inside an aggregation's parameters (bounds, offsets)."""
    try:
        if isinstance(v, (bool, dict, list)):
            raise ValueError(v)
        return float(v)
    except (TypeError, ValueError):
        raise x_content_parse_error(f"[{agg.kind}] [{agg.name}] expected a number, got [{v}]") from None


def int_param(agg: Agg, key: str, default: int) -> int:
    """An integer parameter (``size``, ``min_doc_count``, ...), ``default`` when absent."""
    v = agg.params.get(key, default)
    try:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            raise ValueError(v)
        return int(v)
    except (ValueError, OverflowError):
        raise x_content_parse_error(f"[{agg.kind}] failed to parse field [{key}]") from None


def non_negative_param(agg: Agg, key: str, default: int, label: str | None = None) -> int:
    """An integer parameter that must be >= 0 (``min_doc_count``, ``precision_threshold``, named
    ``label`` in the message as the builder's setter names it)."""
    v = int_param(agg, key, default)
    if v < 0:
        raise illegal_argument(
            f"[{label or key}] must be greater than or equal to 0. Found [{v}] in [{agg.name}]"
        )
    return v
