"""Growable column arrays shared between snapshots (the in-memory buffers a segment appends to).

A published segment is an immutable snapshot (:meth:`engine.index.segment.segment.Segment.with_changes`
returns a new one): its arrays are prefixes of buffers with spare capacity, appends go past the
rows any snapshot sees (:func:`grow`), and a big read-only (mapped) array is not copied to append
to it but kept as the base of a :class:`Split`, the new rows going to its tail. Hot paths read the
parts (:func:`pieces`, :func:`take`, :func:`slice_rows`, :func:`since`) without joining them.
"""

from __future__ import annotations

import numpy as np


class _Buf:
    """A growable array's storage: ``arr`` has spare capacity past ``used`` rows."""

    __slots__ = ("arr", "used")

    def __init__(self, arr: np.ndarray, used: int) -> None:
        self.arr, self.used = arr, used


#: a read-only (mapped) array at least this long is not copied to append to it: the rows
#: appended after it go to a tail of their own (:class:`Split`); for the attributes declared
#: with :class:`Splittable` only (the vector matrix and the postings, the big ones)
SPLIT_MIN_ROWS = 1 << 16


class Split:
    """A column array held in two parts: ``base`` (a read-only view of a mapped file, never
    copied) and ``tail`` (the rows appended since, a growable buffer's prefix).

    Opening a base with deltas, or appending to a freshly opened base, used to copy the whole
    mapped array into a growable buffer first (4 s and 2.5 GB of memory at 1M chunks). Hot paths
    read the parts (:func:`pieces`, :func:`take`, :func:`since`); a read of the whole array
    through the attribute joins them once (:class:`Splittable`)."""

    __slots__ = ("base", "tail")

    def __init__(self, base: np.ndarray, tail: np.ndarray) -> None:
        self.base, self.tail = base, tail

    def __len__(self) -> int:
        return len(self.base) + len(self.tail)


