"""Index mappings: which fields exist, their types, analyzers and vector settings.

Parses the ``mappings`` body of ``PUT <index>`` the way Elasticsearch does for the types
the embedded engine supports, and turns a document's ``_source`` into per-field values.
Unknown types and parameters fail with Elasticsearch's ``mapper_parsing_exception``.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scholar_es.engine.errors import EsError

TEXT = "text"
KEYWORD = "keyword"
VECTOR = "dense_vector"
NUMERIC_TYPES = {"long", "integer", "short", "byte", "double", "float", "half_float", "scaled_float"}
INTEGER_TYPES = {"long", "integer", "short", "byte"}
INTEGER_RANGES = {
    "long": (-(2**63), 2**63 - 1),
    "integer": (-(2**31), 2**31 - 1),
    "short": (-(2**15), 2**15 - 1),
    "byte": (-128, 127),
}
MAX_TERM_BYTES = 32766  # Lucene's IndexWriter.MAX_TERM_LENGTH
# index.mapping.total_fields.limit (MapperService.INDEX_MAPPING_TOTAL_FIELDS_LIMIT_SETTING, default 1000):
# leaf fields, multi-fields and object fields together (MappingLookup.checkFieldLimit).
TOTAL_FIELDS_LIMIT = 1000
# index.mapping.depth.limit (MapperService.INDEX_MAPPING_DEPTH_LIMIT_SETTING, default 20): how deep
# object fields may nest (MappingLookup.checkObjectDepthLimit).
DEPTH_LIMIT = 20
FIELD_TYPES = {TEXT, KEYWORD, VECTOR, "boolean", "date", "object", *NUMERIC_TYPES}
VECTOR_SIMILARITIES = ("cosine", "dot_product", "l2_norm", "max_inner_product")
# DenseVectorFieldMapper.VectorIndexType names (8.x/9.x); engine/index/hnsw.py decides which use a graph
VECTOR_INDEX_TYPES = (
    "hnsw",
    "int8_hnsw",
    "int4_hnsw",
    "bbq_hnsw",
    "flat",
    "int8_flat",
    "int4_flat",
    "bbq_flat",
    "bbq_disk",
)

# Parameters each type accepts; anything else is rejected rather than ignored, because a
# parameter we silently dropped would make the engine rank differently from a cluster.
_COMMON = {"type", "fields", "meta", "store", "doc_values", "index", "copy_to", "ignore_malformed"}
_ALLOWED = {
    TEXT: _COMMON
    | {
        "analyzer",
        "search_analyzer",
        "norms",
        "similarity",
        "index_options",
        "fielddata",
        "term_vector",
        "position_increment_gap",
    },
    KEYWORD: _COMMON
    | {
        "ignore_above",
        "normalizer",
        "norms",
        "null_value",
        "similarity",
        "eager_global_ordinals",
        "split_queries_on_whitespace",
    },
    VECTOR: {"type", "dims", "index", "similarity", "index_options", "element_type", "meta"},
    "boolean": _COMMON | {"null_value"},
    "date": _COMMON | {"format", "null_value"},
    "object": {"type", "properties", "dynamic", "enabled"},
}
for _t in NUMERIC_TYPES:
    _ALLOWED[_t] = _COMMON | {"null_value", "coerce", "scaling_factor"}


def mapper_error(reason: str) -> EsError:
    return EsError(400, "mapper_parsing_exception", reason)


def _vector_index_options(name: str, opts) -> None:
    """Check a dense_vector's ``index_options`` (DenseVectorFieldMapper.parseIndexOptions: a
    ``type`` is required and must be known; ``m``/``ef_construction`` are integers)."""
    if opts is None:
        return
    if not isinstance(opts, dict):
        raise mapper_error(f"Failed to parse mapping: [index_options] of field [{name}] must be an object")
    if "type" not in opts:
        raise mapper_error("[index_options] requires field [type] to be configured")
    if opts["type"] not in VECTOR_INDEX_TYPES:
        raise mapper_error(f"Unknown vector index options type [{opts['type']}] for field [{name}]")
    for param in ("m", "ef_construction"):
        value = opts.get(param)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise mapper_error(
                f"Failed to parse mapping: [index_options.{param}] of field [{name}] must be a positive "
                f"integer, got [{value!r:.40}]"
            )


def keyword_normalizer(fs: FieldSpec, analysis: dict | None):
    """The function a keyword field's values and query values go through (identity without a
    ``normalizer``); a normalizer the index does not define fails as Elasticsearch's mapper does."""
    if fs.normalizer is None:
        return None
    from scholar_es.engine.analysis.analyzers import get_normalizer

    f = get_normalizer(str(fs.normalizer), analysis)
    if f is None:
        raise mapper_error(f"normalizer [{fs.normalizer}] not found for field [{fs.name}]")
    return f


