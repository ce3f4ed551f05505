"""A question turned into a :class:`QueryPlan`: everything the DSL builder needs, decided once.

:func:`plan_for` is pure: a :class:`~querybuilder.request.SearchRequest` (question, profile,
filters, sizes) + a strategy -> a frozen plan (intent, search type, field boosts, section multipliers, expansions, filters, sizes). The
plan does not hold the query vector; the strategy's ``build`` takes it
(:meth:`querybuilder.strategies.PlanStrategy.searches`).

Question text. Any string is a valid question. :func:`clean_question` replaces what JSON or
UTF-8 cannot carry (lone surrogates) and control characters with spaces and collapses
whitespace. The vector is made from the whole cleaned question (the embedding model reads up
to its own ``max_seq_length`` tokens; a longer question is noted, :func:`querybuilder.run.embed_noted`).
The text query is bounded by Elasticsearch's clause limit: Lucene counts one clause per term
and field, and Elasticsearch 8+ sizes the limit from heap and thread pool with a floor of
:data:`MAX_CLAUSES` (``indices.query.bool.max_clause_count``, deprecated in 8.0, fixes it no
more), so :func:`bound_text` keeps the first terms that fit that floor over the query's fields
(and drops expansions that would not fit); the plan's ``notes`` say when and how the text
was shortened. The profile's
``drop_question_words`` (default on) then leaves the question words out of the text query
(:func:`querybuilder.intent.content_text`); the intent is read, and the vector embedded, from
the whole question. The text only ever goes into
the ``query`` string of ``match``/``multi_match`` queries, never ``query_string``, so
Lucene syntax such as ``title:(a OR b)~2`` is just words. A question without any letter or
digit (empty, punctuation, emoji) has no text part: the text query is ``match_none`` (the
``bm25`` strategy then returns no hits, ``hybrid`` returns the kNN neighbours alone; the
search entry points -- ``scholar-es search``/``query``, ``querybuilder.strategies.search`` -- refuse an
empty or whitespace-only question instead, :func:`querybuilder.registry.check_question`). An
all-stop-word question ("what is the") does have text, which the english analyzer turns into
no terms: Elasticsearch's ``zero_terms_query: none`` makes it match nothing, with the same
effect.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from indexer.models import SECTION_TYPES
from querybuilder.expansion import Synonyms, expand
from querybuilder.intent import Intent, IntentTerms, analyze, content_text, words
from querybuilder.profiles import SEARCH_TYPES, Profile, load_profile
from querybuilder.request import SearchRequest
from scholar_es.errors import ConfigError, choices

#: the clause limit the text query stays within: Elasticsearch 8+'s floor of the
#: dynamically sized ``indices.query.bool.max_clause_count`` (reference/modules/indices/search-settings)
MAX_CLAUSES = 1024
#: clauses left for what is not the question's text (filters, section multipliers, knn)
RESERVED_CLAUSES = 64
MAX_RESULT_WINDOW = 10_000  # Elasticsearch's index.max_result_window default
#: the orders a search can return: by score, or newest first (an Elasticsearch ``sort`` on ``year``,
#: papers without a year last, score breaking ties; for the strategies whose ``year_sort`` is set)
SORTS = ("relevance", "year")


class PlanShape(Protocol):
    """What planning needs to know of a strategy (a :class:`querybuilder.strategies.PlanStrategy`)."""

    @property
    def name(self) -> str: ...

    @property
    def uses_text(self) -> bool: ...

    @property
    def sections(self) -> bool: ...  # applies the intent's section multipliers

    @property
    def expansion(self) -> bool: ...  # always expands (otherwise: when the profile says so)

    @property
    def collapse(self) -> bool: ...  # per-paper cap by collapse in Elasticsearch


#: the old names of the year filters (the search API's before issue 27), still read
FILTER_ALIASES = {"year_min": "year_from", "year_max": "year_to"}
#: filters that hold several values; a single string is one value
_MANY = ("venues", "paper_ids", "section_types")


class Filters(BaseModel):
    """Restrictions applied as ``bool.filter`` and inside every knn clause's own ``filter`` (the
    only place Elasticsearch pre-filters a kNN search).

    One model, one set of names for the command line (``--year-from``, ``--year-to``,
    ``--venue``, ``--paper-id``, ``--section``, the last three repeatable), the Python API
    (``filters={...}``) and the search API (``"filters": {...}``): ``year_from``, ``year_to``
    (inclusive), ``venues``, ``paper_ids``, ``section_types``. ``year_min``/``year_max`` are
    read as ``year_from``/``year_to`` (their old names); giving both names of one filter, or a
    name not listed here, is refused with the valid names."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    year_from: int | None = Field(default=None, description="Only papers from this year on (inclusive).")
    year_to: int | None = Field(default=None, description="Only papers up to this year (inclusive).")
    venues: tuple[str, ...] = Field(default=(), description="Only papers of these venues.")
    paper_ids: tuple[str, ...] = Field(default=(), description="Only chunks of these papers.")
    section_types: tuple[str, ...] = Field(default=(), description="Only chunks of these section types.")

    @model_validator(mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        """The old names read as the new ones; an unknown name, or two names of one filter, refused."""
        if not isinstance(value, dict):
            return value
        out: dict[str, Any] = {}
        given: dict[str, str] = {}  # field -> the key that gave it
        for key, v in value.items():
            name = FILTER_ALIASES.get(key, key)
            if name not in cls.model_fields:
                raise ConfigError(f"unknown filter {key!r}; {valid_filters()}")
            if name in out:
                raise ConfigError(f"filters {given[name]!r} and {key!r} name one filter; give one of them")
            out[name], given[name] = ((v,) if name in _MANY and isinstance(v, str) else v), key
        return out

    @field_validator("section_types")
    @classmethod
    def _sections(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for s in v:
            if s not in SECTION_TYPES:
                raise ConfigError(
                    f"unknown section type {s!r} in filters; valid section types: {choices(SECTION_TYPES)}"
                )
        return v

    @model_validator(mode="after")
    def _years(self) -> Filters:
        if self.year_from is not None and self.year_to is not None and self.year_from > self.year_to:
            raise ConfigError(
                f"year range {self.year_from}-{self.year_to} is empty; the first year must not "
                "be after the last"
            )
        return self

    @classmethod
    def parse(cls, value: Filters | dict | None) -> Filters:
        """Filters from a dict (keys as the fields, or their old names) or ``None``; errors become
        ConfigError."""
        if value is None:
            return cls()
        if isinstance(value, Filters):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"filters must be a dict, got {type(value).__name__}")
        data = {
            k: tuple(v) if FILTER_ALIASES.get(k, k) in _MANY and isinstance(v, (list, tuple)) else v
            for k, v in value.items()
            if v is not None
        }
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            raise ConfigError(
                f"filter {'.'.join(map(str, err['loc']))} = {err.get('input')!r}: {err['msg']}"
            ) from None

    def is_empty(self) -> bool:
        return self == Filters()


def result_window_error(start: int, size: int) -> str:
    """Elasticsearch's message for a page past index.max_result_window."""
    return (
        f"Result window is too large, from + size must be less than or equal to: [{MAX_RESULT_WINDOW}] but "
        f"was [{start + size}]. See the scroll api for a more efficient way to request large data sets. This "
        "limit can be set by changing the [index.max_result_window] index level setting."
    )


def valid_filters() -> str:
    """The filters' names, for an error message."""
    return f"valid filters: {choices(Filters.model_fields)} (year_min/year_max are read as year_from/year_to)"


class QueryPlan(BaseModel):
    """Everything a strategy's ``build`` needs except the query vector."""

    model_config = ConfigDict(frozen=True)
    question: str  # the cleaned question (what gets embedded)
    text: str  # the text of the text query, question words left out ("" = none: match_none)
    intent: Intent
    strategy: str
    search_type: str
    field_boosts: dict[str, float]
    match_type: str = "best_fields"  # multi_match type of the text query (see text_fields)
    section_multipliers: dict[str, float]  # empty unless the strategy applies them
    #: hybrid's text part, bm25_weight * s / (s + saturation_k): the profile's, or inside one
    #: paper its paper_scope_* ones (see hybrid_weights)
    bm25_weight: float = 1.0
    saturation_k: float = 10.0
    #: the recall formula's weights (hybrid's first rescore phase, corpus-wide); None inside one
    #: paper, where the window is the paper and one rescore by the main formula orders it
    recall_weights: tuple[float, float] | None = None
    expansions: tuple[str, ...]
    filters: Filters
    size: int = Field(ge=1, le=MAX_RESULT_WINDOW)
    cap: int = Field(ge=0)  # most chunks per paper; 0 = no cap
    papers: bool = False  # paper-level view: top `size` papers, each with its best chunks
    collapse: bool = True  # cap by collapse in Elasticsearch (False: fetch more, cap client-side)
    sort: str = "relevance"  # one of SORTS
    index: str = "chunks"
    profile: Profile
    #: what the user should know of how the question was used (a shortened text query, a
    #: question longer than the embedding model reads); SearchResult.notes
    notes: tuple[str, ...] = ()

    @property
    def has_text(self) -> bool:
        return bool(self.text)

    @property
    def fetch_size(self) -> int:
        """Hits to request: ``size``, or size x cap when the cap is applied client-side."""
        if self.collapse or self.cap == 0:
            return self.size
        return min(self.size * self.cap, MAX_RESULT_WINDOW)

    @property
    def knn_k(self) -> int:
        return min(max(self.profile.knn_k, self.fetch_size), MAX_RESULT_WINDOW)

    @property
    def num_candidates(self) -> int:
        return min(max(self.profile.num_candidates, self.knn_k), MAX_RESULT_WINDOW)

    @property
    def rank_window_size(self) -> int:
        return min(max(self.profile.rank_window_size, self.fetch_size), MAX_RESULT_WINDOW)

    def with_changes(self, **changes: Any) -> QueryPlan:
        """A copy with ``changes`` (validated); the plan itself is unchanged."""
        return QueryPlan(**{**dict(self), **changes})


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_question(question: str) -> tuple[str, str]:
    """(cleaned question, text for the text query) -- see the module doc."""
    if not isinstance(question, str):
        raise ConfigError(f"the question must be a string, got {type(question).__name__}")
    q = _SURROGATE.sub(" ", question)
    q = "".join(" " if unicodedata.category(c) in ("Cc", "Cs") else c for c in q)
    q = " ".join(q.split())
    text = q
    if not words(text):
        text = ""
    return q, text


#: scripts whose every character the standard tokenizer makes a term of its own (Han, kana)
_IDEOGRAPH = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_TERM = re.compile(f"[{_IDEOGRAPH}]|[^{_IDEOGRAPH}]+")


def term_count(text: str) -> int:
    """An upper bound of the terms the index's analyzer makes of ``text``: one per word (runs of
    letters and digits; apostrophes and hyphens split, which can only over-count), one per
    ideograph or kana (the standard tokenizer's UAX#29 rule)."""
    return sum(len(_TERM.findall(w)) for w in words(text))


def _prefix_within(text: str, budget: int) -> str:
    """The longest prefix of ``text`` (whole whitespace-separated pieces where possible) with at
    most ``budget`` terms."""
    kept, used = [], 0
    for piece in text.split(" "):
        n = term_count(piece)
        if used + n <= budget:
            kept.append(piece)
            used += n
            continue
        lo, hi = 0, len(piece)  # the longest prefix of the piece that still fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if used + term_count(piece[:mid]) <= budget else (lo, mid - 1)
        if lo:
            kept.append(piece[:lo])
        break
    return " ".join(kept)


def bound_text(
    text: str, fields: int, expansions: tuple[str, ...] = ()
) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """(text, expansions, notes): the text query within :data:`MAX_CLAUSES` clauses over
    ``fields`` fields -- its first terms, then the expansions that still fit -- and what was
    left out, in words."""
    budget = max((MAX_CLAUSES - RESERVED_CLAUSES) // max(fields, 1), 1)
    notes = []
    total = term_count(text)
    if total > budget:
        text = _prefix_within(text, budget)
        notes.append(
            f"the text query keeps the first {term_count(text)} of the question's {total} terms "
            f"({fields} fields x terms within Elasticsearch's limit of {MAX_CLAUSES} query clauses), "
            f"up to {text.split(' ')[-1]!r}; the vector is made from the whole question"
        )
    used, kept = term_count(text), []
    for e in expansions:
        if used + term_count(e) <= budget:
            kept.append(e)
            used += term_count(e)
    if len(kept) < len(expansions):
        notes.append(
            f"{len(expansions) - len(kept)} of {len(expansions)} synonym expansions left out to stay "
            f"within Elasticsearch's limit of {MAX_CLAUSES} query clauses"
        )
    return text, tuple(kept), tuple(notes)


def choose_search_type(intent: Intent, text: str, configured: str = "auto") -> str:
    """The profile's search type, or for ``auto``: survey for overview questions, section for
    questions with a form or with method/evaluation terms, keyword for short keyword queries (at
    most 4 words, no question form), balanced otherwise."""
    if configured != "auto":
        return configured
    if intent.survey:
        return "survey"
    if intent.form != "other" or intent.intents & {"method", "evaluation"}:
        return "section"
    return "keyword" if len(words(text)) <= 4 else "balanced"


def text_fields(profile: Profile, search_type: str, filters: Filters) -> tuple[dict[str, float], str]:
    """(field boosts, multi_match type) of the text query.

    Across papers: the search type's boosts, ``best_fields`` (the best field counts, the others
    add ``tie_breaker`` times their score). Inside one paper (a single ``paper_ids`` filter):
    the profile's ``paper_scope_boosts``, ``most_fields`` (scores add up). Every chunk of a
    paper carries the same title and abstract, so inside one paper those fields rank nothing
    and, as the best field, would flatten the chunks' differences; the heading takes their
    place and adds to the paragraph's own text (measured on QASPER, docs/evaluation.md).
    """
    if len(filters.paper_ids) == 1:
        return dict(profile.paper_scope_boosts), "most_fields"
    return dict(profile.field_boosts[search_type]), "best_fields"


def section_multipliers(profile: Profile, filters: Filters) -> dict[str, dict[str, float]]:
    """The profile's section multipliers for a search: inside one paper (a single ``paper_ids``
    filter, as in :func:`text_fields`) ``paper_scope_section_multipliers``, else
    ``section_multipliers``."""
    if len(filters.paper_ids) == 1:
        return profile.paper_scope_section_multipliers
    return profile.section_multipliers


def hybrid_weights(profile: Profile, filters: Filters) -> tuple[float, float]:
    """(bm25_weight, saturation_k) of a search: inside one paper (a single ``paper_ids`` filter)
    the profile's ``paper_scope_*`` ones, else ``bm25_weight`` and ``saturation_k``."""
    if len(filters.paper_ids) == 1:
        return profile.paper_scope_bm25_weight, profile.paper_scope_saturation_k
    return profile.bm25_weight, profile.saturation_k


def recall_weights(profile: Profile, filters: Filters) -> tuple[float, float] | None:
    """(recall_bm25_weight, recall_saturation_k) of a corpus-wide search; None inside one paper (a
    single ``paper_ids`` filter), where one rescore by the main formula orders the paper."""
    if len(filters.paper_ids) == 1:
        return None
    return profile.recall_bm25_weight, profile.recall_saturation_k


def per_paper_cap(profile: Profile, filters: Filters) -> int:
    """Most chunks a paper may give: the profile's ``per_paper_cap`` when several papers can
    answer; none (0) inside one paper (a single ``paper_ids`` filter), where a search returns
    ``size`` chunks of that paper."""
    return 0 if len(filters.paper_ids) == 1 else profile.per_paper_cap


def plan_for(
    request: SearchRequest,
    strategy: PlanShape,
    *,
    intents: IntentTerms | None = None,
    synonyms: Synonyms | None = None,
) -> QueryPlan:
    """The plan of ``strategy`` for ``request`` (pure; raises ConfigError for bad options, never for
    the text). By a strategy's name: :func:`querybuilder.strategies.make_plan`."""
    profile, size, search_type = request.profile, request.size, request.search_type
    prof = profile if isinstance(profile, Profile) else load_profile(profile)
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_RESULT_WINDOW:
        raise ConfigError(f"size must be an integer from 1 to {MAX_RESULT_WINDOW}, got {size!r}")
    start = request.from_
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ConfigError(f"from must be an integer of at least 0, got {start!r}")
    if start + size > MAX_RESULT_WINDOW:
        raise ConfigError(result_window_error(start, size))
    if request.sort not in SORTS:
        raise ConfigError(f"unknown sort {request.sort!r}; valid sorts: {choices(SORTS)}")
    if search_type is not None and search_type not in SEARCH_TYPES:
        raise ConfigError(f"unknown search type {search_type!r}; valid search types: {choices(SEARCH_TYPES)}")
    cleaned, text = clean_question(request.question)
    intent = analyze(text, intents)
    stype = search_type or choose_search_type(intent, text, prof.search_type)
    if text and prof.drop_question_words:
        text = content_text(text, intents)
    expand_now = strategy.uses_text and bool(text) and (strategy.expansion or prof.expansion)
    parsed = Filters.parse(request.filters)
    boosts, match_type = text_fields(prof, stype, parsed)
    bm25_weight, saturation_k = hybrid_weights(prof, parsed)
    cap = per_paper_cap(prof, parsed)
    text, _, notes = bound_text(text, len(boosts))
    expansions = expand(text, synonyms) if expand_now else ()
    text, expansions, more = bound_text(text, len(boosts), expansions)
    return QueryPlan(
        question=cleaned,
        text=text,
        intent=intent,
        strategy=strategy.name,
        search_type=stype,
        field_boosts=boosts,
        match_type=match_type,
        bm25_weight=bm25_weight,
        saturation_k=saturation_k,
        recall_weights=recall_weights(prof, parsed),
        section_multipliers=dict(section_multipliers(prof, parsed)[intent.rule]) if strategy.sections else {},
        expansions=expansions,
        notes=notes + more if strategy.uses_text else (),
        filters=parsed,
        size=start + size,  # the hits before the page are ranked too, then left out (results.page_of)
        cap=cap,
        papers=request.papers,
        collapse=strategy.collapse and cap > 0,
        sort=request.sort,
        index=request.index,
        profile=prof,
    )
