"""What a question asks for: its form (what/how/which/why/other) and its intent terms.

The word lists live in ``intents.json`` beside this module (one data file; see its
``description`` for the matching rules). Users extend them there or pass their own file to
:func:`load_intents`, whose terms are added to the built-in ones. Everything here is pure and
deterministic: the same question and term file always give the same :class:`Intent`.

The same file lists the question words (*what*, *do*, *authors*, ...) that
:func:`content_text` leaves out of the text query.

The intent decides which section-multiplier rule applies (the strengths live in the profile,
see :mod:`querybuilder.profiles`). Rules are tried in this order, the first that holds wins:

``evaluation``      evaluation terms, whatever the form ("What evaluation benchmarks...",
                    "How is it evaluated?", "Which datasets...")
``how``             a How question
``what_method``     a What question with method terms
``which_overview``  a Which question with overview terms
``default``         anything else

Quantity questions ("How many ...", "How much ...", also "By how much ...") are evaluation
questions: "how many" and "how much" are evaluation terms, so they take the ``evaluation`` rule
rather than ``how`` (their QASPER train evidence is in results paragraphs twice as often as the
average question's and in introductions a quarter as often; docs/evaluation.md).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from scholar_es.datafiles import read_json
from scholar_es.errors import ConfigError, choices

DEFAULT_INTENTS_PATH = Path(__file__).with_name("intents.json")
FORMS = ("what", "how", "which", "why", "other")
INTENTS = ("method", "evaluation", "overview")
RULES = ("evaluation", "how", "what_method", "which_overview", "default")
_WORD = re.compile(r"[^\W_]+")
#: a word of the text query: letters/digits, hyphen- or apostrophe-joined parts kept together
#: ("state-of-the-art", "don't") so that only whole question words are left out
_QUERY_WORD = re.compile(r"[^\W_]+(?:['\u2019-][^\W_]+)*")


def words(text: str) -> list[str]:
    """Lower-cased words (runs of letters and digits, NFKC-normalized) of ``text``."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).casefold())


class Term(BaseModel):
    """One intent term compiled: its words, the last one a prefix when the term ended in '*'."""

    model_config = ConfigDict(frozen=True)
    text: str
    words: tuple[str, ...]
    prefix: bool

    def matches_at(self, qwords: list[str], i: int) -> bool:
        n = len(self.words)
        if i + n > len(qwords):
            return False
        *head, last = self.words
        if any(qwords[i + j] != w for j, w in enumerate(head)):
            return False
        q = qwords[i + n - 1]
        return q.startswith(last) if self.prefix else q == last

    def found_in(self, qwords: list[str], qset: frozenset[str] | None = None) -> bool:
        qset = frozenset(qwords) if qset is None else qset
        first = self.words[0]
        if len(self.words) == 1:
            return any(q.startswith(first) for q in qset) if self.prefix else first in qset
        return first in qset and any(self.matches_at(qwords, i) for i, q in enumerate(qwords) if q == first)


class IntentTerms(BaseModel):
    """The compiled content of an intents file."""

    model_config = ConfigDict(frozen=True)
    form_window: int
    question_forms: dict[str, tuple[str, ...]]
    intents: dict[str, tuple[Term, ...]]
    #: casefolded words the text query leaves out (see :func:`content_text`)
    question_words: frozenset[str] = frozenset()


class Intent(BaseModel):
    """The analysis of one question."""

    model_config = ConfigDict(frozen=True)
    form: str
    #: intent name -> the terms of that intent found in the question (only intents found)
    terms: dict[str, tuple[str, ...]]
    rule: str

    @property
    def intents(self) -> frozenset[str]:
        return frozenset(self.terms)

    @property
    def survey(self) -> bool:
        """Overview terms were found: the question asks for a survey of a topic."""
        return "overview" in self.terms


def _compile_term(raw: object, where: str) -> Term:
    if not isinstance(raw, str) or not raw.strip().rstrip("*").strip():
        raise ConfigError(f"{where}: intent terms must be non-empty strings, got {raw!r}")
    prefix = raw.strip().endswith("*")
    ws = tuple(words(raw.strip().rstrip("*")))
    if not ws:
        raise ConfigError(f"{where}: term {raw!r} has no letters or digits")
    return Term(text=raw.strip(), words=ws, prefix=prefix)


def _single_words(value: object, where: str) -> list[str]:
    """A JSON list of single words, casefolded; ConfigError naming ``where`` otherwise."""
    if not isinstance(value, list) or not all(
        isinstance(w, str) and words(w) == [w.casefold()] for w in value
    ):
        raise ConfigError(f"{where} must be a list of single words, got {value!r}")
    return [w.casefold() for w in value]


