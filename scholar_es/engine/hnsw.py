"""Approximate kNN through an HNSW graph (usearch), as a cluster answers kNN on large indices.

A ``dense_vector`` field whose ``index_options.type`` is ``hnsw``, ``int8_hnsw`` or ``int4_hnsw``
(or that has no ``index_options``: Elasticsearch 8.14+ defaults float vectors to ``int8_hnsw``,
m 16, ef_construction 100; docs/es-semantics.md §7) is searched through a graph once it holds at
least :data:`GRAPH_THRESHOLD` vectors; ``flat``/``int8_flat``/``int4_flat``, every ``bbq_*`` type,
``index: false`` and smaller fields stay exact (:mod:`engine.knn`). The graph is usearch's
(a maintained HNSW library, not our own): metric by the field's similarity (cosine and dot_product ->
``cos``, max_inner_product -> ``ip``, l2_norm -> ``l2sq``), ``connectivity`` = m,
``expansion_add`` = ef_construction, f32 for ``hnsw``, i8 for the int8/int4 types (usearch has no
int4). The i8 vectors are quantized here, Lucene's way (``ScalarQuantizer``): one scale per graph
from the ``1 - 1/(dims + 1)`` quantile of the absolute components (cosine rows normalized first),
values clamped; a common scale keeps cosine, inner-product and L2 orderings.

The graph only proposes candidates: :func:`engine.knn` re-scores them with the exact similarity
formula (so a returned score is the one the exact path gives, up to float32 summation order) and
keeps the top k. Graph keys are the documents' ``seq`` (never reused, stable across compaction),
so one graph serves every snapshot of the segment: keys a snapshot does not hold (deleted
documents, rows a newer snapshot appended) are dropped after the search, as Lucene skips
non-live docs; rows a snapshot holds beyond the graph's newest key are ``add``-ed first. Once
deleted keys outnumber live ones the graph is rebuilt (Lucene's merges drop deleted docs).
Builds and adds run on one thread, so the graph -- and every approximate answer -- is the same
in every process; a lock serializes use of one graph across searching threads.

The graph is saved with the segment (:meth:`HnswGraph.to_array`: a small JSON header with the
build parameters plus usearch's own serialization, one more checksummed array of the commit) and
restored on open without rebuilding; a stored graph of other parameters is ignored and rebuilt.
"""

from __future__ import annotations

import json
import logging
import math
import threading

import numpy as np

log = logging.getLogger("scholar_es.engine")

#: below this many vectors in a field, kNN stays exact even for hnsw types: the graph's answer
#: would be approximate for no gain (an exact pass over 10k x 384 floats takes ~1 ms), and every
#: small index (fixtures, tests) keeps exact scores and rankings
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

#: graphs built from scratch in this process (tests check a reopened index restores, not rebuilds)
BUILDS = 0


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
    """A usearch index over one vector column, keyed by seq (see the module docstring)."""

    def __init__(self, params: dict, dims: int, scale: float, hw: int, index=None, blob=None) -> None:
        self.params, self.dims, self.scale = params, dims, scale
        #: the highest seq added
        self.hw = hw
        self._index = index
        #: the saved form while it is current (the array read from disk, or the last one written)
        self._blob: np.ndarray | None = blob
        self.lock = threading.Lock()

    # --- building -------------------------------------------------------------------------
    @classmethod
    def build(cls, params: dict, matrix: np.ndarray, present: np.ndarray, seqs: np.ndarray) -> HnswGraph:
        global BUILDS
        rows = np.flatnonzero(present)
        dims = int(matrix.shape[1])
        scale = 1.0
        if params["dtype"] == "i8":
            step = max(1, len(rows) // _QUANTILE_SAMPLE)
            sample = _unit(params, matrix[rows[::step]])
            q = float(np.quantile(np.abs(sample), 1 - 1 / (dims + 1))) if len(sample) else 1.0
            scale = 127.0 / q if q > 0 else 1.0
        g = cls(params, dims, scale, -1, index=_new_index(params, dims))
        g._add(matrix, rows, seqs)
        BUILDS += 1
        return g

    def _add(self, matrix: np.ndarray, rows: np.ndarray, seqs: np.ndarray) -> None:
        if len(rows):
            self._index.add(seqs[rows].astype(np.uint64), self._encode(matrix[rows]), copy=True, threads=1)
            self.hw = max(self.hw, int(seqs[rows[-1]]))
            self._blob = None

    def _encode(self, vecs: np.ndarray, query: bool = False) -> np.ndarray:
        vecs = np.ascontiguousarray(vecs, dtype=np.float32)
        if self.params["dtype"] != "i8":
            return vecs
        scale = self.scale
        if query and self.params["metric"] != "l2sq":
            # cosine and inner-product orderings do not change with the query's scale: use the
            # full int8 range rather than clamp a query longer than the documents
            top = float(np.abs(vecs).max())
            scale = 127.0 / top if top > 0 else 1.0
        return np.clip(np.rint(_unit(self.params, vecs) * scale), -127, 127).astype(np.int8)

    # --- searching ------------------------------------------------------------------------
    def search(
        self, qv: np.ndarray, count: int, ef: int, matrix: np.ndarray, present: np.ndarray, seqs: np.ndarray
    ) -> np.ndarray:
        """Positions (in ``seqs``) of up to ``count`` nearest graph keys that this snapshot holds,
        after adding the snapshot's rows newer than the graph; nearest first."""
        with self.lock:
            index = self._load()
            start = int(np.searchsorted(seqs, self.hw, side="right"))
            if start < len(seqs):
                self._add(matrix, start + np.flatnonzero(present[start:]), seqs)
            count = min(count, len(index))
            if count <= 0:
                return np.zeros(0, dtype=np.int64)
            index.expansion_search = max(ef, count)
            keys = index.search(self._encode(qv[None, :], query=True)[0], count, threads=1).keys
        keys = np.asarray(keys, dtype=np.int64)
        pos = np.searchsorted(seqs, keys)
        ok = pos < len(seqs)
        ok[ok] = seqs[pos[ok]] == keys[ok]
        return pos[ok]

    @property
    def size(self) -> int:
        with self.lock:
            return len(self._load())

    # --- persistence ----------------------------------------------------------------------
    def _load(self):
        if self._index is None:
            from usearch.index import Index

            blob = self._blob
            assert blob is not None  # a graph is built (index) or read (blob)
            header_len = 12 + int.from_bytes(bytes(blob[8:12]), "little")
            index = Index.restore(
                blob[header_len:].tobytes(),
                connectivity=self.params["m"],
                expansion_add=self.params["ef_construction"],  # not part of usearch's serialization
            )
            if index is None or index.ndim != self.dims:
                raise ValueError("the stored graph does not restore")
            self._index = index
        return self._index

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

    @property
    def unsaved(self) -> bool:
        return self._blob is None

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
            log.warning("stored HNSW graph is unusable (%s); it is rebuilt on the next kNN search", e)
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


def graph_for(col, params: dict, seqs: np.ndarray) -> HnswGraph:
    """The column's graph, built (or rebuilt) when it is missing, of other parameters, unloadable,
    or mostly deleted keys."""
    g = col.graph
    live = int(np.count_nonzero(col.present))
    if g is not None and g.params == params:
        try:
            if g.size <= 2 * live:
                return g
        except (ValueError, RuntimeError) as e:
            log.warning("stored HNSW graph does not restore (%s); rebuilding it", e)
    g = HnswGraph.build(params, col.matrix, col.present, seqs)
    col.graph = g
    return g


__all__ = ["BUILDS", "GRAPH_THRESHOLD", "HnswGraph", "graph_for", "graph_params"]
