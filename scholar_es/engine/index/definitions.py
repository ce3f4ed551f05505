"""Index definitions as ``PUT <index>``, ``PUT <index>/_settings`` and ``PUT _mapping`` take them:
the index settings the engine knows (flat or nested), the merge of a mapping update into the
stored properties (MapperService's rules), and the BM25 parameters a mapping and its settings give.
"""

from __future__ import annotations

from scholar_es.engine.errors import illegal_argument
from scholar_es.engine.index import durability
from scholar_es.engine.index.mapping import Mapping, parse_enabled, spec_type
from scholar_es.engine.query import similarity as sim

#: the index settings the engine knows (others: ``unknown setting [index.x]``)
INDEX_SETTINGS = {
    "number_of_shards",
    "number_of_replicas",
    "refresh_interval",
    "analysis",
    "max_result_window",
    "similarity",
    "codec",
    "mapping",
    "translog",  # durability and sync_interval only (engine/index/durability.py)
    "analyze",  # max_token_count only (engine/rest/analyze.py)
}


def flat_index_settings(settings: dict) -> dict:
    """Accept both ``{"index": {...}}`` and flat ``{"number_of_shards": 1}`` forms."""
    out = dict(settings.get("index", {})) if isinstance(settings.get("index"), dict) else {}
    for k, v in settings.items():
        if k == "index":
            continue
        out[k.removeprefix("index.")] = v
    translog: dict = {}
    for k in list(out):
        analyze = (
            out[k] if k == "analyze" else {k.removeprefix("analyze."): 0} if k.startswith("analyze.") else {}
        )
        if (
            k.split(".")[0] not in INDEX_SETTINGS
            or (k == "translog" and not isinstance(out[k], dict))
            or not isinstance(analyze, dict)
            or set(analyze) - {"max_token_count"}
        ):
            raise illegal_argument(
                f"unknown setting [index.{k}] please check that any required plugins are installed, "
                "or check the breaking changes documentation for removed settings"
            )
        if k == "translog":
            translog.update(out.pop(k))
        elif k.startswith("translog."):
            translog[k.removeprefix("translog.")] = out.pop(k)
    if translog:  # one nested group, as GET _settings shows it
        out["translog"] = durability.check_translog(translog)
    return out


def _is_object(spec: dict) -> bool:
    return spec_type(spec) == "object"


def merge_properties(current: dict, update: dict, prefix: str) -> dict:
    """``current`` properties with a PUT _mapping's ``update`` merged in, as MapperService does:
    a new field is added; an object's sub-fields are merged recursively and its ``dynamic`` may
    change, its ``enabled`` may not; a field's type never changes; a field's other parameters
    are taken from the update (the engine does not check each parameter's updatability)."""
    out = dict(current)
    for name, spec in update.items():
        existing = out.get(name)
        if (
            existing is None
            or not isinstance(spec, dict)
            or not isinstance(spec.get("properties", {}), dict)
            or ("type" not in spec and spec_type(spec) is None)
        ):
            out[name] = spec  # Mapping() reports a malformed spec with its own message
            continue
        full = prefix + name
        if _is_object(existing):
            if not _is_object(spec):
                raise illegal_argument(f"can't merge a non object mapping [{full}] with an object mapping")
            if "enabled" in spec and parse_enabled(spec["enabled"]) != parse_enabled(
                existing.get("enabled", True)
            ):
                raise illegal_argument(
                    f"the [enabled] parameter can't be updated for the object mapping [{full}]"
                )
            merged = {**existing, **{k: v for k, v in spec.items() if k != "properties"}}
            props = merge_properties(existing.get("properties", {}), spec.get("properties", {}), full + ".")
            if props:
                merged["properties"] = props
                if merged.get("type") == "object":
                    del merged["type"]
            out[name] = merged
        elif _is_object(spec) or existing.get("type") != spec.get("type"):
            raise illegal_argument(
                f"mapper [{full}] cannot be changed from type [{existing.get('type')}] to "
                f"[{spec.get('type', 'object')}]"
            )
        else:
            out[name] = spec
    return out


def bm25_similarities(settings: dict, mapping: Mapping) -> sim.FieldSimilarities:
    """The BM25 parameters of the index's text/keyword fields (index.similarity + each field's
    ``similarity``); raises for an unknown or unsupported similarity."""
    mapped = {
        name: fs.similarity
        for name, fs in mapping.fields.items()
        if fs.type in ("text", "keyword") and fs.similarity is not None
    }
    return sim.field_similarities(settings.get("similarity"), mapped)
