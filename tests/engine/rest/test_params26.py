"""URL parameters of issue 26 through the official client: indices options on ``_search`` and
``_count``, the waits of index creation, ``cluster.health``'s waits, ``q`` on the by-query APIs,
and ``HEAD /{index}/_source/{id}``. Expected values from Elasticsearch's REST tests and handlers
(cited per test)."""

from __future__ import annotations

import pytest
from elasticsearch import ApiError, NotFoundError


@pytest.fixture()
def es(tmp_engine):
    tmp_engine.indices.create(index="docs", mappings={"properties": {"t": {"type": "text"}}})
    tmp_engine.index(index="docs", id="1", document={"t": "alpha beta"}, refresh=True)
    tmp_engine.index(index="docs", id="2", document={"t": "gamma"}, refresh=True)
    return tmp_engine


# --- 1. indices options on _search and _count (IndicesOptions.fromRequest) ----------------


def test_search_ignore_unavailable_missing_index_is_empty(es):
    # search/10_source_filtering-style: a missing index ignored leaves nothing: no shards, no hits
    r = es.search(index="nope", ignore_unavailable=True)
    assert r["hits"]["total"] == {"value": 0, "relation": "eq"}
    assert r["_shards"]["total"] == 0
    with pytest.raises(NotFoundError) as e:
        es.search(index="nope")
    assert e.value.body["error"]["type"] == "index_not_found_exception"


def test_search_options_over_an_existing_index(es):
    r = es.search(index="docs,nope", ignore_unavailable=True, expand_wildcards="open")
    assert r["hits"]["total"]["value"] == 2
    r = es.search(index="doc*", expand_wildcards="closed")  # matches no open index: nothing
    assert r["hits"]["total"]["value"] == 0
    with pytest.raises(NotFoundError) as e:
        es.search(index="zz*", allow_no_indices=False)
    assert e.value.body["error"]["type"] == "index_not_found_exception"
    with pytest.raises(ApiError) as e:
        es.search(index="docs", expand_wildcards="bogus")
    assert e.value.meta.status == 400
    assert e.value.body["error"]["reason"] == "No valid expand wildcard value [bogus]"


def test_count_indices_options(es):
    assert es.count(index="docs,nope", ignore_unavailable=True)["count"] == 2
    r = es.count(index="zz*", allow_no_indices=True)
    assert r["count"] == 0 and r["_shards"]["total"] == 0
    with pytest.raises(NotFoundError):
        es.count(index="zz*", allow_no_indices=False)
    with pytest.raises(NotFoundError):
        es.count(index="nope")


# --- 2. acknowledgement waits of the index APIs (indices.create/10_basic.yml) --------------


def test_create_index_waits(tmp_engine):
    # indices.create/10_basic.yml "Create index with wait_for_active_shards set to all"
    r = tmp_engine.indices.create(index="a", wait_for_active_shards="all", timeout="30s", master_timeout="1m")
    assert r["acknowledged"] is True and r["shards_acknowledged"] is True
    r = tmp_engine.indices.create(index="b", wait_for_active_shards=1)
    assert r["shards_acknowledged"] is True
    with pytest.raises(ApiError) as e:
        tmp_engine.indices.create(index="c", wait_for_active_shards=2)
    assert e.value.meta.status == 400 and "wait_for_active_shards [2]" in e.value.body["error"]["reason"]
    with pytest.raises(ApiError) as e:  # TimeValue.parseTimeValue
        tmp_engine.indices.create(index="c", timeout="5x")
    assert e.value.body["error"]["type"] == "parse_exception"
    assert not tmp_engine.indices.exists(index="c")
    tmp_engine.indices.put_mapping(index="a", properties={"x": {"type": "keyword"}}, timeout="10s")
    assert tmp_engine.indices.delete(index="a", timeout="10s", master_timeout="10s")["acknowledged"]


# --- 3. cluster.health waits (cluster.health/10_basic.yml, ClusterHealthResponse#status) ---


