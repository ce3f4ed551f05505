"""Aggregations, computed the way Elasticsearch computes them on a single shard.

Supported: ``terms`` (keyword, numeric, date and boolean fields), ``value_count``, ``cardinality``
(exact), ``min``/``max``/``avg``/``sum``/``stats``, ``histogram``, ``range``, ``filter``/``filters``,
``top_hits``; bucket aggregations take sub-aggregations. Every other aggregation type is refused
by name (a 400), never approximated.

Sources for the numbers and their order:

* terms: ``TermsAggregationBuilder`` (size 10, min_doc_count 1, order ``_count`` desc with
  ``_key`` asc as the tie-breaker, ``InternalOrder.compound``), ``doc_count_error_upper_bound`` and
  ``sum_other_doc_count`` as ``InternalTerms`` writes them (the error bound is 0 on one shard);
  numeric keys are longs or doubles, dates and booleans also carry ``key_as_string``
  (rest-api-spec ``search.aggregation/20_terms.yml``).
* histogram: ``key = floor((value - offset) / interval) * interval + offset``
  (``Histogram#round``), min_doc_count 0 fills the gaps between the first and last bucket.
* range: ``from`` inclusive, ``to`` exclusive, ranges sorted by (from, to) (``RangeAggregator``),
  keys ``"from-to"`` with Java's ``Double.toString`` and ``*`` for an open end (``40_range.yml``).
* stats/min/max/avg/sum: doubles; an empty set gives ``null`` (``sum`` gives 0.0)
  (``150_stats_metric.yml``).
* cardinality: exact (HyperLogLog++ counts exactly below its precision threshold, 3000 by default).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal

import numpy as np

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
    x_content_parse_error,
)
from scholar_es.engine.index.mapping import INTEGER_TYPES, KEYWORD, TEXT, parse_date
from scholar_es.engine.search.fetch_fields import doc_value
from scholar_es.engine.search.fetch_fields import format_date as _format_date
from scholar_es.engine.validate import json_token

BUCKET_TYPES = ("terms", "histogram", "range", "filter", "filters")
METRIC_TYPES = ("value_count", "cardinality", "min", "max", "avg", "sum", "stats", "top_hits")
SUPPORTED = BUCKET_TYPES + METRIC_TYPES
# Aggregation types Elasticsearch has that the engine refuses by name (a clear 400, not a guess).
KNOWN_UNSUPPORTED = (
    "adjacency_matrix",
    "auto_date_histogram",
    "avg_bucket",
    "boxplot",
    "bucket_script",
    "bucket_selector",
    "bucket_sort",
    "composite",
    "cumulative_sum",
    "date_histogram",
    "date_range",
    "derivative",
    "diversified_sampler",
    "extended_stats",
    "geo_bounds",
    "geo_centroid",
    "geohash_grid",
    "geotile_grid",
    "global",
    "ip_range",
    "matrix_stats",
    "max_bucket",
    "median_absolute_deviation",
    "min_bucket",
    "missing",
    "moving_fn",
    "multi_terms",
    "nested",
    "percentile_ranks",
    "percentiles",
    "random_sampler",
    "rare_terms",
    "reverse_nested",
    "sampler",
    "scripted_metric",
    "serial_diff",
    "significant_terms",
    "significant_text",
    "stats_bucket",
    "string_stats",
    "sum_bucket",
    "t_test",
    "top_metrics",
    "variable_width_histogram",
    "weighted_avg",
)
_NAME_RX = re.compile(r"[\[\]>]")


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


# --- parsing ---------------------------------------------------------------------------


class Agg:
    def __init__(self, name: str, kind: str, params, subs: dict[str, Agg], meta) -> None:
        self.name, self.kind, self.params, self.subs, self.meta = name, kind, params, subs, meta


def parse_aggs(spec) -> dict[str, Agg]:
    """``aggs`` body -> parsed tree; errors are Elasticsearch's parse errors."""
    if not isinstance(spec, dict):
        raise parsing_error(f"Expected [START_OBJECT] for [aggregations] but found [{type(spec).__name__}]")
    out: dict[str, Agg] = {}
    for name, body in spec.items():
        if _NAME_RX.search(name):
            raise parsing_error(
                f"Invalid aggregation name [{name}]. Aggregation names can contain any character except "
                "'[', ']', and '>'"
            )
        if not isinstance(body, dict):
            raise parsing_error(
                f"Aggregation definition for [{name}] starts with a [{body}], expected a [START_OBJECT]."
            )
        kind = None
        subs: dict[str, Agg] = {}
        meta = None
        for key, value in body.items():
            if key in ("aggs", "aggregations"):
                if subs:
                    raise parsing_error(f"Found two sub aggregation definitions under [{name}]")
                subs = parse_aggs(value)
            elif key == "meta":
                meta = value
            elif kind is not None:
                raise parsing_error(
                    f"Found two aggregation type definitions in [{name}]: [{kind[0]}] and [{key}]"
                )
            else:
                kind = (key, value)
        if kind is None:
            raise parsing_error(f"Missing definition for aggregation [{name}]")
        typ, params = kind
        if typ not in SUPPORTED:
            if typ in KNOWN_UNSUPPORTED:
                raise unsupported(f"aggregation type {typ}", f"supported types: {', '.join(SUPPORTED)}")
            raise parsing_error(f"Unknown aggregation type [{typ}]")
        if subs and typ in METRIC_TYPES:
            raise EsError(
                400,
                "aggregation_initialization_exception",
                f"Aggregator [{name}] of type [{typ}] cannot accept sub-aggregations",
            )
        if typ != "filter" and not isinstance(params, dict):
            raise parsing_error(f"[{typ}] aggregation [{name}] expects an object")
        out[name] = Agg(name, typ, params, subs, meta)
    return out


