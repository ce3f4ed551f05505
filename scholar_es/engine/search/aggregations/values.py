"""A field's doc values as aggregations read them, and how their keys and values are written.

:class:`FieldValues` reads one field's column of the segment as (doc, value) pairs -- keyword values
as term ids, numbers, dates (epoch millis) and booleans (0/1) as numbers -- and refuses the fields
Elasticsearch refuses (``text`` without fielddata, types without doc values). It parses request
values (``missing``, range bounds, include/exclude lists) in the field's value space and gives a
bucket's ``key``/``key_as_string``. ``format_date`` and ``java_double`` write dates and doubles as
Elasticsearch writes them in keys.
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

import numpy as np

from scholar_es.engine.errors import illegal_argument, parsing_error, unsupported
from scholar_es.engine.index.mapping import INTEGER_TYPES, KEYWORD, TEXT, parse_date
from scholar_es.engine.search.aggregations.tree import Agg, AggContext
from scholar_es.engine.search.fetch_fields import doc_value
from scholar_es.engine.search.fetch_fields import format_date as _format_date


class FieldValues:
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
        """The (doc, value) pairs of the docs in ``mask``."""
        keep = mask[self.docs] if len(self.docs) else np.zeros(0, dtype=bool)
        return self.docs[keep], self.vals[keep]

    def missing_docs(self, mask: np.ndarray) -> np.ndarray:
        """The docs in ``mask`` without a value."""
        has = np.zeros(len(mask), dtype=bool)
        has[self.docs] = True
        return np.flatnonzero(mask & ~has)

    def parse_value(self, v: Any) -> Any:
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

    def key(self, v: Any) -> Any:
        """The ``key`` of a bucket for a value (term id for keywords)."""
        if self.kind == "keyword" or self.kind == "unmapped":
            return v
        if self.kind in ("long", "date", "boolean"):
            return int(v)
        return float(v)

    def key_as_string(self, v: Any) -> str | None:
        """The ``key_as_string`` of a bucket: dates and booleans have one."""
        if self.kind == "date":
            return format_date(v)
        if self.kind == "boolean":
            return "true" if v else "false"
        return None


def with_missing(
    docs: np.ndarray, vals: np.ndarray, missing: np.ndarray, value: float
) -> tuple[np.ndarray, np.ndarray]:
    """(doc, value) pairs with the docs that lack a value holding ``value`` (the ``missing``
    parameter), values as doubles."""
    return (
        np.concatenate([docs, missing]),
        np.concatenate([vals.astype(np.float64), np.full(len(missing), float(value))]),
    )


def _java_scalar(v: Any) -> str:
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
