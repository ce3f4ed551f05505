"""_update, update in _bulk, _delete_by_query, _update_by_query and _reindex beyond the ported
YAML tests: concurrent updates lose nothing, the by-query snapshot turns a concurrent write into a
version conflict, and what the engine refuses is refused by name.

Expected values follow Elasticsearch's docs and sources (UpdateHelper, UpdateRequest.validate,
AbstractAsyncBulkByScrollAction, BulkByScrollResponse)."""

from __future__ import annotations

import threading
import time

import pytest
from elasticsearch import ApiError, BadRequestError, ConflictError, NotFoundError

from scholar_es.engine.index.indices import open_engine
from scholar_es.engine.rest import by_query
from scholar_es.engine.rest.handler import handle


def _put(es, n: int = 3) -> None:
    for i in range(n):
        es.index(index="t", id=str(i), document={"n": i, "tags": ["a"]})


def test_update_script_counter_under_concurrency_loses_nothing(tmp_engine) -> None:
    es = tmp_engine
    es.index(index="t", id="c", document={"count": 0})
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(15):
                es.update(
                    index="t", id="c", script={"source": "ctx._source.count += params.n", "params": {"n": 1}},
                    retry_on_conflict=100,
                )  # fmt: skip
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    doc = es.get(index="t", id="c")
    assert doc["_source"]["count"] == 60
    assert doc["_version"] == 61


def test_update_results_and_scripts(tmp_engine) -> None:
    es = tmp_engine
    _put(es, 1)
    r = es.update(
        index="t", id="0", script={"source": "ctx._source.tags.add(params.t)", "params": {"t": "b"}}
    )
    assert r["result"] == "updated" and r["_version"] == 2
    assert es.get(index="t", id="0")["_source"]["tags"] == ["a", "b"]
    r = es.update(index="t", id="0", script="ctx.op = 'none'")
    assert r["result"] == "noop" and r["_version"] == 2 and r["_shards"]["total"] == 0
    # scripted_upsert runs the script on the upsert document
    r = es.update(
        index="t", id="new", scripted_upsert=True, upsert={"count": 0}, script="ctx._source.count += 5",
        source=True,
    )  # fmt: skip
    assert r["result"] == "created" and r.meta.status == 201
    assert r["get"]["_source"] == {"count": 5} and r["get"]["found"] is True
    # without scripted_upsert the upsert document goes in as it is
    r = es.update(index="t", id="new2", upsert={"count": 0}, script="ctx._source.count += 5")
    assert es.get(index="t", id="new2")["_source"] == {"count": 0}
    r = es.update(index="t", id="0", script="ctx.op = 'delete'")
    assert r["result"] == "deleted"
    with pytest.raises(NotFoundError):
        es.get(index="t", id="0")


def test_update_errors(tmp_engine) -> None:
    es = tmp_engine
    _put(es, 1)
    with pytest.raises(NotFoundError) as e:
        es.update(index="t", id="missing", doc={"a": 1})
    assert e.value.body["error"]["type"] == "document_missing_exception"
    assert e.value.body["error"]["reason"] == "[missing]: document missing"
    with pytest.raises(BadRequestError) as e:
        es.update(index="t", id="0", body={"doc": {"a": 1}, "script": "ctx._source.a = 1"})
    assert e.value.body["error"]["reason"] == "Validation Failed: 1: can't provide both script and doc;"
    with pytest.raises(BadRequestError) as e:
        es.update(
            index="t", id="0", body={"doc": {"a": 1}}, if_seq_no=0, if_primary_term=1, retry_on_conflict=2
        )
    assert "compare and write operations can not be retried" in e.value.body["error"]["reason"]
    with pytest.raises(BadRequestError) as e:  # a script error: UpdateHelper's wrapper and its cause
        es.update(index="t", id="0", script="ctx._source.n = 1 / 0")
    err = e.value.body["error"]
    assert err["type"] == "illegal_argument_exception" and err["reason"] == "failed to execute script"
    assert err["caused_by"]["reason"] == "runtime error"
    assert err["caused_by"]["caused_by"] == {"type": "arithmetic_exception", "reason": "/ by zero"}
    with pytest.raises(BadRequestError) as e:  # outside the subset: refused by name
        es.update(index="t", id="0", script="for (int i = 0; i < 3; i++) { ctx._source.n += i }")
    assert "unsupported construct [for]" in str(e.value.body)
    with pytest.raises(BadRequestError) as e:
        es.update(index="t", id="0", doc={"a": 1}, refresh="later")
    assert e.value.body["error"]["reason"] == "Unknown value for refresh: [later]."


def test_bulk_update_items_in_order(tmp_engine) -> None:
    es = tmp_engine
    r = es.bulk(
        operations=[
            {"index": {"_index": "t", "_id": "1"}}, {"n": 1},
            {"update": {"_index": "t", "_id": "1"}}, {"doc": {"m": 2}},
            {"update": {"_index": "t", "_id": "2"}}, {"doc": {"m": 3}, "doc_as_upsert": True},
            {"update": {"_index": "t", "_id": "3"}}, {"doc": {"m": 3}},
            {"update": {"_index": "t", "_id": "1", "retry_on_conflict": 3}}, {"script": "ctx._source.n += 10"},
            {"delete": {"_index": "t", "_id": "2"}},
        ]
    )  # fmt: skip
    items = r["items"]
    assert [next(iter(i)) for i in items] == ["index", "update", "update", "update", "update", "delete"]
    assert [next(iter(i.values()))["status"] for i in items] == [201, 200, 201, 404, 200, 200]
    assert items[3]["update"]["error"]["type"] == "document_missing_exception"
    assert r["errors"] is True
    assert es.get(index="t", id="1")["_source"] == {"n": 11, "m": 2}


