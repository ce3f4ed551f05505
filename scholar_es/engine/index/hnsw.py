"""Approximate kNN through an HNSW graph (usearch), as a cluster answers kNN on large indices.

A ``dense_vector`` field whose ``index_options.type`` is ``hnsw``, ``int8_hnsw`` or ``int4_hnsw``
(or that has no ``index_options``: Elasticsearch 8.14+ defaults float vectors to ``int8_hnsw``,
m 16, ef_construction 100; docs/es-semantics.md §7) gets a graph when a save writes a base whose
column holds at least :data:`GRAPH_THRESHOLD` vectors; ``flat``/``int8_flat``/``int4_flat``, every
``bbq_*`` type, ``index: false`` and smaller fields stay exact (:mod:`engine.query.knn`). The graph is
usearch's (a maintained HNSW library, not our own): metric by the field's similarity (cosine and
dot_product -> ``cos``, max_inner_product -> ``ip``, l2_norm -> ``l2sq``), ``connectivity`` = m,
``expansion_add`` = ef_construction, f32 for ``hnsw``, i8 for the int8/int4 types (usearch has no
int4). The i8 vectors are quantized here, Lucene's way (``ScalarQuantizer``): one scale per graph
from the ``1 - 1/(dims + 1)`` quantile of the absolute components (cosine rows normalized first),
values clamped; a common scale keeps cosine, inner-product and L2 orderings.

Lucene builds a segment's graph when the segment is written (flush, merge), never at query time;
so does the engine: :func:`graph_for_base` runs in :meth:`engine.index.indices.IndexHandle.save` before a
base is written, on every core (usearch's multi-threaded ``add``; a save is a batch job), and
*extends* the graph the previous base had (its rows are keyed by seq, so only the rows added since
are inserted) unless deleted keys outnumber live ones (then it rebuilds it: Lucene's merges drop
deleted docs). A graph is never changed after it is built -- a new one replaces it -- so searches
share it without waiting for a build, and every process that opens a commit point searches the
same graph (a multi-threaded build is not reproducible; the saved graph is what is shared).

The graph only proposes candidates: :func:`engine.query.knn.approximate` re-scores them with the exact
similarity formula (so a returned score is the one the exact path gives, up to float32 summation
order) and keeps the top k. Graph keys are the documents' ``seq`` (never reused, stable across
compaction), so one graph serves every snapshot of the segment: keys a snapshot does not hold
(deleted documents) are dropped after the search, as Lucene skips non-live docs; rows newer than
the graph (the documents of delta files and unsaved writes, at most ``MERGE_RATIO`` of the base by
the merge policy) are scored exactly and merged with the graph's candidates (docs/storage.md).

The graph is saved with the base (:meth:`HnswGraph.to_array`: a small JSON header with the build
parameters plus usearch's own serialization, one more checksummed array of the commit) and
restored on first use without rebuilding; a stored graph of other parameters, or one that does not
restore, is not searched (exact answers) and is rebuilt by the next save that writes a base.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time

import numpy as np

log = logging.getLogger("scholar_es.engine")

#: below this many vectors in a base's column, kNN stays exact even for hnsw types: the graph's
#: answer would be approximate for no gain (an exact pass over 10k x 384 floats takes ~1 ms), and
#: every small index (fixtures, tests) keeps exact scores and rankings
GRAPH_THRESHOLD = 10_000
#: Elasticsearch's defaults for hnsw types (DenseVectorFieldMapper: m 16, ef_construction 100)
DEFAULT_M = 16
DEFAULT_EF_CONSTRUCTION = 100
#: index_options types searched through a graph, and the usearch scalar type of each
GRAPH_TYPES = {"hnsw": "f32", "int8_hnsw": "i8", "int4_hnsw": "i8"}
#: the type a field without index_options gets (ES 8.14+ default for float vectors)
DEFAULT_TYPE = "int8_hnsw"
#: dot_product vectors are unit length (Elasticsearch rejects others at index time), where the
#: inner-product order is the cosine order: usearch's ``cos`` graph gave better recall there
#: (int8, 20k x 32: 0.96 vs 0.94 with ``ip``)
_METRICS = {"cosine": "cos", "dot_product": "cos", "max_inner_product": "ip", "l2_norm": "l2sq"}
_MAGIC = b"SEHNSW01"
#: Lucene's ScalarQuantizer samples this many vectors for its quantiles
_QUANTILE_SAMPLE = 25_000
#: threads of a graph build or extension (a save is a batch job): every core this process may use
#: unless this environment variable names a number
THREADS_ENV = "SCHOLAR_ES_GRAPH_THREADS"

#: graphs built from scratch ("build") and extended ("extend") in this process (tests check that
#: a reopened index restores its graph rather than building one)
counts = {"build": 0, "extend": 0}


def build_threads() -> int:
    """Threads for building a graph: ``SCHOLAR_ES_GRAPH_THREADS`` or every core available."""
    env = os.environ.get(THREADS_ENV, "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"{THREADS_ENV} must be a number of threads, got [{env}]") from None
        if n < 1:
            raise ValueError(f"{THREADS_ENV} must be at least 1, got [{env}]")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def graph_params(fs) -> dict | None:
    """The graph parameters a field's mapping asks for, or None when its kNN stays exact."""
    if not fs.index or fs.similarity not in _METRICS:
        return None
    opts = (fs.raw or {}).get("index_options") or {"type": DEFAULT_TYPE}
    dtype = GRAPH_TYPES.get(str(opts.get("type")))
    if dtype is None:
        return None
    return {
        "metric": _METRICS[fs.similarity],
        "dtype": dtype,
        "m": int(opts.get("m", DEFAULT_M)),
        "ef_construction": int(opts.get("ef_construction", DEFAULT_EF_CONSTRUCTION)),
    }


