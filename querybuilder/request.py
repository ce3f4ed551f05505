"""One search as one object: :class:`SearchRequest`, the question and the options of one search.

The command line (``scholar-es search``/``query``), the Python API
(:func:`querybuilder.strategies.search`, ``scholar_es.search``) and the HTTP API
(``scholar-es serve``) each build one request and hand it to a strategy
(:mod:`querybuilder.registry`), which plans, builds and sends what it stands for. Nothing is
checked here: the strategy checks the question and the options it takes
(:meth:`querybuilder.registry.Strategy.check`), the plan checks the rest
(:func:`querybuilder.plan.plan_for`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SearchRequest:
    """One question and the options of one search (what ``search``/``query`` take)."""

    question: str
    profile: Any = None  # Profile, a built-in name, a JSON file, or None (default)
    size: int = 10
    #: hits (papers with ``papers``) to skip: the page starts there (Elasticsearch's ``from``;
    #: ``from_ + size`` at most index.max_result_window, 10000)
    from_: int = 0
    papers: bool = False
    filters: Any = None  # Filters, a dict, or None
    prefix: str = ""
    search_type: str | None = None
    embedder: Any = None  # indexer.embedder.Embedder or anything with .name and .encode
    heads: Any = None  # a projection Heads or the name of stored heads (strategies that need heads)
    explain: bool = False
    show_plan: bool = False
    crossencoder: Any = None
    #: "relevance" (score) or "year" (Elasticsearch sort on ``year``, newest first; see
    #: :data:`querybuilder.plan.SORTS`)
    sort: str = "relevance"

    @property
    def index(self) -> str:
        return f"{self.prefix}chunks"

    @classmethod
    def of(cls, question: str | SearchRequest, **options: Any) -> SearchRequest:
        """``question`` itself when it is a request (``options`` replace its fields), else a request
        for it with ``options`` (the fields above; an unknown one is a TypeError)."""
        if isinstance(question, SearchRequest):
            return dataclasses.replace(question, **options) if options else question
        return cls(question, **options)

    def replace(self, **changes: Any) -> SearchRequest:
        """A copy with ``changes``; the request itself is unchanged."""
        return dataclasses.replace(self, **changes)
