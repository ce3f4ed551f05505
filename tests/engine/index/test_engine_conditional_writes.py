"""Conditional writes (issue 25): ``if_seq_no``/``if_primary_term``, ``version`` + ``version_type``,
``op_type=create`` and ``_create``, in the URL and in bulk metadata, checked inside the write
transaction -- so two processes on one engine directory never both create one id or both replace
one sequence number -- and a document's dynamic mapping stored in its own transaction.

Expected bodies and messages are Elasticsearch's (``VersionConflictEngineException``,
``VersionType``, ``IndexRequest.validate``, ``DocWriteRequest.validateSeqNoBasedCASParams``,
``BulkRequestParser``); the YAML tests ported in tests/engine/rest/rest_api/ (index.30_cas, delete.20_cas,
bulk.80_cas, ...) check the rest of the protocol.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from elasticsearch import ApiError

from scholar_es.engine.rest.transport import embedded_client

ROOT = Path(__file__).resolve().parents[3]
ENV = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _error(call) -> tuple[int, dict]:
    try:
        resp = call()
    except ApiError as e:
        return e.meta.status, e.body
    raise AssertionError(f"expected an error, got {resp.body}")


def _conflict(es, index: str, reason: str) -> dict:
    """Elasticsearch's 409 body for ``reason``."""
    cause = {
        "type": "version_conflict_engine_exception",
        "reason": reason,
        "index_uuid": es.indices.get(index=index)[index]["settings"]["index"]["uuid"],
        "shard": "0",
        "index": index,
    }
    return {"error": {"root_cause": [cause], **cause}, "status": 409}


def _invalid(*messages: str) -> dict:
    reason = "Validation Failed: " + "".join(f"{i}: {m};" for i, m in enumerate(messages, 1))
    cause = {"type": "action_request_validation_exception", "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": 400}


_JSON = {"content-type": "application/json", "accept": "application/json"}

# --- if_seq_no / if_primary_term -------------------------------------------------------------


def test_stale_if_seq_no_is_a_409_for_index_and_delete(tmp_engine) -> None:
    es = tmp_engine
    first = es.index(index="t", id="1", document={"v": 1})
    seq = first["_seq_no"]
    assert (first["_seq_no"], first["_primary_term"]) == (0, 1)  # Elasticsearch counts from 0
    second = es.index(index="t", id="1", document={"v": 2}, if_seq_no=seq, if_primary_term=1)
    assert (second["result"], second["_version"], second["_seq_no"]) == ("updated", 2, 1)
    got = es.get(index="t", id="1")
    assert (got["_seq_no"], got["_primary_term"]) == (1, 1)

    # the first writer's seq_no is stale now: refused, the document unchanged
    status, body = _error(
        lambda: es.index(index="t", id="1", document={"v": 3}, if_seq_no=seq, if_primary_term=1)
    )
    assert status == 409
    assert body == _conflict(
        es,
        "t",
        "[1]: version conflict, required seqNo [0], primary term [1]. current document has seqNo [1] and primary term [1]",
    )
    # a primary term other than the engine's (1) never matches
    status, body = _error(
        lambda: es.index(index="t", id="1", document={"v": 3}, if_seq_no=1, if_primary_term=2)
    )
    assert body["error"]["reason"].endswith(
        "required seqNo [1], primary term [2]. current document has seqNo [1] and primary term [1]"
    )
    status, body = _error(lambda: es.delete(index="t", id="1", if_seq_no=seq, if_primary_term=1))
    assert status == 409 and body["error"]["type"] == "version_conflict_engine_exception"
    assert es.get(index="t", id="1")["_source"] == {"v": 2}

    deleted = es.delete(index="t", id="1", if_seq_no=1, if_primary_term=1)
    assert (deleted["result"], deleted["_version"], deleted["_seq_no"]) == (
        "deleted",
        3,
        2,
    )  # a delete takes a seq_no
    # nothing to compare with: "but no document was found" (also for an id never written)
    for doc_id in ("1", "never"):
        status, body = _error(
            lambda doc_id=doc_id: es.index(
                index="t", id=doc_id, document={"v": 4}, if_seq_no=2, if_primary_term=1
            )
        )
        assert body == _conflict(
            es,
            "t",
            f"[{doc_id}]: version conflict, required seqNo [2], primary term [1]. but no document was found",
        )
    assert es.index(index="t", id="2", document={})["_seq_no"] == 3  # conflicts take no seq_no