def test_health_waits_met_at_once(tmp_engine):
    tmp_engine.indices.create(index="g", settings={"number_of_replicas": 0})
    r = tmp_engine.cluster.health(
        wait_for_status="green",
        timeout="1s",
        wait_for_no_relocating_shards=True,
        wait_for_no_initializing_shards=True,
        wait_for_active_shards="all",
        wait_for_nodes=">=1",
        level="cluster",
        local=True,
    )
    assert r["status"] == "green" and r["timed_out"] is False
    assert r["number_of_nodes"] == 1 and r["active_primary_shards"] == 1
    assert r["relocating_shards"] == 0 and r["initializing_shards"] == 0
    r = tmp_engine.cluster.health(index="g", wait_for_status="yellow")
    assert r["status"] == "green" and r["timed_out"] is False


def test_health_wait_never_met_times_out_408(tmp_engine):
    tmp_engine.indices.create(index="y")  # one replica, unassigned on one node: yellow
    with pytest.raises(ApiError) as e:
        tmp_engine.cluster.health(wait_for_status="green", timeout="50ms")
    assert e.value.meta.status == 408
    assert e.value.body["status"] == "yellow" and e.value.body["timed_out"] is True
    with pytest.raises(ApiError) as e:  # TransportClusterHealthAction: a missing index is red
        tmp_engine.cluster.health(index="missing", timeout="10ms")
    assert e.value.meta.status == 408 and e.value.body["status"] == "red"
    with pytest.raises(ApiError) as e:
        tmp_engine.cluster.health(level="nodes")
    assert e.value.meta.status == 400
    assert "level parameter must be one of [cluster] or [indices] or [shards] but was [nodes]" in str(
        e.value.body
    )
    with pytest.raises(ApiError) as e:
        tmp_engine.cluster.health(wait_for_status="blue")
    assert e.value.meta.status == 400


# --- 4. q on _delete_by_query / _update_by_query (AbstractBulkByQueryRestHandler) -----------


def test_delete_by_query_q(es):
    # delete_by_query/10_basic.yml style: q selects the documents, no body needed
    r = es.delete_by_query(index="docs", q="t:alpha", refresh=True)
    assert r["deleted"] == 1
    assert es.count(index="docs")["count"] == 1
    r = es.delete_by_query(index="docs", q="gamma", df="t", default_operator="AND", refresh=True)
    assert r["deleted"] == 1
    with pytest.raises(ApiError) as e:  # RestActions#urlParamsToQueryBuilder
        es.delete_by_query(index="docs", df="t", query={"match_all": {}})
    assert e.value.meta.status == 400
    assert "missing query string parameter 'q'" in e.value.body["error"]["reason"]


def test_update_by_query_q(es):
    r = es.update_by_query(
        index="docs", q="t:gam*", analyze_wildcard=False, lenient=True, refresh=True,
        script={"source": "ctx._source.n = 1"},
    )  # fmt: skip
    assert r["updated"] == 1 and r["total"] == 1
    assert es.get(index="docs", id="2")["_source"]["n"] == 1
    assert "n" not in es.get(index="docs", id="1")["_source"]


# --- 5. HEAD /{index}/_source/{id} (exists_source/10_basic.yml) ---------------------------


def test_exists_source(es):
    assert es.exists_source(index="docs", id="1").body is True
    assert es.exists_source(index="docs", id="9").body is False
    assert es.exists_source(index="docs", id="1").meta.status == 200
    assert es.exists_source(index="docs", id="9").meta.status == 404


def test_msearch_header_indices_options(es):
    r = es.msearch(
        searches=[
            {"index": "nope", "ignore_unavailable": True},
            {"query": {"match_all": {}}},
            {"index": "zz*", "allow_no_indices": False},
            {"query": {"match_all": {}}},
            {"index": "docs,nope", "ignore_unavailable": "true", "expand_wildcards": ["open"]},
            {"query": {"match_all": {}}},
        ]
    )
    first, second, third = r["responses"]
    assert first["hits"]["total"]["value"] == 0 and first["_shards"]["total"] == 0
    assert second["status"] == 404 and second["error"]["type"] == "index_not_found_exception"
    assert third["hits"]["total"]["value"] == 2