@dataclass(frozen=True)
class FieldSpec:
    """One indexed field (sub-fields such as ``title.keyword`` are their own spec)."""

    name: str
    type: str
    analyzer: str = "default"  # the index's default analyzer, else standard
    search_analyzer: str | None = None
    dims: int | None = None
    similarity: str | None = None
    ignore_above: int | None = None
    index: bool = True
    #: keyword fields: the normalizer applied to indexed values and to query values (None: none)
    normalizer: str | None = None
    raw: dict = field(default_factory=dict, compare=False)

    @property
    def query_analyzer(self) -> str:
        """search_analyzer, else the field's analyzer, else the index's default_search/default."""
        if self.search_analyzer:
            return self.search_analyzer
        return self.analyzer if self.analyzer != "default" else "default_search"

    @property
    def is_numeric(self) -> bool:
        return self.type in NUMERIC_TYPES or self.type in ("date", "boolean")


class Mapping:
    """The parsed mapping of one index; dynamic fields are added as documents arrive."""

    def __init__(self, body: dict | None = None, *, check_limits: bool = True) -> None:
        """Parse a mapping body; ``check_limits=False`` only to reopen a stored mapping as it is."""
        if body is not None and not isinstance(body, dict):
            raise mapper_error(f"Failed to parse mapping: expected an object, got [{body!r:.80}]")
        body = dict(body or {})
        self.meta: dict = body.pop("_meta", {}) or {}
        source = body.pop("_source", {}) or {}
        if not isinstance(source, dict):
            raise mapper_error(f"Failed to parse mapping: [_source] must be an object, got [{source!r:.80}]")
        for key in ("includes", "excludes"):
            value = source.get(key, [])
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise mapper_error(f"[_source] [{key}] must be an array of strings, got [{value!r:.80}]")
        self.source_excludes: list[str] = list(source.get("excludes", []))
        self.source_includes: list[str] = list(source.get("includes", []))
        self.source_enabled: bool = bool(source.get("enabled", True))
        # the depth limit and a bad dynamic value are checked on a new mapping, not on a stored one
        # (reopened as it is); dynamic fields added later are always checked (set True below)
        self._check_depth = check_limits
        #: whether the mapping sets dynamic itself (GET _mapping then shows it, even "true")
        self.dynamic_set = "dynamic" in body
        self.dynamic: str = self._dynamic_value("_doc", body.pop("dynamic", "true"))
        props = body.pop("properties", {}) or {}
        if body.pop("dynamic_templates", None):
            raise mapper_error(
                "[dynamic_templates] are not supported by the embedded engine; map fields explicitly"
            )
        if body:
            raise mapper_error(f"Root mapping definition has unsupported parameters:  {_fmt_params(body)}")
        self.fields: dict[str, FieldSpec] = {}
        self.objects: set[str] = set()
        #: an object's own ``dynamic`` (its sub-objects inherit it; ObjectMapper#dynamic)
        self.object_dynamic: dict[str, str] = {}
        #: objects mapped ``enabled: false``: their values are kept in ``_source`` only, never
        #: parsed (ObjectMapper#isEnabled; the "enabled" reference page)
        self.disabled: frozenset[str] = frozenset()
        self._add_properties(props, prefix="")
        self._check_depth = True
        if check_limits and self.total_fields > TOTAL_FIELDS_LIMIT:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Limit of total fields [{TOTAL_FIELDS_LIMIT}] has been exceeded",
            )

    @property
    def total_fields(self) -> int:
        """Fields as index.mapping.total_fields.limit counts them: leaves, multi-fields, objects."""
        return len(self.fields) + len(self.objects)

    # --- parsing -------------------------------------------------------------------
    def _add_properties(self, props: dict, prefix: str) -> None:
        if not isinstance(props, dict):
            raise mapper_error(f"Expected map for property [properties] on field [{prefix or '_doc'}]")
        for name, spec in props.items():
            self._add_field(prefix + name, spec)

    def _add_field(self, name: str, spec: Any) -> None:
        if not isinstance(spec, dict):
            raise mapper_error(
                f"Expected map for property [fields] on field [{name}] but got a {type(spec).__name__}"
            )
        ftype = spec_type(spec)
        if ftype is None:
            raise mapper_error(f"No type specified for field [{name}]")
        if not isinstance(ftype, str):
            raise mapper_error(f"[type] must be a string on field [{name}], got [{ftype!r:.80}]")
        for key in ("analyzer", "search_analyzer", "similarity", "normalizer"):
            if key in spec and not isinstance(spec[key], str):
                raise mapper_error(f"[{key}] must be a string on field [{name}], got [{spec[key]!r:.80}]")
        if not isinstance(spec.get("fields") or {}, dict):
            raise mapper_error(f"Expected map for property [fields] on field [{name}]")
        if ftype not in FIELD_TYPES:
            raise mapper_error(f"No handler for type [{ftype}] declared on field [{name}]")
        unknown = {k: v for k, v in spec.items() if k not in _ALLOWED[ftype]}
        if unknown:
            raise mapper_error(
                f"unknown parameter [{next(iter(unknown))}] on mapper [{name}] of type [{ftype}]"
            )
        if ftype == "object":
            if self._check_depth and name.count(".") + 1 > DEPTH_LIMIT:
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    f"Limit of mapping depth [{DEPTH_LIMIT}] has been exceeded due to object field [{name}]",
                )
            if "dynamic" in spec:
                self.object_dynamic = {
                    **self.object_dynamic,
                    name: self._dynamic_value(name, spec["dynamic"]),
                }
            if "enabled" in spec and not parse_enabled(spec["enabled"]):
                self.disabled = self.disabled | {name}
            self.objects = self.objects | {name}  # copy on write: searches may be iterating
            self._add_properties(spec.get("properties", {}), prefix=name + ".")
            return
        if ftype == VECTOR:
            fs = self._vector_spec(name, spec)
        else:
            fs = FieldSpec(
                name=name,
                type=ftype,
                analyzer=spec.get("analyzer", "default"),
                search_analyzer=spec.get("search_analyzer"),
                ignore_above=spec.get("ignore_above"),
                index=bool(spec.get("index", True)),
                similarity=spec.get("similarity"),
                normalizer=spec.get("normalizer") if ftype == KEYWORD else None,
                raw=spec,
            )
        # copy on write: a dynamic field is added by a writer while searches iterate the old dict
        self.fields = {**self.fields, name: fs}
        for sub, subspec in (spec.get("fields") or {}).items():
            self._add_field(f"{name}.{sub}", subspec)

    @staticmethod
    def _vector_spec(name: str, spec: dict) -> FieldSpec:
        dims = spec.get("dims")
        if dims is not None and (not isinstance(dims, int) or not 1 <= dims <= 4096):
            raise mapper_error(f"The number of dimensions should be in the range [1, 4096] but was [{dims}]")
        if spec.get("element_type", "float") != "float":
            raise mapper_error(
                f"element_type [{spec['element_type']}] on field [{name}] is not supported by the embedded engine"
            )
        sim = spec.get("similarity", "cosine")
        if sim not in VECTOR_SIMILARITIES:
            raise mapper_error(
                f"Unknown value [{sim}] for field [similarity] - accepted values are {list(VECTOR_SIMILARITIES)}"
            )
        _vector_index_options(name, spec.get("index_options"))
        return FieldSpec(
            name=name, type=VECTOR, dims=dims, similarity=sim, index=bool(spec.get("index", True)), raw=spec
        )

    # --- output --------------------------------------------------------------------
    def to_body(self) -> dict:
        """The mapping as GET <index>/_mapping returns it."""
        props: dict[str, Any] = {}

        def parent(name: str) -> tuple[dict, str]:
            """The properties that hold ``name`` (its objects created on the way), its last part."""
            node = props
            *path, leaf = name.split(".")
            for p in path:
                node = node.setdefault(p, {"properties": {}})["properties"]
            return node, leaf

        for name, fs in self.fields.items():
            if "." in name and name.rsplit(".", 1)[0] in self.fields:
                continue  # a multi-field, rendered inside its parent's raw spec
            node, leaf = parent(name)
            node[leaf] = fs.raw or {"type": fs.type}
        for name in sorted(self.objects, key=lambda o: o.count(".")):  # parents first
            node, leaf = parent(name)
            obj = node.setdefault(leaf, {"properties": {}})
            if name in self.object_dynamic:
                obj["dynamic"] = self.object_dynamic[name]
            if name in self.disabled:
                obj["enabled"] = False
        _render_objects(props)
        body: dict[str, Any] = {"properties": props}
        if self.meta:
            body["_meta"] = self.meta
        if self.source_excludes or self.source_includes:
            body["_source"] = {
                k: v for k, v in (("includes", self.source_includes), ("excludes", self.source_excludes)) if v
            }
        if not self.source_enabled:
            body.setdefault("_source", {})["enabled"] = False
        if self.dynamic_set or self.dynamic != "true":
            body["dynamic"] = self.dynamic
        return body

    def get(self, name: str) -> FieldSpec | None:
        return self.fields.get(name)

    def vector_fields(self) -> list[FieldSpec]:
        return [f for f in self.fields.values() if f.type == VECTOR]

    # --- documents -----------------------------------------------------------------
    def flatten(self, source: dict) -> dict[str, list]:
        """Map ``_source`` to {field name: [values]} for every mapped field (sub-fields too).

        Unmapped fields are added dynamically (``dynamic: true``), ignored (``false``) or
        rejected (``strict``), as Elasticsearch does.
        """
        out: dict[str, list] = {}
        n_fields = len(self.fields)
        new_objects: list[str] = []
        self._total_before = self.total_fields
        self._new_fields: list[str] = []
        self._new_objects = new_objects
        try:
            self._flatten_into(source, "", out)
            if self.total_fields > TOTAL_FIELDS_LIMIT:  # multi-fields counted: MapperService.merge
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    f"Limit of total fields [{TOTAL_FIELDS_LIMIT}] has been exceeded",
                )
        except EsError as e:
            # a refused document adds nothing to the mapping (Elasticsearch merges a document's
            # dynamic mapping update only once the whole document parsed)
            for name in list(self.fields)[n_fields:]:
                del self.fields[name]
            self.objects.difference_update(new_objects)
            if "while adding new fields" in e.reason or e.reason.startswith("Limit of mapping depth"):
                raise EsError(400, "document_parsing_exception", f"failed to parse: {e.reason}") from None
            raise
        for name, _fs in list(self.fields.items()):
            parent = name.rsplit(".", 1)[0] if "." in name else None
            if parent in self.fields and parent in out and name not in out:
                out[name] = out[parent]  # multi-field: same values, its own analysis
        return out

    def _flatten_into(self, obj: dict, prefix: str, out: dict[str, list]) -> None:
        for key, value in obj.items():
            self._flatten_value(prefix + key, value, out)

    def _flatten_value(self, name: str, value: Any, out: dict[str, list]) -> None:
        """One ``_source`` value of field ``name``: arrays (of arrays) are flattened and nulls skipped,
        as DocumentParser.parseArray/parseNullValue do, so the first non-null value of an unmapped
        field picks its dynamic type and each object of an array of objects is parsed in turn."""
        if self.disabled and self._under_disabled(name):  # enabled: false: kept in _source only
            return
        fs = self.fields.get(name)
        if fs is not None and fs.type == VECTOR:
            if name in out:  # a second object of an array of objects (DenseVectorFieldMapper.parse;
                # "doesn't not" is Elasticsearch's own wording)
                raise mapper_error(
                    f"Field [{name}] of type [{VECTOR}] doesn't not support indexing multiple values for the "
                    "same field in the same document"
                )
            out[name] = [_vector_values(fs, value)]
            return
        if fs is not None and fs.raw.get("null_value") is not None:
            # an explicit null (alone or in an array) is indexed as null_value; [] stays no value
            null = fs.raw["null_value"]
            leaves = [null if v is None else v for v in _leaves(value, keep_null=True)]
        elif type(value) is list:
            leaves = list(_leaves(value)) if any(v is None or type(v) is list for v in value) else value
        else:
            leaves = [] if value is None else [value]
        if fs is None:
            dynamic = self.dynamic_of(name)
            if dynamic == "strict" and name not in self.objects:  # null and [] too: ensureNotStrict
                self._dynamic_add(name, {})  # raises strict_dynamic_mapping_exception
            objects = [v for v in leaves if isinstance(v, dict)]
            if objects:
                if name not in self.objects:
                    if dynamic == "false" and name.count(".") + 1 > DEPTH_LIMIT:
                        return  # no mapped field can lie this deep: the subtree is ignored
                    if self._dynamic_add(name, {"type": "object", "properties": {}}):
                        self._new_objects.append(name)
                for sub in objects:
                    self._flatten_into(sub, name + ".", out)
                leaves = [v for v in leaves if not isinstance(v, dict)]
            if name in self.objects and leaves:
                raise mapper_error(
                    f"object mapping for [{name}] tried to parse field [{name}] as object, but found a "
                    "concrete value"
                )
            if not leaves:
                return
            if dynamic == "false" or not self._dynamic_add(name, _infer_type(name, leaves[0])):
                return
            fs = self.fields[name]
        values = [_coerce(fs, v) for v in leaves]
        if name in out:  # an earlier object of an array of objects had this field too
            out[name].extend(values)
        else:
            out[name] = values

    def _dynamic_value(self, where: str, value: Any) -> str:
        """A mapping's or an object's ``dynamic``: true, false or strict (``runtime`` fields are
        not supported by the embedded engine). A stored mapping from before this check reopens
        with any other value read as true, as it was then."""
        # ObjectMapper.TypeParser: "strict"/"runtime" in any case, else a boolean (nodeBooleanValue:
        # true, false, "true" or "false")
        text = str(value).lower() if type(value) is bool else str(value)
        if text.lower() == "strict":
            return "strict"
        if text in ("true", "false"):
            return text
        if not self._check_depth:
            return "true"
        if text.lower() == "runtime":
            raise mapper_error(f"[dynamic: runtime] on [{where}] is not supported by the embedded engine")
        raise mapper_error(f"[dynamic] on [{where}] must be true, false or strict, got [{value!r:.80}]")

    def _under_disabled(self, name: str) -> bool:
        """``name`` is an object mapped ``enabled: false`` or lies inside one (a dotted key such
        as ``"s.x"`` is the path s -> x, as Elasticsearch expands it)."""
        while True:
            if name in self.disabled:
                return True
            if "." not in name:
                return False
            name = name.rsplit(".", 1)[0]

    def dynamic_of(self, name: str) -> str:
        """The ``dynamic`` that applies to a new field ``name``: its nearest enclosing object's
        own setting, else the root's (an object inherits its parent's, ObjectMapper#dynamic)."""
        if self.object_dynamic:
            parent = name
            while "." in parent:
                parent = parent.rsplit(".", 1)[0]
                found = self.object_dynamic.get(parent)
                if found is not None:
                    return found
        return self.dynamic

    def _dynamic_add(self, name: str, spec: dict) -> bool:
        reason = unpaired_surrogate_reason(name)
        if reason is not None:
            raise mapper_error(f"field name [{escape_surrogates(name)}] holds {reason}")
        dynamic = self.dynamic_of(name)
        if dynamic == "strict":
            # StrictDynamicMappingException: the new field's own name, within its parent's path
            parent, _, leaf = name.rpartition(".")
            raise EsError(
                400,
                "strict_dynamic_mapping_exception",
                f"[_doc] mapping set to strict, dynamic introduction of [{leaf}] within [{parent or '_doc'}] "
                "is not allowed",
            )
        if dynamic == "false":
            return False
        self._new_fields.append(name)
        # DocumentParserContext.addDynamicMapper: each new dynamic mapper counts once (its
        # multi-fields are counted when the mapping update is merged, see flatten)
        if self._total_before + len(self._new_fields) > TOTAL_FIELDS_LIMIT:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Limit of total fields [{TOTAL_FIELDS_LIMIT}] has been exceeded while adding new fields "
                f"[{len(self._new_fields)}]",
            )
        self._add_field(name, spec)
        return True