def test_seq_no_of_search_hits_is_the_one_compared(tmp_engine) -> None:
    es = tmp_engine
    es.index(index="t", id="a", document={"x": 1})
    es.index(index="t", id="a", document={"x": 2})
    es.index(index="t", id="b", document={"x": 3}, refresh=True)
    hits = es.search(index="t", seq_no_primary_term=True, version=True, _source=False)["hits"]["hits"]
    found = {h["_id"]: (h["_seq_no"], h["_primary_term"], h["_version"]) for h in hits}
    assert found == {"a": (1, 1, 2), "b": (2, 1, 1)}
    assert es.get(index="t", id="a")["_seq_no"] == 1
    es.index(index="t", id="a", document={"x": 5}, if_seq_no=found["a"][0], if_primary_term=1)


# --- versions --------------------------------------------------------------------------------


def test_external_versions(tmp_engine) -> None:
    es = tmp_engine
    assert (
        es.index(index="t", id="1", document={"v": 10}, version=10, version_type="external")["_version"] == 10
    )
    status, body = _error(
        lambda: es.index(index="t", id="1", document={"v": 9}, version=9, version_type="external")
    )
    assert body == _conflict(
        es, "t", "[1]: version conflict, current version [10] is higher or equal to the one provided [9]"
    )
    status, body = _error(
        lambda: es.index(index="t", id="1", document={}, version=10, version_type="external_gt")
    )
    assert (
        body["error"]["reason"]
        == "[1]: version conflict, current version [10] is higher or equal to the one provided [10]"
    )
    status, body = _error(
        lambda: es.index(index="t", id="1", document={}, version=9, version_type="external_gte")
    )
    assert body == _conflict(
        es, "t", "[1]: version conflict, current version [10] is higher than the one provided [9]"
    )
    assert es.get(index="t", id="1")["_source"] == {"v": 10}
    # internal writes go on from an external version
    assert es.index(index="t", id="1", document={"v": 11})["_version"] == 11
    # a delete with a lower external version is refused; the tombstone keeps the version after it
    status, body = _error(lambda: es.delete(index="t", id="1", version=5, version_type="external"))
    assert (
        body["error"]["reason"]
        == "[1]: version conflict, current version [11] is higher or equal to the one provided [5]"
    )
    deleted = es.delete(index="t", id="1", version=20, version_type="external")
    assert (deleted["result"], deleted["_version"]) == ("deleted", 20)
    status, body = _error(
        lambda: es.index(index="t", id="1", document={}, version=15, version_type="external")
    )
    assert (
        body["error"]["reason"]
        == "[1]: version conflict, current version [20] is higher or equal to the one provided [15]"
    )
    assert (
        es.index(index="t", id="1", document={"v": 21}, version=21, version_type="external")["result"]
        == "created"
    )
    # a missing document: the given version is taken, for an index and a delete alike
    gone = es.options(ignore_status=404).delete(index="t", id="nope", version=7, version_type="external")
    assert (gone["result"], gone["_version"]) == ("not_found", 7)


def test_create_conflicts_with_a_live_document_only(tmp_engine) -> None:
    es = tmp_engine
    es.index(index="t", id="1", document={"v": 1})
    es.index(index="t", id="1", document={"v": 2})
    status, body = _error(lambda: es.create(index="t", id="1", document={"v": 3}))
    assert body == _conflict(es, "t", "[1]: version conflict, document already exists (current version [2])")
    status, body = _error(lambda: es.index(index="t", id="1", document={"v": 3}, op_type="create"))
    assert status == 409
    es.delete(index="t", id="1")
    created = es.create(index="t", id="1", document={"v": 4})
    assert (created["result"], created["_version"]) == ("created", 4)  # the deleted id's version goes on


