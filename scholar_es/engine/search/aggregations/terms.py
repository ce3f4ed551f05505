"""The ``terms`` aggregation on keyword, numeric, date and boolean fields.

``TermsAggregationBuilder``'s defaults (size 10, min_doc_count 1, order ``_count`` desc with ``_key``
asc as the tie-breaker, ``InternalOrder.compound``); ``doc_count_error_upper_bound`` and
``sum_other_doc_count`` as ``InternalTerms`` writes them (the error bound is 0 on one shard);
numeric keys are longs or doubles, dates and booleans also carry ``key_as_string``
(rest-api-spec ``search.aggregation/20_terms.yml``). ``include``/``exclude`` take arrays of values
or the regular expressions Lucene's ``RegExp`` and Python's ``re`` read alike. The common request
(ordered by count or key, no missing/include/exclude) is counted and ordered in numpy.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.search.aggregations.buckets import grouped, groups, order_key, parse_order
from scholar_es.engine.search.aggregations.tree import (
    Agg,
    AggContext,
    check_keys,
    int_param,
    non_negative_param,
    sub_aggs_of,
)
from scholar_es.engine.search.aggregations.values import FieldValues

# ``typed_keys``: the result class's NAME (StringTerms "sterms", LongTerms "lterms", ...)
_TERMS_TYPE = {
    "keyword": "sterms",
    "long": "lterms",
    "date": "lterms",
    "boolean": "lterms",
    "double": "dterms",
}


def terms(agg: Agg, ctx: AggContext, mask: np.ndarray) -> dict:
    """The ``terms`` aggregation over the docs in ``mask``."""
    check_keys(
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
    size = int_param(agg, "size", 10)
    if size <= 0:
        raise illegal_argument(f"[size] must be greater than 0. Found [{size}] in [{agg.name}]")
    if "shard_size" in agg.params:  # TermsAggregationBuilder#shardSize; only bounds-checked here
        shard_size = int_param(agg, "shard_size", 0)
        if shard_size <= 0:
            raise illegal_argument(
                f"[shardSize] must be greater than 0. Found [{shard_size}] in [{agg.name}]"
            )
    min_doc_count = non_negative_param(agg, "min_doc_count", 1)
    if "format" in agg.params:
        raise unsupported("terms.format")
    vs = FieldValues(ctx, agg)
    docs, vals = vs.in_mask(mask)
    order = parse_order(agg, default=[("_count", False)])
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
        for tid, d in groups(vals, docs):
            buckets[vs.terms[int(tid)]] = d
        if min_doc_count == 0:
            for t in vs.terms:
                buckets.setdefault(t, np.zeros(0, dtype=np.int64))
    elif vs.numeric:
        for v, d in groups(vals, docs):
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
        return sub_aggs_of(agg, ctx, len(mask), d)

    # sub-aggregations are computed for every bucket only when the order needs them
    sort_key = order_key(order)
    if by_sub:
        rendered = sorted(((key, count, subs_of(d)) for key, count, d in rows), key=sort_key)
        top, rest = rendered[:size], [count for _, count, _ in rendered[size:]]
    else:
        rows.sort(key=sort_key)
        top = [(key, count, subs_of(d)) for key, count, d in rows[:size]]
        rest = [count for _, count, _ in rows[size:]]
    return _terms_result(agg, vs, top, int(sum(rest)))


def _terms_result(agg: Agg, vs: FieldValues, top: list[tuple[Any, int, dict]], other: int) -> dict:
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


def _terms_vectorized(
    agg: Agg,
    ctx: AggContext,
    mask: np.ndarray,
    vs: FieldValues,
    docs: np.ndarray,
    vals: np.ndarray,
    size: int,
    min_doc_count: int,
    order: list[tuple[str, bool]],
) -> dict:
    """The common ``terms`` request (order by ``_count``/``_key``, no missing/include/exclude):
    counts and the bucket order in numpy, buckets built only for the ``size`` returned."""
    keys, starts, d = grouped(vals, docs)
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
        subs = sub_aggs_of(agg, ctx, len(mask), d[starts[j] : starts[j] + counts[j]])
        key = vs.terms[int(keys[j])] if vs.kind == "keyword" else float(keys[j])
        rows.append((key, int(counts[j]), subs))
    return _terms_result(agg, vs, rows, other)


def _include_exclude(agg: Agg, vs: FieldValues, buckets: dict) -> dict:
    inc, exc = agg.params.get("include"), agg.params.get("exclude")
    if inc is None and exc is None:
        return buckets
    if isinstance(inc, dict):
        raise unsupported("terms.include partitions")

    def matcher(spec: Any) -> Callable[[Any], bool] | None:
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
