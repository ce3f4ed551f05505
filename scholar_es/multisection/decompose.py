"""Stage 1: preprocess a question and break it down into 1-5 section titles.

Two decomposers behind one function, :func:`breakdown`:

* an **LLM callable** -- any function from a prompt (str) to text (str). The prompt is
  ``breakdown`` in ``prompts.json`` beside this module; the answer must hold a JSON object
  ``{"rewritten": ..., "keywords": ..., "sections": [...]}`` (see :func:`parse_llm_output` for
  what is accepted). The call runs in a daemon thread with a timeout; a callable that raises,
  times out or answers something without a usable section falls back to the offline decomposer,
  and the reason is kept in :attr:`Breakdown.note`.
* the **offline decomposer** (:func:`offline_breakdown`): no model, no network, deterministic.
  It reads the facets off the question's own structure, with the word lists of ``prompts.json``:

  1. polite fillers ("Can you tell me ...") are dropped (the *rewritten* question), then the
     question words, auxiliaries and pronouns that open it ("How do", "What are the");
  2. a subordinator ("when", "while", "especially", "such as", ...) splits a main clause (the
     *topic*) from a condition; the condition's listed aspects ("reading long documents or
     reasoning over many steps") become one facet each, and the topic an overview facet;
  3. without a subordinator, a list ("A, B and C", "A or B") becomes one facet per item, the
     words the items share (a leading "models perform best on", a trailing "are used to
     evaluate X") repeated in each; several questions in one ("... and how are they
     evaluated?") become one facet each;
  4. facet titles follow the question's intent rule (``Methods for ...`` for How questions,
     ``Evaluation of ...`` for evaluation questions ...), unless the facet already names a
     method, evaluation or overview term; a condition split with evaluation terms adds a
     benchmarks facet; a question with overview terms (survey intent) gets a survey facet;
  5. nothing found: one section, the question itself.

  The *keyword query* is the question's content words (no question words, auxiliaries,
  pronouns, prepositions, stop words or generic verbs such as "handle"), in question order.

Both decomposers give at most ``max_sections`` (5) sections, de-duplicated case-insensitively;
an empty breakdown is replaced by the single section "the question" (kind ``question``).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from querybuilder.intent import analyze, default_intents, words
from querybuilder.plan import clean_question
from scholar_es.datafiles import read_json
from scholar_es.errors import ConfigError, choices

DEFAULT_PROMPTS_PATH = Path(__file__).with_name("prompts.json")
#: Section kinds: what a section stands for (``survey`` is searched with the survey field boosts).
SECTION_KINDS = ("question", "overview", "facet", "evaluation", "survey")
#: Where a breakdown came from.
SOURCES = ("offline", "llm", "fallback")
DEFAULT_LLM_TIMEOUT = 30.0
MAX_TITLE_CHARS = 200

#: Any function from a prompt to the model's answer.
LLM = Callable[[str], str]

_TOKEN = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*|[,;:/()]")
_WORD_LISTS = (
    "fillers",
    "question_words",
    "auxiliaries",
    "pronouns",
    "determiners",
    "prepositions",
    "stopwords",
    "generic_verbs",
    "intransitive_verbs",
    "question_modifiers",
    "subordinators",
    "list_separators",
    "no_split_after",
)


class Section(BaseModel):
    """One section of the breakdown: its title (the text searched) and what it stands for."""

    model_config = ConfigDict(frozen=True)
    title: str
    kind: str = "facet"


class Breakdown(BaseModel):
    """The preprocessed question and its sections."""

    model_config = ConfigDict(frozen=True)
    question: str  # the cleaned question
    rewritten: str
    keywords: str
    sections: tuple[Section, ...]
    source: str  # offline | llm | fallback (an LLM was given but failed: offline used)
    note: str = ""  # why the LLM's breakdown was not used, or why the question is the only section


class Prompts(BaseModel):
    """The content of a prompts file."""

    model_config = ConfigDict(frozen=True)
    breakdown: str
    lists: dict[str, tuple[tuple[str, ...], ...]]  # name -> phrases, each as its lower-cased words
    max_sections: int
    max_items: int
    titles: dict

    def words_of(self, name: str) -> frozenset[str]:
        """The one-word entries of a list."""
        return frozenset(p[0] for p in self.lists[name] if len(p) == 1)


# --- prompts file -------------------------------------------------------------------------------
def _parse_prompts(data: object, where: str, base: dict | None) -> Prompts:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a prompts file must hold a JSON object, got {type(data).__name__}")
    for key in data:
        if key not in ("description", "breakdown", "offline"):
            raise ConfigError(
                f"{where}: unknown key {key!r}; valid keys: "
                f"{choices(['description', 'breakdown', 'offline'])}"
            )
    merged = {**(base or {}), **{k: v for k, v in data.items() if k != "offline"}}
    offline = {**((base or {}).get("offline") or {}), **(data.get("offline") or {})}
    known = {*_WORD_LISTS, "max_sections", "max_items", "titles"}
    for key in offline:
        if key not in known:
            raise ConfigError(f"{where}: unknown key 'offline.{key}'; valid keys: {choices(known)}")
    prompt = merged.get("breakdown")
    if isinstance(prompt, list) and all(isinstance(x, str) for x in prompt):
        prompt = "\n".join(prompt)
    if not isinstance(prompt, str) or "{question}" not in prompt:
        raise ConfigError(
            f"{where}: 'breakdown' must be a string (or a list of lines) containing {{question}}"
        )
    lists: dict[str, tuple[tuple[str, ...], ...]] = {}
    for name in _WORD_LISTS:
        raw = offline.get(name, [])
        if not isinstance(raw, list) or not all(isinstance(x, str) and words(x) for x in raw):
            raise ConfigError(f"{where}: 'offline.{name}' must be a list of words or phrases, got {raw!r}")
        lists[name] = tuple(tuple(words(x)) for x in raw)
    limits = {}
    for name, default, top in (("max_sections", 5, 5), ("max_items", 4, 5)):
        value = offline.get(name, default)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ConfigError(f"{where}: 'offline.{name}' must be an integer from 1 to {top}, got {value!r}")
        limits[name] = value
    titles = offline.get("titles") or {}
    facet = titles.get("facet") if isinstance(titles, dict) else None
    if not (
        isinstance(titles, dict)
        and isinstance(facet, dict)
        and "default" in facet
        and all("{topic}" in str(titles.get(k, "")) for k in ("overview", "survey", "evaluation"))
        and all("{item}" in str(v) for v in facet.values())
    ):
        raise ConfigError(
            f"{where}: 'offline.titles' needs overview, survey and evaluation templates with "
            "{topic} and a 'facet' object (a 'default' key at least) of templates with {item}"
        )
    return Prompts(breakdown=prompt, lists=lists, titles=titles, **limits)


def _read(path: Path) -> object:
    return read_json(path, "prompts")


@functools.lru_cache(maxsize=1)
def default_prompts() -> Prompts:
    return _parse_prompts(_read(DEFAULT_PROMPTS_PATH), str(DEFAULT_PROMPTS_PATH), None)


def load_prompts(path: str | Path | None = None) -> Prompts:
    """The built-in prompts, or the built-in ones with a user file's keys replacing theirs."""
    if path is None:
        return default_prompts()
    base = _read(DEFAULT_PROMPTS_PATH)
    return _parse_prompts(_read(Path(path)), str(path), base if isinstance(base, dict) else None)


