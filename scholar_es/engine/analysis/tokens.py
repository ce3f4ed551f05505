"""Tokens with their attributes: position, offsets and type, as Lucene's token streams carry them.

:class:`~engine.analysis.analyzers.Analyzer` yields the terms only (what indexing needs). Phrase
queries need each term's *position* and ``_analyze`` shows offsets and types too; both come from
here, from the same tokenizer and filter chain:

* position: the tokenizer's token index. Every filter of the engine maps one token to at most one
  (a stop filter drops one), and Lucene's ``FilteringTokenFilter`` adds a dropped token's position
  increment to the next kept token, so a kept token's position is its index in the tokenizer output
  (``the quick`` with a stop filter: ``quick`` at position 1).
* offsets: ``start_offset``/``end_offset`` of the token in the text, in UTF-16 code units (Java
  ``char`` offsets). Every tokenizer of the engine emits substrings of the text in order, so each is
  found after the previous one. Filters keep the offsets.
* type: the standard tokenizer's ``<ALPHANUM>``, ``<NUM>``, ``<HANGUL>``, ``<KATAKANA>``,
  ``<SOUTHEAST_ASIAN>``, ``<IDEOGRAPHIC>``, ``<HIRAGANA>``, ``<EMOJI>`` (StandardTokenizerImpl.jflex:
  the longest match wins, a tie goes to the rule listed first: NUM, then HANGUL, KATAKANA, then the
  word rule); ``word`` for the letter, whitespace and keyword tokenizers (CharTokenizer, KeywordTokenizer).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from scholar_es.engine.analysis.analyzers import Analyzer
from scholar_es.engine.analysis.tokenizer import _cc, standard_tokenize

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Token:
    term: str
    position: int
    start_offset: int
    end_offset: int
    type: str


@functools.cache
def _type_patterns() -> dict[str, re.Pattern[str]]:
    ext = _cc("EXTEND", "SEA_EXTEND", "ZWJ", "KEYCAP", "VS15", "VS16", "EMOJI_MOD", "TAG_SPEC", "TAG_TERM")
    letters = _cc("LETTER", "HEBREW", "KATAKANA", "HANGUL", "LETTER_EMOJI")
    return {
        # NUMERIC rule: digits glued by ExtendNumLet / MidNum, no letter anywhere
        "<NUM>": re.compile(f"[^{letters}]*[{_cc('DIGIT', 'NUMERIC')}][^{letters}]*"),
        "<HANGUL>": re.compile(f"(?:[{_cc('HANGUL')}][{ext}]*)+"),
        "<KATAKANA>": re.compile(f"(?:[{_cc('KATAKANA')}][{ext}]*)+"),
        "<SOUTHEAST_ASIAN>": re.compile(f"[{_cc('SEA')}]"),
        "<IDEOGRAPHIC>": re.compile(f"[{_cc('HAN')}]"),
        "<HIRAGANA>": re.compile(f"[{_cc('HIRAGANA')}]"),
        "<EMOJI>": re.compile(
            f"[{_cc('EMOJI', 'EMOJI_MOD', 'RI', 'KEYCAP_BASE_SYM')}\u200d]|[{_cc('DIGIT')}].*\u20e3"
        ),
    }


def standard_type(token: str) -> str:
    """The type StandardTokenizer gives ``token`` (one of its tokens)."""
    pats = _type_patterns()
    for kind in ("<NUM>", "<HANGUL>", "<KATAKANA>"):  # whole-token rules, in jflex order
        if pats[kind].fullmatch(token):
            return kind
    if pats["<EMOJI>"].match(token) and not re.match(f"[{_cc('LETTER')}]", token):
        return "<EMOJI>"
    for kind in ("<SOUTHEAST_ASIAN>", "<IDEOGRAPHIC>", "<HIRAGANA>"):  # single-class rules
        if pats[kind].match(token):
            return kind
    return "<ALPHANUM>"


def _is_standard(tokenizer) -> bool:
    return tokenizer is standard_tokenize or getattr(tokenizer, "func", None) is standard_tokenize


def _u16(text: str, upto: int) -> int:
    """UTF-16 length of ``text[:upto]`` (Java offsets)."""
    part = text[:upto]
    return (
        upto if part.isascii() or max(part, default="\0") <= "\uffff" else len(part.encode("utf-16-le")) // 2
    )


def tokens(analyzer: Analyzer, text: str, with_offsets: bool = True) -> list[Token]:
    """The tokens ``analyzer`` makes of ``text`` (positions from 0), with offsets and types."""
    if _SURROGATE.search(text):  # as Analyzer._analyze: Java reads a surrogate pair as one code point
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    raw = analyzer.tokenizer(text)
    term = getattr(analyzer, "_term", None)
    standard = _is_standard(analyzer.tokenizer)
    out: list[Token] = []
    at = 0
    for position, tok in enumerate(raw):
        start = end = 0
        if with_offsets:
            i = text.find(tok, at)
            start, end = (i, i + len(tok)) if i >= 0 else (at, at)
            at = end
        t = term(tok) if term is not None else tok
        if t is None:
            continue
        kind = standard_type(tok) if standard and with_offsets else "word"
        if with_offsets:
            start, end = _u16(text, start), _u16(text, end)
        out.append(Token(t, position, start, end, kind))
    return out


def positions(analyzer: Analyzer, text: str) -> tuple[list[tuple[str, int]], int]:
    """(term, position) of each token of ``text``, and the number of positions the text took
    (the tokenizer's tokens, dropped ones included: what the next value's positions start after)."""
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    raw = analyzer.tokenizer(text)
    term = getattr(analyzer, "_term", None)
    if term is None:
        return [(t, i) for i, t in enumerate(raw)], len(raw)
    return [(t, i) for i, t in enumerate(map(term, raw)) if t is not None], len(raw)