class Splittable:
    """Declares a column attribute that may hold a :class:`Split`; reading it whole joins the
    parts into one growable buffer (kept, so later appends are in place again)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = name

    def __get__(self, obj: object, owner: type | None = None) -> np.ndarray:
        if obj is None:
            return self  # type: ignore[return-value]
        value = obj.__dict__[self.key]
        if type(value) is Split:
            value = _join(obj, self.key, value)
        return value

    def __set__(self, obj: object, value: np.ndarray) -> None:
        obj.__dict__[self.key] = value


def raw(obj: object, attr: str) -> np.ndarray | Split:
    return obj.__dict__[attr]


def pieces(obj: object, attr: str) -> list[np.ndarray]:
    """The parts of ``obj.<attr>`` in row order, without joining them."""
    value = raw(obj, attr)
    return [value.base, value.tail] if type(value) is Split else [value]  # type: ignore[list-item]


def length(obj: object, attr: str) -> int:
    return len(raw(obj, attr))


def take(obj: object, attr: str, pos: np.ndarray) -> np.ndarray:
    """``obj.<attr>[pos]`` gathered from the parts (no join)."""
    value = raw(obj, attr)
    if type(value) is not Split:
        return value[pos]  # type: ignore[index]
    base, tail = value.base, value.tail
    pos = np.asarray(pos, dtype=np.int64)
    out = np.empty((len(pos), *base.shape[1:]), dtype=np.result_type(base, tail))
    low = pos < len(base)
    out[low] = base[pos[low]]
    out[~low] = tail[pos[~low] - len(base)]
    return out


def slice_rows(obj: object, attr: str, lo: int, hi: int) -> np.ndarray:
    """``obj.<attr>[lo:hi]`` from the parts (no join)."""
    value = raw(obj, attr)
    if type(value) is not Split:
        return value[lo:hi]  # type: ignore[index]
    nb = len(value.base)
    if hi <= nb:
        return value.base[lo:hi]
    if lo >= nb:
        return value.tail[lo - nb : hi - nb]
    return np.concatenate([value.base[lo:], value.tail[: hi - nb]])


def since(obj: object, attr: str, start: int) -> np.ndarray:
    """``obj.<attr>[start:]``, without joining when ``start`` lies in the tail."""
    value = raw(obj, attr)
    if type(value) is Split and start >= len(value.base):
        return value.tail[start - len(value.base) :]
    return getattr(obj, attr)[start:]


def _join(obj: object, attr: str, split: Split) -> np.ndarray:
    """One array of both parts, in a growable buffer registered for later appends."""
    bufs: dict[str, _Buf] = obj.__dict__.setdefault("_bufs", {})
    n = len(split)
    arr = np.empty((n + max(n // 2, 16), *split.base.shape[1:]), dtype=np.result_type(split.base, split.tail))
    arr[: len(split.base)] = split.base
    arr[len(split.base) : n] = split.tail
    bufs[attr] = _Buf(arr, n)
    out = arr[:n]
    out.flags.writeable = False
    obj.__dict__[attr] = out
    return out


def _grown(bufs: dict[str, _Buf], key: str, view: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """``view`` followed by ``extra``: in place in the spare capacity of the buffer ``view`` is a
    prefix of, when no other version has written past that prefix yet (``used`` equals its
    length) and ``extra``'s type fits the buffer's, else copied into a new buffer with 50% spare
    capacity, of the wider of the two types."""
    buf = bufs.get(key)
    n, m = len(view), len(extra)
    if (
        buf is not None
        and view.base is buf.arr
        and buf.used == n
        and len(buf.arr) >= n + m
        and np.can_cast(extra.dtype, buf.arr.dtype, "safe")
    ):
        buf.arr[n : n + m] = extra
    else:
        # the wider of the two types: a narrowed saved array (see postings.narrowed) followed by wider
        # values is widened, never truncated
        arr = np.empty((n + m + max((n + m) // 2, 16), *view.shape[1:]), dtype=np.result_type(view, extra))
        arr[:n] = view
        arr[n : n + m] = extra
        buf = bufs[key] = _Buf(arr, n)
    buf.used = n + m
    out = buf.arr[: n + m]
    out.flags.writeable = False  # a snapshot's arrays are never written
    return out


def grow(obj: object, attr: str, extra: np.ndarray) -> None:
    """Rebind ``obj.<attr>`` to its rows followed by ``extra``, in amortized O(len(extra)).

    The rows go into the spare capacity of the buffer the current array is a prefix of, when
    no other version has written past that prefix yet: every snapshot that shares the buffer
    sees only its own prefix, which is never written again. Otherwise (a compacted array, or a
    second version branching from the same snapshot) the rows are copied into a new buffer with
    50% spare capacity; a big read-only array of a :class:`Splittable` attribute (a mapped
    base) is not copied but kept as the base of a :class:`Split`, the rows going to its tail.
    """
    if len(extra) == 0:
        return
    bufs: dict[str, _Buf] = obj.__dict__.setdefault("_bufs", {})
    view = raw(obj, attr)
    if type(view) is Split:
        obj.__dict__[attr] = Split(view.base, _grown(bufs, attr + "#tail", view.tail, extra))
        return
    buf = bufs.get(attr)
    owned = buf is not None and view.base is buf.arr
    if not owned and isinstance(type(obj).__dict__.get(attr), Splittable) and len(view) >= SPLIT_MIN_ROWS:
        tail = _grown(bufs, attr + "#tail", extra[:0], extra)
        obj.__dict__[attr] = Split(view, tail)  # type: ignore[arg-type]
        return
    obj.__dict__[attr] = _grown(bufs, attr, view, extra)  # type: ignore[arg-type]


def copy_bufs(new: object, old: object) -> None:
    """Give a copied column its own registry of buffers (the buffers themselves are shared)."""
    new.__dict__["_bufs"] = dict(old.__dict__.get("_bufs", {}))
