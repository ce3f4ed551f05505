"""The embedded transport's answer text reads back as ``json.dumps`` writes it.

Answers are written by orjson where it writes what ``json`` reads back alike (issue 29: a page of
``_source`` ~20x faster), else by ``json``; either way the client must read the same values,
float or int, every digit of a big integer, non-finite floats as Jackson's strings.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.rest.transport import _dumps, _non_finite_as_strings

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