# --- validation ------------------------------------------------------------------------------

INTERNAL_VERSION = (
    "internal versioning can not be used for optimistic concurrency control. "
    "Please use `if_seq_no` and `if_primary_term` instead"
)


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        (lambda es: es.index(index="t", id="1", document={}, version=3), _invalid(INTERNAL_VERSION)),
        (lambda es: es.delete(index="t", id="1", version=3), _invalid(INTERNAL_VERSION)),
        (
            lambda es: es.index(index="t", id="1", document={}, version=0),
            _invalid("illegal version value [0] for version type [INTERNAL]", INTERNAL_VERSION),
        ),
        (
            lambda es: es.index(index="t", id="1", document={}, version_type="external"),
            _invalid("illegal version value [-3] for version type [EXTERNAL]"),
        ),
        (
            lambda es: es.index(index="t", id="1", document={}, version=-1, version_type="external_gte"),
            _invalid("illegal version value [-1] for version type [EXTERNAL_GTE]"),
        ),
        (
            lambda es: es.index(
                index="t",
                id="1",
                document={},
                if_seq_no=1,
                if_primary_term=1,
                version=2,
                version_type="external",
            ),
            _invalid("compare and write operations can not use versioning"),
        ),
        (
            lambda es: es.index(index="t", id="1", document={}, if_seq_no=1),
            _invalid("ifSeqNo is set, but primary term is [0]"),
        ),
        (
            lambda es: es.delete(index="t", id="1", if_primary_term=1),
            _invalid("ifSeqNo is unassigned, but primary term is [1]"),
        ),
        (
            lambda es: es.perform_request(
                "PUT", "/t/_create/1", params={"if_seq_no": 0, "if_primary_term": 1}, headers=_JSON, body={}
            ),
            _invalid("create operations do not support compare and set. use index instead"),
        ),
        (
            lambda es: es.create(index="t", id="1", document={}, version=2),
            _invalid("create operations do not support explicit versions. use index instead"),
        ),
        (
            lambda es: es.index(index="t", document={}, version=2, version_type="external", op_type="index"),
            _invalid("an id must be provided if version type or value are set"),
        ),
        (  # POST /{index}/_doc is a create unless op_type says otherwise (RestIndexAction.AutoIdHandler)
            lambda es: es.index(index="t", document={}, version=2, version_type="external"),
            _invalid("create operations only support internal versioning. use index instead"),
        ),
    ],
)
def test_invalid_conditions_are_refused_as_elasticsearch_does(tmp_engine, call, expected) -> None:
    status, body = _error(lambda: call(tmp_engine))
    assert (status, body) == (400, expected)
    assert not tmp_engine.indices.exists(index="t")  # refused before the index is auto-created


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"version_type": "force"}, "No version type match [force]"),
        (
            {"version": "x", "version_type": "external"},
            "Failed to parse long parameter [version] with value [x]",
        ),
        ({"if_seq_no": "-5", "if_primary_term": "1"}, "sequence numbers must be non negative. got [-5]."),
        ({"if_seq_no": "1", "if_primary_term": "-1"}, "primary term must be non negative. got [-1]."),
        ({"op_type": "upsert"}, "opType must be 'create' or 'index', found: [upsert]"),
    ],
)
def test_malformed_condition_parameters(tmp_engine, params, reason) -> None:
    status, body = _error(
        lambda: tmp_engine.perform_request("PUT", "/t/_doc/1", params=params, headers=_JSON, body={})
    )
    assert status == 400
    assert body["error"]["type"] == "illegal_argument_exception"
    assert body["error"]["reason"] == reason


def test_create_endpoint_accepts_op_type_create_only(tmp_engine) -> None:
    status, body = _error(
        lambda: tmp_engine.perform_request(
            "PUT", "/t/_create/1", params={"op_type": "index"}, headers=_JSON, body={}
        )
    )
    assert (status, body["error"]["reason"]) == (400, "opType must be 'create', found: [index]")


