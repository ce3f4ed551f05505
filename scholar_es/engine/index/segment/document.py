"""A document as the segment takes it: ``_source`` analyzed and validated into per-field values.

:func:`parse_document` is the mapper (Elasticsearch's ``DocumentParser``): text fields become
token lists, keywords normalized values, numbers floats, dense vectors float32 arrays, each kept
in the :class:`ParsedDoc` attribute named after the column kind that takes it
(:mod:`engine.index.segment.columns`); mapper errors raise here, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.errors import EsError
from scholar_es.engine.index.mapping import KEYWORD, TEXT, VECTOR, FieldSpec, Mapping, keyword_normalizer


@dataclass
class ParsedDoc:
    """A document turned into per-field values, ready to be appended to a segment."""

    seq: int
    id: str
    text: dict[str, list[str]] = field(default_factory=dict)  # field -> tokens
    keyword: dict[str, list[str]] = field(default_factory=dict)
    numeric: dict[str, list[float]] = field(default_factory=dict)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)


def parse_document(
    mapping: Mapping,
    analysis: dict | None,
    seq: int,
    doc_id: str,
    source: dict,
    vectors: dict[str, np.ndarray] | None = None,
) -> ParsedDoc:
    """Analyze and validate one ``_source`` against the mapping (mapper errors raise)."""
    doc = ParsedDoc(seq=seq, id=doc_id)
    for name, values in mapping.flatten(source).items():
        fs = mapping.fields[name]
        if fs.type == TEXT:
            if fs.index and values:  # present even with no tokens ("" or stop words): Lucene writes norm 0
                analyzer = get_analyzer(fs.analyzer, analysis)
                tokens: list[str] = []
                for v in values:
                    tokens.extend(analyzer(v))
                doc.text[name] = tokens
        elif fs.type == KEYWORD:
            # ignore_above looks at the value as given, the normalizer runs after (KeywordFieldMapper)
            kept = [v for v in values if fs.ignore_above is None or len(v) <= fs.ignore_above]
            normalize = keyword_normalizer(fs, analysis)
            if normalize is not None:
                kept = [normalize(v) for v in kept]
            if kept:
                doc.keyword[name] = kept
        elif fs.type == VECTOR:
            doc.vectors[name] = _vector_value(fs, values[0])
        elif values:
            doc.numeric[name] = [float(v) for v in values]
    for name, vec in (vectors or {}).items():  # vectors excluded from _source live beside it
        spec = mapping.get(name)
        if spec is not None and spec.type == VECTOR and name not in doc.vectors:
            doc.vectors[name] = _vector_value(spec, vec)
    return doc


def _vector_value(fs: FieldSpec, value) -> np.ndarray:
    """One dense_vector value as float32, checked as DenseVectorFieldMapper checks it."""
    try:
        vec = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError):
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: not an array of numbers",
        ) from None
    if vec.ndim != 1:
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: expected a flat array of numbers",
        )
    if fs.dims is not None and vec.shape[0] != fs.dims:
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: "
            f"The [dense_vector] field [{fs.name}] in doc [document with id] has a different number of "
            f"dimensions [{vec.shape[0]}] than defined in the mapping [{fs.dims}]",
        )
    if not np.all(np.isfinite(vec)):
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: vector contains NaN or Infinity",
        )
    if fs.similarity == "cosine" and not np.any(vec):
        raise EsError(
            400,
            "document_parsing_exception",
            f"[1:1] failed to parse field [{fs.name}] of type [dense_vector]: "
            "The [cosine] similarity does not support vectors with zero magnitude.",
        )
    return vec
