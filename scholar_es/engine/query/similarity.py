"""Scoring formulas, each a small pure function citing its source.

All of them reproduce what Elasticsearch 8.x/9.x computes, including Lucene's float32
rounding where it changes the last digits, so the embedded engine's scores match a
cluster's to ~1e-6 relative.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument, unsupported

K1 = 1.2  # Elasticsearch default BM25 k1 (index-modules-similarity)
B = 0.75  # Elasticsearch default BM25 b


@dataclass(frozen=True)
class BM25Params:
    """k1 and b of one BM25 similarity (``index.similarity.<name>`` of type ``BM25``)."""

    k1: float = K1
    b: float = B


DEFAULT_BM25 = BM25Params()


def parse_similarities(settings: object) -> dict[str, BM25Params]:
    """``index.similarity`` -> name -> BM25 parameters, validated as Elasticsearch does.

    Sources: index-modules-similarity ("Configuring a similarity"; the name ``default``
    replaces the default similarity of every field without one); BM25SimilarityProvider and
    Lucene's BM25Similarity constructor for the checks and their messages. Only type ``BM25``
    is supported here (ES builds ``LegacyBM25Similarity(k1, b, discount_overlaps)`` from it);
    ``discount_overlaps: false`` changes field lengths and is refused.
    """
    if settings is None:
        return {}
    if not isinstance(settings, dict):
        raise illegal_argument(f"[index.similarity] must be an object, got [{settings!r}]")
    out: dict[str, BM25Params] = {}
    for name, spec in settings.items():
        if not isinstance(spec, dict):
            raise illegal_argument(f"[index.similarity.{name}] must be an object, got [{spec!r}]")
        kind = spec.get("type")
        if kind is None:
            raise illegal_argument(f"Similarity [{name}] must have an associated type")
        if kind != "BM25":
            raise unsupported(
                f"similarity type [{kind}]", "only type [BM25] with k1/b is; see docs/es-semantics.md"
            )
        for key in spec:
            if key not in ("type", "k1", "b", "discount_overlaps"):
                raise illegal_argument(f"Unknown settings for similarity of type [BM25]: [{key}]")
        if str(spec.get("discount_overlaps", True)).lower() != "true":
            raise unsupported("similarity [discount_overlaps: false]")
        k1, b = _setting_float(spec, "k1", K1), _setting_float(spec, "b", B)
        if not (math.isfinite(k1) and k1 >= 0):
            raise illegal_argument(f"illegal k1 value: {k1}, must be a non-negative finite value")
        if not (math.isfinite(b) and 0 <= b <= 1):
            raise illegal_argument(f"illegal b value: {b}, must be between 0 and 1")
        out[name] = BM25Params(k1, b)
    return out


def _setting_float(spec: dict, key: str, default: float) -> float:
    value = spec.get(key, default)
    try:
        return float(value)  # settings arrive as numbers or strings ("0.3")
    except (TypeError, ValueError, OverflowError):
        raise illegal_argument(f"Failed to parse value [{value}] for setting [{key}]") from None


@dataclass(frozen=True)
class FieldSimilarities:
    """The BM25 parameters of an index's fields: those whose mapping names a similarity, and the
    index default (``index.similarity.default``, else Elasticsearch's) for every other field,
    dynamically added ones included."""

    default: BM25Params = DEFAULT_BM25
    named: dict[str, BM25Params] = field(default_factory=dict)

    def get(self, field_name: str) -> BM25Params:
        return self.named.get(field_name, self.default)


def field_similarities(settings: object, mapped: dict[str, str]) -> FieldSimilarities:
    """``index.similarity`` settings + field -> similarity name (from the mapping), resolved."""
    custom = parse_similarities(settings)
    named = {f: _named_similarity(name, custom, f) for f, name in mapped.items()}
    return FieldSimilarities(default=custom.get("default", DEFAULT_BM25), named=named)


def _named_similarity(name: str, custom: dict[str, BM25Params], field_name: str) -> BM25Params:
    if name == "BM25":
        return DEFAULT_BM25
    if name in custom:
        return custom[name]
    if name == "boolean":
        raise unsupported("similarity [boolean]", f"on field [{field_name}]")
    raise EsError(
        400, "mapper_parsing_exception", f"Unknown Similarity type [{name}] for field [{field_name}]"
    )


# --- Lucene SmallFloat: the one-byte field-length norm -------------------------------
# Source: org.apache.lucene.util.SmallFloat#longToInt4/#int4ToLong/#intToByte4/#byte4ToInt.


def _long_to_int4(i: int) -> int:
    num_bits = i.bit_length()
    if num_bits < 4:
        return i  # subnormal
    shift = num_bits - 4
    encoded = (i >> shift) & 0x07  # keep 4 significant bits, drop the implicit top one
    return encoded | ((shift + 1) << 3)


def _int4_to_long(i: int) -> int:
    bits = i & 0x07
    shift = (i >> 3) - 1
    return bits if shift == -1 else (bits | 0x08) << shift


_MAX_INT4 = _long_to_int4(2**31 - 1)
_NUM_FREE_VALUES = 255 - _MAX_INT4  # lengths below this (24) are stored exactly


def int_to_byte4(i: int) -> int:
    """Encode a field length into Lucene's norm byte (as an unsigned 0..255 int)."""
    if i < 0:
        raise ValueError(f"field length must be >= 0, got {i}")
    if i < _NUM_FREE_VALUES:
        return i
    return _NUM_FREE_VALUES + _long_to_int4(i - _NUM_FREE_VALUES)


def byte4_to_int(b: int) -> int:
    """Decode a norm byte back to the (lossy) field length BM25 sees."""
    if b < _NUM_FREE_VALUES:
        return b
    return min(_NUM_FREE_VALUES + _int4_to_long(b - _NUM_FREE_VALUES), 2**31 - 1)


#: decoded length for every norm byte, as BM25Similarity.LENGTH_TABLE
LENGTH_TABLE = np.array([byte4_to_int(i) for i in range(256)], dtype=np.float32)
_ENCODE_SMALL = np.array([int_to_byte4(i) for i in range(4096)], dtype=np.uint8)


def encode_lengths(lengths: np.ndarray) -> np.ndarray:
    """Vectorized :func:`int_to_byte4` for an array of field lengths."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.empty(lengths.shape, dtype=np.uint8)
    small = lengths < len(_ENCODE_SMALL)
    out[small] = _ENCODE_SMALL[lengths[small]]
    for idx in np.flatnonzero(~small):
        out[idx] = int_to_byte4(int(lengths[idx]))
    return out


# --- BM25 --------------------------------------------------------------------------


def bm25_idf(doc_freq: int, doc_count: int) -> np.float32:
    """idf = ln(1 + (N - n + 0.5) / (n + 0.5)), N = docs that have the field.

    Source: org.apache.lucene.search.similarities.BM25Similarity#idf (computed in double,
    stored as float).
    """
    return np.float32(math.log(1.0 + (doc_count - doc_freq + 0.5) / (doc_freq + 0.5)))


def bm25_avgdl(sum_total_term_freq: int, doc_count: int) -> np.float32:
    """avgdl = sumTotalTermFreq / docCount (BM25Similarity#avgFieldLength), as float."""
    if doc_count <= 0:
        return np.float32(1.0)
    return np.float32(sum_total_term_freq / doc_count)


def bm25_norm_cache(avgdl: np.float32, k1: float = K1, b: float = B) -> np.ndarray:
    """1 / (k1 * ((1 - b) + b * dl / avgdl)) for every norm byte, in float32 (read-only: one
    array per (avgdl, k1, b), shared by every term of a field until its statistics change).

    Source: BM25Similarity#scorer, the ``cache`` array.
    """
    return _norm_cache(float(np.float32(avgdl)), float(k1), float(b))


@functools.lru_cache(maxsize=256)
def _norm_cache(avgdl: float, k1: float, b: float) -> np.ndarray:
    k1f, bf = np.float32(k1), np.float32(b)
    out = (np.float32(1.0) / (k1f * ((np.float32(1.0) - bf) + bf * LENGTH_TABLE / np.float32(avgdl)))).astype(
        np.float32
    )
    out.flags.writeable = False
    return out


def bm25_weight(boost: float, idf: np.float32, k1: float = K1) -> np.float32:
    """boost * (k1 + 1) * idf, in float32.

    Elasticsearch's default similarity is ``LegacyBM25Similarity``, which calls Lucene's
    BM25 with ``boost * (1 + k1)`` so scores keep their pre-Lucene-8 scale (its explain
    output shows ``boost 2.2``). Source: org.elasticsearch.lucene.similarity.LegacyBM25Similarity.
    """
    return np.float32(np.float32(boost) * np.float32(1.0 + k1)) * np.float32(idf)


def bm25_scores(weight: np.float32 | np.ndarray, freqs: np.ndarray, norm_inverse: np.ndarray) -> np.ndarray:
    """weight - weight / (1 + freq * normInverse), in float32 (BM25Scorer#score); ``weight`` one
    term's, or each posting's own (several terms' postings in one pass)."""
    w = np.asarray(weight, dtype=np.float32)
    out = freqs.astype(np.float32)  # the same float32 steps, in place: f * n, 1 + _, w / _, w - _
    np.multiply(out, norm_inverse, out=out)
    np.add(out, np.float32(1.0), out=out)
    np.divide(w, out, out=out)
    np.subtract(w, out, out=out)
    return out


def bm25_term_constants(
    boost: float, doc_freq: int, doc_count: int, sum_total_term_freq: int, k1: float, b: float
) -> tuple[np.float32, np.ndarray, np.float32, np.float32]:
    """(weight, norm cache, idf, avgdl) of one term's BM25 scorer: :func:`bm25_weight`,
    :func:`bm25_norm_cache`, :func:`bm25_idf` and :func:`bm25_avgdl` of its statistics, kept per
    distinct statistics (a pure function of its arguments; ~10 us of numpy scalar steps a term,
    which a query's terms on three fields paid ~30 times). Source: BM25Similarity#scorer."""
    # the boost's sign is part of the key: -0.0 == 0.0 would share an entry (a -0.0 weight)
    return _term_constants(boost, math.copysign(1.0, boost), doc_freq, doc_count, sum_total_term_freq, k1, b)


@functools.lru_cache(maxsize=4096)
def _term_constants(
    boost: float, _sign: float, doc_freq: int, doc_count: int, sum_total_term_freq: int, k1: float, b: float
) -> tuple[np.float32, np.ndarray, np.float32, np.float32]:
    idf = bm25_idf(doc_freq, doc_count)
    avgdl = bm25_avgdl(sum_total_term_freq, doc_count)
    return bm25_weight(boost, idf, k1), bm25_norm_cache(avgdl, k1, b), idf, avgdl


# --- kNN ---------------------------------------------------------------------------
# Source: Elasticsearch reference, dense_vector "similarity" parameter: the _score each
# similarity yields (DenseVectorFieldMapper.VectorSimilarity#score).


def knn_score(similarity: str, raw: np.ndarray) -> np.ndarray:
    """Turn a raw similarity (cosine, dot product, or squared L2 distance) into _score."""
    if similarity == "cosine" or similarity == "dot_product":
        return (1.0 + raw) / 2.0
    if similarity == "l2_norm":
        return 1.0 / (1.0 + raw)  # raw is the squared distance here
    if similarity == "max_inner_product":
        return np.where(raw < 0, 1.0 / (1.0 - raw), raw + 1.0)
    raise ValueError(f"unknown vector similarity {similarity!r}")


# --- rank fusion -------------------------------------------------------------------


def rrf_score(ranks: list[int], rank_constant: int = 60) -> float:
    """Reciprocal rank fusion: sum over result sets of 1 / (k + rank), rank 1-based.

    Source: Elasticsearch reference, "Reciprocal rank fusion" (rrf retriever).
    """
    return float(sum(1.0 / (rank_constant + r) for r in ranks))
