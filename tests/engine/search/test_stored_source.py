"""``stored_source``'s shortcut (issue 29): a stored document the mapping's ``_source.excludes``
cannot change is returned as parsed, without filtering it; the answer is always the filter's.
``shown_source``'s (a request listing top-level names): one pass instead of the two filters,
the same answer."""

from __future__ import annotations

import json

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scholar_es.engine.search.hits import _filter, filter_source, shown_source, stored_source

KEYS = ["vector", "a", "b", "a.b", "x", "", "v\u00e9", 'q"', "*"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.sampled_from(KEYS)
)
values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.sampled_from(KEYS), kids, max_size=3)
    ),
    max_leaves=10,
)
documents = st.dictionaries(st.sampled_from(KEYS), values, max_size=5)
patterns = st.lists(
    st.sampled_from(["vector", "a", "a.b", "a.*", "*", "b", "v\u00e9", 'q"', "x", ""]), max_size=3
)


@settings(max_examples=300, deadline=None)
@given(doc=documents, excludes=patterns, ascii_only=st.booleans(), compact=st.booleans())
def test_stored_source_is_the_filtered_document(doc, excludes, ascii_only, compact):
    text = json.dumps(doc, ensure_ascii=ascii_only, separators=(",", ":") if compact else None)
    expected = _filter(json.loads(text), "", [], excludes) if excludes else json.loads(text)
    got = stored_source(text, excludes)
    assert got == expected
    assert list(got) == list(expected)  # key order too


def test_a_document_without_the_excluded_field_is_returned_as_parsed():
    text = json.dumps({"title": "t", "chunk_text": "c", "year": None, "ids": ["p#1"]})
    assert stored_source(text, ["vector"]) == json.loads(text)
    # the filter drops empty arrays, so a document holding one is filtered
    assert stored_source(json.dumps({"a": [], "b": 1}), ["vector"]) == {"b": 1}
    assert stored_source(json.dumps({"vector": [1.0], "b": 1}), ["vector"]) == {"b": 1}


specs = st.one_of(
    st.lists(st.sampled_from(["a", "b", "x", "vector", "v\u00e9", "a.b", "a.*", "*", 'q"', ""]), max_size=4),
    st.sampled_from([True, False, None, "a", {"includes": ["a"]}, {"excludes": ["b"]}]),
)


#: numbers json and orjson read apart (integers beyond 64 bits), or that orjson refuses
big_numbers = st.one_of(
    st.integers(),
    st.sampled_from([2**63, -(2**63) - 1, 2**64, 2**63 - 1, 9.3e18, -1e19, 1e308, 2.0**63]),
    st.text(max_size=3),  # lone surrogates too: orjson refuses them
)
stored_documents = st.dictionaries(
    st.sampled_from(KEYS),
    st.recursive(
        st.one_of(scalars, big_numbers),
        lambda kids: st.one_of(
            st.lists(kids, max_size=3), st.dictionaries(st.sampled_from(KEYS), kids, max_size=3)
        ),
        max_leaves=10,
    ),
    max_size=5,
)


@settings(max_examples=400, deadline=None)
@given(doc=stored_documents, excludes=patterns, spec=specs)
@example(doc={"a": -(2**63) - 1, "b": 1}, excludes=[], spec=["a"])
@example(doc={"b": [{"x": 2**64}], "x": 1.5}, excludes=["vector"], spec=["b", "x"])
def test_shown_source_is_the_two_filters(doc, excludes, spec):
    """What a hit shows: the mapping's excludes, then the request's ``_source`` (the reference:
    the general filter twice over ``json``'s reading), key order and number types included."""
    text = json.dumps(doc)
    stored = _filter(json.loads(text), "", [], excludes) if excludes else json.loads(text)
    expected = filter_source(stored, spec)
    got = shown_source(text, excludes, spec)
    assert got == expected
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert json.dumps(got) == json.dumps(expected)  # key order, nested too; 2**64, not 1.8e19