# --- tokens -------------------------------------------------------------------------------------
def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _join(tokens: list[str]) -> str:
    out = ""
    for t in tokens:
        if t in ",;:)" or not out or out.endswith("(") or out.endswith("/") or t == "/":
            out += t
        else:
            out += " " + t
    return out.strip(" ,;:/")


def _low(tokens: list[str]) -> list[str]:
    return [t.casefold().replace("’", "'") for t in tokens]


def _match_phrase(low: list[str], i: int, phrases: tuple[tuple[str, ...], ...]) -> int:
    """Length in tokens of the longest phrase of ``phrases`` starting at ``low[i]`` (0: none)."""
    best = 0
    for p in phrases:
        for m in range(1, len(p) + 1):  # a token may hold several words ("i'm", "multi-step")
            if i + m <= len(low) and tuple(words(" ".join(low[i : i + m]))) == p:
                best = max(best, m)
                break
    return best


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:] if text else text


# --- preprocessing ------------------------------------------------------------------------------
def rewrite(question: str, prompts: Prompts | None = None) -> str:
    """The cleaned question without leading polite fillers ("Can you tell me ..."), as asked otherwise."""
    p = prompts or default_prompts()
    cleaned, _ = clean_question(question)
    tokens = _tokens(cleaned)
    low = _low(tokens)
    i = 0
    while i < len(tokens):
        n = _match_phrase(low, i, p.lists["fillers"])
        if not n:
            break
        i += n
    if i == 0 or i >= len(tokens):
        return cleaned
    # drop the filler words from the text itself (keep the rest's spelling and punctuation)
    rest = cleaned
    for _ in range(i):
        m = re.match(r"\W*[^\W_]+(?:['’\-][^\W_]+)*", rest)
        if not m:
            break
        rest = rest[m.end() :]
    rest = rest.lstrip(" ,;:")
    return _capital(rest) if words(rest) else cleaned


