"""Ordering, paging, collapsing and rendering of search hits."""

from __future__ import annotations

import fnmatch
import functools
import json
import math
import re
from collections.abc import Callable

import numpy as np

from scholar_es.engine.errors import (
    EsError,
    illegal_argument,
    parsing_error,
    unsupported,
    x_content_parse_error,
)
from scholar_es.engine.index.segment.buffers import take


def union_docs(parts: list[np.ndarray]) -> np.ndarray:
    """Sorted union of sorted unique arrays (concatenate, sort, drop repeats; no hashing)."""
    if not parts:
        return np.zeros(0, dtype=np.int64)
    if len(parts) == 1:
        return parts[0].astype(np.int64, copy=False)
    a = np.concatenate(parts).astype(np.int64, copy=False)
    a.sort(kind="stable")  # timsort: merges the sorted runs
    if len(a) < 2:
        return a
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def order_by_score(
    cand: np.ndarray, scores: np.ndarray, limit: int | None = None, cand_scores: np.ndarray | None = None
) -> np.ndarray:
    """Candidates by descending score, ties by ascending doc position (Lucene's order).

    With ``limit``, only the first ``limit`` are ordered (argpartition, then an exact sort
    of everything that ties with the cut-off so the result is deterministic). ``cand_scores``:
    ``scores[cand]`` when the caller has it already (one pass over the candidates less).
    """
    s = scores[cand] if cand_scores is None else cand_scores
    if limit is not None and limit < len(cand):
        if limit <= 0:
            return cand[:0]
        cutoff = np.partition(s, len(s) - limit)[len(s) - limit]
        keep = s >= cutoff
        cand, s = cand[keep], s[keep]
    order = np.lexsort((cand, -s))
    out = cand[order]
    return out[:limit] if limit is not None else out


class SortSpec:
    """A parsed ``sort``: keys of (kind, field, descending, missing_last)."""

    def __init__(self, spec) -> None:
        items = spec if isinstance(spec, list) else [spec]
        self.keys: list[tuple[str, str, bool, bool]] = []
        self.modes: list[str | None] = []  # per key: "min", "max" or None (the order's default)
        #: per key: the type an unmapped field sorts as (``unmapped_type``), or None
        self.unmapped: list[str | None] = []
        opts: object
        for item in items:
            if isinstance(item, str):
                name, opts = item, {}
            elif isinstance(item, dict) and len(item) == 1:
                name, opts = next(iter(item.items()))
                opts = {"order": opts} if isinstance(opts, str) else opts
            else:
                raise parsing_error(f"[sort] malformed sort element [{item}]")
            if not isinstance(opts, dict):
                raise parsing_error(f"[sort] malformed options for [{name}]")
            unknown = set(opts) - {"order", "missing", "unmapped_type", "mode"}
            if unknown:
                raise parsing_error(f"[field_sort] unknown field [{next(iter(unknown))}]")
            order = str(opts.get("order", "desc" if name == "_score" else "asc")).lower()
            if order not in ("asc", "desc"):
                raise parsing_error(f"[sort] unknown order [{order}], expected asc or desc")
            missing = opts.get("missing", "_last")
            if missing not in ("_last", "_first"):
                raise unsupported("sort.missing with a value", "use _last or _first")
            kind = name if name in ("_score", "_doc", "_shard_doc") else "field"
            self.keys.append((kind, name, order == "desc", missing == "_last"))
            self.modes.append(_sort_mode(opts["mode"]) if "mode" in opts else None)
            self.unmapped.append(_unmapped_type(opts["unmapped_type"]) if "unmapped_type" in opts else None)

    @property
    def by_score_only(self) -> bool:
        return [k[:3] for k in self.keys] == [("_score", "_score", True)]

    @property
    def tracks_score(self) -> bool:
        return any(k[0] == "_score" for k in self.keys)

    def order(
        self, seg, cand: np.ndarray, scores: np.ndarray, aligned: bool = False
    ) -> tuple[np.ndarray, list]:
        """Ordered candidates and, per key, the value arrays shown as ``sort`` in hits (``scores``:
        per document of the index; ``aligned``: the candidates' own, one per candidate)."""
        lex, shown = [cand], []
        for (kind, name, desc, missing_last), mode, unmapped in zip(
            reversed(self.keys), reversed(self.modes), reversed(self.unmapped), strict=True
        ):
            if kind == "_score":
                vals = scores if aligned else scores[cand]
                lex.append(-vals if desc else vals)
                shown.append(vals.astype(np.float32))  # a Java float: shown as one (java_float)
            elif kind in ("_doc", "_shard_doc"):  # _shard_doc: one shard, index 0 (search_after.py)
                lex.append(-cand if desc else cand)
                shown.append(cand)
            else:
                num, disp = _field_sort_values(seg, name, cand, desc, mode, missing_last, unmapped)
                big = np.inf if missing_last != desc else -np.inf
                key = np.where(np.isnan(num), big, num)  # a keyword's missing value (numbers have theirs)
                lex.append(-key if desc else key)
                shown.append(disp)
        order = np.lexsort(lex)
        return cand[order], [
            s[order] if isinstance(s, np.ndarray) else [s[i] for i in order] for s in reversed(shown)
        ]


