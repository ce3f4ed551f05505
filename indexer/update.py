"""Read-modify-write of one chunk that keeps it searchable: :func:`update_chunk`.

The chunks mapping keeps ``vector`` out of ``_source`` (``mappings/chunks.json``: 384 floats
per chunk would triple the stored source and every hit that asks for it). The vector is indexed,
so search uses it, but a plain read gives a document without it, and writing that document back
(``index``, or ``_update``, which rebuilds the document from ``_source``) leaves the chunk
without a vector: the hybrid strategies then give it 0 for the vector part and ``dense`` cannot
find it. :func:`update_chunk` is the documented way to edit a chunk: it reads the chunk, applies
the changes, embeds the chunk again with the index's model (the text as ``scholar-es index``
embeds it, :func:`indexer.pipeline.chunk_embedding_text`) and writes the whole document back,
vector included, guarded by the version it read (``if_seq_no``/``if_primary_term``), so a
concurrent write is refused as a conflict rather than overwritten.
"""

from __future__ import annotations

from typing import Any

from indexer import layout
from indexer.models import SECTION_TYPES
from indexer.pipeline import chunk_embedding_text
from scholar_es.errors import ConfigError, InputError, choices

#: What may change: the fields of the chunk itself. The paper's fields (title, abstract, authors,
#: year, venue) are copied into every chunk of the paper and into ``<prefix>papers``: correct
#: the source file and run ``scholar-es index`` again for those.
EDITABLE = ("chunk_text", "section_heading", "section_type")


def update_chunk(
    es, chunk_id: str, changes: dict[str, Any], *, embedder, prefix: str = "", refresh: bool | str = False
) -> dict[str, Any]:
    """Apply ``changes`` (fields of :data:`EDITABLE`) to chunk ``chunk_id`` of ``<prefix>chunks``,
    embed it again with ``embedder`` (the index's model, checked against its ``_meta``) and write
    it back with its vector. Returns the new ``_source`` without the vector.

    Raises ConfigError for an unknown chunk or field, InputError for a bad value,
    ModelMismatchError for another model, and the client's ConflictError when the chunk changed
    since it was read."""
    from elasticsearch import NotFoundError

    bad = sorted(set(changes) - set(EDITABLE))
    if bad:
        raise ConfigError(
            f"cannot change {', '.join(map(repr, bad))} of a chunk here; the fields that can change are "
            f"{choices(EDITABLE)} (the vector is computed again; paper fields live in every chunk of the "
            "paper and in the papers index: fix the source file and run `scholar-es index` again)"
        )
    for field in EDITABLE:
        if field in changes and not isinstance(changes[field], str):
            raise InputError(f"expected a string, got {changes[field]!r}", field=field)
    if changes.get("section_type", SECTION_TYPES[0]) not in SECTION_TYPES:
        raise InputError(
            f"unknown section type {changes['section_type']!r}; use one of {choices(SECTION_TYPES)}",
            field="section_type",
        )
    if "chunk_text" in changes and not changes["chunk_text"].strip():
        raise InputError("the chunk text is empty; delete the chunk instead", field="chunk_text")
    alias = layout.alias_name(prefix, "chunks")
    try:
        got = es.get(index=alias, id=chunk_id).body
    except NotFoundError:
        raise ConfigError(f"no chunk {chunk_id!r} in {alias!r}; check the chunk id and --prefix") from None
    index = got["_index"]
    meta = layout.index_meta(es, index)
    layout.check_meta(
        es,
        index,
        embedder.name,
        embedder.dims,
        meta.get("chunking") or "paragraph",
        getattr(embedder, "backend", None),
    )
    doc = {**got["_source"], **changes}
    text = chunk_embedding_text(
        doc.get("section_type") or "",
        doc.get("section_heading") or "",
        doc.get("title") or "",
        doc.get("chunk_text") or "",
    )
    vector = [float(x) for x in embedder.encode([text])[0]]
    es.index(
        index=index,
        id=chunk_id,
        document={**doc, "vector": vector},
        if_seq_no=got["_seq_no"],
        if_primary_term=got["_primary_term"],
        refresh=refresh,
    )
    return doc