def _check_keys(agg: Agg, allowed: set[str]) -> None:
    unknown = set(agg.params) - allowed
    if unknown:
        raise EsError(400, "x_content_parse_exception", f"[{agg.kind}] unknown field [{sorted(unknown)[0]}]")


# --- values ------------------------------------------------------------------------------


class _Values:
    """The doc values of one field: (doc, value) pairs, values as numbers or term ids."""

    def __init__(self, ctx: AggContext, agg: Agg, numeric_only: bool = False) -> None:
        field = agg.params.get("field")
        if field is not None and not isinstance(field, str):
            raise parsing_error(
                f"[{agg.kind}] failed to parse field [field]: expected a string, got [{field}]"
            )
        if not isinstance(field, str):
            if "script" in agg.params:
                raise unsupported(f"{agg.kind}.script", "aggregate on a field")
            raise illegal_argument("Required one of fields [field, script], but none were specified. ")
        seg = ctx.seg
        self.field = field
        self.fs = seg.mapping.get(field)
        self.kind = "unmapped"
        self.terms: list[str] = []
        self.docs = np.zeros(0, dtype=np.int64)
        self.vals = np.zeros(0)
        fs = self.fs
        if fs is None:
            value_type = agg.params.get("value_type")
            self.kind = {"string": "keyword", "keyword": "keyword", None: "unmapped"}.get(
                value_type, value_type
            )
            if self.kind in ("long", "integer"):
                self.kind = "long"
            return
        if fs.type == TEXT:
            raise illegal_argument(
                f"Fielddata is disabled on [{field}] in [{ctx.index}]. Text fields are not optimised for "
                "operations that require per-document field data like aggregations and sorting, so these "
                "operations are disabled by default. Please use a keyword field instead. Alternatively, set "
                f"fielddata=true on [{field}] in order to load field data by uninverting the inverted index. "
                "Note that this can use significant memory."
            )
        if fs.type == KEYWORD:
            if numeric_only:
                raise illegal_argument(
                    f"Field [{field}] of type [keyword] is not supported for aggregation [{agg.kind}]"
                )
            self.kind = "keyword"
            col = seg.keyword.get(field)
            if col is not None:
                ptr = col.postings.indptr
                self.docs = np.repeat(np.arange(len(ptr) - 1, dtype=np.int64), np.diff(ptr))
                self.vals = col.postings.indices.astype(np.int64)
                self.terms = col.terms()
            return
        if fs.is_numeric:
            self.kind = (
                "date"
                if fs.type == "date"
                else "boolean"
                if fs.type == "boolean"
                else ("long" if fs.type in INTEGER_TYPES else "double")
            )
            col = seg.numeric.get(field)
            if col is not None:
                self.docs, self.vals = col.doc, doc_value(fs, col.values)
            return
        raise illegal_argument(
            f"Field [{field}] of type [{fs.type}] is not supported for aggregation [{agg.kind}]"
        )

    @property
    def numeric(self) -> bool:
        return self.kind in ("long", "double", "date", "boolean")

    def in_mask(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = mask[self.docs] if len(self.docs) else np.zeros(0, dtype=bool)
        return self.docs[keep], self.vals[keep]

    def missing_docs(self, mask: np.ndarray) -> np.ndarray:
        has = np.zeros(len(mask), dtype=bool)
        has[self.docs] = True
        return np.flatnonzero(mask & ~has)

    def parse_value(self, v):
        """A request value (``missing``, ranges) in this field's value space."""
        try:
            if self.kind == "date":
                return parse_date(v)
            if self.kind == "boolean":
                if isinstance(v, bool):
                    return 1.0 if v else 0.0
                if str(v) not in ("true", "false"):
                    raise ValueError(v)
                return 1.0 if str(v) == "true" else 0.0
            if self.kind in ("long", "double"):
                if isinstance(v, (dict, list)):
                    raise ValueError(v)
                return float(v)
        except (TypeError, ValueError, OverflowError):
            raise illegal_argument(
                f"failed to parse [{v}] as a value of field [{self.field}] of type [{self.fs.type if self.fs else self.kind}]"
            ) from None
        if self.kind == "unmapped":
            return v
        return v if isinstance(v, str) else _java_scalar(v)

    def key(self, v):
        """The ``key`` of a bucket for a value (term id for keywords)."""
        if self.kind == "keyword" or self.kind == "unmapped":
            return v
        if self.kind in ("long", "date", "boolean"):
            return int(v)
        return float(v)

    def key_as_string(self, v) -> str | None:
        if self.kind == "date":
            return format_date(v)
        if self.kind == "boolean":
            return "true" if v else "false"
        return None


def _java_scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def format_date(ms: float) -> str:
    """A date key as Elasticsearch renders it (``strict_date_optional_time``, UTC, millis)."""
    return str(_format_date(ms, None))


def java_double(v: float) -> str:
    """Java's ``Double.toString`` (``50.0``, ``1.0E7``, ``1.0E-4``), used in range keys."""
    if math.isinf(v) or math.isnan(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    a = abs(v)
    if a == 0 or 1e-3 <= a < 1e7:
        return repr(float(v))  # Python's shortest repr is decimal in this range, like Java's
    sign, digits, exponent = Decimal(repr(float(v))).normalize().as_tuple()
    ds = "".join(map(str, digits))
    exp10 = len(ds) - 1 + int(exponent)
    return f"{'-' if sign else ''}{ds[0]}.{ds[1:] or '0'}E{exp10}"


# --- evaluation ----------------------------------------------------------------------------


def run_aggs(aggs: dict[str, Agg], ctx: AggContext, mask: np.ndarray) -> dict:
    out = {}
    for name, agg in aggs.items():
        result = _run(agg, ctx, mask)
        typed = result.pop("_type", agg.kind)
        out[f"{typed}#{name}" if ctx.typed_keys else name] = result
    return out


def _run(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    out = _RUNNERS[agg.kind](agg, ctx, mask)
    if agg.meta is not None:
        out = {"meta": agg.meta, **out}
    return out


# ``typed_keys``: the result class's NAME (StringTerms "sterms", LongTerms "lterms", ...)
_TERMS_TYPE = {
    "keyword": "sterms",
    "long": "lterms",
    "date": "lterms",
    "boolean": "lterms",
    "double": "dterms",
}


def _subs(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    return run_aggs(agg.subs, ctx, mask) if agg.subs else {}


def _num(agg: Agg, v) -> float:
    """A number inside an aggregation's parameters (bounds, offsets)."""
    try:
        if isinstance(v, (bool, dict, list)):
            raise ValueError(v)
        return float(v)
    except (TypeError, ValueError):
        raise EsError(
            400, "x_content_parse_exception", f"[{agg.kind}] [{agg.name}] expected a number, got [{v}]"
        ) from None


def _int_param(agg: Agg, key: str, default: int) -> int:
    v = agg.params.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise EsError(400, "x_content_parse_exception", f"[{agg.kind}] failed to parse field [{key}]")
    try:
        return int(v)
    except (ValueError, OverflowError):
        raise EsError(
            400, "x_content_parse_exception", f"[{agg.kind}] failed to parse field [{key}]"
        ) from None


# terms ------------------------------------------------------------------------------------


def _terms(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    _check_keys(
        agg,
        {
            "field",
            "size",
            "shard_size",
            "min_doc_count",
            "shard_min_doc_count",
            "order",
            "missing",
            "include",
            "exclude",
            "execution_hint",
            "collect_mode",
            "value_type",
            "show_term_doc_count_error",
            "format",
        },
    )
    size = _int_param(agg, "size", 10)
    if size <= 0:
        raise illegal_argument(f"[size] must be greater than 0. Found [{size}] in [{agg.name}]")
    if "shard_size" in agg.params:  # TermsAggregationBuilder#shardSize; only bounds-checked here
        shard_size = _int_param(agg, "shard_size", 0)
        if shard_size <= 0:
            raise illegal_argument(
                f"[shardSize] must be greater than 0. Found [{shard_size}] in [{agg.name}]"
            )
    min_doc_count = _int_param(agg, "min_doc_count", 1)
    if min_doc_count < 0:
        raise illegal_argument(
            f"[min_doc_count] must be greater than or equal to 0. Found [{min_doc_count}] in [{agg.name}]"
        )
    if "format" in agg.params:
        raise unsupported("terms.format")
    vs = _Values(ctx, agg)
    docs, vals = vs.in_mask(mask)
    order = _parse_order(agg, default=[("_count", False)])
    simple = (
        min_doc_count >= 1
        and all(k not in agg.params for k in ("missing", "include", "exclude"))
        and all(path in ("_key", "_count") for path, _ in order)
        and (vs.kind == "keyword" or vs.numeric)
    )
    if simple:
        return _terms_vectorized(agg, ctx, mask, vs, docs, vals, size, min_doc_count, order)
    # (key value, doc positions) per bucket; a doc counts once per distinct value
    buckets: dict = {}
    if vs.kind == "keyword":
        for tid, d in _groups(vals, docs):
            buckets[vs.terms[int(tid)]] = d
        if min_doc_count == 0:
            for t in vs.terms:
                buckets.setdefault(t, np.zeros(0, dtype=np.int64))
    elif vs.numeric:
        for v, d in _groups(vals, docs):
            buckets[float(v)] = d
        if min_doc_count == 0:
            for v in np.unique(vs.vals):
                buckets.setdefault(float(v), np.zeros(0, dtype=np.int64))
    if "missing" in agg.params:
        miss = vs.missing_docs(mask)
        key = vs.parse_value(agg.params["missing"])  # a bad value is a 400 even when no doc lacks one
        if len(miss):
            if vs.kind == "unmapped":
                vs.kind = (
                    "keyword"
                    if isinstance(key, str)
                    else "long"
                    if isinstance(key, int) or float(key).is_integer()
                    else "double"
                )
                key = key if isinstance(key, str) else float(key)
            have = buckets.get(key, np.zeros(0, dtype=np.int64))
            buckets[key] = np.union1d(have, miss)
    buckets = _include_exclude(agg, vs, buckets)
    rows = [(key, len(d), d) for key, d in buckets.items() if len(d) >= min_doc_count]
    by_sub = any(path not in ("_key", "_count") for path, _ in order)

    def subs_of(d: np.ndarray) -> dict:
        if not agg.subs:
            return {}
        sub_mask = np.zeros(len(mask), dtype=bool)
        sub_mask[d] = True
        return _subs(agg, ctx, sub_mask)

    # sub-aggregations are computed for every bucket only when the order needs them
    order_key = _order_key(agg, order, vs)
    if by_sub:
        rendered = sorted(((key, count, subs_of(d)) for key, count, d in rows), key=order_key)
        top, rest = rendered[:size], [count for _, count, _ in rendered[size:]]
    else:
        rows.sort(key=order_key)
        top = [(key, count, subs_of(d)) for key, count, d in rows[:size]]
        rest = [count for _, count, _ in rows[size:]]
    return _terms_result(agg, vs, top, int(sum(rest)))


def _terms_result(agg: Agg, vs: _Values, top: list, other: int) -> dict:
    out_buckets = []
    for key, count, subs in top:
        b: dict = {"key": vs.key(key)}
        s = vs.key_as_string(key)
        if s is not None:
            b["key_as_string"] = s
        b["doc_count"] = count
        if agg.params.get("show_term_doc_count_error"):
            b["doc_count_error_upper_bound"] = 0
        b.update(subs)
        out_buckets.append(b)
    return {
        "_type": _TERMS_TYPE.get(vs.kind, "umterms"),
        "doc_count_error_upper_bound": 0,
        "sum_other_doc_count": other,
        "buckets": out_buckets,
    }


def _terms_vectorized(agg, ctx, mask, vs: _Values, docs, vals, size: int, min_doc_count: int, order) -> dict:
    """The common ``terms`` request (order by ``_count``/``_key``, no missing/include/exclude):
    counts and the bucket order in numpy, buckets built only for the ``size`` returned."""
    keys, starts, d = _grouped(vals, docs)
    counts = np.diff(np.append(starts, len(d)))
    if vs.kind == "keyword":
        terms = np.array(vs.terms, dtype=str) if vs.terms else np.zeros(0, dtype=str)
        rank = np.empty(len(terms), dtype=np.int64)
        rank[np.argsort(terms, kind="stable")] = np.arange(len(terms))  # code-point = UTF-8 byte order
        key_rank = rank[keys.astype(np.int64)] if len(keys) else keys.astype(np.int64)
    else:
        key_rank = np.arange(len(keys))  # numeric keys come out ascending
    sort_keys = []
    for path, asc in reversed(order):  # np.lexsort: the last key is the primary one
        v = key_rank if path == "_key" else counts
        sort_keys.append(v if asc else -v)
    keep = counts >= min_doc_count
    idx = np.flatnonzero(keep)
    ranked = idx[np.lexsort([k[idx] for k in sort_keys])] if len(idx) else idx
    top, other = ranked[:size], int(counts[ranked[size:]].sum())
    rows = []
    for j in top:
        bucket_docs = d[starts[j] : starts[j] + counts[j]]
        if agg.subs:
            sub_mask = np.zeros(len(mask), dtype=bool)
            sub_mask[bucket_docs] = True
            subs = _subs(agg, ctx, sub_mask)
        else:
            subs = {}
        key = vs.terms[int(keys[j])] if vs.kind == "keyword" else float(keys[j])
        rows.append((key, int(counts[j]), subs))
    return _terms_result(agg, vs, rows, other)


def _grouped(keys: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _groups(keys: np.ndarray, docs: np.ndarray) -> list[tuple[np.number, np.ndarray]]:
    """(key, distinct docs holding it) for every key, keys ascending."""
    k, starts, d = _grouped(keys, docs)
    return list(zip(k, np.split(d, starts[1:]), strict=True)) if len(k) else []


def _include_exclude(agg: Agg, vs: _Values, buckets: dict) -> dict:
    inc, exc = agg.params.get("include"), agg.params.get("exclude")
    if inc is None and exc is None:
        return buckets
    if isinstance(inc, dict):
        raise unsupported("terms.include partitions")

    def matcher(spec):
        if spec is None:
            return None
        if isinstance(spec, str):
            if vs.kind != "keyword":
                raise EsError(
                    400,
                    "aggregation_execution_exception",
                    f"Aggregation [{agg.name}] cannot support regular expression style include/exclude "
                    "settings as they can only be applied to string fields. Use an array of values for "
                    "include/exclude clauses",
                )
            rx = _lucene_regexp(agg, spec)
            return lambda k: rx.fullmatch(str(k)) is not None
        if not isinstance(spec, list) or any(isinstance(v, (dict, list)) for v in spec):
            raise parsing_error(
                f"[{agg.name}] include/exclude must be a string (regular expression) or an array"
            )
        values = {vs.parse_value(v) for v in spec}
        return lambda k: k in values

    m_inc, m_exc = matcher(inc), matcher(exc)
    return {
        k: d for k, d in buckets.items() if (m_inc is None or m_inc(k)) and (m_exc is None or not m_exc(k))
    }


# Characters whose meaning differs between Lucene's RegExp (ALL flags: @ & ~ < > # " operators,
# backslash escapes any char, implicit anchoring) and Python's re: refused rather than guessed.
_LUCENE_ONLY = set('@&~<>#"\\^$')


def _lucene_regexp(agg: Agg, spec: str) -> re.Pattern:
    bad = sorted(set(spec) & _LUCENE_ONLY)
    if bad:
        raise unsupported(
            f"terms include/exclude regular expression with [{''.join(bad)}]",
            "use an array of values, or a pattern of literals, ., *, +, ?, |, (), [] and {}",
        )
    try:
        return re.compile(spec)
    except re.error as e:
        raise illegal_argument(f"invalid regular expression [{spec}] in [{agg.name}]: {e}") from None


def _parse_order(agg: Agg, default: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
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

    def __init__(self, v) -> None:
        self.v = v

    def __lt__(self, other: _Desc) -> bool:
        return other.v < self.v

    def __eq__(self, other) -> bool:
        return isinstance(other, _Desc) and self.v == other.v


def _order_key(agg: Agg, order: list[tuple[str, bool]], vs: _Values | None):
    def key(row):
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


# metrics ----------------------------------------------------------------------------------


def _metric_values(agg: Agg, ctx: AggContext, mask: np.ndarray, numeric_only: bool = True):
    _check_keys(agg, {"field", "missing", "format", "value_type", "precision_threshold", "execution_hint"})
    if "format" in agg.params:
        raise unsupported(f"{agg.kind}.format")
    vs = _Values(ctx, agg, numeric_only=numeric_only)
    docs, vals = vs.in_mask(mask)
    if "missing" in agg.params:
        miss = vs.missing_docs(mask)
        mv = vs.parse_value(agg.params["missing"])  # a bad value is a 400 even when no doc lacks one
        if len(miss):
            if vs.kind == "keyword":
                tid = vs.terms.index(mv) if mv in vs.terms else len(vs.terms)
                if tid == len(vs.terms):
                    vs.terms = [*vs.terms, mv]
                mv = tid
            elif vs.kind == "unmapped":
                vs.kind = "double" if not isinstance(mv, str) else "keyword"
                if isinstance(mv, str):
                    vs.terms, mv = [mv], 0
                else:
                    mv = float(mv)
            docs = np.concatenate([docs, miss])
            vals = np.concatenate([vals.astype(np.float64), np.full(len(miss), float(mv))])
    elif numeric_only and vs.kind == "unmapped":
        vals = np.zeros(0)
    return vs, docs, vals


def _single_value(fn):
    def run(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
        vs, _, vals = _metric_values(agg, ctx, mask)
        value = fn(vals.astype(np.float64))
        out: dict = {"value": value}
        if vs.kind == "date" and value is not None:
            out["value_as_string"] = format_date(value)
        return out

    return run


def _f(v) -> float:
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
    threshold = _int_param(agg, "precision_threshold", 3000)
    if threshold < 0:
        raise illegal_argument(
            f"[precisionThreshold] must be greater than or equal to 0. Found [{threshold}] in [{agg.name}]"
        )
    _, _, vals = _metric_values(agg, ctx, mask, numeric_only=False)
    return {"value": int(len(np.unique(vals)))}


def _top_hits(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    _check_keys(agg, {"size", "from", "sort", "_source", "track_scores", "version", "explain"})
    if agg.params.get("explain"):
        raise unsupported("top_hits.explain")
    size, from_ = _int_param(agg, "size", 3), _int_param(agg, "from", 0)
    if size < 0 or from_ < 0:
        raise illegal_argument(f"[{'size' if size < 0 else 'from'}] parameter cannot be negative")
    if from_ + size > 100:  # index.max_inner_result_window
        raise illegal_argument(
            f"Top hits result window is too large, the top hits aggregator [{agg.name}]'s from + size must "
            f"be less than or equal to: [100] but was [{from_ + size}]. This limit can be set by changing "
            "the [index.max_inner_result_window] index level setting."
        )
    return ctx.render_hits(agg.params, mask)


# buckets ----------------------------------------------------------------------------------


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
    _check_keys(
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
    offset = _num(agg, agg.params.get("offset", 0))
    min_doc_count = _int_param(agg, "min_doc_count", 0)
    if min_doc_count < 0:
        raise illegal_argument(
            f"[min_doc_count] must be greater than or equal to 0. Found [{min_doc_count}] in [{agg.name}]"
        )

    # Bucket index in double, as Elasticsearch computes a key: Math.floor((value - offset) / interval)
    # * interval + offset (Histogram round); never cast to int64, where a tiny interval overflows.
    def index_of(value: float) -> float:
        return float(np.floor((value - offset) / interval))

    hard = _bounds(agg, "hard_bounds")
    ext = _bounds(agg, "extended_bounds")
    vs, docs, vals = _metric_values_for_buckets(agg, ctx, mask)
    with np.errstate(over="ignore"):  # an overflowing index is +-inf, as a double is in Java
        idx = np.floor((vals - offset) / interval)
    if hard:
        keys = idx * interval + offset
        keep = np.ones(len(idx), dtype=bool)
        # DoubleBounds#contain on the rounded key
        if hard.get("min") is not None:
            keep &= keys >= _num(agg, hard["min"])
        if hard.get("max") is not None:
            keep &= keys <= _num(agg, hard["max"])
        idx, docs = idx[keep], docs[keep]
    buckets: dict[float, np.ndarray] = {float(i): d for i, d in _groups(idx, docs)}
    if min_doc_count == 0:
        lo = min(buckets) if buckets else None
        hi = max(buckets) if buckets else None
        if ext.get("min") is not None:
            e = index_of(_num(agg, ext["min"]))
            lo = e if lo is None else min(lo, e)
        if ext.get("max") is not None:
            e = index_of(_num(agg, ext["max"]))
            hi = e if hi is None else max(hi, e)
        if hard.get("min") is not None and lo is not None:
            lo = max(lo, float(np.ceil((_num(agg, hard["min"]) - offset) / interval)))
        if hard.get("max") is not None and hi is not None:
            hi = min(hi, index_of(_num(agg, hard["max"])))
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
    rows = []
    for i in sorted(buckets):
        d = buckets[i]
        if len(d) < min_doc_count:
            continue
        sub_mask = np.zeros(len(mask), dtype=bool)
        sub_mask[d] = True
        rows.append((i * interval + offset, len(d), _subs(agg, ctx, sub_mask)))
    order = _parse_order(agg, default=[("_key", True)])
    rows.sort(key=_order_key(agg, order, vs))
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


def _metric_values_for_buckets(agg: Agg, ctx: AggContext, mask: np.ndarray):
    vs = _Values(ctx, agg, numeric_only=True)
    docs, vals = vs.in_mask(mask)
    vals = vals.astype(np.float64)
    if "missing" in agg.params:
        miss = vs.missing_docs(mask)
        mv = float(vs.parse_value(agg.params["missing"]))  # a bad value is a 400 even when none is missing
        if len(miss):
            docs = np.concatenate([docs, miss])
            vals = np.concatenate([vals, np.full(len(miss), mv)])
    return vs, docs, vals


def _range(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    _check_keys(agg, {"field", "ranges", "keyed", "missing", "format"})
    ranges = agg.params.get("ranges")
    if not isinstance(ranges, list) or not ranges:
        raise illegal_argument(f"No [ranges] specified for the [{agg.name}] aggregation")
    if "format" in agg.params:
        raise unsupported("range.format")
    vs, docs, vals = _metric_values_for_buckets(agg, ctx, mask)
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
        sub_mask = np.zeros(len(mask), dtype=bool)
        sub_mask[d] = True
        b: dict = {
            "key": key
            if key is not None
            else f"{'*' if math.isinf(lo) else java_double(lo)}-{'*' if math.isinf(hi) else java_double(hi)}"
        }
        if not math.isinf(lo):
            b["from"] = lo
            if vs.kind == "date":
                b["from_as_string"] = format_date(lo)
        if not math.isinf(hi):
            b["to"] = hi
            if vs.kind == "date":
                b["to_as_string"] = format_date(hi)
        b["doc_count"] = int(len(d))
        b.update(_subs(agg, ctx, sub_mask))
        out.append(b)
    if agg.params.get("keyed"):
        return {"buckets": {b["key"]: {k: v for k, v in b.items() if k != "key"} for b in out}}
    return {"buckets": out}


def _filter(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    if not isinstance(agg.params, dict):
        raise parsing_error(f"[filter] aggregation [{agg.name}] expects a query object")
    sub_mask = mask & ctx.parse_query(agg.params)
    return {"doc_count": int(sub_mask.sum()), **_subs(agg, ctx, sub_mask)}


def _filters(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    _check_keys(agg, {"filters", "other_bucket", "other_bucket_key", "keyed"})
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
        sub_mask = mask & m
        buckets.append((key, {"doc_count": int(sub_mask.sum()), **_subs(agg, ctx, sub_mask)}))
    if other:
        sub_mask = mask & ~any_match
        buckets.append((other_key, {"doc_count": int(sub_mask.sum()), **_subs(agg, ctx, sub_mask)}))
    if keyed:
        return {"buckets": dict(buckets)}
    if isinstance(spec, dict):
        return {"buckets": [{"key": k, **b} for k, b in buckets]}
    return {"buckets": [b for _, b in buckets]}


_RUNNERS: dict[str, Callable[[Agg, AggContext, np.ndarray], dict]] = {
    "terms": _terms,
    "histogram": _histogram,
    "range": _range,
    "filter": _filter,
    "filters": _filters,
    "value_count": _value_count,
    "cardinality": _cardinality,
    "min": _min,
    "max": _max,
    "avg": _avg,
    "sum": _sum,
    "stats": _stats,
    "top_hits": _top_hits,
}

__all__ = [
    "parse_aggs",
    "run_aggs",
    "AggContext",
    "SUPPORTED",
    "KNOWN_UNSUPPORTED",
    "format_date",
    "java_double",
]
