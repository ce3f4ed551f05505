"""``search_after``: the hits that sort strictly after a given hit's ``sort`` values.

Elasticsearch (SearchAfterBuilder) turns the values into a Lucene ``FieldDoc`` and collects only
the documents that compare after it under the request's sort; ``hits.total`` and aggregations
still count every match. Here each sort key compares the candidates with its value in the sort's
direction, missing values placed as the key's ``missing`` says (``_last``: after every value), and
the first key that differs decides; a document equal on every key is not after.

``_shard_doc`` (the point-in-time tiebreaker) is the document's position in the pinned snapshot
(Elasticsearch's ``shard index << 32 | doc``, with the one shard's index 0); it needs a point in
time, and a point-in-time search with a ``sort`` that does not end with it gets it appended
(SearchRequest: unless ``search_after`` has exactly as many values as the sort).
"""

from __future__ import annotations

import math

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument
from scholar_es.engine.index.mapping import parse_date
from scholar_es.engine.search.hits import DOUBLE_SORTED, FLOAT_SORTED, SortSpec, _field_sort_values

SHARD_DOC = "_shard_doc"


def sort_names(sort) -> list[str]:
    items = sort if isinstance(sort, list) else [sort]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and len(item) == 1:
            out.append(next(iter(item)))
    return out


def problems(body: dict, pit: bool, scroll: bool) -> list[str]:
    """SearchRequest.validate's messages about ``search_after`` and ``_shard_doc``."""
    out = []
    if "sort" in body and not pit and SHARD_DOC in sort_names(body["sort"]):
        out.append(f"[{SHARD_DOC}] sort field cannot be used without [point in time]")
    if body.get("search_after") is not None:
        if scroll:
            out.append("[search_after] cannot be used in a scroll context")
        if body.get("from", 0) not in (0, None, -1):
            out.append("`from` parameter must be set to 0 when `search_after` is used")
    return out


def with_tiebreaker(body: dict) -> dict:
    """A point-in-time search's body with ``_shard_doc`` appended to its ``sort``
    (SearchRequest#rewrite), when the sort does not end with it already."""
    if "sort" not in body:
        return body
    items = body["sort"] if isinstance(body["sort"], list) else [body["sort"]]
    if not items:
        return body
    after = body.get("search_after")
    if after is not None and (not isinstance(after, list) or len(after) != len(items) + 1):
        return body  # the tiebreaker is not among the search_after values
    if sort_names(items[-1:]) == [SHARD_DOC]:
        return body
    return {**body, "sort": [*items, {SHARD_DOC: "asc"}]}


def keep_after(seg, sort: SortSpec | None, cand: np.ndarray, scores: np.ndarray, after) -> np.ndarray:
    """The candidates (ascending positions) that sort strictly after ``after``."""
    if sort is None:
        raise illegal_argument("Sort must contain at least one field.")
    if not isinstance(after, list):
        raise illegal_argument("[search_after] must be an array of values")
    if len(after) != len(sort.keys):
        raise illegal_argument(f"search_after has {len(after)} value(s) but sort has {len(sort.keys)}.")
    decided = np.zeros(len(cand), dtype=bool)
    keep = np.zeros(len(cand), dtype=bool)
    for (kind, name, desc, missing_last), mode, unmapped, value in zip(
        sort.keys, sort.modes, sort.unmapped, after, strict=True
    ):
        cmp = _compare(seg, kind, name, desc, missing_last, mode, cand, scores, value, unmapped)
        now = ~decided & (cmp != 0)
        keep[now] = cmp[now] > 0
        decided |= cmp != 0
        if decided.all():
            break
    return cand[keep]