def kept_scores(sort: SortSpec | None, track_scores: bool) -> tuple[bool, bool]:
    """(each hit shows its ``_score``, ``max_score`` is kept) for a search sorted by ``sort``.
    Unsorted or by ``_score`` alone: both. By a field: the max score only with ``track_scores``
    (QueryPhaseCollectorManager: NaN, written null), each hit's score with it or where a ``_score``
    key carries it (SearchPhaseController's sortScoreIndex). A top_hits keeps scores as
    ``max_score`` (TopHitsAggregator fills them in under ``trackScores()`` only)."""
    if sort is None or sort.by_score_only:
        return True, True
    return sort.tracks_score or track_scores, track_scores


def _sort_mode(value) -> str:
    """``mode`` of a field sort: SortMode.fromString, refused at parse time when unknown."""
    mode = str(value).lower() if isinstance(value, str) else None
    if mode not in ("min", "max", "sum", "avg", "median"):
        raise x_content_parse_error(
            "[field_sort] failed to parse field [mode]",
            illegal_argument(f"Unknown SortMode [{value}]; use min, max, sum, avg or median"),
        )
    if mode not in ("min", "max"):
        raise unsupported(f"sort mode {mode}", "use min or max")
    return mode


#: ``unmapped_type`` values the engine sorts by (FieldSortBuilder builds such a field type)
UNMAPPED_TYPES = (
    "long",
    "integer",
    "short",
    "byte",
    "date",
    "boolean",
    "double",
    "float",
    "half_float",
    "keyword",
)


def _unmapped_type(value) -> str:
    if value not in UNMAPPED_TYPES:
        raise unsupported(f"sort unmapped_type [{value}]", f"use one of {', '.join(UNMAPPED_TYPES)}")
    return str(value)


def _missing_object(field_type: str, high: bool) -> tuple[float, float | int]:
    """(the value a document without one orders by, the value it shows) for a numeric field of
    ``field_type`` (XFieldComparatorSource.missingObject): the sort type's largest or smallest."""
    if field_type in FLOAT_SORTED or field_type in DOUBLE_SORTED:
        return (math.inf, math.inf) if high else (-math.inf, -math.inf)
    return (float(2**63 - 1), 2**63 - 1) if high else (-float(2**63), -(2**63))


def _shown_dtype(field_type: str) -> type:
    """The NumPy type a numeric sort value of ``field_type`` is shown from (execute._json_value)."""
    return (
        np.float32 if field_type in FLOAT_SORTED else np.float64 if field_type in DOUBLE_SORTED else np.int64
    )


