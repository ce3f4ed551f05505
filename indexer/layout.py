"""Index bodies from ``mappings/`` and the versioned indices behind their aliases.

``chunks`` and ``papers`` are aliases; the physical indices are ``chunks-v<N>`` and
``papers-v<N>``. A normal run writes into the indices the aliases point to (creating
``-v1`` on the first run); ``rebuild`` writes a fresh ``-v<N+1>`` and then moves the
alias in one ``_aliases`` request, so searches never see a half-built index.
"""

from __future__ import annotations

import copy
import json
import re
from importlib import resources

from scholar_es.errors import ConfigError, ModelMismatchError

INDEX_KINDS = ("papers", "chunks")


def index_body(kind: str, dims: int, meta: dict) -> dict:
    """The create-index body for ``kind`` with the vector dimension and ``_meta`` filled in."""
    if kind not in INDEX_KINDS:
        raise ConfigError(f"unknown index kind {kind!r}; expected one of {INDEX_KINDS}")
    body = json.loads(resources.files("mappings").joinpath(f"{kind}.json").read_text())
    body = copy.deepcopy(body)
    body["mappings"]["properties"]["vector"]["dims"] = dims
    body["mappings"]["_meta"] = {**body["mappings"].get("_meta", {}), **meta}
    return body


def alias_name(prefix: str, kind: str) -> str:
    return f"{prefix}{kind}"


def physical_indices(es, alias: str) -> list[str]:
    """Indices the alias points to now ([] when it does not exist)."""
    if not es.indices.exists_alias(name=alias):
        return []
    return sorted(es.indices.get_alias(name=alias).body)


def next_version(es, alias: str) -> str:
    """``<alias>-v<N+1>`` where N is the highest existing version."""
    pattern = re.compile(re.escape(alias) + r"-v(\d+)$")
    existing = es.indices.get(index=f"{alias}-v*", allow_no_indices=True, expand_wildcards="all").body
    versions = [int(m[1]) for name in existing if (m := pattern.match(name))]
    return f"{alias}-v{max(versions, default=0) + 1}"


def check_meta(es, index: str, model: str, dims: int) -> None:
    """Refuse to mix vectors of another model or dimension into an existing index."""
    body = es.indices.get_mapping(index=index).body
    meta = next(iter(body.values()))["mappings"].get("_meta", {})
    if meta.get("embedding_model") not in (None, model) or meta.get("dims") not in (None, dims):
        raise ModelMismatchError(
            f"index {index!r} holds vectors of model {meta.get('embedding_model')!r} ({meta.get('dims')} dims), "
            f"but this run embeds with {model!r} ({dims} dims); pass --model {meta.get('embedding_model')} "
            "or rebuild the index with --rebuild")


def prepare(es, prefix: str, model: str, dims: int, meta: dict, rebuild: bool) -> dict[str, str]:
    """The physical index to write for each kind (created if needed)."""
    targets = {}
    for kind in INDEX_KINDS:
        alias = alias_name(prefix, kind)
        current = physical_indices(es, alias)
        if es.indices.exists(index=alias) and not current:
            raise ConfigError(f"{alias!r} is a concrete index, not an alias; scholar-es keeps {alias!r} as an alias "
                              f"of versioned indices. Delete or rename it, or use another --prefix")
        if current and not rebuild:
            if len(current) != 1:
                raise ConfigError(f"alias {alias!r} points to several indices {current}; fix it with _aliases")
            check_meta(es, current[0], model, dims)
            targets[kind] = current[0]
            continue
        name = next_version(es, alias)
        es.indices.create(index=name, **index_body(kind, dims, meta))
        targets[kind] = name
    return targets


def publish(es, prefix: str, targets: dict[str, str], drop_old: bool = True) -> list[str]:
    """Point each alias at its target in one atomic ``_aliases`` call; returns retired indices."""
    actions, retired = [], []
    for kind, index in targets.items():
        alias = alias_name(prefix, kind)
        for old in physical_indices(es, alias):
            if old != index:
                actions.append({"remove": {"index": old, "alias": alias}})
                retired.append(old)
        actions.append({"add": {"index": index, "alias": alias}})
    es.indices.update_aliases(actions=actions)
    if drop_old and retired:
        for old in retired:
            es.indices.delete(index=old)
    return retired
