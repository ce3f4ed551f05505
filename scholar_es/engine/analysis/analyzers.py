"""Elasticsearch text analysis (analyzers, tokenizers, token filters) in pure Python.

Every analyzer yields the terms Elasticsearch 8.15+/9.x (Lucene 9.11-10.x) indexes for a text:

* tokenizers: ``standard`` (Lucene StandardTokenizer, see :mod:`engine.analysis.tokenizer`), ``letter``
  (Character.isLetter runs), ``whitespace`` (Character.isWhitespace splits), ``keyword``;
* token filters: ``lowercase`` (LowerCaseFilter), ``stop`` (StopFilter), ``porter_stem``
  (PorterStemFilter), ``stemmer`` (english/porter/possessive_english), plus the possessive filter
  the ``english`` analyzer uses (EnglishPossessiveFilter).

Every filter maps one token to at most one token, so an analyzer's filter chain is one cached
function of the token; analyzing is a regex ``findall`` plus one cache lookup per token.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import regex

from scholar_es.engine.analysis.tokenizer import (
    MAX_TOKEN_LENGTH_LIMIT,
    keyword_tokenize,
    letter_tokenize,
    standard_tokenize,
    whitespace_tokenize,
)
from scholar_es.engine.errors import illegal_argument, unsupported

Tokenizer = Callable[[str], list[str]]
TermFilter = Callable[[str], "str | None"]  # one token in, the token out or None (dropped)

# Lucene EnglishAnalyzer.ENGLISH_STOP_WORDS_SET, which Elasticsearch names `_english_`.
ENGLISH_STOP_WORDS = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    )
)
BUILTIN_ANALYZERS: tuple[str, ...] = ("standard", "simple", "whitespace", "stop", "keyword", "english")
BUILTIN_TOKENIZERS: tuple[str, ...] = ("standard", "letter", "whitespace", "keyword")
BUILTIN_FILTERS: tuple[str, ...] = ("lowercase", "stop", "porter_stem", "stemmer")


def _name_set(names: str) -> frozenset[str]:
    return frozenset(names.split())


# Names Elasticsearch knows but this engine does not implement: a 400 naming them, not a silent guess.
_KNOWN_ANALYZERS = _name_set(
    "pattern fingerprint snowball classic arabic armenian basque bengali brazilian bulgarian catalan "
    "cjk czech danish dutch estonian finnish french galician german greek hindi hungarian indonesian "
    "irish italian latvian lithuanian norwegian persian portuguese romanian russian serbian sorani "
    "spanish swedish turkish thai"
)
_KNOWN_TOKENIZERS = _name_set(
    "classic uax_url_email ngram edge_ngram pattern simple_pattern simple_pattern_split char_group "
    "path_hierarchy lowercase thai"
)
_KNOWN_FILTERS = _name_set(
    "apostrophe asciifolding cjk_bigram cjk_width classic common_grams condition decimal_digit "
    "delimited_payload dictionary_decompounder edge_ngram elision fingerprint flatten_graph hunspell "
    "hyphenation_decompounder keep keep_types keyword_marker keyword_repeat kstem length limit "
    "min_hash multiplexer ngram pattern_capture pattern_replace phonetic predicate_token_filter "
    "remove_duplicates reverse shingle snowball stemmer_override synonym synonym_graph trim truncate "
    "unique uppercase word_delimiter word_delimiter_graph"
)
_KNOWN_CHAR_FILTERS = frozenset(("html_strip", "mapping", "pattern_replace"))

_SURROGATE = regex.compile("[\ud800-\udfff]")


# ---------------------------------------------------------------------------------------- filters


def lowercase(token: str) -> str:
    """Lucene LowerCaseFilter: Character.toLowerCase per code point (no final sigma, 'İ' -> 'i')."""
    if token.isascii() or ("\u0130" not in token and "\u03a3" not in token):
        return token.lower()
    return "".join("i" if c == "\u0130" else c.lower() for c in token)


def english_possessive(token: str) -> str:
    """Lucene EnglishPossessiveFilter: drop a trailing 's / ’s / ＇s (either case of s)."""
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in "'\u2019\uff07":
        return token[:-2]
    return token


