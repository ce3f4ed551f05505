"""The ``sort`` values of hits, as Elasticsearch shows them.

A numeric field sorts as its ``IndexNumericFieldData.NumericType``'s comparator source: float and
half_float as floats (FloatValuesComparatorSource), double and scaled_float as doubles, every other
number (long, integer, short, byte, date, boolean) as a long. A document without a value takes
``XFieldComparatorSource.missingObject``: the type's largest value where it sorts last ascending or
first descending (``min = missing first XOR reversed``), else its smallest -- ``Long.MAX_VALUE``,
``Float/Double.POSITIVE_INFINITY`` -- and shows it (SearchSortValues shows the FieldDoc's value;
Jackson writes an infinite float as the string ``"Infinity"``). A double shows as a double (2.0).
"""

from __future__ import annotations

import pytest

from scholar_es.engine.rest.transport import embedded_client

LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    client = embedded_client(tmp_path_factory.mktemp("sortvalues"))
    client.indices.create(
        index="s",
        mappings={
            "properties": {
                "k": {"type": "keyword"},
                "l": {"type": "long"},
                "i": {"type": "integer"},
                "d": {"type": "double"},
                "f": {"type": "float"},
                "h": {"type": "half_float"},
                "sf": {"type": "scaled_float", "scaling_factor": 100},
                "dt": {"type": "date"},
            }
        },
    )
    full = {"k": "a", "l": 2, "i": 3, "d": 2.0, "f": 0.1, "h": 1.1, "sf": 0.125, "dt": "2020-01-01"}
    client.index(index="s", id="full", document=full)
    client.index(index="s", id="empty", document={"k": "b"})
    client.indices.refresh(index="s")
    yield client
    client.close()


@pytest.mark.parametrize(
    "field, value, high, low",
    [
        ("l", 2, LONG_MAX, LONG_MIN),
        ("i", 3, LONG_MAX, LONG_MIN),  # INT sorts as a LONG
        ("dt", 1577836800000, LONG_MAX, LONG_MIN),  # epoch millis, a long
        ("d", 2.0, "Infinity", "-Infinity"),
        ("sf", 0.13, "Infinity", "-Infinity"),  # Math.round(0.125 * 100) / 100
        ("f", 0.1, "Infinity", "-Infinity"),  # the float 0.1f, written as Float.toString does
        ("h", 1.0996094, "Infinity", "-Infinity"),  # 1.1 as a half float, a Float
    ],
)
@pytest.mark.parametrize("order", ["asc", "desc"])
@pytest.mark.parametrize("missing", [None, "_first", "_last"])
def test_sort_values_and_missing_objects(es, field, value, high, low, order, missing):
    spec: dict = {"order": order}
    if missing is not None:
        spec["missing"] = missing
    hits = es.search(index="s", sort=[{field: spec}])["hits"]["hits"]
    first = missing == "_first"
    assert [h["_id"] for h in hits] == (["empty", "full"] if first else ["full", "empty"])
    shown = {h["_id"]: h["sort"] for h in hits}
    assert shown["full"] == [value]
    assert type(shown["full"][0]) is type(value)  # a double stays a double: 2.0, not 2
    biggest = first == (order == "desc")  # min = missing first XOR reversed
    assert shown["empty"] == [high if biggest else low]


def test_search_after_a_missing_object_pages_on(es):
    """The shown missing object, sent back, finds the documents after it (ties: the next key)."""
    sort = [{"l": "asc"}, {"k": "asc"}]
    first = es.search(index="s", sort=sort, size=1)["hits"]["hits"]
    second = es.search(index="s", sort=sort, size=1, search_after=first[0]["sort"])["hits"]["hits"]
    third = es.search(index="s", sort=sort, size=1, search_after=second[0]["sort"])["hits"]["hits"]
    assert [h["_id"] for h in first + second] == ["full", "empty"] and third == []
    assert second[0]["sort"] == [LONG_MAX, "b"]


