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

from indexer.embedder import model_key
from scholar_es.errors import ConfigError, ModelMismatchError

INDEX_KINDS = ("papers", "chunks")


def index_body(kind: str, dims: int, meta: dict) -> dict:
    """The create-index body for ``kind`` with the vector dimension and ``_meta`` filled in."""
    if kind not in INDEX_KINDS:
        raise ConfigError(f"unknown index kind {kind!r}; expected one of {INDEX_KINDS}")
    body = json.loads(resources.files("scholar_es.mappings").joinpath(f"{kind}.json").read_text())
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


def check_meta(es, index: str, model: str, dims: int, chunking: str) -> None:
    """Refuse to mix vectors of another model, dimension or chunking into an existing index."""
    body = es.indices.get_mapping(index=index).body
    meta = next(iter(body.values()))["mappings"].get("_meta", {})
    if model_key(meta.get("embedding_model")) not in (None, model_key(model)) or meta.get("dims") not in (
        None,
        dims,
    ):
        raise ModelMismatchError(
            f"index {index!r} holds vectors of model {meta.get('embedding_model')!r} ({meta.get('dims')} dims), "
            f"but this run embeds with {model!r} ({dims} dims); pass --model {meta.get('embedding_model')} "
            "or rebuild the index with --rebuild"
        )
    if meta.get("chunking") not in (None, chunking):
        raise ConfigError(
            f"index {index!r} holds {meta['chunking']!r} chunks, but this run makes {chunking!r} chunks; mixing them "
            f"would index the same text twice. Pass --chunking {meta['chunking']} or rebuild with --rebuild"
        )


def prepare(es, prefix: str, model: str, dims: int, meta: dict, rebuild: bool) -> tuple[dict[str, str], bool]:
    """The physical index to write for each kind, and whether they are new (created now)."""
    targets, created = {}, False
    for kind in INDEX_KINDS:
        alias = alias_name(prefix, kind)
        current = physical_indices(es, alias)
        if es.indices.exists(index=alias) and not current:
            raise ConfigError(
                f"{alias!r} is a concrete index, not an alias; scholar-es keeps {alias!r} as an alias "
                f"of versioned indices. Delete or rename it, or use another --prefix"
            )
        if current and not rebuild:
            if len(current) != 1:
                raise ConfigError(
                    f"alias {alias!r} points to several indices {current}; fix it with _aliases"
                )
            check_meta(es, current[0], model, dims, meta.get("chunking", "paragraph"))
            targets[kind] = current[0]
            continue
        if not rebuild:
            targets[kind] = f"{alias}-v1"
            created = _create_or_join_first_version(es, alias, kind, model, dims, meta) or created
            continue
        name = next_version(es, alias)
        es.indices.create(index=name, **index_body(kind, dims, meta))
        targets[kind] = name
        created = True
    return targets, created


def _create_or_join_first_version(es, alias: str, kind: str, model: str, dims: int, meta: dict) -> bool:
    """First run (no alias yet): create ``<alias>-v1``, or join it when another run created it
    first, so two runs started together on a fresh directory write into one index and publish
    the same alias target. True when this run created it."""
    from elasticsearch import BadRequestError

    name = f"{alias}-v1"
    try:
        es.indices.create(index=name, **index_body(kind, dims, meta))
        return True
    except BadRequestError as e:
        if e.error != "resource_already_exists_exception":
            raise
    check_meta(es, name, model, dims, meta.get("chunking", "paragraph"))
    return False


def discard(es, targets: dict[str, str]) -> None:
    """Delete indices a failed run created (they were never published)."""
    for index in targets.values():
        if es.indices.exists(index=index) and not es.indices.get_alias(index=index).body.get(index, {}).get(
            "aliases"
        ):
            es.indices.delete(index=index)


def publish(es, prefix: str, targets: dict[str, str]) -> list[str]:
    """Point each alias at its target in one atomic ``_aliases`` call.

    The version the alias pointed to before is kept (so a bad rebuild can be undone by moving
    the alias back); older versions are deleted. Returns the deleted indices.
    """
    actions = []
    for kind, index in targets.items():
        alias = alias_name(prefix, kind)
        for old in physical_indices(es, alias):
            if old != index:
                actions.append({"remove": {"index": old, "alias": alias}})
        actions.append({"add": {"index": index, "alias": alias}})
    es.indices.update_aliases(actions=actions)
    deleted = []
    pattern = re.compile(r"-v(\d+)$")
    for kind, index in targets.items():
        alias = alias_name(prefix, kind)
        existing = es.indices.get(index=f"{alias}-v*", allow_no_indices=True, expand_wildcards="all").body
        older = sorted(
            (int(m[1]), name)
            for name in existing
            if (m := pattern.search(name)) and name != index and name.startswith(f"{alias}-v")
        )
        for _, name in older[:-1]:  # keep the most recent previous version
            es.indices.delete(index=name)
            deleted.append(name)
    return deleted
