"""Collapse + inner_hits against a brute-force reference on random data.

The reference is built from the same engine's *uncollapsed* answer (every hit, in the search's
order): the collapsed hits are the first hit of each key in that order (a missing key is one group,
as CollapsingTopDocsCollector's null group), paged over groups; a group's inner hits are its
members in score order; each head's ``sort`` values are the ones its uncollapsed hit shows.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

WORDS = ["graph", "neural", "model", "data", "protein", "cell", "gene", "tree"]
KEYS = ["A", "B", "C", "D", "E", "F", "G"]
N_DOCS = 120


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("collapse"))
    client.indices.create(
        index="r",
        mappings={"properties": {"k": {"type": "keyword"}, "n": {"type": "integer"}, "t": {"type": "text"}}},
    )
    rnd = random.Random(1234)
    docs = {}
    for i in range(N_DOCS):
        src: dict = {"t": " ".join(rnd.choices(WORDS, k=rnd.randint(1, 8)))}
        if rnd.random() < 0.9:
            src["k"] = rnd.choice(KEYS)
        if rnd.random() < 0.85:
            src["n"] = rnd.randint(0, 9)
        docs[f"d{i:03d}"] = src
    for doc_id, src in docs.items():
        client.index(index="r", id=doc_id, document=src)
    client.indices.refresh(index="r")
    client.docs = docs  # type: ignore[attr-defined]
    yield client
    client.close()


QUERIES = [
    {"match_all": {}},
    {"match": {"t": "graph"}},
    {"match": {"t": "neural model gene"}},
    {
        "bool": {
            "should": [{"match": {"t": "protein"}}, {"term": {"k": "B"}}],
            "filter": {"range": {"n": {"gte": 3}}},
        }
    },
]
SORTS = [None, [{"n": "desc"}], [{"n": "asc"}, {"_doc": "desc"}], [{"k": "desc"}, "_score"]]


def _key(src: dict, field: str):
    return src.get(field)


@settings(max_examples=60, deadline=None)
@given(
    query=st.sampled_from(QUERIES),
    sort=st.sampled_from(SORTS),
    field=st.sampled_from(["k", "n"]),
    size=st.integers(0, 8),
    from_=st.integers(0, 5),
    inner_size=st.integers(1, 4),
    inner_from=st.integers(0, 2),
)
def test_collapse_equals_brute_force(es, query, sort, field, size, from_, inner_size, inner_from):
    extra = {"sort": sort} if sort else {}
    everything = es.search(index="r", query=query, size=1000, **extra)["hits"]["hits"]
    by_score = es.search(index="r", query=query, size=1000)["hits"]["hits"]
    heads: dict = {}
    for h in everything:
        heads.setdefault(_key(es.docs[h["_id"]], field), h)
    expected = list(heads.values())[from_ : from_ + size]

    resp = es.search(
        index="r",
        query=query,
        size=size,
        from_=from_,
        collapse={"field": field, "inner_hits": {"name": "g", "size": inner_size, "from": inner_from}},
        **extra,
    )
    got = resp["hits"]["hits"]
    assert resp["hits"]["total"]["value"] == len(everything)  # documents, not groups
    assert [h["_id"] for h in got] == [h["_id"] for h in expected]
    for g, e in zip(got, expected, strict=True):
        key = _key(es.docs[g["_id"]], field)
        assert g["_score"] == e["_score"]
        assert g.get("sort") == e.get("sort")
        assert g["fields"] == ({field: [key]} if key is not None else {})
        members = [h for h in by_score if _key(es.docs[h["_id"]], field) == key]
        inner = g["inner_hits"]["g"]["hits"]
        assert inner["total"] == {"value": len(members), "relation": "eq"}
        shown = members[inner_from : inner_from + inner_size]
        assert [h["_id"] for h in inner["hits"]] == [h["_id"] for h in shown]
        assert [h["_score"] for h in inner["hits"]] == [h["_score"] for h in shown]
        if sort is None:
            assert inner["max_score"] == members[0]["_score"]


@pytest.mark.parametrize(
    "inner_hits, key",
    [
        ([{"name": "x", "size": 1}, {"name": "x", "size": 2}], "x"),
        ([{"size": 1}, {"size": 2}], "k"),  # unnamed inner hits are keyed by the collapse field
        ([{"name": "k"}, {}], "k"),
    ],
)
def test_inner_hits_with_the_same_name_are_a_400(es, inner_hits, key):
    from elasticsearch import BadRequestError

    with pytest.raises(BadRequestError) as e:
        es.search(index="r", collapse={"field": "k", "inner_hits": inner_hits})
    err = e.value.body["error"]
    assert err["type"] == "illegal_argument_exception"
    assert err["reason"].startswith(f"[inner_hits] already contains an entry for key [{key}]")
    ok = es.search(index="r", collapse={"field": "k", "inner_hits": [{"name": "a"}, {"name": "b"}]})
    assert set(ok["hits"]["hits"][0]["inner_hits"]) == {"a", "b"}


@pytest.mark.parametrize("source", [True, ["t", "k"], {"excludes": ["n"]}])
def test_hits_and_inner_hits_show_their_documents_reading_each_row_once(es, monkeypatch, source):
    """Every hit and inner hit shows its own document, filtered as asked: an inner hit by its own
    ``_source`` alone, the whole document without one (ExpandSearchPhase searches each group with
    the inner hit's options, none of the request's). The rows are read once per search, so a
    group's head -- also its first inner hit -- is not read twice (issue 29)."""
    from scholar_es.engine.index.store import Reader
    from scholar_es.engine.search.hits import filter_source

    read: list[int] = []
    plain = Reader.sources

    def counting(self, seqs):
        read.extend(int(s) for s in seqs)
        return plain(self, seqs)

    monkeypatch.setattr(Reader, "sources", counting)
    resp = es.search(
        index="r",
        query={"match": {"t": "neural model gene"}},
        size=5,
        _source=source,
        collapse={
            "field": "k",
            "inner_hits": [{"name": "a", "size": 3}, {"name": "b", "size": 2, "from": 1, "_source": source}],
        },
    )
    shown = 0
    for hit in resp["hits"]["hits"]:
        assert hit["_source"] == filter_source(es.docs[hit["_id"]], source)
        for name, spec in (("a", True), ("b", source)):
            for inner in hit["inner_hits"][name]["hits"]["hits"]:
                assert inner["_source"] == filter_source(es.docs[inner["_id"]], spec)
                shown += 1
    assert shown > len(resp["hits"]["hits"])
    assert len(read) == len(set(read))


