"""Optimistic concurrency control of document writes, as Elasticsearch implements it.

A write may carry a :class:`Condition`: ``if_seq_no`` + ``if_primary_term`` (compare and set
on the document's last sequence number), a ``version`` with a ``version_type`` (``internal``,
``external``/``external_gt``, ``external_gte``) or ``op_type=create`` (internally: version
``MATCH_DELETED``). :meth:`engine.index.store.Store.write` checks each condition inside its
write transaction, against the state of that transaction and the earlier operations of the same
request (:func:`conflict`), so the check is atomic across threads and processes; a failed check
is a 409 ``version_conflict_engine_exception`` (:func:`conflict_error`).

The parsing and validation follow ``RestIndexAction``/``RestDeleteAction``, ``BulkRequestParser``,
``IndexRequest.validate``, ``DeleteRequest.validate`` and ``DocWriteRequest.validateSeqNoBasedCASParams``;
the conflict rules and their wording ``VersionType`` and ``VersionConflictEngineException``, and the
order of the checks ``InternalEngine.planIndexingAsPrimary``/``planDeletionAsPrimary`` (all in
elastic/elasticsearch ``server/src/main/java/org/elasticsearch/``).

Sequence numbers: a document version's ``_seq_no`` is its row's ``seq`` minus one (Elasticsearch
counts from 0, SQLite's AUTOINCREMENT from 1); a delete takes a ``seq`` of its own, so its
``_seq_no`` is a fresh number too. The engine has one primary term, 1: any other never matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scholar_es.engine.errors import EsError, illegal_argument

# org.elasticsearch.common.lucene.uid.Versions / index.seqno.SequenceNumbers
MATCH_ANY = -3
MATCH_DELETED = -4
NOT_FOUND = -1
UNASSIGNED_SEQ_NO = -2
UNASSIGNED_PRIMARY_TERM = 0
#: the engine's only primary term (one shard, never failed over)
PRIMARY_TERM = 1

#: VersionType.fromString: the URL/metadata value -> the enum's name (what messages print)
VERSION_TYPES = {
    "internal": "INTERNAL",
    "external": "EXTERNAL",
    "external_gt": "EXTERNAL",
    "external_gte": "EXTERNAL_GTE",
}


@dataclass(frozen=True)
class Condition:
    """What a write requires of the document's current state (Elasticsearch's defaults: none)."""

    version: int = MATCH_ANY
    version_type: str = "INTERNAL"
    if_seq_no: int = UNASSIGNED_SEQ_NO
    if_primary_term: int = UNASSIGNED_PRIMARY_TERM


ANY = Condition()
CREATE = Condition(version=MATCH_DELETED)
#: the parameters (or metadata keys) that make a condition
_KEYS = frozenset(("version", "version_type", "if_seq_no", "if_primary_term"))


def seq_no(seq: int) -> int:
    """The ``_seq_no`` reported for (and compared with ``if_seq_no`` against) a store ``seq``."""
    return seq - 1


def conflict(cond: Condition, current_version: int | None, current_seq: int | None) -> str | None:
    """Why ``cond`` does not hold for a document at ``current_version`` (None: never written or
    its tombstone collected) whose live row is ``current_seq`` (None: absent or deleted), as
    ``VersionConflictEngineException`` words it after ``[id]: version conflict, ``; None if it holds."""
    if cond is ANY:
        return None
    deleted = current_seq is None
    current = NOT_FOUND if current_version is None else current_version
    if cond.if_seq_no != UNASSIGNED_SEQ_NO:
        required = f"required seqNo [{cond.if_seq_no}], primary term [{cond.if_primary_term}]. "
        if current_seq is None:
            return required + "but no document was found"
        if seq_no(current_seq) != cond.if_seq_no or cond.if_primary_term != PRIMARY_TERM:
            return (
                required
                + f"current document has seqNo [{seq_no(current_seq)}] and primary term [{PRIMARY_TERM}]"
            )
        return None
    expected, kind = cond.version, cond.version_type
    if kind == "INTERNAL":
        if expected == MATCH_ANY:
            return None
        if expected == MATCH_DELETED:
            return None if deleted else f"document already exists (current version [{current}])"
        if current == expected:
            return None
        if current == NOT_FOUND:
            return f"document does not exist (expected version [{expected}])"
        return f"current version [{current}] is different than the one provided [{expected}]"
    if current == NOT_FOUND:
        return None
    if kind == "EXTERNAL":
        if expected == MATCH_ANY or current >= expected:
            return f"current version [{current}] is higher or equal to the one provided [{expected}]"
        return None
    if expected == MATCH_ANY or current > expected:  # EXTERNAL_GTE
        return f"current version [{current}] is higher than the one provided [{expected}]"
    return None


def next_version(cond: Condition, current_version: int | None) -> int:
    """``VersionType.updateVersion``: internal counts on from the current version (1 for a new
    document), external versions are taken as given."""
    if cond.version_type == "INTERNAL":
        return 1 if current_version is None else current_version + 1
    return cond.version


def conflict_error(doc_id: str, reason: str, index: str, index_uuid: str) -> EsError:
    """The 409 of a failed condition, with the body Elasticsearch sends."""
    return EsError(
        409,
        "version_conflict_engine_exception",
        f"[{doc_id}]: version conflict, {reason}",
        index_uuid=index_uuid,
        shard="0",
        index=index,
    )


# --- parsing and validation -----------------------------------------------------------------


def validation_error(messages: list[str]) -> EsError:
    """``ActionRequestValidationException``: every message, numbered."""
    listed = "".join(f"{i}: {m};" for i, m in enumerate(messages, 1))
    return EsError(400, "action_request_validation_exception", f"Validation Failed: {listed}")


def _long(name: str, value: Any) -> int:
    """``RestRequest.paramAsLong`` (and a metadata line's ``longValue``): a Java long, so a number
    outside the signed 64-bit range is the same 400 as one that does not parse (``Long.parseLong``
    throws NumberFormatException for both), never an overflow further down."""
    try:
        number = value if type(value) is int else int(str(value).strip())
    except ValueError:
        number = None
    if number is None or not -(2**63) <= number < 2**63:
        raise illegal_argument(f"Failed to parse long parameter [{name}] with value [{value}]")
    return number


def parse(values: Mapping[str, Any], op: str) -> Condition:
    """The condition of one write from its URL parameters or bulk metadata (``op``: ``index``,
    ``create`` or ``delete``). Raises the 400 Elasticsearch raises while parsing them (a bad
    number, an unknown version type, a negative ``if_seq_no``/``if_primary_term``)."""
    if _KEYS.isdisjoint(values):  # the common case: no condition
        return CREATE if op == "create" else ANY
    version = _long("version", values["version"]) if values.get("version") is not None else MATCH_ANY
    kind = values.get("version_type")
    if kind is not None and str(kind) not in VERSION_TYPES:
        raise illegal_argument(f"No version type match [{kind}]")
    if_seq_no = UNASSIGNED_SEQ_NO
    if values.get("if_seq_no") is not None:
        if_seq_no = _long("if_seq_no", values["if_seq_no"])
        if if_seq_no < 0 and if_seq_no != UNASSIGNED_SEQ_NO:  # IndexRequest.setIfSeqNo
            raise illegal_argument(f"sequence numbers must be non negative. got [{if_seq_no}].")
    if_term = UNASSIGNED_PRIMARY_TERM
    if values.get("if_primary_term") is not None:
        if_term = _long("if_primary_term", values["if_primary_term"])
        if if_term < 0:  # IndexRequest.setIfPrimaryTerm
            raise illegal_argument(f"primary term must be non negative. got [{if_term}].")
    if op == "create" and version == MATCH_ANY:  # IndexRequest.resolveVersionDefaults
        version = MATCH_DELETED
    return Condition(
        version, VERSION_TYPES[str(kind)] if kind is not None else "INTERNAL", if_seq_no, if_term
    )


def problems(cond: Condition, op: str, has_id: bool = True) -> list[str]:
    """What ``IndexRequest.validate`` (``op`` index/create) or ``DeleteRequest.validate`` says of
    ``cond``: the messages of an ``action_request_validation_exception``, none when it is valid."""
    if cond is ANY or cond is CREATE:
        return []
    version, kind = cond.version, cond.version_type
    if op == "create":
        if kind != "INTERNAL":
            return ["create operations only support internal versioning. use index instead"]
        if version != MATCH_DELETED:
            return ["create operations do not support explicit versions. use index instead"]
        if cond.if_seq_no != UNASSIGNED_SEQ_NO or cond.if_primary_term != UNASSIGNED_PRIMARY_TERM:
            return ["create operations do not support compare and set. use index instead"]
    out: list[str] = []
    if not has_id and (kind != "INTERNAL" or version not in (MATCH_DELETED, MATCH_ANY)):
        out.append("an id must be provided if version type or value are set")
    # DocWriteRequest.validateSeqNoBasedCASParams
    valid = version >= 0 if kind != "INTERNAL" else version > 0 or version in (MATCH_ANY, MATCH_DELETED)
    if not valid:
        out.append(f"illegal version value [{version}] for version type [{kind}]")
    if kind == "INTERNAL" and version not in (MATCH_ANY, MATCH_DELETED):
        out.append(
            "internal versioning can not be used for optimistic concurrency control. "
            "Please use `if_seq_no` and `if_primary_term` instead"
        )
    if cond.if_seq_no != UNASSIGNED_SEQ_NO and (kind != "INTERNAL" or version != MATCH_ANY):
        out.append("compare and write operations can not use versioning")
    if cond.if_primary_term == UNASSIGNED_PRIMARY_TERM and cond.if_seq_no != UNASSIGNED_SEQ_NO:
        out.append("ifSeqNo is set, but primary term is [0]")
    if cond.if_primary_term != UNASSIGNED_PRIMARY_TERM and cond.if_seq_no == UNASSIGNED_SEQ_NO:
        out.append(f"ifSeqNo is unassigned, but primary term is [{cond.if_primary_term}]")
    return out


def checked(values: Mapping[str, Any], op: str, has_id: bool = True) -> Condition:
    """:func:`parse`, then :func:`problems` raised as one validation error."""
    cond = parse(values, op)
    found = problems(cond, op, has_id)
    if found:
        raise validation_error(found)
    return cond