class _PorterStemmer:
    """Lucene's ``PorterStemmer`` (Porter's reference implementation, release 3), step by step:
    b[0..k] is the word, j the end of the stem left by the last successful ``ends``."""

    _STEP3 = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP4 = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP5 = {
        "a": ("al",),
        "c": ("ance", "ence"),
        "e": ("er",),
        "i": ("ic",),
        "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"),
        "o": ("ion", "ou"),
        "s": ("ism",),
        "t": ("ate", "iti"),
        "u": ("ous",),
        "v": ("ive",),
        "z": ("ize",),
    }

    def stem(self, word: str) -> str:
        b = list(word)  # Java chars: a supplementary character is two UTF-16 units
        if not word.isascii() and max(word) > "\uffff":  # isascii: O(1) on str
            b = [chr(u) for u in memoryview(word.encode("utf-16-le", "surrogatepass")).cast("H")]
        if len(b) <= 2:  # stem(): `if (k > k0 + 1)`
            return word
        self.b, self.k, self.j = b, len(b) - 1, 0
        self._step1()
        if self._ends("y") and self._vowel_in_stem():  # step2: y -> i
            self.b[self.k] = "i"
        if self.k > 0:  # step3 (`if (k == k0) return`): double suffixes, e.g. -ization -> -ize
            self._replace_first(self._STEP3.get(self.b[self.k - 1], ()))
        self._replace_first(self._STEP4.get(self.b[self.k], ()))  # step4: -ic-, -full, -ness
        self._step5()
        self._step6()
        out = "".join(self.b[: self.k + 1])
        return out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")

    def _cons(self, i: int) -> bool:
        ch = self.b[i]
        if ch in "aeiou":
            return False
        return i == 0 or not self._cons(i - 1) if ch == "y" else True

    def _m(self) -> int:
        """Number of consonant sequences between 0 and j: <c>(vc)^m<v>."""
        n, i, j = 0, 0, self.j
        while i <= j and self._cons(i):
            i += 1
        while i <= j:
            while i <= j and not self._cons(i):
                i += 1
            if i > j:
                break
            n += 1
            while i <= j and self._cons(i):
                i += 1
        return n

    def _vowel_in_stem(self) -> bool:
        return any(not self._cons(i) for i in range(self.j + 1))

    def _doublec(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self._cons(j)

    def _cvc(self, i: int) -> bool:
        return (
            i >= 2
            and self._cons(i)
            and not self._cons(i - 1)
            and self._cons(i - 2)
            and self.b[i] not in "wxy"
        )

    def _ends(self, s: str) -> bool:
        o = self.k - len(s) + 1
        if o < 0 or "".join(self.b[o : self.k + 1]) != s:
            return False
        self.j = self.k - len(s)
        return True

    def _setto(self, s: str) -> None:
        self.b[self.j + 1 :] = s
        self.k = self.j + len(s)

    def _replace_first(self, rules: tuple[tuple[str, str], ...]) -> None:
        for suffix, repl in rules:  # the first suffix that ends the word decides, stem or not
            if self._ends(suffix):
                if self._m() > 0:
                    self._setto(repl)
                return

    def _step1(self) -> None:
        """Plurals and -ed / -ing: caresses -> caress, ponies -> poni, meetings -> meet."""
        b = self.b
        if b[self.k] == "s":
            if self._ends("sses"):
                self.k -= 2
            elif self._ends("ies"):
                self._setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
        if self._ends("eed"):
            if self._m() > 0:
                self.k -= 1
        elif (self._ends("ed") or self._ends("ing")) and self._vowel_in_stem():
            self.k = self.j
            if self._ends("at"):
                self._setto("ate")
            elif self._ends("bl"):
                self._setto("ble")
            elif self._ends("iz"):
                self._setto("ize")
            elif self._doublec(self.k):
                if self.b[self.k] not in "lsz":
                    self.k -= 1
            elif self._m() == 1 and self._cvc(self.k):
                self._setto("e")

    def _step5(self) -> None:
        """-ant, -ence, ... removed when m() > 1."""
        if self.k == 0:
            return
        for suffix in self._STEP5.get(self.b[self.k - 1], ()):
            if self._ends(suffix):
                if suffix == "ion" and not (self.j >= 0 and self.b[self.j] in "st"):
                    continue  # -ion only after s or t; then -ou is tried
                break
        else:
            return
        if self._m() > 1:
            self.k = self.j

    def _step6(self) -> None:
        """Final -e when m() > 1 (or 1 without cvc), and -ll -> -l when m() > 1."""
        self.j = self.k
        if self.b[self.k] == "e":
            a = self._m()
            if a > 1 or (a == 1 and not self._cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self._doublec(self.k) and self._m() > 1:
            self.k -= 1


@functools.lru_cache(maxsize=1 << 20)
def porter_stem(token: str) -> str:
    """Lucene PorterStemFilter's stem of ``token`` (no lowercasing; keyword marking not modelled)."""
    return _PorterStemmer().stem(token)


def _stop_filter(words: Iterable[str], ignore_case: bool = False) -> TermFilter:
    if ignore_case:  # CharArraySet(ignoreCase=true) lowercases with Character.toLowerCase
        lowered = frozenset(map(lowercase, words))
        return lambda t: None if lowercase(t) in lowered else t
    stop = frozenset(words)
    return lambda t: None if t in stop else t


def _keep_unstemmed(words: frozenset[str]) -> TermFilter:
    """SetKeywordMarkerFilter + PorterStemFilter: stem unless the token is in ``words``."""
    return lambda t: t if t in words else porter_stem(t)


# --------------------------------------------------------------------------------------- analyzer


RECENT_TEXTS = 4096  # texts whose terms an analyzer keeps (Analyzer.__call__)
RECENT_MAX_CHARS = 8192  # ... when they are no longer than this (titles, abstracts, names)


@dataclass(frozen=True, eq=False)
class Analyzer:
    """A tokenizer plus token filters, called on a text to get the indexed terms in order."""

    name: str
    tokenizer: Tokenizer = field(repr=False)
    filters: tuple[TermFilter, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_term", _compose(self.filters))
        object.__setattr__(self, "_recent", {})

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text``. The last ``RECENT_TEXTS`` short texts' terms are kept: documents
        written together often repeat a field's text (the title and abstract of the chunks of
        one paper, section names), which is then analyzed once."""
        recent: dict[str, list[str]] = self._recent  # type: ignore[attr-defined]
        hit = recent.get(text)
        if hit is not None:
            return list(hit)
        terms = self._analyze(text)
        if len(text) <= RECENT_MAX_CHARS:  # bounded memory: at most RECENT_TEXTS short texts
            if len(recent) >= RECENT_TEXTS:
                recent.clear()  # cheaper than an LRU; a batch's repeats are close together
            recent[text] = terms
            return list(terms)
        return terms

    def _analyze(self, text: str) -> list[str]:
        if _SURROGATE.search(text):  # Java reads UTF-16: a high+low surrogate pair is one code point
            text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
        tokens = self.tokenizer(text)
        term = self._term  # type: ignore[attr-defined]
        if term is None:
            return tokens
        return [t for t in map(term, tokens) if t is not None]


def _compose(filters: tuple[TermFilter, ...]) -> TermFilter | None:
    if not filters:
        return None

    @functools.lru_cache(maxsize=1 << 18)
    def term(token: str) -> str | None:
        for f in filters:
            token = f(token)  # type: ignore[assignment]
            if token is None:
                return None
        return token

    return term


def _words(value: Any, what: str, default: frozenset[str]) -> frozenset[str]:
    """Analysis.parseWords: `_none_`, `_english_`, a list, or a comma-separated string of words."""
    if value is None:
        return default
    if value == "_none_":
        return frozenset()
    items = [w.strip() for w in value.split(",")] if isinstance(value, str) else list(value)
    out: set[str] = set()
    for w in items:
        if w == "_english_":
            out |= ENGLISH_STOP_WORDS
        elif isinstance(w, str) and w.startswith("_") and w.endswith("_") and len(w) > 2:
            raise unsupported(f"{what} [{w}]", "only _english_ and _none_ are built in")
        elif w:
            out.add(str(w))
    return frozenset(out)


def _int(value: Any, name: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise illegal_argument(f"Failed to parse value [{value}] for setting [{name}]") from None


def _bool(value: Any, name: str) -> bool:
    if isinstance(value, bool) or value in ("true", "false"):
        return value in (True, "true")
    raise illegal_argument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def _no_files(conf: Mapping[str, Any], *keys: str) -> None:
    for key in keys:
        if conf.get(key) is not None:
            raise unsupported(key, "word-list files are not readable by the embedded engine")


def _standard_tokenizer(max_token_length: Any = 255) -> Tokenizer:
    n = _int(max_token_length, "max_token_length")
    if not 1 <= n <= MAX_TOKEN_LENGTH_LIMIT:  # StandardTokenizer.setMaxTokenLength
        raise illegal_argument(
            "maxTokenLength must be greater than zero"
            if n < 1
            else f"maxTokenLength may not exceed {MAX_TOKEN_LENGTH_LIMIT}"
        )
    return functools.partial(standard_tokenize, max_token_length=n)


def _builtin_analyzer(name: str, kind: str, conf: Mapping[str, Any]) -> Analyzer:
    """The analyzer types of the ES reference (Lucene StandardAnalyzer, EnglishAnalyzer, ...)."""
    if kind in ("standard", "english", "stop"):
        _no_files(conf, "stopwords_path")
    if kind == "standard":  # StandardTokenizer, LowerCaseFilter, StopFilter (default _none_)
        stop = _words(conf.get("stopwords"), "stopwords", frozenset())
        filters = (lowercase, _stop_filter(stop)) if stop else (lowercase,)
        return Analyzer(name, _standard_tokenizer(conf.get("max_token_length", 255)), filters)
    if kind == "english":  # EnglishAnalyzer: possessive, lowercase, stop, keyword marker, porter
        stop = _words(conf.get("stopwords"), "stopwords", ENGLISH_STOP_WORDS)
        keep = _words(conf.get("stem_exclusion"), "stem_exclusion", frozenset())
        stem = _keep_unstemmed(keep) if keep else porter_stem
        return Analyzer(name, standard_tokenize, (english_possessive, lowercase, _stop_filter(stop), stem))
    if kind == "stop":
        stop = _words(conf.get("stopwords"), "stopwords", ENGLISH_STOP_WORDS)
        return Analyzer(name, letter_tokenize, (lowercase, _stop_filter(stop)))  # StopAnalyzer
    if kind == "simple":
        return Analyzer(name, letter_tokenize, (lowercase,))  # SimpleAnalyzer
    if kind == "whitespace":
        return Analyzer(name, whitespace_tokenize)
    if kind == "keyword":
        return Analyzer(name, keyword_tokenize)
    if kind in _KNOWN_ANALYZERS:
        raise unsupported(f"analyzer [{kind}]", f"built-in analyzers: {', '.join(BUILTIN_ANALYZERS)}")
    raise illegal_argument(f"Unknown analyzer type [{kind}] for [{name}]")


class _Registry:
    """The analysis components of one index: its ``settings.analysis`` over the built-in ones."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = settings

    def _defs(self, group: str) -> Mapping[str, Any]:
        defs = self.settings.get(group) or {}
        if not isinstance(defs, Mapping):
            raise illegal_argument(f"[analysis.{group}] must be an object")
        return defs

    def analyzer(self, name: str) -> Analyzer:
        defs = self._defs("analyzer")
        if name in defs and name.startswith("_"):
            raise illegal_argument(f"analyzer name must not start with '_'. got \"{name}\"")
        if name in defs:
            conf = defs[name]
            if not isinstance(conf, Mapping):
                raise illegal_argument(f"analyzer [{name}] must be an object")
            kind = conf.get("type") or ("custom" if conf.get("tokenizer") is not None else None)
            if kind is None:
                raise illegal_argument(
                    f"analyzer [{name}] must specify either an analyzer type, or a tokenizer"
                )
            return self._custom(name, conf) if kind == "custom" else _builtin_analyzer(name, kind, conf)
        if name in ("default_search_quoted", "default_search"):  # fall back to default, then standard
            return self.analyzer("default_search" if name == "default_search_quoted" else "default")
        if name in BUILTIN_ANALYZERS or name == "default":
            return _builtin_analyzer(name, "standard" if name == "default" else name, {})
        if name in _KNOWN_ANALYZERS:
            raise unsupported(f"analyzer [{name}]", f"built-in analyzers: {', '.join(BUILTIN_ANALYZERS)}")
        raise illegal_argument(f"failed to find analyzer [{name}]")

    def _custom(self, name: str, conf: Mapping[str, Any]) -> Analyzer:
        def missing(component: str, ref: str) -> Exception:
            return illegal_argument(f"Custom Analyzer [{name}] failed to find {component} under name [{ref}]")

        for ref in _names(conf.get("char_filter")):
            if ref in self._defs("char_filter") or ref in _KNOWN_CHAR_FILTERS:
                raise unsupported(f"char_filter [{ref}]", "char filters are not implemented")
            raise missing("char_filter", ref)
        tok_name = conf.get("tokenizer")
        tokenizer = self.tokenizer(str(tok_name)) if tok_name is not None else None
        if tokenizer is None:
            raise missing("tokenizer", str(tok_name))
        filters = []
        for ref in _names(conf.get("filter")):
            f = self.filter(ref)
            if f is None:
                raise missing("filter", ref)
            filters.append(f)
        return Analyzer(name, tokenizer, tuple(filters))

    def tokenizer(self, name: str) -> Tokenizer | None:
        """The named tokenizer, or None when neither the index nor Elasticsearch defines it."""
        defs = self._defs("tokenizer")
        conf: Mapping[str, Any] = defs.get(name) or {}
        kind = conf.get("type") if name in defs else name
        if kind is None:
            raise illegal_argument(f"tokenizer [{name}] must specify either an analyzer type, or a tokenizer")
        n = conf.get("max_token_length", 255)
        if kind == "standard":
            return _standard_tokenizer(n)
        if kind in ("whitespace", "letter"):
            n = _int(n, "max_token_length")
            if not 1 <= n <= MAX_TOKEN_LENGTH_LIMIT:  # CharTokenizer constructor check
                raise illegal_argument(
                    f"maxTokenLen must be greater than 0 and less than {MAX_TOKEN_LENGTH_LIMIT} passed: {n}"
                )
            return functools.partial(
                whitespace_tokenize if kind == "whitespace" else letter_tokenize, max_token_length=n
            )
        if kind == "keyword":
            return keyword_tokenize
        if kind in _KNOWN_TOKENIZERS:
            raise unsupported(f"tokenizer [{kind}]", f"tokenizers: {', '.join(BUILTIN_TOKENIZERS)}")
        if name in defs:
            raise illegal_argument(f"Unknown tokenizer type [{kind}] for [{name}]")
        return None

    def filter(self, name: str) -> TermFilter | None:
        """The named token filter, or None when neither the index nor Elasticsearch defines it."""
        defs = self._defs("filter")
        conf: Mapping[str, Any] = defs.get(name) or {}
        kind = conf.get("type") if name in defs else name
        if kind is None:
            raise illegal_argument(f"filter [{name}] must specify either an analyzer type, or a tokenizer")
        if kind == "lowercase":
            if conf.get("language") is not None:  # greek / irish / turkish lowercasing
                raise unsupported(f"lowercase filter language [{conf['language']}]")
            return lowercase
        if kind == "stop":  # StopTokenFilterFactory: default _english_, case-sensitive
            _no_files(conf, "stopwords_path")
            if not _bool(conf.get("remove_trailing", True), "remove_trailing"):
                raise unsupported("stop filter [remove_trailing: false]")
            words = _words(conf.get("stopwords"), "stopwords", ENGLISH_STOP_WORDS)
            return _stop_filter(words, _bool(conf.get("ignore_case", False), "ignore_case"))
        if kind == "porter_stem":
            return porter_stem
        if kind == "stemmer":  # StemmerTokenFilterFactory: language (alias name), default porter
            language = str(conf.get("language", conf.get("name", "porter")))
            if language in ("english", "porter"):
                return porter_stem
            if language == "possessive_english":
                return english_possessive
            raise unsupported(f"stemmer language [{language}]", "english, porter and possessive_english are")
        if kind in _KNOWN_FILTERS:
            raise unsupported(f"token filter [{kind}]", f"token filters: {', '.join(BUILTIN_FILTERS)}")
        if name in defs:
            raise illegal_argument(f"Unknown filter type [{kind}] for [{name}]")
        return None


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


@functools.lru_cache(maxsize=512)
def _cached(name: str, settings_json: str) -> Analyzer:
    return _Registry(json.loads(settings_json)).analyzer(name)


_BY_SETTINGS: dict[tuple[str, int], tuple[Any, Analyzer]] = {}


def get_analyzer(name: str, analysis_settings: Mapping[str, Any] | None = None) -> Analyzer:
    """The analyzer ``name``: one of ``analysis_settings["analyzer"]`` (an index's
    ``settings.analysis``), else a built-in one.  Raises EsError (400) the way Elasticsearch does.

    Cheap enough to call per document: memoized on the settings object, re-checked by equality."""
    if not analysis_settings:
        return _cached(name, "{}")
    key = (name, id(analysis_settings))
    hit = _BY_SETTINGS.get(key)
    if hit is not None and hit[0] == analysis_settings:
        return hit[1]
    analyzer = _cached(name, json.dumps(analysis_settings, sort_keys=True, default=str))
    if len(_BY_SETTINGS) > 4096:
        _BY_SETTINGS.clear()
    _BY_SETTINGS[key] = (copy.deepcopy(analysis_settings), analyzer)
    return analyzer


def build_analyzer(
    tokenizer: str, filters: Iterable[str] = (), analysis_settings: Mapping[str, Any] | None = None
) -> Analyzer:
    """An ad-hoc chain, as ``_analyze`` with ``tokenizer`` and ``filter`` builds it."""
    registry, scope = _Registry(analysis_settings or {}), "" if analysis_settings else "global "
    tok = registry.tokenizer(tokenizer)
    if tok is None:
        raise illegal_argument(f"failed to find {scope}tokenizer under [{tokenizer}]")
    chain = []
    for ref in filters:
        f = registry.filter(ref)
        if f is None:
            raise illegal_argument(f"failed to find {scope}token filter under [{ref}]")
        chain.append(f)
    return Analyzer("_anonymous_", tok, tuple(chain))


# ------------------------------------------------------------------------------------- normalizer
#: Filters Elasticsearch allows in a custom normalizer (the per-character ones: analysis-normalizers
#: in the reference); of these the engine implements ``lowercase``, the rest are refused by name.
NORMALIZER_FILTERS = _name_set(
    "arabic_normalization asciifolding bengali_normalization cjk_width decimal_digit elision "
    "german_normalization hindi_normalization indic_normalization lowercase pattern_replace "
    "persian_normalization scandinavian_folding serbian_normalization sorani_normalization trim "
    "uppercase"
)

Normalizer = Callable[[str], str]


def _normalizer(name: str, analysis_settings: Mapping[str, Any]) -> Normalizer | None:
    """The keyword normalizer ``name`` (the index's ``analysis.normalizer``, else the built-in
    ``lowercase``), or None when there is none of that name."""
    defs = analysis_settings.get("normalizer") or {}
    if not isinstance(defs, Mapping):
        raise illegal_argument("[analysis.normalizer] must be an object")
    if name not in defs:
        return lowercase if name == "lowercase" else None  # LowercaseNormalizer: LowerCaseFilter
    conf = defs[name]
    if not isinstance(conf, Mapping):
        raise illegal_argument(f"normalizer [{name}] must be an object")
    kind = conf.get("type", "custom")
    if kind != "custom":
        raise illegal_argument(f"Unknown normalizer type [{kind}] for [{name}]")
    if conf.get("tokenizer") is not None:
        raise illegal_argument(f"Custom normalizer [{name}] cannot configure a tokenizer")
    for ref in _names(conf.get("char_filter")):
        raise unsupported(f"char_filter [{ref}] in normalizer [{name}]", "char filters are not implemented")
    registry = _Registry(analysis_settings)
    chain: list[TermFilter] = []
    for ref in _names(conf.get("filter")):
        filter_defs = registry._defs("filter")
        kind = (filter_defs.get(ref) or {}).get("type") if ref in filter_defs else ref
        if kind not in NORMALIZER_FILTERS:
            if ref in filter_defs or kind in _KNOWN_FILTERS or kind in BUILTIN_FILTERS:
                raise illegal_argument(f"Custom normalizer [{name}] may not use filter [{ref}]")
            raise illegal_argument(f"Custom normalizer [{name}] failed to find filter under name [{ref}]")
        if kind != "lowercase":
            raise unsupported(f"normalizer filter [{kind}]", "the embedded engine implements lowercase")
        f = registry.filter(ref)
        if f is not None:
            chain.append(f)

    def normalize(value: str) -> str:
        for f in chain:  # every filter here maps the one token to one token
            value = f(value)  # type: ignore[assignment]
        return value

    return normalize


@functools.lru_cache(maxsize=512)
def _cached_normalizer(name: str, settings_json: str) -> Normalizer | None:
    return _normalizer(name, json.loads(settings_json))


def get_normalizer(name: str, analysis_settings: Mapping[str, Any] | None = None) -> Normalizer | None:
    """The keyword normalizer ``name`` as a function of the whole value (a normalizer emits one
    token), or None when the index defines none of that name (mapping code turns that into
    Elasticsearch's ``normalizer [x] not found for field [f]``). Elasticsearch applies it to the
    indexed value and to term-level and match queries on the field (``normalizer`` in the reference)."""
    return _cached_normalizer(name, json.dumps(analysis_settings or {}, sort_keys=True, default=str))