def _expected_groups(docs: dict, hits: list[dict], field: str) -> list[tuple]:
    """(head id, key, member ids in score order) per group, from an uncollapsed answer."""
    groups: dict = {}
    for h in hits:
        groups.setdefault(docs[h["_id"]].get(field), []).append(h["_id"])
    return [(ids[0], key, ids) for key, ids in groups.items()]


@pytest.mark.parametrize("field", ["k", "n"])
def test_collapse_keys_follow_every_write(tmp_path, field):
    """The collapse keys are kept per version of the field's column: after appends (new values,
    documents without one), an update moving a document to another group and a delete, the
    groups, their labels and their inner hits are the index's as it is now."""
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(tmp_path / "e")
    es.indices.create(index="w", mappings={"properties": {"k": {"type": "keyword"}, "n": {"type": "long"}}})
    docs: dict = {}
    rnd = random.Random(7)

    def write(doc_id: str, src: dict) -> None:
        docs[doc_id] = src
        es.index(index="w", id=doc_id, document=src)

    def check() -> None:
        es.indices.refresh(index="w")
        script = "doc['n'].size() == 0 ? 0.5 : doc['n'].value % 4 + 1"
        query = {"script_score": {"query": {"match_all": {}}, "script": {"source": script}}}
        every = es.search(index="w", query=query, size=1000)["hits"]["hits"]
        resp = es.search(
            index="w",
            query=query,
            size=100,
            collapse={"field": field, "inner_hits": {"name": "g", "size": 100}},
        )
        got = [
            (
                h["_id"],
                h["fields"].get(field, [None])[0],
                [i["_id"] for i in h["inner_hits"]["g"]["hits"]["hits"]],
            )
            for h in resp["hits"]["hits"]
        ]
        assert got == _expected_groups(docs, every, field)

    for i in range(30):
        write(f"a{i}", {"k": rnd.choice("ABC"), "n": rnd.randint(0, 3)})
    check()
    for i in range(10):  # new values, and documents without one
        write(f"b{i}", {"k": rnd.choice("CDE"), "n": rnd.randint(2, 6)} if i % 3 else {})
    check()
    write("a0", {"k": "Z", "n": 99})  # an update: another group, a new value
    es.delete(index="w", id="a1")
    del docs["a1"]
    check()
    es.close()


