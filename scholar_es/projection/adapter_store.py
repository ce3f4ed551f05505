"""The self-supervised adapter stored in the engine or cluster, next to the corpus it was trained on.

Layout, as the heads (:mod:`scholar_es.projection.store`): alias ``<prefix>adapter`` -> index
``<prefix>adapter-v<N>``; training again writes ``-v<N+1>`` and moves the alias in one
``_aliases`` call (:func:`indexer.layout.publish`; the previous version is kept for a rollback).
One adapter per corpus prefix: an index has one or none, and the ``adapted-*`` strategies use it
when asked (opt-in). One document per row of ``W``, id = its row number::

    {"seq": 0, "row": [0.0013, -0.0202, ...]}

Rows are ``float`` arrays with ``index: false`` and ``doc_values: false`` (verbatim in
``_source``; ``dense_vector`` would be dropped from ``_source`` by 9.x clusters'
``exclude_source_vectors``). The mapping's ``_meta`` holds the model, dims and how the adapter
was trained.
"""

from __future__ import annotations

import numpy as np
from elasticsearch import NotFoundError

from indexer import layout
from scholar_es.errors import ConfigError
from scholar_es.projection.adapter import Adapter
from scholar_es.projection.store import delete_versions, read_rows, version_body, write_version

SCHEMA = "scholar-es/adapter"
SCHEMA_VERSION = 1
KIND = "adapter"
_ROW = {"type": "float", "index": False, "doc_values": False}
TRAIN_COMMAND = "scholar-es heads train --self-supervised --prefix {prefix!r} --es TARGET"


def adapter_alias(prefix: str = "") -> str:
    return layout.alias_name(prefix, KIND)


def adapter_body(adapter: Adapter) -> dict:
    meta = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "embedding_model": adapter.model,
        "dims": adapter.dims,
        "info": adapter.info,
    }
    return version_body(meta, {"seq": {"type": "integer"}, "row": dict(_ROW)})


def save_adapter(es, adapter: Adapter, prefix: str = "") -> str:
    """Write ``adapter`` as a new version behind ``<prefix>adapter``; returns the index name."""
    w = np.asarray(adapter.weight, dtype=np.float32)
    return write_version(
        es,
        prefix,
        KIND,
        adapter_body(adapter),
        ({"seq": k, "row": [float(x) for x in w[k]]} for k in range(adapter.dims)),
        concrete_fix=" before training the adapter of this prefix",
        failure="storing the adapter",
        unit="rows",
        chunk_size=100,
    )


def read_meta(es, prefix: str = "") -> dict:
    alias = adapter_alias(prefix)
    try:
        body = es.indices.get_mapping(index=alias).body
    except NotFoundError:
        body = {}
    if not body:
        raise ConfigError(
            f"no self-supervised adapter for the prefix {prefix!r} ({alias!r} not found); train it "
            f"with `{TRAIN_COMMAND.format(prefix=prefix)}`, or use a strategy without the adapter "
            "(hybrid, dense)"
        )
    metas = [m["mappings"].get("_meta", {}) for m in body.values()]
    if len(metas) != 1 or metas[0].get("schema") != SCHEMA:
        raise ConfigError(
            f"{alias!r} is not an adapter index of scholar-es (its _meta schema is "
            f"{metas[0].get('schema') if metas else None!r}); train the adapter again with "
            f"`{TRAIN_COMMAND.format(prefix=prefix)}`"
        )
    return metas[0]


def load_adapter(es, prefix: str = "") -> Adapter:
    """The adapter stored as ``<prefix>adapter``, back in numpy."""
    alias = adapter_alias(prefix)
    meta = read_meta(es, prefix)
    dims = int(meta["dims"])
    w = np.zeros((dims, dims), dtype=np.float32)
    seen: set[int] = set()
    for hit in read_rows(es, alias, dims):
        src = hit["_source"]
        k = int(src["seq"])
        if not 0 <= k < dims or len(src["row"]) != dims:
            raise ConfigError(
                f"adapter index {alias!r} is damaged: row {hit['_id']!r} does not match its _meta "
                f"({dims} dims); train the adapter again"
            )
        w[k] = src["row"]
        seen.add(k)
    if len(seen) != dims:
        raise ConfigError(
            f"adapter index {alias!r} holds {len(seen)} rows but its _meta says {dims}; train the "
            "adapter again"
        )
    return Adapter(w, str(meta["embedding_model"]), dims, dict(meta.get("info") or {}))


def delete_adapter(es, prefix: str = "") -> list[str]:
    """Delete every ``<prefix>adapter-v<N>`` index (the alias goes with them); returns them."""
    return delete_versions(es, adapter_alias(prefix))