def _parse(data: object, where: str, base: IntentTerms | None) -> IntentTerms:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: an intents file must hold a JSON object, got {type(data).__name__}")
    known = {"description", "form_window", "question_forms", "question_words", "intents"}
    for key in data:
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {choices(known)}")
    window = data.get("form_window", base.form_window if base else 3)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"{where}: form_window must be a positive integer, got {window!r}")
    forms = {f: list(base.question_forms.get(f, ())) if base else [] for f in FORMS if f != "other"}
    for form, ws in (data.get("question_forms") or {}).items():
        if form not in forms:
            raise ConfigError(
                f"{where}: unknown question form {form!r}; valid forms: "
                f"{choices(f for f in FORMS if f != 'other')}"
            )
        forms[form] += [
            w for w in _single_words(ws, f"{where}: question_forms[{form!r}]") if w not in forms[form]
        ]
    question_words = (base.question_words if base else frozenset()) | set(
        _single_words(data.get("question_words", []), f"{where}: question_words")
    )
    intents = {name: list(base.intents.get(name, ())) if base else [] for name in INTENTS}
    for name, terms in (data.get("intents") or {}).items():
        if name not in intents:
            raise ConfigError(f"{where}: unknown intent {name!r}; valid intents: {choices(INTENTS)}")
        if not isinstance(terms, list):
            raise ConfigError(f"{where}: intents[{name!r}] must be a list of terms, got {terms!r}")
        have = {t.text for t in intents[name]}
        intents[name] += [
            t for t in (_compile_term(x, f"{where}: intents[{name!r}]") for x in terms) if t.text not in have
        ]
    return IntentTerms(
        form_window=window,
        question_forms={k: tuple(v) for k, v in forms.items()},
        intents={k: tuple(v) for k, v in intents.items()},
        question_words=question_words,
    )


def _read(path: Path) -> object:
    return read_json(path, "intents")


@functools.lru_cache(maxsize=1)
def default_intents() -> IntentTerms:
    """The built-in term lists (``intents.json`` beside this module)."""
    return _parse(_read(DEFAULT_INTENTS_PATH), str(DEFAULT_INTENTS_PATH), None)


def load_intents(path: str | Path | None = None) -> IntentTerms:
    """The built-in lists extended with a user file's forms and terms (``None``: built-in only)."""
    if path is None:
        return default_intents()
    return _parse(_read(Path(path)), str(path), default_intents())


def question_form(qwords: list[str], terms: IntentTerms) -> str:
    for w in qwords[: terms.form_window]:
        for form, forms in terms.question_forms.items():
            if w in forms:
                return form
    return "other"


def choose_rule(form: str, found: frozenset[str] | set[str]) -> str:
    """The section-multiplier rule for a question form and the intents found (see module doc)."""
    if "evaluation" in found:
        return "evaluation"
    if form == "how":
        return "how"
    if form == "what" and "method" in found:
        return "what_method"
    if form == "which" and "overview" in found:
        return "which_overview"
    return "default"


def analyze(question: str, terms: IntentTerms | None = None) -> Intent:
    """Form, intent terms and section rule of ``question`` (any string; never raises)."""
    terms = terms or default_intents()
    qwords = words(question)
    qset = frozenset(qwords)
    found = {
        name: tuple(t.text for t in ts if t.found_in(qwords, qset)) for name, ts in terms.intents.items()
    }
    found = {k: v for k, v in found.items() if v}
    form = question_form(qwords, terms)
    return Intent(form=form, terms=found, rule=choose_rule(form, set(found)))


def content_text(text: str, terms: IntentTerms | None = None) -> str:
    """``text`` without its question words ("How do they train the LLM?" -> "train the LLM?").

    Words such as *what*, *do*, *authors* phrase a question but match paragraphs for no reason
    (the english analyzer keeps them: Lucene's English stop set is only 33 function words).
    Leaving them out of the text query lifted BM25 nDCG@10 on QASPER train, scope paper, from
    0.427 to 0.441 (docs/evaluation.md). Only whole words go (hyphen- and apostrophe-joined
    parts count as one word, so "how-to" and "what's" stay); everything else is kept as typed.
    A text without question words is returned unchanged; so is one made only of them ("How
    do they?"), which has nothing else to search for.
    """
    terms = terms or default_intents()

    def keep(m: re.Match) -> str:
        return (
            "" if unicodedata.normalize("NFKC", m.group()).casefold() in terms.question_words else m.group()
        )

    out = " ".join(_QUERY_WORD.sub(keep, text).split())
    return out if out != text and words(out) else text