def _content(tokens: list[str], p: Prompts) -> list[str]:
    skip = (
        p.words_of("question_words")
        | p.words_of("auxiliaries")
        | p.words_of("pronouns")
        | p.words_of("determiners")
        | p.words_of("prepositions")
        | p.words_of("stopwords")
        | p.words_of("generic_verbs")
        | p.words_of("list_separators")
    )
    return [t for t, w in zip(tokens, _low(tokens), strict=True) if words(w) and w not in skip]


def keyword_query(text: str, prompts: Prompts | None = None) -> str:
    """The content words of ``text`` in order, each once (case-insensitively); ``text`` if none."""
    p = prompts or default_prompts()
    seen: set[str] = set()
    out = []
    for t in _content(_tokens(text), p):
        if t.casefold() not in seen:
            seen.add(t.casefold())
            out.append(t)
    return " ".join(out) if out else text


def preprocess(question: str, prompts: Prompts | None = None) -> tuple[str, str, str]:
    """(cleaned question, rewritten question, keyword query), offline."""
    cleaned, _ = clean_question(question)
    rewritten = rewrite(cleaned, prompts)
    return cleaned, rewritten, keyword_query(rewritten, prompts)


# --- the offline decomposer ---------------------------------------------------------------------
class _Rules:
    def __init__(self, p: Prompts) -> None:
        self.p = p
        self.lead = p.words_of("question_words") | p.words_of("auxiliaries") | p.words_of("determiners")
        self.pronouns = p.words_of("pronouns")
        self.aux = p.words_of("auxiliaries")
        self.preps = p.words_of("prepositions")
        self.verbs = p.words_of("generic_verbs")
        self.intransitive = p.words_of("intransitive_verbs")
        self.modifiers = p.words_of("question_modifiers")
        self.boundary = (
            self.lead
            | self.pronouns
            | self.preps
            | self.verbs
            | self.intransitive
            | p.words_of("stopwords")
            | p.words_of("question_words")
        )

    def strip_lead(self, tokens: list[str]) -> list[str]:
        """Drop opening question words (with a modifier: "how many"), auxiliaries, determiners,
        pronouns, prepositions, stop words and punctuation ("In what kind of ways do ...")."""
        low = _low(tokens)
        skip = self.lead | self.pronouns | self.preps | self.p.words_of("stopwords")
        qwords = self.p.words_of("question_words")
        i = 0
        while i < len(tokens) and (
            low[i] in skip
            or not words(low[i])
            or (i > 0 and low[i - 1] in qwords and low[i] in self.modifiers)
        ):
            i += 1
        return tokens[i:]

    def strip_edges(self, tokens: list[str]) -> list[str]:
        """Drop leading/trailing separators, subordinators, prepositions and determiners."""
        seps = self.p.lists["list_separators"] + self.p.lists["subordinators"]
        changed = True
        while tokens and changed:
            changed = False
            low = _low(tokens)
            n = _match_phrase(low, 0, seps)
            if n:
                tokens, changed = tokens[n:], True
            elif low[0] in self.lead or low[0] in self.preps or not words(low[0]):
                tokens, changed = tokens[1:], True
            elif (
                low[-1] in self.preps
                or low[-1] in self.lead
                or not words(low[-1])
                or (low[-1],) in self.p.lists["list_separators"]
            ):
                tokens, changed = tokens[:-1], True
        return tokens

    def topic(self, tokens: list[str]) -> list[str]:
        """``SUBJECT VERB OBJECT`` with a generic verb ("LLMs handle context limits") becomes
        ``OBJECT in SUBJECT`` ("context limits in LLMs"); anything else is kept, edges stripped."""
        tokens = self.strip_edges(self.strip_lead(tokens))
        low = _low(tokens)
        for v in range(1, len(tokens) - 1):
            if low[v] in self.verbs and not any(w in self.boundary for w in low[:v]):
                obj = self.strip_edges(tokens[v + 1 :])
                if obj:
                    return [*obj, "in", *tokens[:v]]
                break
        # drop auxiliaries inside ("methods are used to" -> "methods used to")
        return [t for t, w in zip(tokens, low, strict=True) if w not in self.aux] or tokens

    def split_condition(self, tokens: list[str]) -> tuple[list[str], list[str]] | None:
        low = _low(tokens)
        for i in range(1, len(tokens)):
            n = _match_phrase(low, i, self.p.lists["subordinators"])
            if n and any(words(w) for w in low[:i]) and any(words(w) for w in low[i + n :]):
                return tokens[:i], tokens[i + n :]
        return None

    def split_list(self, tokens: list[str]) -> list[list[str]]:
        """Parts of ``tokens`` between list separators (commas, "and", "or", ...)."""
        low = _low(tokens)
        parts: list[list[str]] = [[]]
        i = 0
        no_split = self.p.words_of("no_split_after")
        while i < len(tokens):
            n = _match_phrase(low, i, self.p.lists["list_separators"])
            sep = n or low[i] in (",", ";")
            if sep and not any(w in no_split for w in low[:i]):
                if parts[-1]:
                    parts.append([])
                i += max(n, 1)
                continue
            parts[-1].append(tokens[i])
            i += 1
        return [part for part in parts if any(words(t) for t in part)]

    def survey_topic(self, tokens: list[str]) -> list[str]:
        """The topic without its overview words ("recent trends in X" -> "X", "improve the state
        of the art in X" -> "improve X"); empty when nothing else is left."""
        low = _low(tokens)
        for i, w in enumerate(low):
            if w in self.preps and i + 1 < len(tokens):
                if analyze(" ".join(low[:i])).survey:
                    tokens, low = tokens[i + 1 :], low[i + 1 :]
                break
        flat: list[str] = []
        owner: list[int] = []
        for k, w in enumerate(low):
            for part in words(w):
                flat.append(part)
                owner.append(k)
        drop: set[int] = set()
        for term in default_intents().intents["overview"]:
            for i in range(len(flat)):
                if term.matches_at(flat, i):
                    drop.update(owner[i : i + len(term.words)])
        kept = self.strip_edges(self.strip_lead([t for k, t in enumerate(tokens) if k not in drop]))
        return kept if any(w not in self.boundary for w in _low(kept) if words(w)) else []


