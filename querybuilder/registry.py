"""The strategy protocol and registry: every search strategy is ONE object, found by name.

A :class:`Strategy` says what it needs (:class:`Needs`: a query vector, trained heads, the
Elasticsearch license and version) and which per-strategy options it takes (``explain``,
``show_plan``, ``crossencoder``, ``heads``), and it does everything its name stands for, for one
:class:`~querybuilder.request.SearchRequest`:

* :meth:`Strategy.prepare` -- plan, embed, route: everything decided before searching, nothing sent;
* :meth:`Strategy.bodies` -- the request body (or the bodies of one ``_msearch``) it will send,
  built with ``elasticsearch.dsl`` (``scholar-es query --format json|console``);
* :meth:`Strategy.execute` / :meth:`Strategy.search` -- send it (through a runner,
  :mod:`querybuilder.run`) and shape the answer (``scholar-es search``,
  :func:`querybuilder.strategies.search` for Python);
* :meth:`Strategy.eval_searcher` -- the timed search ``scholar-es eval`` runs per judged query.

This module sits below every strategy: it imports the planning and rendering modules it uses
(:mod:`querybuilder.plan`, :mod:`querybuilder.render`), and none of those looks a strategy up.
Strategies register themselves when their module is imported; :data:`ENTRIES` names the module
of each strategy that ships with scholar-es, imported on first use: the query builder's own
(``bm25`` ... ``linear``: :mod:`querybuilder.strategies`, one
:class:`~querybuilder.plan.QueryPlan` each), ``direct``, ``multihead``, ``multihead-hybrid``
(``scholar_es.projection.search``), ``adapted-dense``, ``adapted-hybrid``
(``scholar_es.projection.adapted``) and ``multisection`` (``scholar_es.multisection.strategy``).
The model is elasticsearch-py's ``helpers.vectorstore`` retrieval strategies: one object per
strategy that knows its needs and builds its own request, which a runner sends. The commands,
the evaluation harness and the Python API look strategies up here and nowhere else: error
messages list :func:`names`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from querybuilder.plan import clean_question
from querybuilder.render import format_results
from querybuilder.request import SearchRequest
from querybuilder.results import SearchResult
from scholar_es.errors import ConfigError, choices

License = Literal["basic", "enterprise"]

#: options that apply to some strategies only: keyword -> command-line flag
OPTIONS: dict[str, str] = {
    "explain": "--explain",
    "show_plan": "--show-plan",
    "crossencoder": "--crossencoder",
    "heads": "--heads",
}

#: ``(question, filters) -> (hits, seconds)``: one timed search of the evaluation harness (hits are
#: dicts with ``chunk_id``, ``paper_id`` and optionally ``paragraph_ids``)
SearchFn = Callable[[str, "dict | None"], "tuple[list[dict], float]"]


@dataclass(frozen=True)
class Needs:
    """What a strategy needs from the caller and the cluster."""

    vector: bool  # the question's embedding
    heads: bool = False  # heads trained with `scholar-es heads train`
    adapter: bool = False  # the index's adapter (`scholar-es heads train --self-supervised`)
    license: License = "basic"
    min_version: str = "8.15"  # the oldest Elasticsearch that runs it
    note: str = ""  # where the version comes from

    def describe(self) -> str:
        version = f"{self.min_version}+" + (f" ({self.note})" if self.note else "")
        return f"{version}, {self.license.capitalize()} license"


@dataclass
class Prepared:
    """Everything a strategy decided for one request before searching (``state`` is its own)."""

    strategy: Strategy
    request: SearchRequest
    state: Any

    def bodies(self) -> dict | list[dict]:
        return self.strategy.bodies(self)


@dataclass
class EvalContext:
    """What the evaluation harness gives a strategy to build its per-query search."""

    es: Any
    profile: Any  # the evaluation profile (per-paper cap off)
    prefix: str
    vectors: dict  # cleaned question -> its embedding (every judged question, embedded once)
    embedder: Any = None
    heads: Any = None
    size: int = 100
    fields: tuple[str, ...] = ("chunk_id", "paper_id", "paragraph_ids")


def check_question(question: str) -> None:
    """Refuse an empty or whitespace-only question (it would rank arbitrary chunks)."""
    if not clean_question(question)[0]:
        raise ConfigError(
            f"the question {question!r} is empty; give the words to search for, e.g. "
            '"How is the named entity tagger trained?"'
        )


@dataclass(frozen=True, kw_only=True)
class Strategy:
    """One search strategy (see the module doc). Subclasses implement prepare/bodies/execute."""

    name: str
    description: str
    needs: Needs
    #: per-strategy options (keys of OPTIONS) this strategy takes
    takes: frozenset[str] = frozenset({"explain"})
    #: ``scholar-es query --format template`` can store it as a mustache search template
    templates: bool = False
    #: it sorts by ``year`` (``sort``); refused to the others by name (``from`` pages every strategy
    #: that ranks hits: :func:`querybuilder.results.page_of`; multisection refuses it itself)
    year_sort: bool = False

    # --- options ------------------------------------------------------------------------------
    def check_options(self, **given: Any) -> None:
        """ConfigError for an option given (not None, False or "") that this strategy does not take."""
        for key, value in given.items():
            if key not in OPTIONS:
                raise ConfigError(f"unknown option {key!r}; valid options: {choices(OPTIONS)}")
            given_here = (
                value is not None and value is not False and not (isinstance(value, str) and not value)
            )
            if given_here and key not in self.takes:
                takers = [s.name for s in all_strategies() if key in s.takes]
                raise ConfigError(
                    f"{OPTIONS[key]} applies only to the strategies {', '.join(takers)}, not to "
                    f"{self.name!r}; leave it out or pick one of those"
                )

    def check_paging(self, request: SearchRequest) -> None:
        """ConfigError for ``sort: year`` given to a strategy that does not do it."""
        if request.sort != "relevance" and not self.year_sort:
            takers = [s.name for s in all_strategies() if s.year_sort]
            raise ConfigError(
                f"sort {request.sort!r} applies only to the strategies {', '.join(takers)}, not to "
                f"{self.name!r}; leave it out or pick one of those"
            )
        if request.sort == "year" and request.explain:
            # explain applies the per-paper cap client-side over a fetched window of chunks, which
            # sorted by year holds the chunks of the first few papers only: fewer papers would come back
            raise ConfigError(
                "explain takes apart the score that ranks the hits; with sort 'year' the year ranks them: "
                "leave explain out, or sort by relevance"
            )

    def check(self, request: SearchRequest) -> None:
        """The request's question and per-strategy options, before anything is embedded or sent."""
        check_question(request.question)
        self.check_paging(request)
        self.check_options(
            explain=request.explain,
            show_plan=request.show_plan,
            crossencoder=request.crossencoder,
            heads=request.heads,
        )

    # --- what subclasses do -------------------------------------------------------------------
    def prepare(self, es, request: SearchRequest) -> Prepared:  # pragma: no cover - abstract
        """Plan, embed, route (``es`` may be None where the strategy can do without a target)."""
        raise NotImplementedError

    def bodies(self, prepared: Prepared) -> dict | list[dict]:  # pragma: no cover - abstract
        """The body it sends, or a list of bodies (the items of one ``_msearch``)."""
        raise NotImplementedError

    def execute(self, es, prepared: Prepared) -> Any:  # pragma: no cover - abstract
        """Send the prepared request(s); the strategy's own result object."""
        raise NotImplementedError

    def eval_searcher(self, ctx: EvalContext) -> SearchFn:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_format(self, fmt: str) -> None:
        """ConfigError for ``--format template`` where the strategy has no stored template."""
        if fmt == "template" and not self.templates:
            takers = [s.name for s in all_strategies() if s.templates]
            raise ConfigError(
                f"--format template applies only to the strategies {', '.join(takers)}, not to "
                f"{self.name!r}; use --format json or console"
            )

    def template(self, prepared: Prepared) -> str:
        """Console text of a stored mustache search template (strategies with ``templates``)."""
        self.check_format("template")
        raise NotImplementedError  # pragma: no cover - a strategy with templates implements this

    # --- results --------------------------------------------------------------------------------
    def result(self, native: Any, request: SearchRequest) -> SearchResult:
        """The strategy's result as a :class:`~querybuilder.results.SearchResult`."""
        return native

    def render(self, native: Any, request: SearchRequest) -> str:
        """What ``scholar-es search`` prints."""
        return format_results(self.result(native, request), explain=request.explain)

    def as_dict(self, native: Any, request: SearchRequest) -> dict:
        """What ``scholar-es search --json`` prints."""
        return self.result(native, request).model_dump(mode="json")

    def search(self, es, request: SearchRequest) -> SearchResult:
        self.check(request)
        return self.result(self.execute(es, self.prepare(es, request)), request)