@pytest.mark.parametrize("name", ["routing", "pipeline", "require_alias"])
def test_unimplemented_write_parameters_are_refused_by_name(tmp_engine, name) -> None:
    value = "true" if name == "require_alias" else "x"
    status, body = _error(
        lambda: tmp_engine.perform_request("PUT", "/t/_doc/1", params={name: value}, headers=_JSON, body={})
    )
    assert status == 400 and f"[{name}]" in body["error"]["reason"]
    # what they default to is accepted
    if name == "require_alias":
        tmp_engine.perform_request("PUT", "/t/_doc/1", params={name: "false"}, headers=_JSON, body={})


# --- bulk ------------------------------------------------------------------------------------


def test_bulk_metadata_conditions_see_the_earlier_ops_of_the_request(tmp_engine) -> None:
    es = tmp_engine
    es.index(index="t", id="old", document={"v": 1})  # seq_no 0
    ops = [
        {"create": {"_index": "t", "_id": "a"}},  # seq_no 1
        {"v": 1},
        {"create": {"_index": "t", "_id": "a"}},  # exists now, in this same request
        {"v": 2},
        {"index": {"_index": "t", "_id": "a", "if_seq_no": 1, "if_primary_term": 1}},  # seq_no 2
        {"v": 3},
        {"index": {"_index": "t", "_id": "a", "if_seq_no": 1, "if_primary_term": 1}},  # stale now
        {"v": 4},
        {"index": {"_index": "t", "_id": "old", "op_type": "create"}},
        {"v": 5},
        {"delete": {"_index": "t", "_id": "old", "if_seq_no": 0, "if_primary_term": 1}},  # seq_no 3
        {"index": {"_index": "t", "_id": "e", "version": 7, "version_type": "external"}},  # seq_no 4
        {"v": 6},
        {"index": {"_index": "t", "_id": "e", "version": 7, "version_type": "external"}},
        {"v": 7},
    ]
    r = es.bulk(operations=ops)
    assert r["errors"] is True
    summary = [
        (op, item["status"], item.get("_seq_no"), item.get("_version"))
        for it in r["items"]
        for op, item in it.items()
    ]
    assert summary == [
        ("create", 201, 1, 1),
        ("create", 409, None, None),
        ("index", 200, 2, 2),
        ("index", 409, None, None),
        ("index", 409, None, None),
        ("delete", 200, 3, 2),
        ("index", 201, 4, 7),
        ("index", 409, None, None),
    ]
    uuid = es.indices.get(index="t")["t"]["settings"]["index"]["uuid"]
    assert r["items"][1] == {
        "create": {
            "_index": "t",
            "_id": "a",
            "status": 409,
            "error": {
                "type": "version_conflict_engine_exception",
                "reason": "[a]: version conflict, document already exists (current version [1])",
                "index_uuid": uuid,
                "shard": "0",
                "index": "t",
            },
        }
    }
    assert r["items"][3]["index"]["error"]["reason"] == (
        "[a]: version conflict, required seqNo [1], primary term [1]. current document has seqNo [2] and primary term [1]"
    )
    assert es.get(index="t", id="a")["_source"] == {"v": 3}
    assert es.get(index="t", id="e")["_source"] == {"v": 6}
    assert es.count(index="t")["count"] == 2  # the stale ops changed nothing


def test_bulk_validation_refuses_the_whole_request(tmp_engine) -> None:
    es = tmp_engine
    ops = [
        {"index": {"_index": "t", "_id": "1"}},
        {"v": 1},
        {"create": {"_index": "t", "_id": "2", "version": 3, "version_type": "external"}},
        {"v": 2},
        {"delete": {"_index": "t", "_id": "3", "version": 3}},
    ]
    status, body = _error(lambda: es.bulk(operations=ops))
    assert (status, body) == (
        400,
        _invalid("create operations only support internal versioning. use index instead", INTERNAL_VERSION),
    )
    assert not es.indices.exists(index="t")