def _title_for_facet(item: list[str], rule: str, p: Prompts) -> str:
    text = _join(item)
    if analyze(text).intents:  # already names a method, evaluation or overview term
        return _capital(text)
    facet = p.titles["facet"]
    return _capital(str(facet.get(rule, facet["default"])).replace("{item}", text))


def _list_facets(parts: list[list[str]], r: _Rules) -> list[list[str]]:
    """Items of a list with the words they share: a prefix before the first item ("models
    perform best on" SQuAD, ...) and a suffix after the last one (datasets, ... "are used to
    evaluate X"); a part that is a question of its own stays whole."""
    qwords = r.p.words_of("question_words")
    if any(_low(part)[0] in qwords for part in parts[1:]):  # "..., and how are they evaluated?"
        first = r.topic(parts[0])
        out = [first]
        for part in parts[1:]:
            rest = r.topic(part)
            low = _low(part)
            # a pronoun that refers back to the first question: put that question's topic in its place
            if any(w in r.pronouns for w in low[:4]) and len(words(" ".join(_low(rest)))) <= 3:
                rest = [*first, *rest]
            out.append(rest or part)
        return out
    parts = [r.strip_edges(x) for x in parts]
    first, last = parts[0], parts[-1]
    low_first, low_last = _low(first), _low(last)
    prefix: list[str] = []
    j = len(first)
    while j > 0 and low_first[j - 1] not in r.boundary:
        j -= 1
    if 0 < j < len(first) and (low_first[j - 1] in r.preps or low_first[j - 1] in r.verbs):
        prefix, parts = first[:j], [first[j:], *parts[1:]]
    suffix: list[str] = []
    k = 0
    while k < len(last) and low_last[k] not in r.boundary:
        k += 1
    if 0 < k < len(last) and (
        low_last[k] in r.aux or low_last[k] in r.verbs or low_last[k] in r.intransitive
    ):
        suffix, parts = last[k:], [*parts[:-1], last[:k]]
    return [r.topic([*prefix, *part, *suffix]) for part in parts]


