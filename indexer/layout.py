"""Index bodies from ``mappings/`` and the versioned indices behind their aliases.

``chunks`` and ``papers`` are aliases; the physical indices are ``chunks-v<N>`` and
``papers-v<N>``. A normal run writes into the indices the aliases point to (creating
``-v1`` on the first run); ``rebuild`` writes a fresh ``-v<N+1>`` and then moves the
alias in one ``_aliases`` request, so searches never see a half-built index.

Which version is good is never guessed from version numbers:

* a version is created with ``_meta.build_state: "building"`` and marked ``"complete"`` only
  after every document was written and refreshed, just before the alias moves to it;
* the version the alias served before a swap gets the ``<alias>-previous`` alias (moved in the
  same ``_aliases`` request), so the rollback target is the last *published* version, never a
  half-built one;
* a version that no alias names and whose state is ``building`` is the leftover of a run that
  was killed (kill -9, power loss) when the process that builds it (``_meta.builder``: host and
  pid) is gone: the next run deletes it before it starts. A version whose builder still runs
  (two runs started together on a fresh directory write into one ``-v1``), or runs on another
  host, where its state cannot be seen, is left alone;
* after a swap, unaliased versions older than the new one are deleted: the current and the
  previous version are all that is kept.
"""

from __future__ import annotations

import copy
import json
import os
import re
import socket
from importlib import resources

from indexer.embedder import model_key, vectors_differ
from scholar_es.errors import ConfigError, ModelMismatchError

INDEX_KINDS = ("papers", "chunks")
#: ``_meta.build_state`` of a version being filled, and of one every document was written to
BUILDING, COMPLETE = "building", "complete"
#: ``_meta.schema`` values of the indices scholar-es creates (mappings/*.json)
SCHEMA_PREFIX = "scholar-es/"
VERSION_RE = re.compile(r"^(?P<alias>.+)-v(?P<n>\d+)$")


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


def previous_alias(alias: str) -> str:
    """The alias that names the version ``alias`` served before the last swap (the rollback)."""
    return f"{alias}-previous"


def versions(es, alias: str) -> dict[str, int]:
    """Every ``<alias>-v<N>`` index that exists -> N."""
    existing = es.indices.get(index=f"{alias}-v*", allow_no_indices=True, expand_wildcards="all").body
    out = {}
    for name in existing:
        m = VERSION_RE.match(name)
        if m and m["alias"] == alias:
            out[name] = int(m["n"])
    return out


def index_meta(es, index: str) -> dict:
    body = es.indices.get_mapping(index=index).body
    return next(iter(body.values()))["mappings"].get("_meta", {}) or {}


def physical_indices(es, alias: str) -> list[str]:
    """Indices the alias points to now ([] when it does not exist)."""
    if not es.indices.exists_alias(name=alias):
        return []
    return sorted(es.indices.get_alias(name=alias).body)


def next_version(es, alias: str) -> str:
    """``<alias>-v<N+1>`` where N is the highest existing version."""
    return f"{alias}-v{max(versions(es, alias).values(), default=0) + 1}"


def check_meta(es, index: str, model: str, dims: int, chunking: str, backend: str | None = None) -> None:
    """Refuse to mix vectors of another model, dimension, chunking or vector-changing backend
    (onnx-int8 vs torch/onnx, which give the same vectors) into an existing index."""
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
    if backend is not None and vectors_differ(meta.get("embedding_backend"), backend):
        held = meta.get("embedding_backend") or "torch"
        raise ModelMismatchError(
            f"index {index!r} holds vectors of the {held!r} embedding backend, but this run embeds with "
            f"{backend!r}, whose vectors differ (int8 quantization); pass --backend {held} or rebuild "
            "the index with --rebuild"
        )
    if meta.get("chunking") not in (None, chunking):
        raise ConfigError(
            f"index {index!r} holds {meta['chunking']!r} chunks, but this run makes {chunking!r} chunks; mixing them "
            f"would index the same text twice. Pass --chunking {meta['chunking']} or rebuild with --rebuild"
        )


def building_meta(meta: dict) -> dict:
    """``meta`` of a version this process starts filling: state building, and who builds it."""
    return {**meta, "build_state": BUILDING, "builder": {"host": socket.gethostname(), "pid": os.getpid()}}