def _missing_values(field_type: str, n: int, high: bool) -> tuple[np.ndarray, np.ndarray | list]:
    """(values to order by, values shown) of ``n`` documents without a value of a field of
    ``field_type``: the type's missing object (a keyword's: null), as :func:`_field_sort_values`."""
    if field_type == "keyword":
        return np.full(n, np.nan), [None] * n
    order_by, shown = _missing_object(field_type, high)
    return np.full(n, order_by), np.full(n, shown, dtype=_shown_dtype(field_type))


def java_round(x: np.ndarray) -> np.ndarray:
    """Java's ``Math.round`` (half up: ``floor(x + 1/2)`` computed exactly, saturated at the long
    range; NaN stays NaN here), which ScaledFloatFieldMapper applies to ``value * scaling_factor``
    (NumPy's ``round`` is half to even)."""
    with np.errstate(over="ignore", invalid="ignore"):
        low = np.floor(x)
        return np.clip(low + (x - low >= 0.5), -float(2**63), float(2**63 - 1))


def scaled_doc_values(values: np.ndarray, factor: float) -> np.ndarray:
    """A scaled_float's doc values: the long ``Math.round(value * factor)`` read back as
    ``long * (1d / factor)`` (ScaledFloatLeafFieldData); NaN stays."""
    with np.errstate(over="ignore"):
        return java_round(values * factor) * (1.0 / factor)


#: field types Elasticsearch sorts as Java doubles (NumericType DOUBLE, SCALED_FLOAT)
DOUBLE_SORTED = frozenset({"double", "scaled_float"})

#: field types Elasticsearch sorts as Java floats (``IndexNumericFieldData.NumericType``: FLOAT and
#: HALF_FLOAT sort as ``SortField.Type.FLOAT``): their values compared, and shown, as floats
FLOAT_SORTED = frozenset({"float", "half_float"})


def _field_sort_values(
    seg,
    name: str,
    cand: np.ndarray,
    desc: bool,
    mode: str | None = None,
    missing_last: bool = True,
    unmapped_type: str | None = None,
):
    """(values to order by, values shown as ``sort``) of field ``name`` for ``cand``. A number
    sorts as Elasticsearch's ``SortField`` type for the field (IndexNumericFieldData.NumericType):
    FLOAT (float, half_float: the float, shown as one), DOUBLE (double, scaled_float: a double,
    2.0 shown as 2.0) or LONG (the rest: an integer); a document without a value takes the type's
    missing object (XFieldComparatorSource.missingObject: the largest value where it sorts last
    ascending or first descending, else the smallest), which it is also shown as."""
    fs = seg.mapping.get(name)
    if fs is None:
        if unmapped_type is None:
            raise EsError(400, "query_shard_exception", f"No mapping found for [{name}] in order to sort on")
        # sorted as a field of ``unmapped_type`` that no document holds
        return _missing_values(unmapped_type, len(cand), missing_last != desc)
    if name in seg.numeric:
        _, lo, hi = seg.numeric[name].stats()
        use_max = desc if mode is None else mode == "max"  # SortMode default: max for desc, min for asc
        vals = (hi if use_max else lo)[cand]
        missing = np.isnan(vals)
        # the doc values as the field holds them: a float or half float, a scaled long
        if fs.type == "half_float":
            vals = vals.astype(np.float16)
        elif fs.type == "scaled_float":
            vals = scaled_doc_values(vals, float(fs.raw.get("scaling_factor", 1.0)))
        shown: np.ndarray = np.where(missing, 0, vals).astype(_shown_dtype(fs.type))
        order_by, missing_shown = _missing_object(fs.type, missing_last != desc)  # last xor reversed: max
        shown[missing] = missing_shown
        num = shown.astype(np.float64) if fs.type in FLOAT_SORTED or fs.type in DOUBLE_SORTED else vals
        return np.where(missing, order_by, num), shown
    if name in seg.keyword:
        col = seg.keyword[name]
        terms = col.terms()
        rank = np.empty(len(terms), dtype=np.float64)
        rank[np.argsort(np.array(terms, dtype=object), kind="stable")] = np.arange(len(terms))
        chosen = col.first[cand].astype(np.int64)
        # a document with several values sorts by its smallest (ascending) or largest (descending,
        # or as ``mode`` says: SortMode MIN/MAX), read from its row of the doc x term matrix
        counts = col.postings.row_counts()[cand]
        several = np.flatnonzero(counts > 1)
        if len(several):
            use_max = desc if mode is None else mode == "max"
            lens = counts[several]
            firsts = np.cumsum(lens) - lens  # each document's first value among the gathered ones
            at = np.repeat(col.postings.indptr[cand[several]] - firsts, lens) + np.arange(int(lens.sum()))
            ranks = rank[take(col.postings, "indices", at)].astype(np.int64)
            best = (np.maximum if use_max else np.minimum).reduceat(ranks, firsts)
            term_of_rank = np.empty(len(rank), dtype=np.int64)
            term_of_rank[rank.astype(np.int64)] = np.arange(len(rank))
            chosen[several] = term_of_rank[best]
        num = np.where(chosen >= 0, rank[np.maximum(chosen, 0)], np.nan)
        return num, [terms[f] if f >= 0 else None for f in chosen.tolist()]
    if fs.type in ("text", "dense_vector"):
        raise EsError(
            400,
            "illegal_argument_exception",
            f"Text fields are not optimised for operations that require per-document field data like "
            f"aggregations and sorting, so these operations are disabled by default. [{name}]"
            if fs.type == "text"
            else f"Field [{name}] of type [dense_vector] does not support sorting",
        )
    return np.full(len(cand), np.nan), [None] * len(cand)