def offline_breakdown(question: str, prompts: Prompts | None = None) -> Breakdown:
    """The built-in decomposer (see the module doc); pure and deterministic."""
    p = prompts or default_prompts()
    cleaned, rewritten, keywords = preprocess(question, p)
    r = _Rules(p)
    intent = analyze(rewritten)
    core = r.strip_lead(_tokens(rewritten))
    sections: list[Section] = []
    topic: list[str] = []
    split = r.split_condition(core)
    facets: list[list[str]] = []
    if split:
        main, condition = split
        topic = r.topic(main)
        items = [r.strip_edges(x) for x in r.split_list(condition)]
        facets = items if any(items) else [r.strip_edges(condition)]
    else:
        parts = r.split_list(core)
        if len(parts) >= 2:
            facets = _list_facets(parts, r)
            qwords = p.words_of("question_words")
            topic = r.topic(parts[0] if any(_low(x)[0] in qwords for x in parts[1:]) else core)
    facets = [f for f in (r.strip_edges(f) for f in facets[: p.max_items]) if f]
    topic_text = _join(topic) if topic else _join(r.topic(core))
    survey_text = _join(r.survey_topic(_tokens(topic_text)))
    if intent.survey and words(survey_text):
        sections.append(
            Section(title=_capital(p.titles["survey"].replace("{topic}", survey_text)), kind="survey")
        )
    elif split and words(topic_text):
        sections.append(
            Section(title=_capital(p.titles["overview"].replace("{topic}", topic_text)), kind="overview")
        )
    for f in facets:
        sections.append(Section(title=_title_for_facet(f, intent.rule, p), kind="facet"))
    if (
        split
        and "evaluation" in intent.intents
        and not any("evaluation" in analyze(s.title).intents for s in sections)
    ):
        sections.append(
            Section(title=_capital(p.titles["evaluation"].replace("{topic}", topic_text)), kind="evaluation")
        )
    note = ""
    if not facets:  # no structure: the question itself (a survey question also keeps its survey facet)
        sections.append(Section(title=rewritten, kind="question"))
        note = "no conjunction, list or condition found: the question is the only facet"
    return Breakdown(
        question=cleaned,
        rewritten=rewritten,
        keywords=keywords,
        sections=_finish(sections, rewritten, p.max_sections),
        source="offline",
        note=note,
    )


def _finish(sections: list[Section], rewritten: str, limit: int) -> tuple[Section, ...]:
    """De-duplicated (case-insensitively), titles without letters or digits dropped, at most ``limit``;
    none left: the question itself."""
    out: list[Section] = []
    seen: set[str] = set()
    for s in sections:
        title = " ".join(s.title.split())[:MAX_TITLE_CHARS].strip()
        key = " ".join(words(title))
        if not key or key in seen:
            continue
        seen.add(key)
        out.append(Section(title=title, kind=s.kind))
        if len(out) >= limit:
            break
    return tuple(out) or (Section(title=rewritten, kind="question"),)


# --- the LLM decomposer -------------------------------------------------------------------------
def build_prompt(question: str, prompts: Prompts | None = None) -> str:
    return (prompts or default_prompts()).breakdown.replace("{question}", question)


