"""Facts about a saved integer array: min, max, sum and order.

Opening a segment verifies every array's CRC32 (engine/index/commit.py) and then checks what a checksum
cannot: id ranges, ascending offsets, frequency totals (``Segment.from_arrays``). Done as a second
pass, those checks read the postings again (2.2 GB of pages at 1M chunks, all of them left in the
process's resident set, and ~1 s of reductions). The writer records each integer array's facts
in the commit point beside its CRC32 (``commit.write_commit``); once the CRC matches, the facts
describe exactly those bytes, so the open's checks read them instead of the array (a writer bug
that wrote an out-of-range id records that id's value as the maximum, and the check still fails).
A commit point written before the facts were recorded (and arrays built in memory) get them
computed from the arrays at load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ArrayStats:
    """min, max and sum of a 1-D integer array; for int64 arrays (offsets, sequence numbers,
    document ids: one entry per document or term) also whether it never decreases and whether
    it strictly increases. Empty: min 0, max -1, sum 0, both orders true."""

    min: int
    max: int
    total: int
    nondecreasing: bool | None
    increasing: bool | None

    def to_json(self) -> list:
        return [self.min, self.max, self.total, self.nondecreasing, self.increasing]

    @classmethod
    def from_json(cls, value: object) -> ArrayStats:
        """The facts a commit point recorded; ValueError when malformed."""
        if not isinstance(value, list) or len(value) != 5:
            raise ValueError(f"array facts are malformed: {value!r:.80}")
        lo, hi, total, nondecreasing, increasing = value
        if not all(type(v) is int for v in (lo, hi, total)) or not all(
            v is None or type(v) is bool for v in (nondecreasing, increasing)
        ):
            raise ValueError(f"array facts are malformed: {value!r:.80}")
        return cls(lo, hi, total, nondecreasing, increasing)

    @classmethod
    def of(cls, arr: np.ndarray) -> ArrayStats | None:
        """The facts of ``arr`` (None for an array that is not 1-D integer)."""
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            return None
        ordered = arr.dtype == np.int64
        if not len(arr):
            return cls(0, -1, 0, True if ordered else None, True if ordered else None)
        step = np.diff(arr) if ordered else None
        return cls(
            min=int(arr.min()),
            max=int(arr.max()),
            total=int(arr.sum(dtype=np.int64)),
            nondecreasing=bool((step >= 0).all()) if step is not None else None,
            increasing=bool((step > 0).all()) if step is not None else None,
        )


__all__ = ["ArrayStats"]
