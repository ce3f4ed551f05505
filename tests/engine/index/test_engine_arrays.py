"""Arrays in ``_source`` as Elasticsearch's mapping reference ("Arrays") describes them: an array
of arrays is the same as the flat array, null values are skipped (the first non-null value picks a
dynamic field's type), an empty or all-null array adds no field, and an array of objects is parsed
object by object (flattened, not nested)."""

from __future__ import annotations

import pytest
from elasticsearch import BadRequestError

from scholar_es.engine.rest.transport import embedded_client


@pytest.fixture
def es(tmp_path):
    client = embedded_client(tmp_path / "engine")
    yield client
    client.close()


REFERENCE_DOC = {
    "message": "some arrays in this document...",
    "tags": ["elasticsearch", "wow"],
    "lists": [
        {"name": "prog_list", "description": "programming list"},
        {"name": "cool_list", "description": "cool stuff list"},
    ],
}


def test_the_reference_example_arrays_of_strings_and_objects(es):
    # the reference's own example: PUT my-index-000001/_doc/1 and /2, then match tags
    es.index(index="my-index-000001", id="1", document=REFERENCE_DOC)
    es.index(
        index="my-index-000001",
        id="2",
        document={
            "message": "no arrays in this document...",
            "tags": "elasticsearch",
            "lists": {"name": "prog_list", "description": "programming list"},
        },
        refresh=True,
    )
    hits = es.search(index="my-index-000001", query={"match": {"tags": "elasticsearch"}})["hits"]["hits"]
    assert sorted(h["_id"] for h in hits) == ["1", "2"]
    props = es.indices.get_mapping(index="my-index-000001")["my-index-000001"]["mappings"]["properties"]
    assert set(props["lists"]["properties"]) == {"name", "description"}
    # flattened: the values of every object of the array belong to the one document
    cool = es.search(index="my-index-000001", query={"match": {"lists.description": "cool"}})["hits"]["hits"]
    assert [h["_id"] for h in cool] == ["1"]
    assert (
        es.count(index="my-index-000001", query={"term": {"lists.name.keyword": "prog_list"}})["count"] == 2
    )


def test_an_array_of_arrays_is_the_flat_array(es):
    es.index(index="a", id="1", document={"n": [1, [2, 3]]}, refresh=True)
    mapping = es.indices.get_mapping(index="a")["a"]["mappings"]["properties"]
    assert mapping["n"] == {"type": "long"}
    for value in (1, 2, 3):
        assert es.count(index="a", query={"term": {"n": value}})["count"] == 1
    agg = es.search(index="a", size=0, aggs={"s": {"sum": {"field": "n"}}})["aggregations"]["s"]["value"]
    assert agg == 6.0


def test_nulls_are_skipped_and_the_first_value_picks_the_type(es):
    es.index(
        index="n", id="1", document={"t": [None, "words here"], "e": [], "z": [None, [None]]}, refresh=True
    )
    props = es.indices.get_mapping(index="n")["n"]["mappings"]["properties"]
    assert props["t"]["type"] == "text"
    assert "e" not in props and "z" not in props  # an empty or all-null array is a missing field
    assert es.count(index="n", query={"match": {"t": "words"}})["count"] == 1
    assert es.count(index="n", query={"exists": {"field": "z"}})["count"] == 0


def test_dynamic_false_ignores_unmapped_arrays_of_any_shape(es):
    es.indices.create(index="f", mappings={"dynamic": False, "properties": {"k": {"type": "keyword"}}})
    doc = {"k": ["a", None, ["b"]], "q": [None], "r": [[{"s": 1}]], "u": [[1, 2]]}
    es.index(index="f", id="1", document=doc, refresh=True)
    assert es.indices.get_mapping(index="f")["f"]["mappings"]["properties"] == {"k": {"type": "keyword"}}
    assert es.get(index="f", id="1")["_source"] == doc
    assert es.count(index="f", query={"term": {"k": "b"}})["count"] == 1


def test_a_concrete_value_for_an_object_field_is_still_refused(es):
    es.index(index="o", id="1", document={"a": [{"b": 1}]}, refresh=True)
    with pytest.raises(
        BadRequestError, match=r"object mapping for \[a\] tried to parse field \[a\] as object"
    ):
        es.index(index="o", id="2", document={"a": [{"b": 2}, 5]})


