"""Facts about a saved integer array: min, max, sum and order.

Opening a segment verifies every array's CRC32 (engine/commit.py) and then checks what a checksum
cannot: id ranges, ascending offsets, frequency totals (``Segment.from_arrays``). Done as a second
pass, those checks read the postings again (2.2 GB of pages at 1M chunks, all of them left in the
process's resident set, and ~1 s of reductions). The writer records each integer array's facts
in the commit point beside its CRC32 (``commit.write_commit``); once the CRC matches, the facts
describe exactly those bytes, so the open's checks read them instead of the array (a writer bug
that wrote an out-of-range id records that id's value as the maximum, and the check still fails).
A commit point written before the facts were recorded gets them during the CRC pass, one file
step at a time while its pages are mapped. Arrays built in memory compute them directly.
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
        acc = StatsAccumulator.for_array(arr)
        if acc is None:
            return None
        acc.add(arr)
        return acc.result()


class StatsAccumulator:
    """:class:`ArrayStats` of an array fed in consecutive pieces (``add``, in order)."""

    def __init__(self, ordered: bool) -> None:
        self.ordered = ordered
        self.lo: int | None = None
        self.hi: int | None = None
        self.total = 0
        self.nondecreasing = True
        self.increasing = True
        self.last: int | None = None

    @classmethod
    def for_array(cls, arr: np.ndarray) -> StatsAccumulator | None:
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            return None
        return cls(ordered=arr.dtype == np.int64)

    def add(self, piece: np.ndarray) -> None:
        if not len(piece):
            return
        lo, hi = int(piece.min()), int(piece.max())
        self.lo = lo if self.lo is None else min(self.lo, lo)
        self.hi = hi if self.hi is None else max(self.hi, hi)
        self.total += int(piece.sum(dtype=np.int64))
        if self.ordered:
            first = int(piece[0])
            if self.last is not None:
                self.nondecreasing &= first >= self.last
                self.increasing &= first > self.last
            if len(piece) > 1 and (self.nondecreasing or self.increasing):
                step = np.diff(piece)
                self.nondecreasing &= bool((step >= 0).all())
                self.increasing &= bool((step > 0).all())
            self.last = int(piece[-1])

    def result(self) -> ArrayStats:
        return ArrayStats(
            min=0 if self.lo is None else self.lo,
            max=-1 if self.hi is None else self.hi,
            total=self.total,
            nondecreasing=self.nondecreasing if self.ordered else None,
            increasing=self.increasing if self.ordered else None,
        )


__all__ = ["ArrayStats", "StatsAccumulator"]