def _compare(seg, kind, name, desc, missing_last, mode, cand, scores, value, unmapped=None) -> np.ndarray:
    """Per candidate: 1 when it sorts after ``value`` on this key, -1 before, 0 equal."""
    if value is None and not _keyword_sorted(seg, name, unmapped):
        # Elasticsearch fails on a null top value of a numeric comparator (a 500 before
        # elastic/elasticsearch#132434, a 400 since): refused here, with the value to send
        raise illegal_argument(
            f"search_after value for [{name}] is null; a numeric sort takes the value the hit shows "
            "(a document without the field shows its missing value, e.g. 9223372036854775807)"
        )
    if kind == "_score":  # SearchAfterBuilder.convertValueFromSortType: SCORE reads floatValue()
        vals = scores[cand].astype(np.float32).astype(np.float64)
        return _directional(vals, _as_float(_number(name, value)), desc, missing_last)
    if kind in ("_doc", SHARD_DOC):
        return _directional(cand.astype(np.float64), _number(name, value), desc, missing_last)
    num, shown = _field_sort_values(seg, name, cand, desc, mode, missing_last, unmapped)
    if _keyword_sorted(seg, name, unmapped):
        target = None if value is None else str(value)
        present = np.array([s is not None for s in shown], dtype=bool)
        raw = np.zeros(len(cand), dtype=np.int8)
        if target is not None:
            raw = np.array([0 if s is None else (s > target) - (s < target) for s in shown], dtype=np.int8)
        return _with_missing(raw, present, target is None, desc, missing_last)
    fs = seg.mapping.get(name)
    field_type = fs.type if fs is not None else unmapped
    target_num = _date(name, value) if field_type == "date" else _number(name, value)
    if field_type in FLOAT_SORTED:  # a FLOAT sort: floatValue(), as the field's values
        target_num = _as_float(target_num)
    elif field_type not in DOUBLE_SORTED:  # a LONG sort: a number's longValue(), a text's parseLong
        target_num = _as_long(value, target_num)
    return _directional(num, target_num, desc, missing_last)


def _keyword_sorted(seg, name: str, unmapped: str | None) -> bool:
    """Whether the key sorts by terms (a keyword field, or an unmapped one sorted as keyword)."""
    return name in seg.keyword or (seg.mapping.get(name) is None and unmapped == "keyword")


def _as_float(value: float | None) -> float | None:
    """A search_after value as Java's ``floatValue()`` reads it (None: missing; beyond a float's
    range: infinite, as Java's cast)."""
    if value is None:
        return None
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _as_long(given, value: float | None) -> float | None:
    """A search_after value of a LONG sort as SearchAfterBuilder reads it: a number's
    ``longValue()`` (a fraction truncated toward zero), a text's ``DocValueFormat.RAW.parseLong``
    (``Math.round(Math.floor(Double.parseDouble))``: floored); saturated at the long range (Java's
    conversions); held as a float, as the engine holds long sort values. None: no number (a NaN,
    which :func:`_number` reads as none)."""
    if value is None:
        return None
    if math.isinf(value):
        return float(2**63 - 1) if value > 0 else -float(2**63)
    whole = math.floor(value) if isinstance(given, str) else math.trunc(value)
    return float(max(min(whole, 2**63 - 1), -(2**63)))


def _directional(vals: np.ndarray, target: float | None, desc: bool, missing_last: bool) -> np.ndarray:
    present = ~np.isnan(vals)
    raw = np.zeros(len(vals), dtype=np.int8)
    if target is not None:  # compared, not subtracted: infinite missing objects tie with themselves
        safe = np.where(present, vals, 0.0)
        raw = (safe > target).astype(np.int8) - (safe < target).astype(np.int8)
    return _with_missing(raw, present, target is None, desc, missing_last)


def _with_missing(raw, present, target_missing: bool, desc: bool, missing_last: bool) -> np.ndarray:
    """``raw`` (ascending comparison of present values) in the sort's direction, with missing
    values (the document's or the target's) placed where the sort puts them."""
    out = (-raw if desc else raw).astype(np.int8)
    missing_side = 1 if missing_last else -1  # where a missing value sorts, whatever the order
    if target_missing:
        out = np.where(present, -missing_side, 0).astype(np.int8)
    else:
        out = np.where(present, out, missing_side).astype(np.int8)
    return out


def _number(name: str, value) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double: its text parsed as a double is infinite
        return math.inf if value > 0 else -math.inf
    except (TypeError, ValueError):
        raise illegal_argument(f"Failed to parse search_after value for field [{name}].") from None
    # NaN: read as no value (what the engine showed a missing number as before f93aea4)
    return None if number != number else number


def _date(name: str, value) -> float | None:
    if value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return _number(name, value)
    try:
        return float(parse_date(value))
    except (TypeError, ValueError) as e:
        raise EsError(
            400,
            "parse_exception",
            f"failed to parse date field [{value}] with format [strict_date_optional_time||epoch_millis]: [{e}]",
        ) from None