def test_inner_hits_take_their_own_options_alone(es):
    """ExpandSearchPhase searches each group with the inner hit's own options (sort, track_scores,
    _source, version...; buildExpandSearchSourceBuilder), none of the request's: a group sorted by
    a field shows its ``sort`` values and, without ``track_scores``, a null ``_score`` and
    ``max_score``, as a top-level search sorted so does; the request's ``version`` is its own."""
    query = {"match": {"t": "neural model gene"}}
    plain = es.search(index="r", query=query, size=1000, sort=[{"n": "desc"}, {"_doc": "asc"}])["hits"][
        "hits"
    ]
    scored = {h["_id"]: h["_score"] for h in es.search(index="r", query=query, size=1000)["hits"]["hits"]}
    for track in (False, True):
        resp = es.search(
            index="r",
            query=query,
            size=3,
            version=True,
            collapse={
                "field": "k",
                "inner_hits": {
                    "name": "g",
                    "size": 2,
                    "sort": [{"n": "desc"}, {"_doc": "asc"}],
                    "track_scores": track,
                },
            },
        )
        for hit in resp["hits"]["hits"]:
            assert "_version" in hit
            key = es.docs[hit["_id"]].get("k")
            members = [h for h in plain if es.docs[h["_id"]].get("k") == key]
            inner = hit["inner_hits"]["g"]["hits"]
            assert [(h["_id"], h["sort"]) for h in inner["hits"]] == [
                (h["_id"], h["sort"]) for h in members[:2]
            ]
            assert all("_version" not in h for h in inner["hits"])
            if track:
                assert [h["_score"] for h in inner["hits"]] == [scored[h["_id"]] for h in members[:2]]
                assert inner["max_score"] == max(scored[h["_id"]] for h in members)
            else:
                assert all(h["_score"] is None for h in inner["hits"]) and inner["max_score"] is None


def test_inner_hits_of_size_0_count_their_group_and_show_no_max_score(es):
    """A group searched with size 0 collects no top docs: its total, no hits, ``max_score`` null
    (as "no hits and inner_hits max_score null" in search/110_field_collapsing.yml at the top)."""
    resp = es.search(
        index="r", query={"match": {"t": "graph"}}, collapse={"field": "k", "inner_hits": {"size": 0}}
    )
    for hit in resp["hits"]["hits"]:
        inner = hit["inner_hits"]["k"]["hits"]
        key = es.docs[hit["_id"]].get("k")
        members = [d for d, src in es.docs.items() if src.get("k") == key and "graph" in src["t"].split()]
        assert inner == {"total": {"value": len(members), "relation": "eq"}, "max_score": None, "hits": []}


def test_an_empty_inner_hits_object_is_one_with_the_defaults(es):
    """``inner_hits: {}`` is an InnerHitBuilder with its defaults (size 3, keyed by the field),
    as ``[{}]`` is."""
    query = {"match": {"t": "model"}}
    one = es.search(index="r", query=query, collapse={"field": "k", "inner_hits": {}})["hits"]["hits"]
    listed = es.search(index="r", query=query, collapse={"field": "k", "inner_hits": [{}]})["hits"]["hits"]
    assert one == listed and one
    assert all(1 <= len(h["inner_hits"]["k"]["hits"]["hits"]) <= 3 for h in one)


@pytest.mark.parametrize("size", [0, 5])
def test_an_inner_hits_option_the_engine_lacks_is_refused_with_or_without_hits(es, size):
    from elasticsearch import ApiError

    with pytest.raises(ApiError) as e:
        es.search(index="r", size=size, collapse={"field": "k", "inner_hits": {"name": "a", "highlight": {}}})
    assert "collapse.inner_hits.highlight" in str(e.value.body)
