"""Metric aggregations: ``value_count``, ``cardinality``, ``min``, ``max``, ``avg``, ``sum``,
``stats`` and ``top_hits``.

* stats/min/max/avg/sum: doubles; an empty set gives ``null`` (``sum`` gives 0.0), a date field
  adds ``value_as_string`` (``150_stats_metric.yml``).
* cardinality: exact (HyperLogLog++ counts exactly below its precision threshold, 3000 by default).
* top_hits: the bucket's hits, rendered by the search (``AggContext.render_hits``), within
  ``index.max_inner_result_window`` (100).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from scholar_es.engine.errors import illegal_argument, unsupported
from scholar_es.engine.search.aggregations.tree import (
    Agg,
    AggContext,
    Runner,
    check_keys,
    int_param,
    non_negative_param,
)
from scholar_es.engine.search.aggregations.values import FieldValues, format_date, with_missing
from scholar_es.engine.validate import check_bool, flag


def _metric_values(
    agg: Agg, ctx: AggContext, mask: np.ndarray, numeric_only: bool = True
) -> tuple[FieldValues, np.ndarray, np.ndarray]:
    """The field's values in ``mask``, the ``missing`` value added for the docs without one."""
    check_keys(agg, {"field", "missing", "format", "value_type", "precision_threshold", "execution_hint"})
    if "format" in agg.params:
        raise unsupported(f"{agg.kind}.format")
    vs = FieldValues(ctx, agg, numeric_only=numeric_only)
    docs, vals = vs.in_mask(mask)
    if "missing" in agg.params:
        miss = vs.missing_docs(mask)
        mv = vs.parse_value(agg.params["missing"])  # a bad value is a 400 even when no doc lacks one
        if len(miss):
            docs, vals = with_missing(docs, vals, miss, _missing_number(vs, mv))
    return vs, docs, vals


def _missing_number(vs: FieldValues, mv: Any) -> float:
    """The ``missing`` value as a number: a keyword's term id (a new one past the field's terms),
    an unmapped field's value taking the type the value has."""
    if vs.kind == "keyword":
        tid = vs.terms.index(mv) if mv in vs.terms else len(vs.terms)
        if tid == len(vs.terms):
            vs.terms = [*vs.terms, mv]
        return tid
    if vs.kind == "unmapped":
        vs.kind = "double" if not isinstance(mv, str) else "keyword"
        if isinstance(mv, str):
            vs.terms = [mv]
            return 0
        return float(mv)
    return mv


def _single_value(fn: Callable[[np.ndarray], float | None]) -> Runner:
    def run(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
        vs, _, vals = _metric_values(agg, ctx, mask)
        value = fn(vals.astype(np.float64))
        out: dict = {"value": value}
        if vs.kind == "date" and value is not None:
            out["value_as_string"] = format_date(value)
        return out

    return run


def _f(v: Any) -> float:
    return float(v)


_min = _single_value(lambda v: _f(v.min()) if len(v) else None)
_max = _single_value(lambda v: _f(v.max()) if len(v) else None)
_sum = _single_value(lambda v: _f(math.fsum(v)) if len(v) else 0.0)
_avg = _single_value(lambda v: _f(math.fsum(v) / len(v)) if len(v) else None)


def _stats(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    vs, _, vals = _metric_values(agg, ctx, mask)
    vals = vals.astype(np.float64)
    n = len(vals)
    out: dict[str, float | str | None] = {
        "count": n,
        "min": _f(vals.min()) if n else None,
        "max": _f(vals.max()) if n else None,
        "avg": _f(math.fsum(vals) / n) if n else None,
        "sum": _f(math.fsum(vals)) if n else 0.0,
    }
    if vs.kind == "date" and n:
        for k in ("min", "max", "avg", "sum"):
            v = out[k]
            assert isinstance(v, float)  # every stat of a non-empty set is a number
            out[f"{k}_as_string"] = format_date(v)
    return out


def _value_count(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    _, _, vals = _metric_values(agg, ctx, mask, numeric_only=False)
    return {"value": int(len(vals))}


def _cardinality(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    non_negative_param(agg, "precision_threshold", 3000, label="precisionThreshold")
    _, _, vals = _metric_values(agg, ctx, mask, numeric_only=False)
    return {"value": int(len(np.unique(vals)))}


def _top_hits(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    check_keys(agg, {"size", "from", "sort", "_source", "track_scores", "version", "explain"})
    for key in ("track_scores", "version", "explain"):  # TopHitsAggregationBuilder booleans
        if key in agg.params:
            check_bool(key, agg.params[key])
    if flag(agg.params.get("explain")):
        raise unsupported("top_hits.explain")
    size, from_ = int_param(agg, "size", 3), int_param(agg, "from", 0)
    if size < 0 or from_ < 0:
        raise illegal_argument(f"[{'size' if size < 0 else 'from'}] parameter cannot be negative")
    if from_ + size > 100:  # index.max_inner_result_window
        raise illegal_argument(
            f"Top hits result window is too large, the top hits aggregator [{agg.name}]'s from + size must "
            f"be less than or equal to: [100] but was [{from_ + size}]. This limit can be set by changing "
            "the [index.max_inner_result_window] index level setting."
        )
    return ctx.render_hits(agg.params, mask)


RUNNERS: dict[str, Runner] = {
    "value_count": _value_count,
    "cardinality": _cardinality,
    "min": _min,
    "max": _max,
    "avg": _avg,
    "sum": _sum,
    "stats": _stats,
    "top_hits": _top_hits,
}
METRIC_TYPES: tuple[str, ...] = tuple(RUNNERS)
