"""Bucket aggregations other than ``terms`` -- ``histogram``, ``range``, ``filter``, ``filters`` --
and what every bucket aggregation shares: grouping docs by value and the bucket ``order``.

* histogram: ``key = floor((value - offset) / interval) * interval + offset``
  (``Histogram#round``), min_doc_count 0 fills the gaps between the first and last bucket
  (``extended_bounds`` widen, ``hard_bounds`` clip), at most ``search.max_buckets`` (65,536).
* range: ``from`` inclusive, ``to`` exclusive, ranges sorted by (from, to) (``RangeAggregator``),
  keys ``"from-to"`` with Java's ``Double.toString`` and ``*`` for an open end (``40_range.yml``).
* filters: keyed filters sorted by key (``FiltersAggregationBuilder``), an optional other bucket.
* order: ``_key``/``_count`` or a single- or multi-value metric sub-aggregation (``avg``,
  ``stats.max``), the key breaking ties (``InternalOrder.compound``); null metrics sort last.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
    x_content_parse_error,
)
from scholar_es.engine.search.aggregations.metrics import METRIC_TYPES
from scholar_es.engine.search.aggregations.tree import (
    Agg,
    AggContext,
    Runner,
    check_keys,
    non_negative_param,
    num,
    sub_aggs,
    sub_aggs_of,
)
from scholar_es.engine.search.aggregations.values import FieldValues, format_date, java_double, with_missing
from scholar_es.engine.validate import json_token

# --- grouping and order --------------------------------------------------------------------


def grouped(keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys ascending, start of each key's run, docs grouped by key): a doc counts once
    per value; O(n log n)."""
    if len(keys) == 0:
        return keys[:0], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((docs, keys))
    k, d = keys[order], docs[order].astype(np.int64)
    keep = np.ones(len(k), dtype=bool)
    keep[1:] = (k[1:] != k[:-1]) | (d[1:] != d[:-1])
    k, d = k[keep], d[keep]
    starts = np.flatnonzero(np.concatenate([[True], k[1:] != k[:-1]]))
    return k[starts], starts, d


def groups(keys: np.ndarray, docs: np.ndarray) -> list[tuple[np.number, np.ndarray]]:
    """(key, distinct docs holding it) for every key, keys ascending."""
    k, starts, d = grouped(keys, docs)
    return list(zip(k, np.split(d, starts[1:]), strict=True)) if len(k) else []


