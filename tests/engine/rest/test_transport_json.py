"""The embedded transport's answer text reads back as ``json.dumps`` writes it.

Answers are written by orjson where it writes what ``json`` reads back alike (issue 29: a page of
``_source`` ~20x faster), else by ``json``; either way the client must read the same values,
float or int, every digit of a big integer, non-finite floats as Jackson's strings.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.xcontent import answer_bytes as _dumps
from scholar_es.engine.xcontent import non_finite_as_strings as _non_finite_as_strings

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # lone surrogates included: orjson refuses them, json writes them
    | st.sampled_from(["null", 'é\n"', "1e400", ""])
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=20,
)


def _reference(out) -> bytes:
    return json.dumps(_non_finite_as_strings(out), ensure_ascii=False, allow_nan=False).encode("utf-8")


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_answers_read_back_as_json_writes_them(out):
    ours = _dumps(out)
    assert repr(json.loads(ours)) == repr(json.loads(_reference(out)))


def test_a_page_of_sources_is_written_by_orjson_and_non_finite_floats_by_json():
    page = {"hits": {"max_score": 1.5, "hits": [{"_id": "1", "_score": 1.5, "_source": {"t": "é"}}]}}
    assert _dumps(page) == json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
    assert json.loads(_dumps({"s": float("inf")})) == {"s": "Infinity"}
    assert _dumps({"a": 1}, pretty=True) == b'{\n  "a": 1\n}\n'


def test_a_page_whose_sources_hold_null_is_written_by_orjson():
    """A ``null`` in a stored ``_source`` (a paper without a venue) is its own None: the answer
    is orjson's compact text, not ``json``'s; a NaN beside it still goes to ``json``."""
    page = {"hits": {"hits": [{"_score": 1.5, "_source": {"venue": None, "year": None, "t": "null"}}]}}
    assert _dumps(page) == json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
    page["hits"]["hits"][0]["_score"] = float("nan")
    assert json.loads(_dumps(page))["hits"]["hits"][0]["_score"] == "NaN"
    assert _dumps([None, (1, 2)]) == b"[null, [1, 2]]"  # a tuple: json's text (reads back alike)


def test_serve_writes_the_transports_text():
    """``scholar-es serve`` answers with the same text: a script_score's Infinity is Jackson's
    string over HTTP too (before, ``json.dumps`` wrote the bare literal ``Infinity``: not JSON)."""
    from scholar_es.serve.es_api import render

    body = {"hits": {"max_score": float("inf"), "hits": [{"_score": float("inf"), "_source": {"v": None}}]}}
    for pretty in (False, True):
        answer = render(200, body, method="GET", version=None, pretty=pretty)
        assert answer.body == _dumps(body, pretty)
        assert (
            json.loads(answer.body, parse_constant=lambda c: pytest.fail(f"bare {c}"))["hits"]["max_score"]
            == "Infinity"
        )


def test_the_client_writes_numpy_arrays_beside_null():
    """A request body holding a numpy array and a None: the client's ``default`` hook writes the
    array (``json``'s path); the read-back check of orjson's text never compares an array."""
    import numpy as np
    from elasticsearch.serializer import JsonSerializer

    from scholar_es.engine.rest.client_json import EngineJsonSerializer

    body = {"vector": np.array([0.1, 0.2, 0.3]), "venue": None, "m": np.array([[1, 2], [3, 4]])}
    ours = EngineJsonSerializer().json_dumps(body)
    assert json.loads(ours) == json.loads(JsonSerializer().json_dumps(body))
    assert json.loads(ours)["vector"] == [0.1, 0.2, 0.3]
