"""A write request's operations before they reach the store: each document parsed against the
mapping (its id checked as ``IndexRequest.validate`` checks it), the ``_source`` to store and its
vectors packed, or the item's error -- a document the mapping rejects gets its error and the others
are still written (bulk semantics). :meth:`IndexHandle.write <engine.index.indices.IndexHandle.write>`
sends what is left to :meth:`Store.write <engine.index.store.Store.write>` in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable

from scholar_es.engine.errors import EsError, illegal_argument
from scholar_es.engine.index.mapping import (
    Mapping,
    escape_surrogates,
    mapper_error,
    unpaired_surrogate_reason,
)
from scholar_es.engine.index.segment import ParsedDoc, parse_document
from scholar_es.engine.index.store import pack_vectors
from scholar_es.engine.xcontent import dumps_text

MAX_ID_BYTES = 512  # IndexRequest: "id is too long, must be no longer than 512 bytes"


def item_error(e: EsError) -> dict:
    return {"status": e.status, "error": e.cause()}


def parse_ops(
    mapping: Mapping, analysis: dict | None, ops: list[tuple], stored_source: Callable[[dict], dict]
) -> tuple[list[dict | None], list[tuple[int, tuple]], list[tuple[int, ParsedDoc]]]:
    """Per op: its error item (or None), the store ops with their positions, and the parsed
    documents with theirs. ``mapping`` grows by the dynamic fields the documents add."""
    results: list[dict | None] = [None] * len(ops)
    writes: list[tuple[int, tuple]] = []  # (op position, store op)
    parsed: list[tuple[int, ParsedDoc]] = []
    for i, op in enumerate(ops):
        if op[0] == "delete":
            writes.append((i, op))
            continue
        _, doc_id, source, cond = op
        reason = unpaired_surrogate_reason(doc_id)
        if reason is not None:
            results[i] = item_error(illegal_argument(f"id [{escape_surrogates(doc_id)}] holds {reason}"))
            continue
        if len(doc_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
            results[i] = item_error(
                illegal_argument(
                    f"id [{doc_id[:40]}...] is too long, must be no longer than {MAX_ID_BYTES} bytes but was: "
                    f"{len(doc_id.encode('utf-8', 'surrogatepass'))}"
                )
            )
            continue
        try:
            pdoc = parse_document(mapping, analysis, 0, doc_id, source)
        except EsError as e:
            results[i] = item_error(e)
            continue
        stored_text = dumps_text(stored_source(source))
        reason = unpaired_surrogate_reason(stored_text)  # e.g. in a field the mapping does not index
        if reason is not None:
            results[i] = item_error(mapper_error(f"failed to parse: the document's _source holds {reason}"))
            continue
        writes.append((i, ("index", doc_id, stored_text, pack_vectors(pdoc.vectors), cond)))
        parsed.append((i, pdoc))
    return results, writes, parsed