class HnswGraph:
    """A usearch index over one vector column, keyed by seq; never changed once built (see the
    module docstring)."""

    def __init__(self, params: dict, dims: int, scale: float, hw: int, index=None, blob=None) -> None:
        self.params, self.dims, self.scale = params, dims, scale
        #: the highest seq the graph covers: every present row up to it is a key
        self.hw = hw
        self._index = index
        #: the saved form (the array read from disk, or the one last written)
        self._blob: np.ndarray | None = blob
        #: guards the lazy restore and the search-time ``expansion_search`` setting
        self.lock = threading.Lock()
        #: the usearch index restored from ``_blob`` in this process (tests: loaded, not built)
        self.restored = False
        #: the stored graph did not restore: never searched, replaced by the next base
        self.broken = False

    # --- building -------------------------------------------------------------------------
    @classmethod
    def build(
        cls, params: dict, matrix: np.ndarray, present: np.ndarray, seqs: np.ndarray, threads: int = 1
    ) -> HnswGraph:
        """A new graph of every present row."""
        rows = np.flatnonzero(present)
        dims = int(matrix.shape[1])
        scale = 1.0
        if params["dtype"] == "i8":
            step = max(1, len(rows) // _QUANTILE_SAMPLE)
            sample = _unit(params, matrix[rows[::step]])
            q = float(np.quantile(np.abs(sample), 1 - 1 / (dims + 1))) if len(sample) else 1.0
            scale = 127.0 / q if q > 0 else 1.0
        g = cls(params, dims, scale, -1, index=_new_index(params, dims))
        g._add(matrix, rows, seqs, threads)
        counts["build"] += 1
        return g

    def extended(
        self, matrix: np.ndarray, present: np.ndarray, seqs: np.ndarray, threads: int = 1
    ) -> HnswGraph:
        """A new graph: a copy of this one plus the present rows newer than its newest key (this
        one stays as it is: searches of older snapshots keep using it)."""
        start = int(np.searchsorted(seqs, self.hw, side="right"))
        index = self._load().copy()
        g = HnswGraph(self.params, self.dims, self.scale, self.hw, index=index)
        g._add(matrix, start + np.flatnonzero(present[start:]), seqs, threads)
        counts["extend"] += 1
        return g

    def _add(self, matrix: np.ndarray, rows: np.ndarray, seqs: np.ndarray, threads: int) -> None:
        if len(rows):
            self._index.add(
                seqs[rows].astype(np.uint64), self._encode(matrix[rows]), copy=True, threads=threads
            )
            self._blob = None
        if len(seqs):
            self.hw = max(self.hw, int(seqs[-1]))

    def _encode(self, vecs: np.ndarray, query: bool = False) -> np.ndarray:
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if self.params["dtype"] != "i8":
            return vecs
        if query and self.params["metric"] != "l2sq":
            # cosine and inner-product orderings do not change with the query's (positive) scale:
            # the largest component maps to 127, the full int8 range, whatever the query's length
            # (no normalization needed: a unit vector would be scaled the same way)
            top = float(np.abs(vecs).max())
            return np.rint(vecs * np.float32(127.0 / top if top > 0 else 1.0)).astype(np.int8)
        return np.clip(np.rint(_unit(self.params, vecs) * self.scale), -127, 127).astype(np.int8)

    # --- searching ------------------------------------------------------------------------
    def search(self, qv: np.ndarray, count: int, ef: int) -> np.ndarray:
        """Keys (seqs) of up to ``count`` nearest rows, nearest first (deleted documents
        included: the caller drops keys its snapshot does not hold)."""
        query = self._encode(qv[None, :], query=True)[0]
        with self.lock:
            index = self._load()
            count = min(count, len(index))
            if count <= 0:
                return np.zeros(0, dtype=np.int64)
            index.expansion_search = max(ef, count)
            keys = index.search(query, count, threads=1).keys
        return np.asarray(keys, dtype=np.int64)

    @property
    def size(self) -> int:
        """Keys in the graph (deleted documents' included)."""
        with self.lock:
            return len(self._load())

    # --- persistence ----------------------------------------------------------------------
    def _load(self):
        if self._index is None:
            from usearch.index import Index

            blob = self._blob
            assert blob is not None  # a graph is built (index) or read (blob)
            header_len = 12 + int.from_bytes(bytes(blob[8:12]), "little")
            # a view of the saved bytes (memory-mapped and CRC-checked by commit.py), not a copy:
            # a graph is never changed once built (an extension copies it first), and ``_blob``
            # keeps the mapping alive as long as the graph is (1M x 384 i8: 0.14 s against 0.98 s
            # for a copying load, and no second copy of the graph in memory)
            index = Index.restore(
                blob[header_len:].data,
                view=True,
                connectivity=self.params["m"],
                expansion_add=self.params["ef_construction"],  # not part of usearch's serialization
            )
            if index is None or index.ndim != self.dims:
                raise ValueError("the stored graph does not restore")
            self._index = index
            self.restored = True
        return self._index

    def usable(self) -> bool:
        """Whether the graph restores (a stored one that does not is logged once and not searched)."""
        if self.broken:
            return False
        try:
            with self.lock:
                self._load()
            return True
        except (ValueError, RuntimeError) as e:
            log.warning("stored HNSW graph does not restore (%s); kNN on its field is exact", e)
            self.broken = True
            return False

    def to_array(self) -> np.ndarray:
        """Header + usearch serialization, as one uint8 array of the segment."""
        with self.lock:
            if self._blob is None:
                head = json.dumps(
                    {**self.params, "dims": self.dims, "scale": self.scale, "hw": self.hw}
                ).encode()
                body = self._index.save()
                self._blob = np.frombuffer(
                    _MAGIC + len(head).to_bytes(4, "little") + head + bytes(body), dtype=np.uint8
                )
            return self._blob

    @classmethod
    def from_array(cls, arr: np.ndarray, dims: int | None) -> HnswGraph | None:
        """The graph ``to_array`` wrote (restored on first use), or None when it is not one."""
        try:
            if arr.dtype != np.uint8 or arr.ndim != 1 or bytes(arr[:8]) != _MAGIC:
                raise ValueError("not a graph")
            n = int.from_bytes(bytes(arr[8:12]), "little")
            head = json.loads(bytes(arr[12 : 12 + n]))
            params = {k: head[k] for k in ("metric", "dtype", "m", "ef_construction")}
            if head["dims"] != dims or not math.isfinite(head["scale"]):
                raise ValueError("graph of other dimensions")
            return cls(params, int(head["dims"]), float(head["scale"]), int(head["hw"]), blob=arr)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("stored HNSW graph is unusable (%s); kNN on its field is exact until a new base", e)
            return None


def _unit(params: dict, vecs: np.ndarray) -> np.ndarray:
    if params["metric"] != "cos":
        return vecs
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms > 0, norms, 1.0)