def spec_type(spec: dict) -> Any:
    """A field spec's ``type``; without one, "object" when it has ``properties`` or ``enabled`` is
    its only key (ObjectMapper.TypeParser#parseProperties), else None (no type specified)."""
    if "type" in spec:
        return spec["type"]
    return "object" if "properties" in spec or list(spec) == ["enabled"] else None


def parse_enabled(value: Any) -> bool:
    """An object's ``enabled``: a boolean or the string "true"/"false" (nodeBooleanValue)."""
    if type(value) is bool:
        return value
    if value in ("true", "false"):
        return value == "true"
    raise mapper_error(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def _render_objects(props: dict) -> None:
    """Objects as GET _mapping shows them (ObjectMapper#toXContent): one without sub-fields gets
    ``"type": "object"`` and no ``properties``."""
    for node in props.values():
        if "properties" in node and "type" not in node:
            if node["properties"]:
                _render_objects(node["properties"])
            else:
                del node["properties"]
                params = dict(node)
                node.clear()
                node.update({"type": "object", **params})


def _leaves(value: Any, keep_null: bool = False) -> Iterator[Any]:
    """The non-null values of a ``_source`` value (``keep_null``: nulls too), arrays of arrays
    flattened."""
    if isinstance(value, list):
        for v in value:
            yield from _leaves(v, keep_null)
    elif value is not None or keep_null:
        yield value


def _infer_type(name: str, sample: Any) -> dict:
    """Elasticsearch's default dynamic mapping for a JSON value (the field's first non-null one)."""
    if isinstance(sample, bool):
        return {"type": "boolean"}
    if isinstance(sample, int):
        return {"type": "long"}
    if isinstance(sample, float):
        return {"type": "float"}
    if isinstance(sample, str):
        return {"type": "text", "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
    raise mapper_error(
        f"failed to parse field [{name}]: cannot infer a type for {type(sample).__name__} values"
    )


#: a UTF-16 surrogate code point: JSON decodes an escaped pair into one character, so one left in a
#: string is unpaired ("\\ud800" alone), and has no UTF-8 form to store or index
SURROGATE = re.compile("[\ud800-\udfff]")


def unpaired_surrogate_reason(text: str) -> str | None:
    """Why ``text`` cannot be stored (it holds a surrogate code point), or None. Called on every
    indexed string and stored source: ASCII text answers in O(1) and other text by one strict UTF-8
    encode (C speed); the regex runs only to locate a surrogate the encode refused."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
        return None
    except UnicodeEncodeError:
        m = SURROGATE.search(text)
    if m is None:  # pragma: no cover - a strict encode fails on surrogates only
        return None
    return (
        f"an unpaired UTF-16 surrogate (U+{ord(m.group()):04X}) at character {m.start()}: the embedded engine "
        "stores and indexes UTF-8 text, which cannot hold it; send the character itself or a valid "
        "surrogate pair"
    )


def escape_surrogates(text: str) -> str:
    """``text`` with each surrogate code point written as ``\\uXXXX`` (safe in any UTF-8 output)."""
    return SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _unicode(text: str) -> str:
    reason = unpaired_surrogate_reason(text)
    if reason is not None:
        raise ValueError(reason)
    return text


def _coerce(fs: FieldSpec, v: Any) -> Any:
    """Check and convert one value as the field's mapper would (mapper_parsing_exception on failure)."""
    try:
        if fs.type == TEXT:
            if isinstance(v, (dict, list)):
                raise ValueError("object or array where a string was expected")
            return _unicode(v) if isinstance(v, str) else _json_scalar_text(v)
        if fs.type == KEYWORD:
            if isinstance(v, (dict, list)):
                raise ValueError("object or array where a string was expected")
            text = _unicode(v) if isinstance(v, str) else _json_scalar_text(v)
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > MAX_TERM_BYTES and (fs.ignore_above is None or len(text) <= fs.ignore_above):
                raise EsError(
                    400,
                    "illegal_argument_exception",
                    f'Document contains at least one immense term in field="{fs.name}" (whose UTF8 '
                    f"encoding is longer than the max length {MAX_TERM_BYTES}), all of which were skipped. "
                    f"The prefix of the first immense term is: '{text[:30]}...'; set ignore_above",
                )
            return text
        if fs.type == "boolean":
            if isinstance(v, bool):
                return 1.0 if v else 0.0
            if v in ("true", "false"):
                return 1.0 if v == "true" else 0.0
            raise ValueError(f"Failed to parse value [{v}] as only [true] or [false] are allowed.")
        if fs.type == "date":
            return parse_date(v)
        if fs.type in NUMERIC_TYPES:
            if isinstance(v, bool):
                raise ValueError(f"Current token (VALUE_{str(v).upper()}) not numeric")
            f = float(v)
            if not math.isfinite(f):
                raise ValueError(f"[{fs.type}] supports only finite values, but got [{v}]")
            if fs.type not in INTEGER_TYPES:
                return f
            lo, hi = INTEGER_RANGES[fs.type]
            if not lo <= math.trunc(f) <= hi:
                raise ValueError(
                    f"Value [{v}] is out of range for {'an' if fs.type == 'integer' else 'a'} {fs.type}"
                )
            return float(math.trunc(f))  # ES coerces 1.5 → 1 for integer types
    except (TypeError, ValueError, OverflowError) as exc:
        raise mapper_error(
            f"failed to parse field [{fs.name}] of type [{fs.type}]. Preview of field's value: "
            f"'{escape_surrogates(str(v))}' ({exc})"
        ) from None
    return v


_PLAIN_NUMBERS = frozenset({int, float})  # not bool (type(True) is bool), nor subclasses
_FLOAT_MAX = 3.4028234663852886e38  # Float.MAX_VALUE


def _vector_values(fs: FieldSpec, value: Any) -> Any:
    """A dense_vector value: an array of finite numbers within the float range."""
    if isinstance(value, list) and value and set(map(type, value)) <= _PLAIN_NUMBERS:
        # the common case checked on the whole array at once; the loop below finds the bad
        # value of a refused one (and its message), and takes integers beyond the float range
        try:
            arr = np.asarray(value, dtype=np.float64)
        except OverflowError:
            arr = None
        if arr is not None and np.isfinite(arr).all() and float(np.abs(arr).max()) <= _FLOAT_MAX:
            return value
    if isinstance(value, list):
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                break
            try:
                if math.isfinite(float(v)) and abs(float(v)) <= _FLOAT_MAX:
                    continue
            except OverflowError:
                pass
            raise mapper_error(
                f"failed to parse field [{fs.name}] of type [dense_vector]: [dense_vector] only supports finite "
                f"float values, got [{str(v)[:40]}]"
            )
        else:
            return value
    raise mapper_error(
        f"failed to parse field [{fs.name}] of type [dense_vector]: expected an array of numbers, "
        f"got [{str(value)[:80]}]"
    )


def _json_scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def parse_date(v: Any) -> float:
    """A date as epoch milliseconds: numbers are epoch millis, strings ISO-8601
    (``strict_date_optional_time||epoch_millis``, Elasticsearch's default format)."""
    if isinstance(v, bool):
        raise ValueError("boolean is not a date")
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v)
    if s.lstrip("-").isdigit():
        return float(s)
    d = _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    return d.timestamp() * 1000.0


def _fmt_params(d: dict) -> str:
    return "[" + ", ".join(f"{k} : {v}" for k, v in d.items()) + "]"