#: the module of the query builder's own strategies (one QueryPlan each)
BUILDER_MODULE = "querybuilder.strategies"
#: the strategies that ship with scholar-es: name -> the module that registers it on import, the
#: query builder's own first, in the order --help and the README list them
ENTRIES: dict[str, str] = {
    **dict.fromkeys(
        ("bm25", "dense", "hybrid", "sections", "expanded", "rrf", "rrf-client", "linear"), BUILDER_MODULE
    ),
    "direct": "scholar_es.projection.search",
    "multihead": "scholar_es.projection.search",
    "multihead-hybrid": "scholar_es.projection.search",
    "adapted-dense": "scholar_es.projection.adapted",
    "adapted-hybrid": "scholar_es.projection.adapted",
    "multisection": "scholar_es.multisection.strategy",
}
_REGISTERED: dict[str, Strategy] = {}


_S = TypeVar("_S", bound="Strategy")


def register(strategy: _S, *, builtin: bool = False) -> _S:
    """Add ``strategy`` to the registry (modules call this at import; registering again replaces).

    ``builtin``: one of the query builder's own (:data:`BUILDER_MODULE` registers those); their
    names are refused to any other."""
    if not isinstance(strategy, Strategy):
        raise ConfigError(
            f"a strategy must be a querybuilder.registry.Strategy, got {type(strategy).__name__}"
        )
    if not builtin and ENTRIES.get(strategy.name) == BUILDER_MODULE:
        raise ConfigError(f"strategy {strategy.name!r} is one of the query builder's own; pick another name")
    _REGISTERED[strategy.name] = strategy
    return strategy


def names() -> list[str]:
    """Every strategy's name: the query builder's, the other bundled entries, then any registered later."""
    return list(dict.fromkeys([*ENTRIES, *_REGISTERED]))


def get(name: str) -> Strategy:
    """The strategy called ``name``; ConfigError listing :func:`names` for any other."""
    if not isinstance(name, str):
        raise ConfigError(f"the strategy must be a name, got {type(name).__name__}")
    if name not in _REGISTERED and name in ENTRIES:
        importlib.import_module(ENTRIES[name])
    if name not in _REGISTERED:
        raise ConfigError(f"unknown strategy {name!r}; valid strategies: {choices(names())}")
    return _REGISTERED[name]


def all_strategies() -> list[Strategy]:
    return [get(n) for n in names()]


__all__ = [
    "BUILDER_MODULE",
    "ENTRIES",
    "OPTIONS",
    "EvalContext",
    "Needs",
    "Prepared",
    "SearchFn",
    "SearchRequest",
    "Strategy",
    "all_strategies",
    "check_question",
    "get",
    "names",
    "register",
]