def _new_index(params: dict, dims: int):
    from usearch.index import Index

    return Index(
        ndim=dims,
        metric=params["metric"],
        dtype=params["dtype"],
        connectivity=params["m"],
        expansion_add=params["ef_construction"],
    )


def fits(col, params: dict | None) -> bool:
    """Whether the column has a graph of the field's current parameters (not restored here)."""
    g = col.graph
    return g is not None and params is not None and g.params == params and g.dims == col.dims and not g.broken


def searchable(col, params: dict | None) -> HnswGraph | None:
    """The column's graph when a search may use it: built with the field's current parameters
    and restorable; None means exact kNN."""
    g = col.graph
    return g if g is not None and fits(col, params) and g.usable() else None


def wants_graph(col, params: dict | None) -> bool:
    """Whether a base saves a graph for the column: an hnsw type with at least
    :data:`GRAPH_THRESHOLD` live vectors."""
    return (
        params is not None and col.dims is not None and int(np.count_nonzero(col.present)) >= GRAPH_THRESHOLD
    )


def graph_for_base(name: str, col, params: dict | None, seqs: np.ndarray) -> HnswGraph | None:
    """The graph a base being written saves for column ``col`` (field ``name``): None under
    :data:`GRAPH_THRESHOLD` live vectors or for an exact type; the current graph when it already
    covers every row; extended by the rows added since when most of its keys are live; else a
    new build. Runs on :func:`build_threads` threads and logs one line before and after."""
    if params is None or not wants_graph(col, params):  # (None: narrows the type for the build)
        return None
    live = int(np.count_nonzero(col.present))
    g = searchable(col, params)
    newest = int(seqs[-1]) if len(seqs) else -1
    if g is not None and g.size > 2 * live:
        g = None  # mostly deleted keys: rebuild, as a merge drops deleted docs
    if g is not None and g.hw >= newest:
        return g
    threads = build_threads()
    start = time.perf_counter()
    if g is None:
        log.info("building the HNSW graph of [%s]: %d vectors on %d threads", name, live, threads)
        g = HnswGraph.build(params, col.matrix, col.present, seqs, threads)
    else:
        added = len(seqs) - int(np.searchsorted(seqs, g.hw, side="right"))
        log.info("extending the HNSW graph of [%s] by %d rows on %d threads", name, added, threads)
        g = g.extended(col.matrix, col.present, seqs, threads)
    log.info("HNSW graph of [%s] ready in %.1fs", name, time.perf_counter() - start)
    return g


__all__ = [
    "GRAPH_THRESHOLD",
    "HnswGraph",
    "build_threads",
    "counts",
    "fits",
    "graph_for_base",
    "graph_params",
    "searchable",
    "wants_graph",
]