@pytest.mark.parametrize("field", ["d", "f", "sf", "l", "dt"])
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_paging_through_missing_objects_sees_every_document_once(tmp_path, field, order):
    """search_after with a shown missing object (``"Infinity"``, ``Long.MAX_VALUE``) pages on
    through the documents that share it, ordered by the next key (found by a review: infinity
    minus infinity had made the comparison NaN)."""
    client = embedded_client(tmp_path)
    client.indices.create(
        index="p",
        mappings={
            "properties": {
                "k": {"type": "keyword"},
                "d": {"type": "double"},
                "f": {"type": "float"},
                "sf": {"type": "scaled_float", "scaling_factor": 10},
                "l": {"type": "long"},
                "dt": {"type": "date"},
            }
        },
    )
    values = {"d": 1.5, "f": 1.5, "sf": 1.5, "l": 3, "dt": "2021-02-03"}
    for i in range(3):
        client.index(index="p", id=f"full{i}", document={"k": f"a{i}", field: values[field]})
        client.index(index="p", id=f"empty{i}", document={"k": f"b{i}"})
    client.indices.refresh(index="p")
    sort = [{field: order}, {"k": "asc"}]
    seen, after = [], None
    while True:
        extra = {"search_after": after} if after is not None else {}
        hits = client.search(index="p", sort=sort, size=1, **extra)["hits"]["hits"]
        if not hits:
            break
        seen.append(hits[0]["_id"])
        after = hits[0]["sort"]
    assert seen == ["full0", "full1", "full2", "empty0", "empty1", "empty2"]
    client.close()


def test_scaled_float_sort_values_are_its_doc_values(tmp_path):
    """ScaledFloatLeafFieldData reads ``long * (1d / factor)``: 0.3 at factor 10 is 3 * 0.1,
    shown 0.30000000000000004 (``fields`` divides instead: 0.3); a value beyond the long range is
    saturated by Math.round."""
    client = embedded_client(tmp_path)
    client.indices.create(
        index="q", mappings={"properties": {"s": {"type": "scaled_float", "scaling_factor": 10}}}
    )
    client.index(index="q", id="1", document={"s": 0.3})
    client.index(index="q", id="2", document={"s": 1e307})
    client.indices.refresh(index="q")
    hits = client.search(index="q", sort=[{"s": "asc"}], fields=["s"])["hits"]["hits"]
    assert [h["sort"] for h in hits] == [[3 * 0.1], [(2**63 - 1) * 0.1]]
    assert hits[0]["fields"]["s"] == [0.3]
    client.close()