def test_one_vector_per_document_even_through_an_array_of_objects(es):
    es.indices.create(
        index="v", mappings={"properties": {"o": {"properties": {"v": {"type": "dense_vector", "dims": 2}}}}}
    )
    es.index(index="v", id="1", document={"o": [{"v": [1.0, 0.0]}]}, refresh=True)
    with pytest.raises(
        BadRequestError,
        match=r"Field \[o\.v\] of type \[dense_vector\] doesn't not support indexing multiple",
    ):
        es.index(index="v", id="2", document={"o": [{"v": [1.0, 0.0]}, {"v": [0.0, 1.0]}]})


def test_dynamic_strict_refuses_an_unmapped_field_even_when_null_or_empty(es):
    # DocumentParser.parseNullValue / parseArrayDynamic both call ensureNotStrict
    es.indices.create(index="s", mappings={"dynamic": "strict", "properties": {"k": {"type": "keyword"}}})
    for value in (None, [], [None], [[]]):
        with pytest.raises(BadRequestError, match="strict_dynamic_mapping_exception"):
            es.index(index="s", id="1", document={"k": "a", "x": value})
    es.index(index="s", id="1", document={"k": [None, "a"]}, refresh=True)
    assert es.count(index="s", query={"term": {"k": "a"}})["count"] == 1


def test_source_filtering_reaches_into_arrays_of_objects(es):
    es.index(index="r", id="1", document=REFERENCE_DOC, refresh=True)
    hit = es.search(index="r", _source=["lists.name"])["hits"]["hits"][0]
    assert hit["_source"] == {"lists": [{"name": "prog_list"}, {"name": "cool_list"}]}
    hit = es.search(index="r", _source={"excludes": ["lists.description", "message"]})["hits"]["hits"][0]
    assert hit["_source"] == {
        "tags": ["elasticsearch", "wow"],
        "lists": [{"name": "prog_list"}, {"name": "cool_list"}],
    }
    # XContentMapValues.filter drops an array that filtering left empty (and keeps it unfiltered)
    es.index(index="r", id="2", document={"tags": [], "message": "m"}, refresh=True)
    hit = es.search(index="r", query={"ids": {"values": ["2"]}}, _source={"excludes": ["message"]})["hits"][
        "hits"
    ][0]
    assert hit["_source"] == {}
    assert es.get(index="r", id="2")["_source"] == {"tags": [], "message": "m"}


def test_mapping_source_excludes_apply_inside_arrays_of_objects(es):
    es.indices.create(index="x", mappings={"_source": {"excludes": ["lists.description"]}})
    es.index(index="x", id="1", document=REFERENCE_DOC, refresh=True)
    assert es.get(index="x", id="1")["_source"]["lists"] == [{"name": "prog_list"}, {"name": "cool_list"}]
    # excluded from _source, still indexed
    assert es.count(index="x", query={"match": {"lists.description": "cool"}})["count"] == 1


def test_fields_and_highlight_read_nested_arrays(es):
    doc = {"t": [["alpha beta"], "gamma"], "lists": [{"name": "p"}, [{"name": "deep"}]]}
    es.index(index="f", id="1", document=doc, refresh=True)
    resp = es.search(
        index="f",
        query={"match": {"t": "alpha"}},
        fields=["t", "lists.name"],
        highlight={"fields": {"t": {}}},
    )
    hit = resp["hits"]["hits"][0]
    assert hit["fields"] == {"t": ["alpha beta", "gamma"], "lists.name": ["p", "deep"]}
    assert hit["highlight"] == {"t": ["<em>alpha</em> beta"]}


def test_null_value_is_indexed_for_explicit_nulls_only(es):
    # the null_value reference page's example: doc 1 holds null, doc 2 an empty array
    es.indices.create(
        index="my-index-000001",
        mappings={"properties": {"status_code": {"type": "keyword", "null_value": "NULL"}}},
    )
    es.index(index="my-index-000001", id="1", document={"status_code": None})
    es.index(index="my-index-000001", id="2", document={"status_code": []})
    es.index(index="my-index-000001", id="3", document={"status_code": ["a", None]}, refresh=True)
    hits = es.search(index="my-index-000001", query={"term": {"status_code": "NULL"}})["hits"]["hits"]
    assert sorted(h["_id"] for h in hits) == ["1", "3"]
    assert es.get(index="my-index-000001", id="1")["_source"] == {"status_code": None}  # source as sent
    assert es.count(index="my-index-000001", query={"exists": {"field": "status_code"}})["count"] == 2