def test_by_query_snapshot_conflicts(tmp_path) -> None:
    """A document written after the snapshot is a version conflict, never overwritten or deleted."""
    engine = open_engine(tmp_path / "e")
    try:
        for i in range(3):
            handle(engine, "PUT", f"/t/_doc/{i}", {}, {"text": "test"})
        job = by_query.parse(engine, "delete_by_query", "t", {}, {"query": {"match_all": {}}})
        hits = by_query.snapshot(engine, job)
        handle(engine, "PUT", "/t/_doc/1", {}, {"text": "test2"})  # after the snapshot
        status, body = by_query.apply(engine, job, hits, time.perf_counter())
        assert status == 409
        assert body["deleted"] == 2 and body["version_conflicts"] == 1 and body["batches"] == 1
        (failure,) = body["failures"]
        assert failure["id"] == "1" and failure["status"] == 409 and failure["index"] == "t"
        assert failure["cause"]["type"] == "version_conflict_engine_exception"
        assert failure["cause"]["reason"].startswith("[1]: version conflict, required seqNo [1]")
        assert handle(engine, "GET", "/t/_doc/1", {}, None)[1]["_source"] == {"text": "test2"}
        # update by query with conflicts=proceed: counted, no failures, 200
        job = by_query.parse(
            engine, "update_by_query", "t", {"conflicts": "proceed"}, {"script": "ctx._source.x = 1"}
        )
        hits = by_query.snapshot(engine, job)
        handle(engine, "PUT", "/t/_doc/1", {}, {"text": "test3"})
        status, body = by_query.apply(engine, job, hits, time.perf_counter())
        assert (
            status == 200
            and body["updated"] == 0
            and body["version_conflicts"] == 1
            and body["failures"] == []
        )
        assert handle(engine, "GET", "/t/_doc/1", {}, None)[1]["_source"] == {"text": "test3"}
    finally:
        engine.close()


def test_abort_finishes_the_batch_then_stops(tmp_engine) -> None:
    es = tmp_engine
    for i in range(4):
        es.index(index="src", id=str(i), document={"n": i})
    es.index(index="dst", id="1", document={"n": 1})
    with pytest.raises(ConflictError) as e:
        es.reindex(source={"index": "src", "size": 2}, dest={"index": "dst", "op_type": "create"})
    body = e.value.body
    # the first batch (0, 1) is written except the conflict; the second is never started
    assert body["created"] == 1 and body["version_conflicts"] == 1 and body["batches"] == 1
    assert body["total"] == 4
    r = es.reindex(
        source={"index": "src", "size": 2}, dest={"index": "dst", "op_type": "create"}, conflicts="proceed"
    )
    assert r["created"] == 2 and r["version_conflicts"] == 2 and r["batches"] == 2


def test_max_docs_with_conflicts_proceed_counts_successes(tmp_engine) -> None:
    """max_docs counts documents processed successfully: conflicts do not use it up."""
    es = tmp_engine
    for i in range(4):
        es.index(index="src", id=str(i), document={"n": i})
    es.index(index="dst", id="0", document={"n": 0})
    r = es.reindex(
        source={"index": "src", "size": 1}, dest={"index": "dst", "op_type": "create"}, conflicts="proceed",
        max_docs=2,
    )  # fmt: skip
    assert r["created"] == 2 and r["version_conflicts"] == 1 and r["batches"] == 3 and r["total"] == 2


def test_reindex_external_versions(tmp_engine) -> None:
    es = tmp_engine
    es.index(index="src", id="1", document={"v": "new"}, version=5, version_type="external")
    es.index(index="dst", id="1", document={"v": "old"}, version=3, version_type="external")
    es.index(index="src", id="2", document={"v": "stale"}, version=1, version_type="external")
    es.index(index="dst", id="2", document={"v": "kept"}, version=7, version_type="external")
    r = es.reindex(
        source={"index": "src"}, dest={"index": "dst", "version_type": "external"}, conflicts="proceed"
    )
    assert r["updated"] == 1 and r["version_conflicts"] == 1
    assert es.get(index="dst", id="1")["_version"] == 5
    assert es.get(index="dst", id="2")["_source"] == {"v": "kept"}


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda es: es.reindex(source={"index": "src", "remote": {"host": "http://x:9200"}}, dest={"index": "d"}),
         "[source.remote] is not supported"),
        (lambda es: es.reindex(source={"index": "src"}, dest={"index": "src"}),
         "reindex cannot write into an index its reading from [src]"),
        (lambda es: es.delete_by_query(index="src", query={"match_all": {}}, slices=2),
         "[slices] is not supported"),
        (lambda es: es.update_by_query(index="src", wait_for_completion=False),
         "[wait_for_completion=false] is not supported"),
        (lambda es: es.update_by_query(index="src", body={"sort": ["n"]}), "[sort] is not supported"),
        (lambda es: es.delete_by_query(index="src", query={"match_all": {}}, search_timeout="1s"),
             "parameter [search_timeout]"),
        (lambda es: es.update(index="src", id="1", doc={"a": 1}, routing="r"),
         "contains parameter [routing] that the embedded engine does not implement"),
    ],
)  # fmt: skip
def test_refused_by_name(tmp_engine, call, needle) -> None:
    tmp_engine.index(index="src", id="1", document={"n": 1})
    with pytest.raises(ApiError) as e:
        call(tmp_engine)
    assert e.value.meta.status == 400
    assert needle in str(e.value.body)
