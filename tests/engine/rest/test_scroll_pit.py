"""Scroll, point in time, search_after and _mget through the official client: elasticsearch-py's
``helpers.scan`` / ``helpers.reindex`` / ``helpers.bulk`` copy every document, in process and over
a real ``scholar-es serve``; contexts hold their snapshot (writes after they open do not show),
their keep-alive and count are bounded, and expired or unknown ones are Elasticsearch's 404.

Expected values and messages come from Elasticsearch's source (SearchRequest.validate,
SearchService, SearchContextMissingException, ClearScrollResponse, TooManyScrollContextsException)
and the YAML tests ported in rest_api/ (scroll.*, search.350_point_in_time, search.90_search_after, mget.*).
"""

from __future__ import annotations

import time

import pytest
from elasticsearch import ApiError, BadRequestError, Elasticsearch, NotFoundError, helpers

from scholar_es.engine.search import contexts

N = 30


def _fill(es, index: str = "papers", n: int = N) -> dict[str, dict]:
    docs = {
        str(i): {"title": f"paper {i}", "year": 1990 + i % 7, "tags": ["a", f"t{i % 3}"]} for i in range(n)
    }
    ok, errors = helpers.bulk(
        es, ({"_index": index, "_id": k, "_source": v} for k, v in docs.items()), refresh=True
    )
    assert ok == n and not errors
    return docs


def _round_trip(es) -> None:
    docs = _fill(es)
    assert es.count(index="papers")["count"] == N
    scanned = {h["_id"]: h["_source"] for h in helpers.scan(es, index="papers", size=7)}
    assert scanned == docs
    ordered = [
        h["_id"] for h in helpers.scan(es, index="papers", size=4, preserve_order=True, sort="year:asc")
    ]
    assert sorted(ordered) == sorted(docs) and len(ordered) == N
    ok, _ = helpers.reindex(es, "papers", "papers-copy", chunk_size=8, scan_kwargs={"size": 6})
    assert ok == N
    es.indices.refresh(index="papers-copy")
    copied = {h["_id"]: h["_source"] for h in helpers.scan(es, index="papers-copy", size=11)}
    assert copied == docs
    got = es.mget(index="papers-copy", ids=list(docs))["docs"]
    assert {d["_id"]: d["_source"] for d in got} == docs
    # every scroll the helpers opened was cleared: _all frees nothing more
    with pytest.raises(NotFoundError) as e:
        es.clear_scroll(scroll_id="_all")
    assert e.value.body == {"succeeded": True, "num_freed": 0}


def test_helpers_round_trip_in_process(tmp_engine):
    _round_trip(tmp_engine)


@pytest.mark.slow
def test_helpers_round_trip_over_serve(tmp_path):
    from serving import serving

    with serving(tmp_path / "engine") as server:
        es = Elasticsearch(server.url, request_timeout=60)
        try:
            _round_trip(es)
        finally:
            es.close()


@pytest.mark.slow
def test_several_workers_refuse_contexts_by_name(tmp_path):
    from serving import serving

    with serving(tmp_path / "engine", "--workers", "2") as server:
        es = Elasticsearch(server.url, request_timeout=60, retry_on_status=(502, 503))
        try:
            deadline = time.monotonic() + 120
            while True:  # until a worker answers
                try:
                    _fill(es, n=3)
                    break
                except Exception:  # noqa: BLE001 - the workers are still starting
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
            for _ in range(4):  # whichever worker answers
                with pytest.raises(BadRequestError) as e:
                    es.search(index="papers", scroll="1m", size=1)
                assert "--workers 1" in e.value.body["error"]["reason"]
                with pytest.raises(BadRequestError):
                    es.open_point_in_time(index="papers", keep_alive="1m")
        finally:
            es.close()


def test_scroll_holds_its_snapshot(tmp_engine):
    es = tmp_engine
    _fill(es, n=6)
    first = es.search(index="papers", scroll="1m", size=2, sort="year:asc,_doc")
    sid = first["_scroll_id"]
    seen = [h["_id"] for h in first["hits"]["hits"]]
    # writes after the scroll opened: an update, a delete, a new document
    es.index(index="papers", id=seen[0], document={"title": "changed"}, refresh=True)
    remaining = [h["_id"] for h in es.search(index="papers", size=10, sort="year:asc,_doc")["hits"]["hits"]]
    es.delete(index="papers", id=remaining[-1], refresh=True)
    es.index(index="papers", id="new", document={"title": "new", "year": 1800}, refresh=True)
    pages = []
    while True:
        page = es.scroll(scroll_id=sid, scroll="1m")
        assert page["hits"]["total"] == {"value": 6, "relation": "eq"}
        if not page["hits"]["hits"]:
            break
        pages.extend(page["hits"]["hits"])
    ids = seen + [h["_id"] for h in pages]
    assert sorted(ids) == sorted(str(i) for i in range(6))  # the deleted one too, never "new"
    assert all(h["_source"]["title"].startswith("paper") for h in pages)
    assert es.clear_scroll(scroll_id=sid) == {"succeeded": True, "num_freed": 1}