def parse_order(agg: Agg, default: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The ``order`` parameter as (path, ascending) pairs, ``_key`` ascending last as the
    tie-breaker; a path must name a metric sub-aggregation."""
    spec = agg.params.get("order")
    items = [] if spec is None else spec if isinstance(spec, list) else [spec]
    out = [] if items else list(default)
    for item in items:
        if not isinstance(item, dict) or len(item) != 1:
            raise parsing_error(f"Order elements must be of type object in [{agg.name}]")
        path, direction = next(iter(item.items()))
        if str(direction).lower() not in ("asc", "desc"):
            raise parsing_error(f"Unknown order direction [{direction}]")
        if path == "_term":
            path = "_key"
        if path not in ("_key", "_count"):
            head = path.split(".", 1)[0].split("[", 1)[0]
            sub = agg.subs.get(head)
            if sub is None or sub.kind not in METRIC_TYPES or sub.kind == "top_hits":
                raise EsError(
                    400,
                    "aggregation_execution_exception",
                    f"Invalid aggregation order path [{path}]. The provided aggregation [{head}] either does "
                    "not exist, or is a pipeline aggregation and cannot be used to sort the buckets.",
                )
        out.append((path, str(direction).lower() == "asc"))
    if not any(p == "_key" for p, _ in out):
        out.append(("_key", True))  # InternalOrder.compound: the key breaks ties
    return out


class _Desc:
    """Wraps a sort key so that it sorts in reverse."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return other.v < self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v


def order_key(order: list[tuple[str, bool]]) -> Callable[[tuple[Any, int, dict]], tuple]:
    """The sort key of a (key, doc count, sub-aggregation results) row under ``order``."""

    def key(row: tuple[Any, int, dict]) -> tuple:
        k, count, subs = row
        parts: list[object] = []
        for path, asc in order:
            if path == "_key":
                v = k
            elif path == "_count":
                v = count
            else:
                head, _, stat = path.partition(".")
                res = subs[head]
                v = res.get(stat or "value") if stat else res.get("value")
                # null metrics sort last whatever the direction (InternalOrder's missing handling)
                v = (1, 0.0) if v is None else (0, v if asc else -v)
                parts.append(v)
                continue
            parts.append(v if asc else _Desc(v))
        return tuple(parts)

    return key


# --- histogram and range -------------------------------------------------------------------


def _numeric_values(
    agg: Agg, ctx: AggContext, mask: np.ndarray
) -> tuple[FieldValues, np.ndarray, np.ndarray]:
    """A numeric field's values in ``mask`` as doubles, ``missing`` added for the docs without one."""
    vs = FieldValues(ctx, agg, numeric_only=True)
    docs, vals = vs.in_mask(mask)
    vals = vals.astype(np.float64)
    if "missing" in agg.params:
        miss = vs.missing_docs(mask)
        mv = float(vs.parse_value(agg.params["missing"]))  # a bad value is a 400 even when none is missing
        if len(miss):
            docs, vals = with_missing(docs, vals, miss, mv)
    return vs, docs, vals


def _bounds(agg: Agg, key: str) -> dict:
    """``hard_bounds``/``extended_bounds``: HistogramAggregationBuilder declares both as
    ``ValueType.OBJECT``, so ObjectParser refuses any other token (400 x_content_parse_exception)."""
    if key not in agg.params:
        return {}
    value = agg.params[key]
    if not isinstance(value, dict):
        raise x_content_parse_error(
            f"[histogram] {key} doesn't support values of type: {json_token(value)}; "
            f'write e.g. "{key}": {{"min": 0, "max": 100}}'
        )
    return value


def _histogram(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    check_keys(
        agg,
        {
            "field",
            "interval",
            "offset",
            "min_doc_count",
            "extended_bounds",
            "hard_bounds",
            "missing",
            "keyed",
            "order",
        },
    )
    try:
        interval = float(agg.params["interval"])
    except (KeyError, TypeError, ValueError):
        interval = 0.0
    if not interval > 0:
        raise illegal_argument(f"[interval] must be >0 for histogram aggregation [{agg.name}]")
    offset = num(agg, agg.params.get("offset", 0))
    min_doc_count = non_negative_param(agg, "min_doc_count", 0)

    # Bucket index in double, as Elasticsearch computes a key: Math.floor((value - offset) / interval)
    # * interval + offset (Histogram round); never cast to int64, where a tiny interval overflows.
    def index_of(value: float) -> float:
        return float(np.floor((value - offset) / interval))

    hard = _bounds(agg, "hard_bounds")
    ext = _bounds(agg, "extended_bounds")
    vs, docs, vals = _numeric_values(agg, ctx, mask)
    with np.errstate(over="ignore"):  # an overflowing index is +-inf, as a double is in Java
        idx = np.floor((vals - offset) / interval)
    if hard:
        keys = idx * interval + offset
        keep = np.ones(len(idx), dtype=bool)
        # DoubleBounds#contain on the rounded key
        if hard.get("min") is not None:
            keep &= keys >= num(agg, hard["min"])
        if hard.get("max") is not None:
            keep &= keys <= num(agg, hard["max"])
        idx, docs = idx[keep], docs[keep]
    buckets: dict[float, np.ndarray] = {float(i): d for i, d in groups(idx, docs)}
    if min_doc_count == 0:
        lo = min(buckets) if buckets else None
        hi = max(buckets) if buckets else None
        if ext.get("min") is not None:
            e = index_of(num(agg, ext["min"]))
            lo = e if lo is None else min(lo, e)
        if ext.get("max") is not None:
            e = index_of(num(agg, ext["max"]))
            hi = e if hi is None else max(hi, e)
        if hard.get("min") is not None and lo is not None:
            lo = max(lo, float(np.ceil((num(agg, hard["min"]) - offset) / interval)))
        if hard.get("max") is not None and hi is not None:
            hi = min(hi, index_of(num(agg, hard["max"])))
        if lo is not None and hi is not None and lo <= hi:
            span = hi - lo + 1  # a double: inf, or too coarse to count, is over the limit too
            if not span <= 65_536:  # search.max_buckets
                was = f"{span:.0f}" if math.isfinite(span) and span < 1e18 else "more than 65536"
                raise EsError(
                    400,
                    "too_many_buckets_exception",
                    "Trying to create too many buckets. Must be less than or equal to: [65536] but was "
                    f"[{was}]. This limit can be set by changing the [search.max_buckets] cluster "
                    "level setting.",
                    max_buckets=65536,
                )
            for n in range(int(lo), int(hi) + 1):
                buckets.setdefault(float(n), np.zeros(0, dtype=np.int64))
    rows = [
        (i * interval + offset, len(d), sub_aggs_of(agg, ctx, len(mask), d))
        for i, d in sorted(buckets.items())
        if len(d) >= min_doc_count
    ]
    rows.sort(key=order_key(parse_order(agg, default=[("_key", True)])))
    out = []
    for k, count, subs in rows:
        b: dict = {"key": float(k)}
        if vs.kind == "date":
            b["key_as_string"] = format_date(k)
        b["doc_count"] = count
        b.update(subs)
        out.append(b)
    if agg.params.get("keyed"):
        return {"buckets": {java_double(b["key"]): b for b in out}}
    return {"buckets": out}


def _range(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    check_keys(agg, {"field", "ranges", "keyed", "missing", "format"})
    ranges = agg.params.get("ranges")
    if not isinstance(ranges, list) or not ranges:
        raise illegal_argument(f"No [ranges] specified for the [{agg.name}] aggregation")
    if "format" in agg.params:
        raise unsupported("range.format")
    vs, docs, vals = _numeric_values(agg, ctx, mask)
    parsed = []
    for r in ranges:
        if not isinstance(r, dict) or set(r) - {"from", "to", "key"}:
            raise parsing_error(f"[ranges] unknown field in [{r}]")
        lo = vs.parse_value(r["from"]) if r.get("from") is not None else -math.inf
        hi = vs.parse_value(r["to"]) if r.get("to") is not None else math.inf
        parsed.append((float(lo), float(hi), r.get("key")))
    parsed.sort(key=lambda t: (t[0], t[1]))  # RangeAggregator sorts ranges by (from, to)
    out = []
    for lo, hi, key in parsed:
        hit = (vals >= lo) & (vals < hi)
        d = np.unique(docs[hit])
        b: dict = {
            "key": key
            if key is not None
            else f"{'*' if math.isinf(lo) else java_double(lo)}-{'*' if math.isinf(hi) else java_double(hi)}"
        }
        for end, value in (("from", lo), ("to", hi)):
            if not math.isinf(value):
                b[end] = value
                if vs.kind == "date":
                    b[f"{end}_as_string"] = format_date(value)
        b["doc_count"] = int(len(d))
        b.update(sub_aggs_of(agg, ctx, len(mask), d))
        out.append(b)
    if agg.params.get("keyed"):
        return {"buckets": {b["key"]: {k: v for k, v in b.items() if k != "key"} for b in out}}
    return {"buckets": out}


# --- filter and filters --------------------------------------------------------------------


def _filter(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    if not isinstance(agg.params, dict):
        raise parsing_error(f"[filter] aggregation [{agg.name}] expects a query object")
    return _mask_bucket(agg, ctx, mask & ctx.parse_query(agg.params))


def _mask_bucket(agg: Agg, ctx: AggContext, sub_mask: np.ndarray) -> dict:
    """A bucket given as a mask: its doc count and sub-aggregations."""
    return {"doc_count": int(sub_mask.sum()), **sub_aggs(agg, ctx, sub_mask)}


def _filters(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    check_keys(agg, {"filters", "other_bucket", "other_bucket_key", "keyed"})
    spec = agg.params.get("filters")
    if not spec:
        raise illegal_argument("[filters] cannot be empty.")
    if isinstance(spec, dict):
        # FiltersAggregationBuilder keeps keyed filters sorted by key
        named = sorted(spec.items())
        keyed = bool(agg.params.get("keyed", True))
    elif isinstance(spec, list):
        named = [(str(i), q) for i, q in enumerate(spec)]
        keyed = False
    else:
        raise parsing_error(f"[filters] aggregation [{agg.name}] requires [filters] as an object or an array")
    other = bool(agg.params.get("other_bucket", False)) or "other_bucket_key" in agg.params
    other_key = str(agg.params.get("other_bucket_key", "_other_"))
    buckets, any_match = [], np.zeros(len(mask), dtype=bool)
    for key, q in named:
        m = ctx.parse_query(q)
        any_match |= m
        buckets.append((key, _mask_bucket(agg, ctx, mask & m)))
    if other:
        buckets.append((other_key, _mask_bucket(agg, ctx, mask & ~any_match)))
    if keyed:
        return {"buckets": dict(buckets)}
    if isinstance(spec, dict):
        return {"buckets": [{"key": k, **b} for k, b in buckets]}
    return {"buckets": [b for _, b in buckets]}


RUNNERS: dict[str, Runner] = {
    "histogram": _histogram,
    "range": _range,
    "filter": _filter,
    "filters": _filters,
}
