"""A segment's arrays as they are saved and loaded: numbered in order, checked when read.

:class:`ArrayWriter` collects the arrays of one ``Segment.to_arrays`` call and numbers them
(file names are positions, never field names; see :mod:`engine.index.commit`); lists of strings
(ids, vocabularies) are arrays too, of UTF-8 JSON, so the commit point stays small.
:class:`SavedArrays` hands them back to ``Segment.from_arrays`` with :func:`check` for shapes and
dtypes and the facts of each integer array (:mod:`engine.index.array_stats`) for the range checks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import orjson

from scholar_es.engine.index.array_stats import ArrayStats


class ArrayWriter:
    """The arrays of one save, numbered from ``first_ref``."""

    def __init__(self, first_ref: int = 0) -> None:
        self.arrays: list[np.ndarray] = []
        self.first_ref = first_ref

    def put(self, *arrs: np.ndarray) -> list[int]:
        """Append ``arrs``; returns their numbers."""
        self.arrays.extend(arrs)
        end = self.first_ref + len(self.arrays)
        return list(range(end - len(arrs), end))

    def json_array(self, value: list) -> int:
        """Append a list of strings as one array of its UTF-8 JSON; returns its number."""
        return self.put(np.frombuffer(json.dumps(value, ensure_ascii=False).encode(), dtype=np.uint8))[0]


class SavedArrays:
    """The arrays of one saved segment being loaded, by number, with the facts its commit point
    recorded (``stats``, per array; computed here where absent) so the range checks do not read
    the postings again."""

    def __init__(self, arrays: list[np.ndarray], stats: Sequence[ArrayStats | None] | None = None) -> None:
        self.arrays = arrays
        self.stats = stats

    def __getitem__(self, ref: int) -> np.ndarray:
        return self.arrays[ref]

    def facts(self, ref: int) -> ArrayStats:
        stats = self.stats
        found = stats[ref] if stats is not None and ref < len(stats) else None
        got = found if found is not None else ArrayStats.of(self.arrays[ref])
        if got is None:
            raise ValueError(f"array {ref} is not a 1-D integer array")
        return got

    def check(self, ref: int, dtype, ndim: int, length: int | None = None) -> np.ndarray:
        """Array ``ref``, of this dtype, number of dimensions and length (:func:`check`)."""
        return check(self.arrays[ref], dtype, ndim, length)

    def json_list(self, ref) -> list[str]:
        """A list of strings stored inline (a list: files written before issue 16) or as the
        UTF-8 JSON bytes of an array (``ref``: its position)."""
        if isinstance(ref, list):
            value = ref
        else:
            raw = self.check(ref, np.uint8, 1).tobytes()
            try:
                value = orjson.loads(raw)  # ~3x json's speed on the 1M ids of a base
            except orjson.JSONDecodeError:  # e.g. an escaped lone surrogate, which json reads
                try:
                    value = json.loads(raw)
                except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                    raise ValueError(f"a list of names is not valid JSON: {e!r:.200}") from None
        # one C-level pass over the element types (a generator of isinstance calls cost ~1 s at 1M)
        if not isinstance(value, list) or not set(map(type, value)) <= {str}:
            raise ValueError("a list of names holds something else than strings")
        return value


def check(arr: np.ndarray, dtype, ndim: int, length: int | None = None) -> np.ndarray:
    """``arr`` unchanged if it has this dtype, number of dimensions and (if given) length; else
    ValueError."""
    if arr.dtype != dtype or arr.ndim != ndim or (length is not None and len(arr) != length):
        raise ValueError(
            f"array of dtype {arr.dtype} and shape {arr.shape} where {np.dtype(dtype)} was expected"
        )
    return arr