def test_scroll_validation_and_errors(tmp_engine):
    es = tmp_engine
    _fill(es, n=3)

    def bad(**kw) -> ApiError:
        with pytest.raises(ApiError) as e:
            es.search(index="papers", scroll="1m", **kw)
        return e.value

    e = bad(from_=1, size=0, rescore={"query": {"rescore_query": {"match_all": {}}}})
    assert e.body["error"]["type"] == "action_request_validation_exception"
    assert e.body["error"]["reason"] == (
        "Validation Failed: 1: using [from] is not allowed in a scroll context;2: [size] cannot be [0] in a "
        "scroll context;3: using [rescore] is not allowed in a scroll context;"
    )
    e = bad(track_total_hits=False, size=1)
    assert "disabling [track_total_hits] is not allowed in a scroll context" in e.body["error"]["reason"]
    with pytest.raises(BadRequestError) as e2:
        es.search(index="papers", scroll="25h", size=1)
    assert e2.value.body["error"]["reason"] == (
        "Keep alive for request (1d) is too large. It must be less than (1d). This limit can be set by changing "
        "the [search.max_keep_alive] cluster level setting."
    )
    with pytest.raises(BadRequestError) as e2:
        es.search(index="papers", scroll="5", size=1)
    assert e2.value.body["error"]["type"] == "parse_exception"
    sid = es.search(index="papers", scroll="1m", size=1)["_scroll_id"]
    with pytest.raises(BadRequestError) as e2:
        es.scroll(scroll_id=sid, scroll="36h")
    assert "Keep alive for request (1.5d) is too large" in e2.value.body["error"]["reason"]
    with pytest.raises(BadRequestError) as e2:
        es.scroll(scroll_id="not an id", scroll="1m")
    assert e2.value.body["error"]["reason"] == "Cannot parse scroll id"
    # a well-formed id of another process (or a restarted server): the context is missing
    other = contexts.Registry()
    foreign = other.encode(contexts.Context(7, "scroll", 1000, pinned=None))  # type: ignore[arg-type]
    with pytest.raises(NotFoundError) as e3:
        es.scroll(scroll_id=foreign, scroll="1m")
    assert e3.value.body["error"]["root_cause"][0] == {
        "type": "search_context_missing_exception",
        "reason": "No search context found for id [7]",
    }


def test_scroll_without_keep_alive_frees_the_context(tmp_engine):
    es = tmp_engine
    _fill(es, n=3)
    sid = es.search(index="papers", scroll="1m", size=1)["_scroll_id"]
    assert len(es.scroll(scroll_id=sid)["hits"]["hits"]) == 1  # no `scroll`: freed once answered
    with pytest.raises(NotFoundError):
        es.scroll(scroll_id=sid, scroll="1m")


def test_expired_contexts_are_freed(tmp_engine, monkeypatch):
    es = tmp_engine
    _fill(es, n=3)
    sid = es.search(index="papers", scroll="50ms", size=1)["_scroll_id"]
    pit = es.open_point_in_time(index="papers", keep_alive="50ms")["id"]
    time.sleep(0.2)
    with pytest.raises(NotFoundError) as e:
        es.scroll(scroll_id=sid, scroll="1m")
    assert e.value.body["error"]["caused_by"]["type"] == "search_context_missing_exception"
    with pytest.raises(NotFoundError):
        es.search(pit={"id": pit}, size=1)
    with pytest.raises(NotFoundError) as e:
        es.close_point_in_time(id=pit)
    assert e.value.body == {"succeeded": True, "num_freed": 0}


def test_open_scroll_contexts_are_bounded(tmp_engine, monkeypatch):
    es = tmp_engine
    _fill(es, n=3)
    monkeypatch.setattr(contexts, "MAX_OPEN_SCROLL_CONTEXT", 2)
    ids = [es.search(index="papers", scroll="1m", size=1)["_scroll_id"] for _ in range(2)]
    with pytest.raises(ApiError) as e:
        es.search(index="papers", scroll="1m", size=1)
    assert e.value.meta.status == 429
    assert e.value.body["error"]["type"] == "too_many_scroll_contexts_exception"
    assert e.value.body["error"]["reason"] == (
        "Trying to create too many scroll contexts. Must be less than or equal to: [2]. This limit can be set "
        "by changing the [search.max_open_scroll_context] setting."
    )
    assert es.clear_scroll(scroll_id=ids)["num_freed"] == 2
    es.search(index="papers", scroll="1m", size=1)  # room again


