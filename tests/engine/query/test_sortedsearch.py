"""``search_sorted`` finds what ``np.searchsorted`` finds, keys of any integer type and range."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.query.sortedsearch import search_sorted

DTYPES = st.sampled_from([np.int32, np.int64, np.uint8, np.int16, np.uint32])


@settings(max_examples=300, deadline=None)
@given(
    DTYPES,
    st.lists(st.integers(0, 2**31 - 1), max_size=40),
    st.lists(st.integers(-(2**40), 2**40), max_size=20),
    st.sampled_from(["left", "right"]),
)
def test_the_same_indices_as_numpy(dtype, values, keys, side):
    info = np.iinfo(dtype)
    a = np.sort(np.clip(np.array(values, dtype=np.int64), info.min, info.max)).astype(dtype)
    v = np.array(keys, dtype=np.int64)  # beyond the array's type too: searched as numpy does
    assert np.array_equal(search_sorted(a, v, side), np.searchsorted(a, v, side=side))
    if len(keys):
        assert search_sorted(a, keys[0], side) == np.searchsorted(a, keys[0], side=side)


def test_int64_keys_in_int32_postings_and_keys_past_int32():
    docs = np.array([1, 5, 9, 2**31 - 1], dtype=np.int32)
    assert search_sorted(docs, np.array([0, 5, 6, 2**31 - 1], dtype=np.int64)).tolist() == [0, 1, 2, 3]
    assert search_sorted(docs, np.array([2**31, 2**40], dtype=np.int64)).tolist() == [4, 4]  # not wrapped
    assert search_sorted(docs, np.array([-(2**40)], dtype=np.int64)).tolist() == [0]
    assert search_sorted(docs, [5, 9], "right").tolist() == [2, 3]