@pytest.mark.parametrize(
    ("meta", "status", "reason"),
    [
        ({"_type": "_doc"}, 400, "Action/metadata line [1] contains an unknown parameter [_type]"),
        (
            {"if_seq_no": [1]},
            400,
            "Malformed action/metadata line [1], expected a simple value for field [if_seq_no] but found [START_ARRAY]",
        ),
        ({"version_type": "nope"}, 400, "No version type match [nope]"),
        ({"routing": "r"}, 400, "[index.routing] is not supported by the scholar-es embedded engine"),
    ],
)
def test_bulk_metadata_keys(tmp_engine, meta, status, reason) -> None:
    got, body = _error(
        lambda: tmp_engine.bulk(operations=[{"index": {"_index": "t", "_id": "1", **meta}}, {}])
    )
    assert got == status
    assert body["error"]["reason"].startswith(reason)


# --- the mapping goes in with the documents ---------------------------------------------------

_OPEN_AND_MAP = """
import json, sys
from scholar_es.engine.rest.transport import embedded_client
es = embedded_client(sys.argv[1])
print(json.dumps(es.indices.get_mapping(index="t")["t"]["mappings"]))
"""


def test_dynamic_mapping_is_stored_in_the_documents_transaction(tmp_path) -> None:
    """A fault inside the write transaction (a SQLite trigger refusing the document row, after the
    mapping update of the same transaction ran) leaves neither the document nor its dynamic
    field: not on disk, not in this process's mapping; the field can then be mapped otherwise."""
    path = tmp_path / "engine"
    es = embedded_client(path)
    try:
        es.indices.create(index="t", mappings={"properties": {"title": {"type": "text"}}})
        with sqlite3.connect(path / "engine.sqlite3") as db:
            db.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON docs WHEN NEW.id = 'bad' "
                "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        status, body = _error(lambda: es.index(index="t", id="bad", document={"count": 5}))
        assert status == 500 and body["error"]["type"] == "internal_error"
        assert "count" not in es.indices.get_mapping(index="t")["t"]["mappings"]["properties"]
        stored = subprocess.run(
            [sys.executable, "-c", _OPEN_AND_MAP, str(path)],
            env=ENV,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert stored.returncode == 0, stored.stderr
        assert "count" not in json.loads(stored.stdout)["properties"]
        # the field was never mapped as a long: a string is accepted into it
        es.index(index="t", id="ok", document={"count": "five"})
        assert es.indices.get_mapping(index="t")["t"]["mappings"]["properties"]["count"]["type"] == "text"
        assert es.get(index="t", id="ok")["_source"] == {"count": "five"}
        with pytest.raises(ApiError):
            es.get(index="t", id="bad")
    finally:
        es.close()


# --- two processes, one directory ----------------------------------------------------------------

_RACER = """
import json, sys, time
from pathlib import Path
from elasticsearch import ConflictError
from scholar_es.engine.rest.transport import embedded_client

path, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
es = embedded_client(path)
es.info()  # the engine is open before the start
(Path(path).parent / f"ready-{me}").touch()
def wait(name):
    while not (Path(path).parent / name).exists():
        time.sleep(0.001)

wait("go")
created = {}
for i in range(n):
    try:
        created[i] = es.create(index="race", id=str(i), document={"writer": me}).meta.status
    except ConflictError as e:
        created[i] = e.meta.status
(Path(path).parent / f"created-{me}").touch()
wait("swap")
swapped = []
for i in range(n):
    seen = es.get(index="race", id=str(i))["_seq_no"]
    try:
        es.index(index="race", id=str(i), document={"writer": me, "cas": seen}, if_seq_no=seen, if_primary_term=1)
        swapped.append((i, seen, 200))
    except ConflictError as e:
        swapped.append((i, seen, e.meta.status))
print(json.dumps({"created": created, "swapped": swapped}))
"""


def test_two_processes_create_and_swap_the_same_ids(tmp_path) -> None:
    """Two processes on one directory ``_create`` the same ids at the same moment: exactly one
    201 and one 409 per id, and the stored document is the winner's; then both compare-and-set
    every id from the ``_seq_no`` they read: never two successes from one ``_seq_no``."""
    n = 200
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(index="race")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(path), me, str(n)],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for me in ("a", "b")
    ]

    def both(step: str) -> None:
        deadline = time.monotonic() + 120
        while not all((tmp_path / f"{step}-{me}").exists() for me in ("a", "b")):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), (
                f"a racer is not {step}"
            )
            time.sleep(0.01)

    try:
        both("ready")
        (tmp_path / "go").touch()
        both("created")
        # every id exists once, written by one of them (its create's 201 is checked below)
        stored = {i: es.get(index="race", id=str(i)) for i in range(n)}
        assert all(doc["_version"] == 1 for doc in stored.values())
        (tmp_path / "swap").touch()
        outs = {}
        for me, p in zip(("a", "b"), procs, strict=True):
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            outs[me] = json.loads(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for i in range(n):
        statuses = sorted(outs[me]["created"][str(i)] for me in ("a", "b"))
        assert statuses == [201, 409], (i, statuses)
        winner = next(me for me in ("a", "b") if outs[me]["created"][str(i)] == 201)
        assert stored[i]["_source"] == {"writer": winner}, (i, winner, stored[i])
    # the last successful swap holds; every success came from a distinct seq_no of its id
    successes: dict[int, list[int]] = {}
    for me in ("a", "b"):
        for i, seen, status in outs[me]["swapped"]:
            assert status in (200, 409)
            if status == 200:
                successes.setdefault(i, []).append(seen)
    for i in range(n):
        seen = successes.get(i, [])
        assert seen and len(seen) == len(set(seen)), (i, seen)
        doc = es.get(index="race", id=str(i))
        assert doc["_version"] == 1 + len(seen)
        assert doc["_source"]["cas"] == max(seen)
    es.close()


@pytest.mark.parametrize(
    ("name", "path_params"),
    [
        ("version", "version=9223372036854775808&version_type=external"),
        ("version", "version=18446744073709551616&version_type=external_gte"),
        ("if_seq_no", "if_seq_no=9223372036854775808&if_primary_term=1"),
        ("if_primary_term", "if_seq_no=0&if_primary_term=9223372036854775808"),
    ],
)
def test_numbers_past_a_java_long_are_a_400_not_a_500(tmp_engine, name, path_params) -> None:
    """``RestRequest.paramAsLong`` -> ``Long.parseLong`` throws for a number outside the signed
    64-bit range as for one that does not parse: 400 ``Failed to parse long parameter [...]``
    (found by the issue-25 review: an OverflowError, a 500, further down)."""
    es = tmp_engine
    es.indices.create(index="o")
    value = path_params.split(f"{name}=")[1].split("&")[0]
    for method, path, body in (
        ("PUT", f"/o/_doc/a?{path_params}", {"x": 1}),
        ("DELETE", f"/o/_doc/a?{path_params}", None),
    ):
        status, err = _error(lambda m=method, p=path, b=body: es.perform_request(m, p, body=b, headers=_JSON))
        assert status == 400
        assert err["error"]["type"] == "illegal_argument_exception"
        assert err["error"]["reason"] == f"Failed to parse long parameter [{name}] with value [{value}]"
    meta = {"_index": "o", "_id": "b", name: int(value)}
    if name == "version":
        meta["version_type"] = "external"
    headers = {"content-type": "application/x-ndjson", "accept": "application/json"}
    status, err = _error(
        lambda: es.perform_request("POST", "/_bulk", body=[{"index": meta}, {"x": 1}], headers=headers)
    )
    assert status == 400
    assert err["error"]["reason"] == f"Failed to parse long parameter [{name}] with value [{value}]"
    assert es.count(index="o")["count"] == 0