def builder_gone(builder: object) -> bool:
    """Whether the process recorded as a version's builder has ended (None: never recorded)."""
    if not isinstance(builder, dict):
        return True  # built before builders were recorded: only a killed run leaves one
    if builder.get("host") != socket.gethostname():
        return False  # another machine's run: its state cannot be seen from here
    try:
        os.kill(int(builder["pid"]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, KeyError, TypeError, ValueError, OverflowError):
        return False
    return False


def clean_leftovers(es, alias: str) -> list[str]:
    """Delete the half-built versions of ``alias`` a killed run left (no alias, state building,
    builder process gone)."""
    deleted = []
    for name in sorted(versions(es, alias)):
        if _aliases_of(es, name):
            continue
        meta = index_meta(es, name)
        if meta.get("build_state") == BUILDING and builder_gone(meta.get("builder")):
            es.indices.delete(index=name)
            deleted.append(name)
    return deleted


def _aliases_of(es, index: str) -> list[str]:
    return sorted(es.indices.get_alias(index=index).body.get(index, {}).get("aliases", {}))


def prepare(
    es, prefix: str, model: str, dims: int, meta: dict, rebuild: bool
) -> tuple[dict[str, str], bool, list[str]]:
    """The index to write for each kind, whether they are new (created now), and the leftovers of
    killed runs that were deleted first."""
    targets, created, cleaned = {}, False, []
    for kind in INDEX_KINDS:
        alias = alias_name(prefix, kind)
        current = physical_indices(es, alias)
        if es.indices.exists(index=alias) and not current:
            raise ConfigError(
                f"{alias!r} is a concrete index, not an alias; scholar-es keeps {alias!r} as an alias "
                f"of versioned indices. Delete or rename it, or use another --prefix"
            )
        cleaned += clean_leftovers(es, alias)
        if current and not rebuild:
            if len(current) != 1:
                raise ConfigError(
                    f"alias {alias!r} points to several indices {current}; fix it with _aliases"
                )
            check_meta(
                es, current[0], model, dims, meta.get("chunking", "paragraph"), meta.get("embedding_backend")
            )
            targets[kind] = current[0]
            continue
        if not rebuild:
            targets[kind] = f"{alias}-v1"
            created = _create_or_join_first_version(es, alias, kind, model, dims, meta) or created
            continue
        name = next_version(es, alias)
        es.indices.create(index=name, **index_body(kind, dims, building_meta(meta)))
        targets[kind] = name
        created = True
    return targets, created, cleaned


def _create_or_join_first_version(es, alias: str, kind: str, model: str, dims: int, meta: dict) -> bool:
    """First run (no alias yet): create ``<alias>-v1``, or join it when another run created it
    first, so two runs started together on a fresh directory write into one index and publish
    the same alias target. True when this run created it."""
    from elasticsearch import BadRequestError

    name = f"{alias}-v1"
    try:
        es.indices.create(index=name, **index_body(kind, dims, building_meta(meta)))
        return True
    except BadRequestError as e:
        if e.error != "resource_already_exists_exception":
            raise
    check_meta(es, name, model, dims, meta.get("chunking", "paragraph"), meta.get("embedding_backend"))
    return False


def discard(es, targets: dict[str, str]) -> None:
    """Delete indices a failed run created (they were never published)."""
    for index in targets.values():
        if es.indices.exists(index=index) and not _aliases_of(es, index):
            es.indices.delete(index=index)


def mark_complete(es, index: str) -> None:
    """Record in ``_meta`` that every document of this run is in ``index`` (before it is published)."""
    meta = index_meta(es, index)
    if meta.get("build_state") != COMPLETE:
        es.indices.put_mapping(index=index, meta={**meta, "build_state": COMPLETE})


def publish(es, prefix: str, targets: dict[str, str]) -> list[str]:
    """Mark each target complete, then point each alias at it in one atomic ``_aliases`` call.

    The version an alias served before gets ``<alias>-previous`` (so a bad rebuild can be undone
    by moving the alias back: ``scholar-es indices`` shows both); unaliased versions older than the
    new one are deleted. Returns the deleted indices.
    """
    for index in targets.values():
        mark_complete(es, index)
    actions = []
    for kind, index in targets.items():
        alias = alias_name(prefix, kind)
        current = physical_indices(es, alias)
        if current == [index]:
            continue  # an update in place: nothing moves
        prev = previous_alias(alias)
        for old in physical_indices(es, prev):
            actions.append({"remove": {"index": old, "alias": prev}})
        for old in current:
            actions.append({"remove": {"index": old, "alias": alias}})
            actions.append({"add": {"index": old, "alias": prev}})
        actions.append({"add": {"index": index, "alias": alias}})
    if actions:
        es.indices.update_aliases(actions=actions)
    deleted = []
    for kind, index in targets.items():
        alias = alias_name(prefix, kind)
        found = versions(es, alias)
        for name, n in sorted(found.items(), key=lambda kv: kv[1]):
            if n < found[index] and not _aliases_of(es, name):
                es.indices.delete(index=name)
                deleted.append(name)
    return deleted