def call_with_timeout(llm: LLM, prompt: str, timeout: float) -> str:
    """``llm(prompt)`` in a daemon thread; TimeoutError after ``timeout`` seconds (the thread is
    left to finish on its own: a Python thread cannot be killed), its exception re-raised."""
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = llm(prompt)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    thread = threading.Thread(target=target, name="multisection-llm", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the LLM did not answer within {timeout:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # set: the thread finished without an error


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def parse_llm_output(text: object) -> dict | None:
    """``{"rewritten", "keywords", "sections"}`` from an LLM answer, or None.

    Accepted: a JSON object (alone, in a ``` fence, or inside other text), whose ``sections``
    is a list of strings or of objects with a ``title``; or a JSON list of titles; or, failing
    JSON, lines that are bulleted or numbered ("- A", "1. A", "* A").
    """
    if not isinstance(text, str) or not text.strip():
        return None
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for c in candidates:
        for start_char, end_char in (("{", "}"), ("[", "]")):
            start, end = c.find(start_char), c.rfind(end_char)
            if start < 0 or end <= start:
                continue
            try:
                data = json.loads(c[start : end + 1])
            except json.JSONDecodeError:
                continue
            if isinstance(data, list):
                data = {"sections": data}
            if isinstance(data, dict) and isinstance(data.get("sections"), list):
                titles = [s.get("title") if isinstance(s, dict) else s for s in data["sections"]]
                return {
                    "rewritten": data.get("rewritten") if isinstance(data.get("rewritten"), str) else None,
                    "keywords": data.get("keywords") if isinstance(data.get("keywords"), str) else None,
                    "sections": [t for t in titles if isinstance(t, str)],
                }
    bullets = [m.group(1) for m in re.finditer(r"(?m)^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$", text)]
    return {"rewritten": None, "keywords": None, "sections": bullets} if bullets else None


def llm_breakdown(
    question: str, llm: LLM, *, timeout: float = DEFAULT_LLM_TIMEOUT, prompts: Prompts | None = None
) -> Breakdown:
    """The LLM's breakdown; the offline one (source ``fallback``, with the reason) if it fails."""
    p = prompts or default_prompts()
    cleaned, rewritten, keywords = preprocess(question, p)

    def fallback(reason: str) -> Breakdown:
        b = offline_breakdown(question, p)
        return b.model_copy(update={"source": "fallback", "note": f"LLM breakdown not used: {reason}"})

    if not callable(llm):
        raise ConfigError(
            f"llm must be a callable from a prompt (str) to text (str), got {type(llm).__name__}"
        )
    if not words(cleaned):
        return fallback("the question has no words to break down")
    try:
        answer = call_with_timeout(llm, build_prompt(cleaned, p), timeout)
    except TimeoutError as e:
        return fallback(str(e))
    except Exception as e:  # noqa: BLE001 - any failure of a user's callable means: use the offline decomposer
        return fallback(f"the LLM raised {type(e).__name__}: {e}")
    parsed = parse_llm_output(answer)
    if parsed is None:
        return fallback(f"no JSON object or list of sections in the answer {str(answer)[:120]!r}")
    sections = [Section(title=t, kind="facet") for t in parsed["sections"]]
    kept = _finish(sections, "", p.max_sections)
    if not kept[0].title:
        return fallback("the answer holds no section title with letters or digits")
    llm_rewritten = " ".join((parsed["rewritten"] or "").split())
    llm_keywords = " ".join((parsed["keywords"] or "").split())
    return Breakdown(
        question=cleaned,
        rewritten=llm_rewritten if words(llm_rewritten) else rewritten,
        keywords=llm_keywords if words(llm_keywords) else keywords,
        sections=kept,
        source="llm",
    )


def breakdown(
    question: str,
    llm: LLM | None = None,
    *,
    timeout: float = DEFAULT_LLM_TIMEOUT,
    prompts: Prompts | None = None,
) -> Breakdown:
    """Preprocess and break down ``question``: with ``llm`` when given (offline on failure), else offline."""
    if llm is None:
        return offline_breakdown(question, prompts)
    return llm_breakdown(question, llm, timeout=timeout, prompts=prompts)


def survey_section(question: str, prompts: Prompts | None = None) -> Section | None:
    """The survey section the offline decomposer gives ``question`` (None unless it asks for
    surveys or overviews): added by the flow when a breakdown (an LLM's) has none."""
    return next((s for s in offline_breakdown(question, prompts).sections if s.kind == "survey"), None)
