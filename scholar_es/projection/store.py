"""Heads stored in the engine or cluster, so every backend service shares them (issue 7).

Layout: alias ``<prefix>heads-<name>`` -> index ``<prefix>heads-<name>-v<N>``; retraining writes
``-v<N+1>`` and moves the alias in one ``_aliases`` call (:func:`indexer.layout.publish`: the
previous version is kept so a bad retrain can be undone, older ones are deleted), so readers
never see half a set. One document per head, id = its row number::

    {"seq": 0, "answer_id": "31715818", "n_questions": 2,
     "centroid": [0.013, ...], "answer_vector": [-0.041, ...]}

The vectors are ``float`` arrays with ``index: false`` and ``doc_values: false``: kept verbatim
in ``_source`` (order preserved), neither indexed nor searchable. (``dense_vector`` fields would
be dropped from ``_source`` by 9.x clusters' ``exclude_source_vectors`` default.) The mapping's
``_meta`` holds the model name, dims, τ, threshold, α and the provenance; a threshold of -inf
(no fallback) is stored as ``null`` and +inf (always fall back) as 2.0 (JSON has no infinity).

Reading pages through the heads with ``range`` on ``seq`` (no scroll or search_after needed).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
from elasticsearch import NotFoundError, helpers

from indexer import layout
from scholar_es.errors import ConfigError, ScholarEsError, choices
from scholar_es.projection.heads import DEFAULT_NAME, Heads, check_name
from scholar_es.projection.routing import NO_THRESHOLD

SCHEMA = "scholar-es/heads"
SCHEMA_VERSION = 1
PAGE = 1000
_VECTOR = {"type": "float", "index": False, "doc_values": False}


def heads_alias(name: str = DEFAULT_NAME, prefix: str = "") -> str:
    return layout.alias_name(prefix, f"heads-{check_name(name)}")


def heads_body(heads: Heads) -> dict:
    """The create-index body: mapping + ``_meta`` (model, dims, routing parameters, provenance)."""
    meta = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "name": heads.name,
        "embedding_model": heads.model,
        "dims": heads.dims,
        "n_heads": len(heads),
        "tau": heads.tau,
        "threshold": _threshold_json(heads.threshold),
        "alpha": heads.alpha,
        "info": heads.info,
    }
    return version_body(
        meta,
        {
            "seq": {"type": "integer"},
            "answer_id": {"type": "keyword"},
            "n_questions": {"type": "integer"},
            "centroid": dict(_VECTOR),
            "answer_vector": dict(_VECTOR),
        },
    )


def version_body(meta: dict, properties: dict) -> dict:
    """The create-index body of one stored version (heads, an adapter): one shard, a strict
    mapping of ``properties``, ``meta`` as its ``_meta``."""
    return {
        "settings": {"number_of_shards": 1},
        "mappings": {"dynamic": "strict", "_meta": meta, "properties": properties},
    }


def _threshold_json(threshold: float) -> float | None:
    """-inf (never fall back) -> null; above 1 (always: cosine similarities are at most 1) -> 2.0."""
    if math.isinf(threshold) and threshold < 0:
        return None
    return min(float(threshold), 2.0)


def _doc(heads: Heads, k: int) -> dict:
    return {
        "seq": k,
        "answer_id": heads.answer_ids[k],
        "n_questions": int(heads.n_questions[k]),
        "centroid": [float(x) for x in heads.centroids[k]],
        "answer_vector": [float(x) for x in heads.answers[k]],
    }


def write_version(
    es,
    prefix: str,
    kind: str,
    body: dict,
    rows: Iterator[dict],
    *,
    concrete_fix: str,
    failure: str,
    unit: str,
    chunk_size: int,
) -> str:
    """Write ``rows`` (their ``seq`` is their id) into a new version ``<prefix><kind>-v<N>`` created
    with ``body`` and move the alias ``<prefix><kind>`` to it (:func:`indexer.layout.publish`);
    returns the index. Shared by the heads and the self-supervised adapter. A concrete index named
    like the alias is refused (``concrete_fix``: what to do); a failed row deletes the new version."""
    alias = layout.alias_name(prefix, kind)
    if es.indices.exists(index=alias) and not layout.physical_indices(es, alias):
        raise ConfigError(f"{alias!r} is a concrete index, not an alias; delete or rename it{concrete_fix}")
    index = layout.next_version(es, alias)
    es.indices.create(index=index, **body)
    ok, errors = helpers.bulk(
        es,
        ({"_index": index, "_id": str(row["seq"]), "_source": row} for row in rows),
        raise_on_error=False,
        chunk_size=chunk_size,
    )
    assert isinstance(errors, list)  # without stats_only, bulk gives the failed items themselves
    if errors:
        es.indices.delete(index=index)
        raise ScholarEsError(f"{failure} failed for {len(errors)} {unit}: {errors[0]}")
    es.indices.refresh(index=index)
    layout.publish(es, prefix, {kind: index})
    return index


def read_rows(es, alias: str, count: int) -> Iterator[dict]:
    """The hits of rows ``seq`` 0 .. count-1 of ``alias``, in pages of :data:`PAGE` by ``range`` on
    ``seq`` (no scroll or search_after needed)."""
    for start in range(0, count, PAGE):
        resp = es.search(
            index=alias,
            query={"range": {"seq": {"gte": start, "lt": start + PAGE}}},
            sort=[{"seq": "asc"}],
            size=PAGE,
        ).body
        yield from resp["hits"]["hits"]


def delete_versions(es, alias: str) -> list[str]:
    """Delete every ``<alias>-v<N>`` index (the alias goes with them); returns them, sorted."""
    deleted = sorted(layout.versions(es, alias))
    for index in deleted:
        es.indices.delete(index=index)
    return deleted


def save_heads(es, heads: Heads, prefix: str = "") -> str:
    """Write ``heads`` as a new version behind ``<prefix>heads-<name>``; returns the index name."""
    check_name(heads.name)
    return write_version(
        es,
        prefix,
        f"heads-{heads.name}",
        heads_body(heads),
        (_doc(heads, k) for k in range(len(heads))),
        concrete_fix=", or train heads with another --name",
        failure=f"storing heads {heads.name!r}",
        unit="heads",
        chunk_size=200,
    )


def list_heads(es, prefix: str = "") -> list[str]:
    """Names of the heads stored under ``prefix``."""
    try:
        aliases = es.indices.get_alias(index=f"{prefix}heads-*", allow_no_indices=True).body
    except NotFoundError:
        return []
    start = f"{prefix}heads-"
    found = {a for body in aliases.values() for a in body.get("aliases", {}) if a.startswith(start)}
    # <alias>-previous names the version kept for rollback (indexer.layout.publish), not heads
    return sorted(a[len(start) :] for a in found if not (a.endswith("-previous") and a[:-9] in found))


def read_meta(es, name: str = DEFAULT_NAME, prefix: str = "") -> dict:
    alias = heads_alias(name, prefix)
    try:
        body = es.indices.get_mapping(index=alias).body
    except NotFoundError:
        known = list_heads(es, prefix)
        raise ConfigError(
            f"no heads named {name!r} ({alias!r} not found); train them with `scholar-es heads train "
            f"DATASET --format beir|qasper --name {name}`"
            + (f", or use one of {choices(known)}" if known else "")
        ) from None
    metas = [m["mappings"].get("_meta", {}) for m in body.values()]
    if len(metas) != 1 or metas[0].get("schema") != SCHEMA:
        raise ConfigError(
            f"{alias!r} is not a heads index of scholar-es (its _meta schema is "
            f"{metas[0].get('schema') if metas else None!r}); retrain the heads"
        )
    return metas[0]


def load_heads(es, name: str = DEFAULT_NAME, prefix: str = "") -> Heads:
    """The heads stored as ``<prefix>heads-<name>``, back in numpy."""
    alias = heads_alias(name, prefix)
    meta = read_meta(es, name, prefix)
    n, dims = int(meta["n_heads"]), int(meta["dims"])
    ids: list[str] = [""] * n
    cents = np.zeros((n, dims), dtype=np.float32)
    answers = np.zeros((n, dims), dtype=np.float32)
    counts = np.zeros(n, dtype=np.int64)
    seen = 0
    for hit in read_rows(es, alias, n):
        src = hit["_source"]
        k = int(src["seq"])
        if not 0 <= k < n or len(src["centroid"]) != dims or len(src["answer_vector"]) != dims:
            raise ConfigError(
                f"heads index {alias!r} is damaged: head {hit['_id']!r} does not match its _meta "
                f"({n} heads of {dims} dims); retrain the heads"
            )
        ids[k] = str(src["answer_id"])
        cents[k] = src["centroid"]
        answers[k] = src["answer_vector"]
        counts[k] = int(src.get("n_questions") or 0)
        seen += 1
    if seen != n:
        raise ConfigError(
            f"heads index {alias!r} holds {seen} heads but its _meta says {n}; retrain the heads"
        )
    threshold = meta.get("threshold")
    return Heads(
        answer_ids=tuple(ids),
        centroids=cents,
        answers=answers,
        n_questions=counts,
        model=str(meta["embedding_model"]),
        dims=dims,
        tau=float(meta["tau"]),
        threshold=NO_THRESHOLD if threshold is None else float(threshold),
        alpha=float(meta["alpha"]),
        name=str(meta.get("name") or name),
        info=dict(meta.get("info") or {}),
    )


def delete_heads(es, name: str = DEFAULT_NAME, prefix: str = "") -> list[str]:
    """Delete the heads ``name``: every ``<prefix>heads-<name>-v<N>`` index (the alias goes with
    them). Returns the deleted indices."""
    return delete_versions(es, heads_alias(name, prefix))
