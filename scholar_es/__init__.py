"""scholar-es: scientific-literature search inside Elasticsearch, or in its embedded engine.

The public API, re-exported here (each name lives in the module of its stage)::

    import scholar_es

    es = scholar_es.connect("./.scholar-es")        # a directory (embedded engine) or an http(s):// URL
    run = scholar_es.IndexRun(es, scholar_es.Embedder())
    summary = run.run(["papers.jsonl"])
    result = scholar_es.search(es, "How do they train the tagger?", strategy="hybrid")
    for hit in result.hits:
        print(hit.score, hit.paper_id, hit.section_type, hit.snippet)

The names are loaded on first use (PEP 562), so ``import scholar_es.engine`` and the command line
do not pay for the whole API's imports.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:
    __version__ = version("scholar-es")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"

# public name -> the module that defines it
_EXPORTS = {
    "connect": "scholar_es.client",
    "Embedder": "indexer.embedder",
    "IndexRun": "indexer.pipeline",
    "IndexSummary": "indexer.pipeline",
    "search": "querybuilder.strategies",
    "SearchRequest": "querybuilder.request",
    "SearchResult": "querybuilder.results",
    "Hit": "querybuilder.results",
    "PaperHit": "querybuilder.results",
    "ScoreParts": "querybuilder.results",
    "Filters": "querybuilder.plan",
    "Profile": "querybuilder.profiles",
    "multisection_search": "scholar_es.multisection.flow",
    "MultiSectionResult": "scholar_es.multisection.flow",
    "PaperResult": "scholar_es.multisection.aggregate",
    "SupportingChunk": "scholar_es.multisection.aggregate",
    "ScholarEsError": "scholar_es.errors",
    "ConfigError": "scholar_es.errors",
    "InputError": "scholar_es.errors",
    "ModelMismatchError": "scholar_es.errors",
}

__all__ = [
    "__version__",
    "connect",
    "Embedder",
    "IndexRun",
    "IndexSummary",
    "search",
    "SearchRequest",
    "SearchResult",
    "Hit",
    "PaperHit",
    "ScoreParts",
    "Filters",
    "Profile",
    "multisection_search",
    "MultiSectionResult",
    "PaperResult",
    "SupportingChunk",
    "ScholarEsError",
    "ConfigError",
    "InputError",
    "ModelMismatchError",
]

if TYPE_CHECKING:
    from indexer.embedder import Embedder
    from indexer.pipeline import IndexRun, IndexSummary
    from querybuilder.plan import Filters
    from querybuilder.profiles import Profile
    from querybuilder.request import SearchRequest
    from querybuilder.results import Hit, PaperHit, ScoreParts, SearchResult
    from querybuilder.strategies import search
    from scholar_es.client import connect
    from scholar_es.errors import ConfigError, InputError, ModelMismatchError, ScholarEsError
    from scholar_es.multisection.aggregate import PaperResult, SupportingChunk
    from scholar_es.multisection.flow import MultiSectionResult, multisection_search


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'scholar_es' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
