"""The ``fields`` and ``docvalue_fields`` search options and ``stored_fields: _none_``.

* ``fields`` reads values from ``_source`` and returns them as the mapping parses them: always an
  array, numbers in the field's type, dates formatted with the field's format
  (``strict_date_optional_time`` unless the request names another ``format``), booleans as
  ``true``/``false``; sub-fields (``title.keyword``) too; wildcards match mapped leaf fields;
  unmapped fields are left out (Elasticsearch's ``include_unmapped: false`` default).
* ``docvalue_fields`` reads the columnar values: keywords deduplicated and sorted, numbers
  sorted (duplicates kept, as ``SortedNumericDocValues``), dates as formatted strings, booleans
  as ``true``/``false``; text fields are refused as Elasticsearch refuses them (no doc values).

Sources: ``FetchFieldsPhase``/``FieldFetcher``, ``DocValueFieldsFetchSubPhase``,
``DocValueFormat`` (``DateTime`` formats dates, ``BOOLEAN`` prints ``true``/``false``).
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import re

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index.mapping import INTEGER_TYPES, KEYWORD, TEXT, VECTOR, _coerce, keyword_normalizer
from scholar_es.engine.search.hits import java_round, scaled_doc_values
from scholar_es.engine.xcontent import java_float

_JAVA_DATE_TOKENS = [
    ("yyyy", "%Y"),
    ("uuuu", "%Y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
]
_DEFAULT_DATE_FORMATS = {
    None,
    "strict_date_optional_time",
    "date_optional_time",
    "strict_date_time",
    "date_time",
}


class FieldRequest:
    __slots__ = ("pattern", "format")

    def __init__(self, pattern: str, format: str | None) -> None:
        self.pattern, self.format = pattern, format


def parse_field_list(key: str, spec) -> list[FieldRequest]:
    """``fields`` / ``docvalue_fields``: strings or ``{"field": ..., "format": ...}`` objects."""
    items = spec if isinstance(spec, list) else [spec]
    out = []
    for item in items:
        if isinstance(item, str):
            out.append(FieldRequest(item, None))
        elif isinstance(item, dict) and isinstance(item.get("field"), str):
            unknown = set(item) - {"field", "format", "include_unmapped"}
            if unknown:
                raise parsing_error(f"[{key}] unknown field [{sorted(unknown)[0]}]")
            if item.get("include_unmapped"):
                raise unsupported(f"{key}.include_unmapped")
            fmt = item.get("format")
            out.append(FieldRequest(item["field"], None if fmt is None else str(fmt)))
        else:
            raise parsing_error(f'[{key}] expects an array of field names or {{"field": ...}} objects')
    return out


def format_date(ms: float, fmt: str | None) -> str | int:
    """A date in epoch millis rendered with an Elasticsearch date format."""
    if fmt == "epoch_millis":
        return str(int(ms))
    if fmt == "epoch_second":
        return str(int(ms // 1000))
    d = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=int(ms))
    if fmt in _DEFAULT_DATE_FORMATS:
        return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"
    if fmt in ("strict_date", "date", "yyyy-MM-dd"):
        return d.strftime("%Y-%m-%d")
    if fmt is not None and re.fullmatch(r"[yuMdHmsS\-:/ .'T]+", fmt):
        py = fmt.replace("'T'", "T")
        py = py.replace("SSS", "\x00")
        for java, c in _JAVA_DATE_TOKENS:
            py = py.replace(java, c)
        if re.search(r"[A-Za-z]", re.sub(r"%[YmdHMS]|T", "", py)):
            raise illegal_argument(
                f"Invalid format: [{fmt}]: the embedded engine supports yyyy MM dd HH mm ss SSS"
            )
        return d.strftime(py).replace("\x00", f"{d.microsecond // 1000:03d}")
    raise illegal_argument(
        f"Invalid format: [{fmt}]: the embedded engine supports epoch_millis, epoch_second, "
        "strict_date_optional_time and yyyy MM dd HH mm ss SSS patterns"
    )


def _check_format(name: str, fs, fmt: str | None) -> None:
    """Keyword and text fields take no ``format`` (DocValueFormat.RAW / TextFieldType#docValueFormat)."""
    if fmt is not None and fs is not None and fs.type in (KEYWORD, TEXT):
        raise illegal_argument(f"Field [{name}] of type [{fs.type}] does not support custom formats")


def check_source_enabled(mapping, index: str) -> None:
    """``fields`` reads ``_source``: refused when the mapping disables it (FetchFieldsPhase)."""
    if not mapping.source_enabled:
        raise illegal_argument(
            f"Unable to retrieve the requested [fields] since _source is disabled in the mappings for index [{index}]"
        )


def stored_field_requests(mapping, body: dict) -> list[FieldRequest]:
    """``stored_fields`` names of fields mapped with ``store: true`` (their values come from ``_source``)."""
    spec = body.get("stored_fields")
    names = spec if isinstance(spec, list) else [spec] if isinstance(spec, str) else []
    out = []
    for pattern in names:
        if pattern.startswith("_"):
            continue
        for name in _matching(mapping, pattern):
            fs = mapping.get(name)
            if fs is not None and fs.raw.get("store") in (True, "true"):
                out.append(FieldRequest(name, None))
    return out


def doc_value(fs, values: np.ndarray) -> np.ndarray:
    """Numbers as the field's doc values hold them: float and half_float rounded to their width,
    scaled_float to a multiple of 1/scaling_factor (what aggregations see on a cluster)."""
    if fs.type == "float":
        return values.astype(np.float32).astype(np.float64)
    if fs.type == "half_float":
        return values.astype(np.float16).astype(np.float64)
    if fs.type == "scaled_float":
        return scaled_doc_values(values, float(fs.raw.get("scaling_factor", 1.0)))
    return values


def _number(fs_type: str, v: float):
    if fs_type in INTEGER_TYPES:
        return int(v)
    if fs_type in ("float", "half_float"):
        return float(np.float32(v)) if fs_type == "float" else float(np.float16(v))
    return float(v)


def _render(fs, v, fmt: str | None, docvalue: bool):
    if fs.type == "date":
        return format_date(v, fmt or fs.raw.get("format", "").split("||")[0] or None)
    if fs.type == "boolean":
        return bool(v)
    if fmt is not None and fs.type not in (KEYWORD, TEXT):
        if fmt == "use_field_mapping":
            return _number(fs.type, v)
        raise unsupported(f"numeric format {fmt}", "leave [format] out")
    if fs.is_numeric:
        if docvalue or fs.type in INTEGER_TYPES:
            return _number(fs.type, v)
        if fs.type in ("float", "half_float"):  # NumberType.parse gives a Java float, written as one
            return java_float(np.float16(v) if fs.type == "half_float" else v)
        if fs.type == "scaled_float":  # ScaledFloatFieldMapper's fetcher: round(v * factor) / factor
            factor = float(fs.raw.get("scaling_factor", 1.0))
            return float(java_round(np.array([float(v) * factor]))[0] / factor)
        return float(v)
    return v


def _matching(mapping, pattern: str) -> list[str]:
    if any(c in pattern for c in "*?"):
        rx = re.compile(fnmatch.translate(pattern))
        return [n for n in mapping.fields if rx.match(n)]
    return [pattern] if mapping.get(pattern) is not None else []


def _leaves(obj: dict, prefix: str, out: dict[str, list]) -> None:
    for key, value in obj.items():
        _leaf_values(prefix + key, value, out)


def _leaf_values(name: str, value, out: dict[str, list]) -> None:
    """The source values of ``name`` (XContentMapValues.extractRawValues): arrays of arrays
    flattened, each object of an array of objects read under the array's own path."""
    if isinstance(value, dict):
        _leaves(value, name + ".", out)
    elif isinstance(value, list):
        for v in value:
            _leaf_values(name, v, out)
    else:
        out.setdefault(name, []).append(value)


def source_fields(
    mapping, source: dict, requests: list[FieldRequest], analysis: dict | None = None
) -> dict[str, list]:
    """The ``fields`` section of one hit, from its ``_source`` (``analysis``: the index's analysis
    settings, where a keyword field's custom normalizer is defined)."""
    raw: dict[str, list] = {}
    _leaves(source, "", raw)
    out: dict[str, list] = {}
    for req in requests:
        for name in _matching(mapping, req.pattern):
            fs = mapping.get(name)
            _check_format(name, fs, req.format)
            values = raw.get(name)
            if values is None and "." in name:  # a multi-field reads its parent's value
                parent = name.rsplit(".", 1)[0]
                if mapping.get(parent) is not None:
                    values = raw.get(parent)
            if not values or fs.type == "object":
                continue
            if fs.type == VECTOR:  # the vector's values, as floats (DenseVectorFieldMapper value fetcher)
                out[name] = [float(v) for v in values if isinstance(v, (int, float))]
                continue
            # KeywordFieldMapper.sourceValueFetcher: ignore_above on the source text, then
            # normalizeValue(normalizer(), name(), keywordValue)
            normalize = keyword_normalizer(fs, analysis) if fs.type == KEYWORD else None
            vals = []
            for v in values:
                if v is None:
                    continue
                if fs.type == KEYWORD and fs.ignore_above is not None and len(str(v)) > fs.ignore_above:
                    continue
                try:
                    c = _coerce(fs, v)
                except EsError:
                    continue
                if normalize is not None:
                    c = normalize(str(c))
                vals.append(_render(fs, c, req.format, docvalue=False))
            if vals:
                out[name] = vals
    return out


def docvalue_fields(seg, index: str, pos: int, requests: list[FieldRequest]) -> dict[str, list]:
    """The ``docvalue_fields`` of the doc at segment position ``pos``."""
    out: dict[str, list] = {}
    for req in requests:
        names = _matching(seg.mapping, req.pattern)
        if not names and not any(c in req.pattern for c in "*?"):
            continue  # unmapped: nothing, as Elasticsearch answers
        for name in names:
            fs = seg.mapping.get(name)
            _check_format(name, fs, req.format)
            if fs.type == TEXT:
                if any(c in req.pattern for c in "*?"):
                    continue
                raise illegal_argument(
                    f"Fielddata is disabled on [{name}] in [{index}]. Text fields are not optimised for "
                    "operations that require per-document field data like aggregations and sorting, so these "
                    "operations are disabled by default. Please use a keyword field instead. Alternatively, "
                    f"set fielddata=true on [{name}] in order to load field data by uninverting the inverted "
                    "index. Note that this can use significant memory."
                )
            if fs.type == KEYWORD:
                col = seg.keyword.get(name)
                if col is None:
                    continue
                p = col.postings
                terms = col.terms()
                vals = sorted(terms[t] for t in p.row_terms(pos))
            elif fs.is_numeric:
                col = seg.numeric.get(name)
                if col is None:
                    continue
                raw = np.sort(doc_value(fs, col.values[col.doc == pos]))
                vals = [_render(fs, float(v), req.format, docvalue=True) for v in raw]
            elif fs.type == VECTOR:
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    f"Field [{name}] of type [dense_vector] doesn't support docvalue_fields",
                )
            else:
                continue
            if vals:
                out[name] = vals
    return out


def check_stored_fields(body: dict) -> tuple[bool, bool]:
    """(show _id, show _source) under ``stored_fields``; raises on combinations Elasticsearch refuses."""
    spec = body.get("stored_fields")
    if spec is None:
        return True, body.get("_source", True) is not False
    if not isinstance(spec, (str, list)) or (
        isinstance(spec, list) and not all(isinstance(n, str) for n in spec)
    ):
        raise parsing_error("[stored_fields] expects a field name or an array of field names")
    names = spec if isinstance(spec, list) else [spec]
    if "_none_" in names:
        if len(names) > 1:
            raise illegal_argument("[stored_fields] cannot be disabled if [stored_fields] lists other fields")
        if body.get("_source") not in (None, False):
            raise illegal_argument("[stored_fields] cannot be disabled if [_source] is requested")
        return False, False
    # Only _id (and _source when asked) are stored by the engine; listing fields hides _source
    # unless _source is requested, as Elasticsearch does.
    return True, "_source" in names or body.get("_source") not in (None, False)


__all__ = [
    "parse_field_list",
    "source_fields",
    "docvalue_fields",
    "check_stored_fields",
    "check_source_enabled",
    "stored_field_requests",
    "format_date",
    "doc_value",
]