def test_point_in_time_with_search_after_pages_every_document(tmp_engine):
    es = tmp_engine
    docs = _fill(es)
    pit = es.open_point_in_time(index="papers", keep_alive="1m")["id"]
    es.index(index="papers", id="late", document={"title": "late", "year": 1}, refresh=True)
    seen: dict[str, dict] = {}
    after = None
    while True:
        kw = {"search_after": after} if after is not None else {}
        resp = es.search(pit={"id": pit, "keep_alive": "1m"}, size=7, sort=[{"year": "desc"}], **kw)
        assert resp["pit_id"] == pit and resp["hits"]["total"]["value"] == N
        hits = resp["hits"]["hits"]
        if not hits:
            break
        for h in hits:
            assert len(h["sort"]) == 2  # the implicit _shard_doc tiebreaker
            seen[h["_id"]] = h["_source"]
        after = hits[-1]["sort"]
    assert seen == docs
    assert es.close_point_in_time(id=pit) == {"succeeded": True, "num_freed": 1}


def test_point_in_time_errors(tmp_engine):
    es = tmp_engine
    _fill(es, n=3)
    pit = es.open_point_in_time(index="papers", keep_alive="1m")["id"]
    with pytest.raises(BadRequestError) as e:
        es.search(index="papers", pit={"id": pit}, size=1)
    assert e.value.body["error"]["reason"] == (
        "Validation Failed: 1: [indices] cannot be used with point in time. Do not specify any index with "
        "point in time.;"
    )
    with pytest.raises(BadRequestError) as e:
        es.search(index="papers", sort=["_shard_doc"], search_after=[0])
    assert "[_shard_doc] sort field cannot be used without [point in time]" in e.value.body["error"]["reason"]
    with pytest.raises(BadRequestError) as e:
        es.search(index="papers", scroll="1m", pit={"id": pit})
    assert "using [point in time] is not allowed in a scroll context" in e.value.body["error"]["reason"]
    with pytest.raises(BadRequestError) as e:
        es.search(pit={"id": "%%%"}, size=1)
    assert e.value.body["error"]["reason"] == "invalid id: [%%%]"
    with pytest.raises(BadRequestError) as e:
        es.search(index="papers", sort=[{"year": "asc"}], search_after=[1, 2])
    assert e.value.body["error"]["reason"] == "search_after has 2 value(s) but sort has 1."


def test_search_after_with_keyword_and_missing_values(tmp_engine):
    es = tmp_engine
    es.indices.create(
        index="k", mappings={"properties": {"tag": {"type": "keyword"}, "n": {"type": "integer"}}}
    )
    rows = [("1", "b", 3), ("2", None, 1), ("3", "a", None), ("4", "c", 2), ("5", "a", 5)]
    for doc_id, tag, n in rows:
        es.index(index="k", id=doc_id, document={k: v for k, v in (("tag", tag), ("n", n)) if v is not None})
    es.indices.refresh(index="k")
    for sort in (
        [{"tag": "asc"}, {"n": "desc"}],
        [{"tag": "desc"}, {"n": "asc"}],
        [{"n": "asc"}, {"tag": "asc"}],
    ):
        full = es.search(index="k", sort=sort, size=10)["hits"]["hits"]
        paged, after = [], None
        while True:
            kw = {"search_after": after} if after is not None else {}
            hits = es.search(index="k", sort=sort, size=2, **kw)["hits"]["hits"]
            if not hits:
                break
            paged += [h["_id"] for h in hits]
            after = hits[-1]["sort"]
        assert paged == [h["_id"] for h in full], sort


def test_mget_errors(tmp_engine):
    es = tmp_engine
    _fill(es, n=2)
    with pytest.raises(BadRequestError) as e:
        es.mget(docs=[{"_index": "papers"}, {"_id": "1"}])
    assert e.value.body["error"]["reason"] == "Validation Failed: 1: id is missing;2: index is missing;"
    with pytest.raises(BadRequestError) as e:
        es.mget(index="papers", ids=["1"], stored_fields="title")
    assert "[stored_fields]" in e.value.body["error"]["reason"]
    out = es.mget(
        docs=[{"_index": "papers", "_id": "0", "_source": ["title"]}, {"_index": "nope", "_id": "1"}]
    )
    assert out["docs"][0]["_source"] == {"title": "paper 0"}
    assert out["docs"][1]["error"]["type"] == "index_not_found_exception"