def test_search_after_reads_a_long_as_long_value_does(es):
    """``longValue()`` truncates a fraction toward zero: descending after 2.5 is after 2, so the
    document holding 2 is not after it (read as 2.5 it would be)."""
    hits = es.search(index="s", sort=[{"l": "desc"}], search_after=[2.5])["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["empty"]
    hits = es.search(index="s", sort=[{"l": "desc"}], search_after=[3.5])["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["full", "empty"]


@pytest.mark.parametrize(
    "unmapped_type, high, low",
    [
        ("long", LONG_MAX, LONG_MIN),
        ("double", "Infinity", "-Infinity"),
        ("float", "Infinity", "-Infinity"),
        ("keyword", None, None),
    ],
)
@pytest.mark.parametrize("order", ["asc", "desc"])
def test_unmapped_type_sorts_an_unmapped_field_as_missing_everywhere(es, unmapped_type, high, low, order):
    """FieldSortBuilder: an unmapped field with ``unmapped_type`` sorts as a field of that type no
    document holds: every hit shows the type's missing object and the next key orders them;
    without it the request fails (the existing 400)."""
    sort = [{"nope": {"order": order, "unmapped_type": unmapped_type}}, {"k": "asc"}]
    hits = es.search(index="s", sort=sort)["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["full", "empty"]
    shown = high if order == "asc" else low
    assert [h["sort"] for h in hits] == [[shown, "a"], [shown, "b"]]
    after = es.search(index="s", sort=sort, search_after=hits[0]["sort"])["hits"]["hits"]
    assert [h["_id"] for h in after] == ["empty"]


def test_an_unmapped_type_the_engine_lacks_is_refused_by_name(es):
    from elasticsearch import ApiError

    with pytest.raises(ApiError) as e:
        es.search(index="s", sort=[{"nope": {"unmapped_type": "geo_point"}}])
    assert "unmapped_type [geo_point]" in str(e.value.body)


@pytest.mark.parametrize("track", [False, True])
def test_top_hits_sorted_by_a_field_show_sort_values_and_scores_only_when_tracked(es, track):
    """TopHitsAggregator: a field sort collects no scores without ``track_scores`` (no
    MaxScoreCollector: ``max_score`` NaN, written null; each hit's ``_score`` null) and each hit
    shows its sort values, as the search's own hits do."""
    aggs = {"top": {"top_hits": {"sort": [{"l": "asc"}], "track_scores": track}}}
    hits = es.search(index="s", query={"match_all": {}}, size=0, aggs=aggs)["aggregations"]["top"]["hits"]
    plain = es.search(index="s", query={"match_all": {}}, sort=[{"l": "asc"}], track_scores=track)["hits"]
    assert [(h["_id"], h["sort"], h["_score"]) for h in hits["hits"]] == [
        (h["_id"], h["sort"], h["_score"]) for h in plain["hits"]
    ]
    assert (hits["max_score"] is None) == (not track) and (
        [h["_score"] is None for h in hits["hits"]] == [not track] * 2
    )


@pytest.mark.parametrize(
    "spec, ids, shown",
    [
        ({"order": "asc"}, ["multi", "one"], [["a"], ["m"]]),  # MIN ascending: "a" of ["z", "a"]
        ({"order": "desc"}, ["multi", "one"], [["z"], ["m"]]),  # MAX descending: "z"
        ({"order": "asc", "mode": "max"}, ["one", "multi"], [["m"], ["z"]]),
        ({"order": "desc", "mode": "min"}, ["one", "multi"], [["m"], ["a"]]),
    ],
)
def test_a_multi_valued_keyword_sorts_by_its_min_or_max(tmp_path, spec, ids, shown):
    """SortMode: MIN for ascending, MAX for descending unless ``mode`` says (a review found the
    engine sorted by the first value given)."""
    client = embedded_client(tmp_path)
    client.indices.create(index="m", mappings={"properties": {"k": {"type": "keyword"}}})
    client.index(index="m", id="multi", document={"k": ["z", "a"]})
    client.index(index="m", id="one", document={"k": "m"})
    client.indices.refresh(index="m")
    hits = client.search(index="m", sort=[{"k": spec}])["hits"]["hits"]
    assert [h["_id"] for h in hits] == ids and [h["sort"] for h in hits] == shown
    client.close()


@pytest.fixture(scope="module")
def longs(tmp_path_factory):
    client = embedded_client(tmp_path_factory.mktemp("longs"))
    client.indices.create(
        index="n",
        mappings={"properties": {"l": {"type": "long"}, "d": {"type": "double"}, "k": {"type": "keyword"}}},
    )
    for doc_id, doc in {
        "five": {"l": 5, "d": 5.0, "k": "a"},
        "none": {"k": "b"},
        "seven": {"l": 7, "d": 7.0, "k": "c"},
        "minus3": {"l": -3, "d": -3.0, "k": "d"},
        "minus2": {"l": -2, "d": -2.0, "k": "e"},
    }.items():
        client.index(index="n", id=doc_id, document=doc)
    client.indices.refresh(index="n")
    yield client
    client.close()


def _after(client, sort, value) -> list[str]:
    return [
        h["_id"] for h in client.search(index="n", sort=sort, search_after=[value], size=10)["hits"]["hits"]
    ]


def test_search_after_reads_values_as_search_after_builder_does(longs):
    """convertValueFromSortType: a LONG sort reads ``"Infinity"`` as Long.MAX_VALUE (it ties with
    the missing object), a text through ``Math.floor`` and a number through ``longValue()``; an
    integer beyond a double reads as infinite, not a 500 (found by a review)."""
    desc_first = [{"l": {"order": "desc", "missing": "_first"}}]
    assert _after(longs, desc_first, "Infinity") == ["seven", "five", "minus2", "minus3"]
    asc = [{"l": "asc"}]
    assert _after(longs, asc, "-2.5") == ["minus2", "five", "seven", "none"]  # floor: -3
    assert _after(longs, asc, -2.5) == ["five", "seven", "none"]  # truncated: -2
    assert _after(longs, [{"d": "asc"}], 2**1100) == []  # +Infinity ties with the missing object
    assert _after(longs, [{"d": "desc"}], 2**1100) == ["seven", "five", "minus2", "minus3", "none"]


@pytest.mark.parametrize("sort", [[{"l": "asc"}], [{"_score": "desc"}, {"k": "asc"}]])
def test_a_null_search_after_value_of_a_numeric_sort_is_refused(longs, sort):
    from elasticsearch import BadRequestError

    with pytest.raises(BadRequestError) as e:
        longs.search(index="n", sort=sort, search_after=[None] * len(sort))
    assert "is null" in str(e.value.body)
    assert _after(longs, [{"k": "asc"}], None) == []  # a keyword's missing value is null: allowed


def test_unmapped_keyword_and_date_sorts_read_their_search_after_values(longs):
    for unmapped, value in (("keyword", "a"), ("date", "2020-01-01")):
        sort = [{"nope": {"unmapped_type": unmapped}}, {"k": "asc"}]
        hits = longs.search(index="n", sort=sort, search_after=[value, "b"])["hits"]["hits"]
        assert hits is not None  # read, not "Failed to parse"


def test_max_score_under_a_field_sort_needs_track_scores(longs):
    """QueryPhaseCollectorManager keeps a max score under a field sort only with track_scores;
    a ``_score`` key still shows each hit's score (SearchPhaseController's sortScoreIndex); a
    top_hits shows scores only under track_scores (a string "false" is false: declareBoolean)."""
    sort = [{"_score": "desc"}, {"k": "asc"}]
    plain = longs.search(index="n", query={"match_all": {}}, sort=sort)["hits"]
    assert plain["max_score"] is None and all(h["_score"] == 1.0 for h in plain["hits"])
    tracked = longs.search(index="n", query={"match_all": {}}, sort=sort, track_scores=True)["hits"]
    assert tracked["max_score"] == 1.0
    for track in (False, "false"):
        aggs = {"t": {"top_hits": {"sort": [{"_score": "asc"}], "track_scores": track}}}
        top = longs.search(index="n", size=0, aggs=aggs)["aggregations"]["t"]["hits"]
        assert top["max_score"] is None and all(h["_score"] is None for h in top["hits"])


@pytest.mark.parametrize("seed", [1, 2])
def test_multi_valued_keywords_sort_as_a_reference_orders_them(tmp_path, seed):
    """Random documents of 0-3 values written in three refreshed batches (values gathered across
    the segment's parts): ascending by each one's smallest value, descending by its largest,
    documents without a value last, ties in index order."""
    import random

    rnd = random.Random(seed)
    client = embedded_client(tmp_path)
    client.indices.create(index="r", mappings={"properties": {"k": {"type": "keyword"}}})
    docs = []
    for batch in range(3):
        for i in range(40):
            values = rnd.sample(["ant", "bee", "cat", "dog", "eel", "fox", "gnu"], rnd.randint(0, 3))
            doc_id = f"{batch}-{i:02d}"
            client.index(index="r", id=doc_id, document={"k": values} if values else {})
            docs.append((doc_id, values))
        client.indices.refresh(index="r")
    for order in ("asc", "desc"):
        hits = client.search(index="r", sort=[{"k": order}], size=200)["hits"]["hits"]
        with_values = [(d, min(v) if order == "asc" else max(v)) for d, v in docs if v]
        ranked = sorted(with_values, key=lambda t: t[1], reverse=order == "desc")  # stable: ties in order
        expected = [d for d, _ in ranked] + [d for d, v in docs if not v]
        assert [h["_id"] for h in hits] == expected
        assert [h["sort"][0] for h in hits][: len(ranked)] == [k for _, k in ranked]
    client.close()


def test_boolean_options_given_as_text_read_as_they_say(longs):
    """A boolean option accepted as text is read as what it says everywhere ("false" is false;
    the top-level body's were read as true before), and one that is no boolean is refused at
    parse time, inner hits' and top_hits' included."""
    from elasticsearch import BadRequestError

    hit = longs.search(index="n", query={"match_all": {}}, version="false", explain="false", size=1)
    assert "_version" not in hit["hits"]["hits"][0] and "_explanation" not in hit["hits"]["hits"][0]
    shown = longs.search(index="n", query={"match_all": {}}, version="true", size=1)["hits"]["hits"][0]
    assert shown["_version"] == 1
    bad = [
        {"collapse": {"field": "k", "inner_hits": {"name": "i", "version": "yes"}}},
        {"size": 0, "aggs": {"t": {"top_hits": {"track_scores": "maybe"}}}},
    ]
    for body in bad:
        with pytest.raises(BadRequestError) as e:
            longs.search(index="n", **body)
        assert "must be a boolean" in str(e.value.body)