def filter_source(source: dict, spec) -> dict | None:
    """Apply ``_source`` filtering (true/false, a pattern, a list, includes/excludes)."""
    if spec is None or spec is True:
        return source
    if spec is False:
        return None
    excludes: list
    if isinstance(spec, str):
        includes, excludes = [spec], []
    elif isinstance(spec, list):
        includes, excludes = spec, []
    elif isinstance(spec, dict):
        includes = _as_list(spec.get("includes", spec.get("include", [])))
        excludes = _as_list(spec.get("excludes", spec.get("exclude", [])))
    else:
        raise parsing_error(f"[_source] unsupported value [{spec}]")
    if not includes and not excludes:  # FetchSourceContext: nothing to filter, the source as stored
        return source
    return _filter(source, "", includes, excludes)


def _as_list(v) -> list:
    return [v] if isinstance(v, str) else list(v or [])


@functools.lru_cache(maxsize=256)
def _pattern(patterns: tuple[str, ...]) -> re.Pattern:
    return re.compile("|".join(fnmatch.translate(p) for p in patterns))


@functools.lru_cache(maxsize=256)
def _matcher(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a path matches one of ``patterns``: a set look-up when none has a wildcard."""
    if any(c in p for p in patterns for c in "*?[]\\"):
        rx = _pattern(patterns)
        return lambda path: rx.match(path) is not None
    return frozenset(patterns).__contains__


#: compiled patterns (None: no pattern, which includes everything / excludes nothing)
_Rx = Callable[[str], bool] | None


def _compiled(patterns: list) -> _Rx:
    return _matcher(tuple(patterns)) if patterns else None


def _filter(obj: dict, prefix: str, includes: list, excludes: list) -> dict:
    """XContentMapValues.filter: an object keeps its included (and not excluded) keys; an object
    whose own path is included keeps all of its keys but the excluded ones, even if none is left."""
    return _filter_rx(obj, prefix, _compiled(includes), _compiled(excludes))


def _filter_rx(obj: dict, prefix: str, inc: _Rx, exc: _Rx) -> dict:
    """:func:`_filter` with the patterns compiled once (``inc`` None: every key is included)."""
    out: dict = {}
    for key, value in obj.items():
        path = prefix + key
        if exc is not None and exc(path):
            continue
        included = inc is None or inc(path)
        if isinstance(value, dict):
            sub = _filter_rx(value, path + ".", None if included else inc, exc)
            if included or sub:
                out[key] = sub
        elif isinstance(value, list):
            items = _filter_list(value, path, inc, exc, included)
            if items:  # an array left empty is dropped, as Elasticsearch does
                out[key] = items
        elif included:
            out[key] = value
    return out


def _filter_list(items: list, path: str, inc: _Rx, exc: _Rx, included: bool) -> list:
    """XContentMapValues.filter over an array: each object filtered under the array's own path
    (arrays of objects are flattened: ``lists.name`` selects ``name`` in every object of ``lists``),
    nested arrays in turn, a value kept when the array's path is included; empty results dropped."""
    out: list = []
    for value in items:
        if isinstance(value, dict):
            sub = _filter_rx(value, path + ".", None if included else inc, exc)
            if sub:
                out.append(sub)
        elif isinstance(value, list):
            sub_items = _filter_list(value, path, inc, exc, included)
            if sub_items:
                out.append(sub_items)
        elif included:
            out.append(value)
    return out


def stored_source(text: str, excludes: list[str]) -> dict:
    """A stored ``_source`` (JSON text) with the mapping's ``_source.excludes`` applied."""
    source = json.loads(text)
    if not excludes or _untouched(text, tuple(excludes)):
        return source
    return _filter(source, "", [], excludes)


def shown_source(text: str, excludes: list[str], spec) -> dict | None:
    """``filter_source(stored_source(text, excludes), spec)``: a hit's ``_source`` as shown.
    Where ``spec`` lists top-level names only and the mapping's excludes are top-level names
    too, the names shown are the listed ones less the excluded ones, and each is filtered as the
    includes filter does (empty arrays dropped inside it): one pass over the document's keys
    instead of two filters (issue 29: 60 sources in the default request)."""
    plain = isinstance(spec, list) and all(isinstance(p, str) for p in spec)
    names = _shown_names(tuple(spec), tuple(excludes)) if plain else None
    if names is None:
        return filter_source(stored_source(text, excludes), spec)
    out: dict = {}
    for key, value in json.loads(text).items():
        if key not in names:
            continue
        if isinstance(value, dict):
            out[key] = _filter_rx(value, key + ".", None, None)
        elif isinstance(value, list):
            items = _filter_list(value, key, None, None, True)
            if items:
                out[key] = items
        else:
            out[key] = value
    return out


@functools.lru_cache(maxsize=256)
def _shown_names(spec: tuple, excludes: tuple[str, ...]) -> frozenset[str] | None:
    """The top-level names :func:`shown_source` keeps (None: ``spec`` or ``excludes`` is not
    a plain list of top-level names: the two filters decide). ``spec``: the listed includes."""
    if not spec:
        return None
    if not all(_plain_key(p) for p in (*spec, *excludes)):
        return None
    return frozenset(spec) - frozenset(excludes)


def _untouched(text: str, excludes: tuple[str, ...]) -> bool:
    """Whether filtering ``text``'s object by ``excludes`` surely leaves it as it is: every pattern
    is a plain top-level name (ASCII, no wildcard, dot, quote or backslash: written as itself
    in JSON) that the text does not hold in quotes, and the text holds no empty array or object
    (which the filter drops from arrays). Documents are stored with the excludes already applied
    (``IndexHandle._stored_source``), so this is the common case."""
    return (
        "[]" not in text
        and "{}" not in text
        and all(_plain_key(p) and f'"{p}"' not in text for p in excludes)
    )


@functools.lru_cache(maxsize=256)
def _plain_key(pattern: str) -> bool:
    return pattern.isascii() and pattern.isprintable() and not any(c in pattern for c in '*?[]\\."')


#: ``track_total_hits``'s default: matches are counted exactly up to this many
TRACK_TOTAL_HITS = 10_000


def total_hits(count: int, track) -> dict | None:
    """``hits.total`` under ``track_total_hits`` (default: exact up to 10,000)."""
    if track is False:
        return None
    limit = TRACK_TOTAL_HITS if track is None else (None if track is True else int(track))
    if limit is not None and count > limit:
        return {"value": limit, "relation": "gte"}
    return {"value": count, "relation": "eq"}
