"""Text analysis must give the terms Elasticsearch indexes.

Expected values come from the Elasticsearch reference examples (URLs beside them) or, where the
docs have none, from running Lucene 9.9.1's own classes (StandardTokenizer, EnglishAnalyzer,
PorterStemFilter, ... from lucene-core / lucene-analysis-common) on the same input.
"""

from __future__ import annotations

import random

import pytest

from scholar_es.engine.analysis.analyzers import (
    BUILTIN_ANALYZERS,
    ENGLISH_STOP_WORDS,
    build_analyzer,
    english_possessive,
    get_analyzer,
    lowercase,
    porter_stem,
)
from scholar_es.engine.analysis.tokenizer import letter_tokenize, standard_tokenize, whitespace_tokenize
from scholar_es.engine.errors import EsError

DOC_TEXT = "The 2 QUICK Brown-Foxes jumped over the lazy dog's bone."


# --------------------------------------------------------------- Elasticsearch reference examples


def test_standard_tokenizer_doc_example():
    # https://www.elastic.co/guide/en/elasticsearch/reference/current/analysis-standard-tokenizer.html
    assert standard_tokenize(DOC_TEXT) == [
        "The",
        "2",
        "QUICK",
        "Brown",
        "Foxes",
        "jumped",
        "over",
        "the",
        "lazy",
        "dog's",
        "bone",
    ]


def test_standard_tokenizer_max_token_length_doc_example():
    # same page, "max_token_length": 5 -- a long token is split at max_token_length intervals
    assert standard_tokenize(DOC_TEXT, 5) == [
        "The",
        "2",
        "QUICK",
        "Brown",
        "Foxes",
        "jumpe",
        "d",
        "over",
        "the",
        "lazy",
        "dog's",
        "bone",
    ]
    settings = {
        "tokenizer": {"my_tokenizer": {"type": "standard", "max_token_length": 5}},
        "analyzer": {"my_analyzer": {"tokenizer": "my_tokenizer"}},
    }
    assert get_analyzer("my_analyzer", settings)(DOC_TEXT)[5:7] == ["jumpe", "d"]


def test_standard_analyzer_doc_examples():
    # https://www.elastic.co/guide/en/elasticsearch/reference/current/analysis-standard-analyzer.html
    assert get_analyzer("standard")(DOC_TEXT) == [
        "the",
        "2",
        "quick",
        "brown",
        "foxes",
        "jumped",
        "over",
        "the",
        "lazy",
        "dog's",
        "bone",
    ]
    settings = {
        "analyzer": {
            "my_english_analyzer": {"type": "standard", "max_token_length": 5, "stopwords": "_english_"}
        }
    }
    assert get_analyzer("my_english_analyzer", settings)(DOC_TEXT) == [
        "2",
        "quick",
        "brown",
        "foxes",
        "jumpe",
        "d",
        "over",
        "lazy",
        "dog's",
        "bone",
    ]


def test_simple_whitespace_stop_keyword_doc_examples():
    # analysis-simple-analyzer.html, analysis-whitespace-analyzer.html, analysis-stop-analyzer.html,
    # analysis-keyword-analyzer.html under .../elasticsearch/reference/current/
    assert get_analyzer("simple")(DOC_TEXT) == [
        "the",
        "quick",
        "brown",
        "foxes",
        "jumped",
        "over",
        "the",
        "lazy",
        "dog",
        "s",
        "bone",
    ]
    assert get_analyzer("whitespace")(DOC_TEXT) == [
        "The",
        "2",
        "QUICK",
        "Brown-Foxes",
        "jumped",
        "over",
        "the",
        "lazy",
        "dog's",
        "bone.",
    ]
    assert get_analyzer("stop")(DOC_TEXT) == [
        "quick",
        "brown",
        "foxes",
        "jumped",
        "over",
        "lazy",
        "dog",
        "s",
        "bone",
    ]
    assert get_analyzer("keyword")(DOC_TEXT) == [DOC_TEXT]
    assert get_analyzer("keyword")("") == [""]  # KeywordTokenizer emits the empty token too


# ------------------------------------------------------------------------ english analyzer (Lucene)


@pytest.mark.parametrize(
    "text, terms",
    [
        (DOC_TEXT, ["2", "quick", "brown", "fox", "jump", "over", "lazi", "dog", "bone"]),
        (
            "The runners were running quickly through the forests' paths.",
            ["runner", "were", "run", "quickli", "through", "forest", "path"],
        ),
        ("Generalizations of relational databases", ["gener", "relat", "databas"]),
        ("It's John’s and JAMES'S cars; don't", ["john", "jame", "car", "don't"]),
        (
            "Transformer-based models (e.g., BERT) achieve state-of-the-art F1 scores on SQuAD 2.0.",
            [
                "transform",
                "base",
                "model",
                "e.g",
                "bert",
                "achiev",
                "state",
                "art",
                "f1",
                "score",
                "squad",
                "2.0",
            ],
        ),
        ("THE IS A", []),
        ("ΟΔΟΣ İstanbul DOG'S", ["οδοσ", "istanbul", "dog"]),
    ],
)
def test_english_analyzer(text, terms):
    # EnglishAnalyzer: StandardTokenizer, EnglishPossessiveFilter, LowerCaseFilter, StopFilter, PorterStemFilter
    assert get_analyzer("english")(text) == terms


def test_english_analyzer_settings():
    settings = {
        "analyzer": {"mine": {"type": "english", "stopwords": ["over", "lazy"], "stem_exclusion": ["jumped"]}}
    }
    assert get_analyzer("mine", settings)(DOC_TEXT) == [
        "the",
        "2",
        "quick",
        "brown",
        "fox",
        "jumped",
        "the",
        "dog",
        "bone",
    ]


# ------------------------------------------------------------------------------ standard tokenizer


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("a:b", ["a:b"]),  # ':' is MidLetter (UAX#29 WB6/7)
        ("3.14 1,000 1.000,5", ["3.14", "1,000", "1.000,5"]),  # WB11/12
        ("x_1 foo_bar __init__ _x x_", ["x_1", "foo_bar", "__init__", "_x", "x_"]),  # WB13a/b
        ("state-of-the-art GPT-4 f1 3d gpt4", ["state", "of", "the", "art", "GPT", "4", "f1", "3d", "gpt4"]),
        ("can't U.S.A. e.g. ab.cd won’t", ["can't", "U.S.A", "e.g", "ab.cd", "won’t"]),
        ("a.1 1.a 1_a a_1 1_.2", ["a", "1", "1", "a", "1_a", "a_1", "1_", "2"]),
        ("a'b 1'2 a''b a.'b", ["a'b", "1'2", "a", "b", "a", "b"]),
        (
            "email: jo.doe@example.com http://www.example.com/a-b?x=1#y",
            ["email", "jo.doe", "example.com", "http", "www.example.com", "a", "b", "x", "1", "y"],
        ),
        (
            "R2-D2 C-3PO 1/2 3/4 $100 50% #hashtag @user",
            ["R2", "D2", "C", "3PO", "1", "2", "3", "4", "100", "50", "hashtag", "user"],
        ),
        ("café cafe\u0301 co\u00adop naïve", ["café", "cafe\u0301", "co\u00adop", "naïve"]),  # WB4
        (
            "中文字 日本語のテキスト カタカナ ﾊﾝｶｸ 한국어 텍스트",
            ["中", "文", "字", "日", "本", "語", "の", "テキスト", "カタカナ", "ﾊﾝｶｸ", "한국어", "텍스트"],
        ),
        ("ภาษาไทย ລາວ မြန်မာ ខ្មែរ", ["ภาษาไทย", "ລາວ", "မြန်မာ", "ខ្មែរ"]),  # LB=Complex_Context runs
        (
            "😀 👍🏻 🇺🇸 👨\u200d👩\u200d👧 #️⃣ 1️⃣ ❤️ ©",
            ["😀", "👍🏻", "🇺🇸", "👨\u200d👩\u200d👧", "#️⃣", "1️⃣", "❤️", "©"],
        ),
        ("a🏻 😀😀 🏻", ["a🏻", "😀", "😀", "🏻"]),  # skin tones are WB=Extend since Unicode 11
        ("א\"ב ם’ם' א'", ['א"ב', "ם’ם", "א'"]),  # WB7a-c; a letter reached through a Mid* takes no quote
        ("x\u202fy 1\u202f000", ["x\u202fy", "1\u202f000"]),  # U+202F is ExtendNumLet
        ("ＡＢＣ １２３ ３．１４", ["ＡＢＣ", "１２３", "３．１４"]),
        ("œuvre ß İstanbul ΟΔΟΣ", ["œuvre", "ß", "İstanbul", "ΟΔΟΣ"]),
        ("tab\there\nnew\rline\x00null\x1fus", ["tab", "here", "new", "line", "null", "us"]),
        ("_\u17ca\u103e", ["\u17ca\u103e"]),  # a mark that is Extend can still start a SOUTHEAST_ASIAN token
        ("", []),
        ("  ...  --- ", []),
    ],
)
def test_standard_tokenizer(text, tokens):
    assert standard_tokenize(text) == tokens


def test_standard_tokenizer_max_token_length_cuts_at_the_buffer():
    assert standard_tokenize("abcdefgh 1234567 ab.cd.ef", 3) == [
        "abc",
        "def",
        "gh",
        "123",
        "456",
        "7",
        "ab",
        "cd",
        "ef",
    ]
    # lengths are UTF-16 units: a supplementary char takes two of them
    assert standard_tokenize("a😀𝑥𝑥𝑥 𝑥𝑥𝑥", 4) == ["a", "😀", "𝑥𝑥", "𝑥", "𝑥𝑥", "𝑥"]
    assert standard_tokenize("ab 𝑥 cd", 1) == ["a", "b"]  # Lucene's 1-char buffer stops at a surrogate pair
    long_word = "x" * 600
    assert standard_tokenize(long_word) == ["x" * 255, "x" * 255, "x" * 90]
    with pytest.raises(ValueError):
        standard_tokenize("a", 0)


def test_surrogates():
    assert standard_tokenize("ab \ud83d\ude00 cd") == ["ab", "😀", "cd"]  # halves of one pair re-paired
    assert standard_tokenize("ab \udc80 cd") == ["ab", "cd"]  # surrogateescape debris is skipped
    assert standard_tokenize("ab cd\ud83d") == []  # zzRefill reports EOF when input ends in a high surrogate


# ------------------------------------------------------------------------------ CharTokenizers


def test_letter_and_whitespace_tokenizers():
    assert letter_tokenize("it's 4x4 naïve 𝑥y") == ["it", "s", "x", "naïve", "𝑥y"]
    # Character.isWhitespace: no-break spaces are not whitespace, U+0085 neither
    assert whitespace_tokenize("a\u00a0b c\u2007d\u202fe\tf\x85g\u3000h") == [
        "a\u00a0b",
        "c\u2007d\u202fe",
        "f\x85g",
        "h",
    ]
    assert whitespace_tokenize("x" * 300) == ["x" * 255, "x" * 45]
    assert letter_tokenize("abcdefg", 3) == ["abc", "def", "g"]


# ----------------------------------------------------------------------------------- token filters


def test_english_stop_words_are_lucenes_33():
    lucene = {
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
    }
    assert len(lucene) == 33
    assert lucene == ENGLISH_STOP_WORDS


def test_lowercase_is_per_code_point():
    assert lowercase("İSTANBUL") == "istanbul"  # str.lower() would give 'i̇stanbul'
    assert lowercase("ΟΔΟΣ ΣΑΣ") == "οδοσ σασ"  # no final-sigma rule
    assert lowercase("Straße ÆBLE") == "straße æble"


@pytest.mark.parametrize(
    "token, out",
    [
        ("dog's", "dog"),
        ("DOG'S", "DOG"),
        ("dog’s", "dog"),
        ("dog＇s", "dog"),
        ("dogs'", "dogs'"),
        ("'s", ""),
        ("s", "s"),
        ("it's's", "it's"),
        ("bus", "bus"),
    ],
)
def test_english_possessive(token, out):
    assert english_possessive(token) == out


@pytest.mark.parametrize(
    "word, stem",
    [
        # Porter's paper / reference implementation examples
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("ties", "ti"),
        ("caress", "caress"),
        ("cats", "cat"),
        ("feed", "feed"),
        ("agreed", "agre"),
        ("disabled", "disabl"),
        ("matting", "mat"),
        ("mating", "mate"),
        ("meeting", "meet"),
        ("milling", "mill"),
        ("messing", "mess"),
        ("meetings", "meet"),
        ("happy", "happi"),
        ("sky", "sky"),
        ("relational", "relat"),
        ("conditional", "condit"),
        ("rational", "ration"),
        ("valenci", "valenc"),
        ("digitizer", "digit"),
        ("conformabli", "conform"),
        ("radicalli", "radic"),
        ("differentli", "differ"),
        ("vileli", "vile"),
        ("analogousli", "analog"),
        ("vietnamization", "vietnam"),
        ("predication", "predic"),
        ("operator", "oper"),
        ("feudalism", "feudal"),
        ("decisiveness", "decis"),
        ("hopefulness", "hope"),
        ("callousness", "callous"),
        ("formaliti", "formal"),
        ("sensitiviti", "sensit"),
        ("sensibiliti", "sensibl"),
        ("triplicate", "triplic"),
        ("formative", "form"),
        ("formalize", "formal"),
        ("electriciti", "electr"),
        ("electrical", "electr"),
        ("hopeful", "hope"),
        ("goodness", "good"),
        ("revival", "reviv"),
        ("allowance", "allow"),
        ("inference", "infer"),
        ("airliner", "airlin"),
        ("gyroscopic", "gyroscop"),
        ("adjustable", "adjust"),
        ("defensible", "defens"),
        ("irritant", "irrit"),
        ("replacement", "replac"),
        ("adjustment", "adjust"),
        ("dependent", "depend"),
        ("adoption", "adopt"),
        ("homologou", "homolog"),
        ("communism", "commun"),
        ("activate", "activ"),
        ("angulariti", "angular"),
        ("homologous", "homolog"),
        ("effective", "effect"),
        ("bowdlerize", "bowdler"),
        ("probate", "probat"),
        ("rate", "rate"),
        ("cease", "ceas"),
        ("controll", "control"),
        ("roll", "roll"),
        # Lucene/reference departures from the 1980 paper: -bli -> -ble, -logi -> -log
        ("generalization", "gener"),
        ("running", "run"),
        ("possibly", "possibl"),
        ("archaeology", "archaeolog"),
        # no lowercasing, words of <= 2 chars untouched
        ("Running", "Run"),
        ("is", "is"),
        ("as", "as"),
        ("ies", "i"),
    ],
)
def test_porter_stem(word, stem):
    assert porter_stem(word) == stem


# ------------------------------------------------------------------------ custom analysis settings


def test_custom_analyzer_from_settings():
    settings = {
        "filter": {
            "my_stop": {"type": "stop", "stopwords": ["brown", "Lazy"], "ignore_case": True},
            "poss": {"type": "stemmer", "language": "possessive_english"},
            "eng": {"type": "stemmer", "language": "english"},
        },
        "analyzer": {
            "my": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "porter_stem"]},
            "stops": {"tokenizer": "whitespace", "filter": ["my_stop"]},
            "chain": {
                "type": "custom",
                "tokenizer": "standard",
                "filter": ["poss", "lowercase", "stop", "eng"],
            },
        },
    }
    assert get_analyzer("my", settings)(DOC_TEXT) == [
        "the",
        "2",
        "quick",
        "brown",
        "fox",
        "jump",
        "over",
        "the",
        "lazi",
        "dog'",
        "bone",
    ]
    assert get_analyzer("stops", settings)("The BROWN lazy fox") == ["The", "fox"]
    assert get_analyzer("chain", settings)(DOC_TEXT) == get_analyzer("english")(DOC_TEXT)
    assert get_analyzer("default", settings)(DOC_TEXT) == get_analyzer("standard")(DOC_TEXT)
    settings["analyzer"]["default"] = {"type": "english"}
    assert get_analyzer("default_search", settings)(DOC_TEXT) == get_analyzer("english")(DOC_TEXT)


def test_get_analyzer_is_cached_and_sees_changed_settings():
    settings = {"analyzer": {"a": {"tokenizer": "keyword"}}}
    assert get_analyzer("a", settings) is get_analyzer("a", settings)
    assert get_analyzer("english") is get_analyzer("english")
    settings["analyzer"]["a"] = {"tokenizer": "whitespace"}
    assert get_analyzer("a", settings)("x y") == ["x", "y"]
    assert set(BUILTIN_ANALYZERS) == {"standard", "simple", "whitespace", "stop", "keyword", "english"}


@pytest.mark.parametrize(
    "name, settings, reason",
    [
        ("foo", None, "failed to find analyzer [foo]"),
        (
            "my",
            {"analyzer": {"my": {"tokenizer": "standard", "filter": ["foo"]}}},
            "Custom Analyzer [my] failed to find filter under name [foo]",
        ),
        (
            "my",
            {"analyzer": {"my": {"type": "custom", "tokenizer": "nope"}}},
            "Custom Analyzer [my] failed to find tokenizer under name [nope]",
        ),
        (
            "my",
            {"analyzer": {"my": {"filter": ["lowercase"]}}},
            "analyzer [my] must specify either an analyzer type, or a tokenizer",
        ),
        ("my", {"analyzer": {"my": {"type": "bogus"}}}, "Unknown analyzer type [bogus] for [my]"),
        (
            "my",
            {
                "analyzer": {"my": {"tokenizer": "standard", "filter": ["f"]}},
                "filter": {"f": {"type": "zap"}},
            },
            "Unknown filter type [zap] for [f]",
        ),
        (
            "my",
            {
                "analyzer": {"my": {"tokenizer": "t"}},
                "tokenizer": {"t": {"type": "standard", "max_token_length": 0}},
            },
            "maxTokenLength must be greater than zero",
        ),
    ],
)
def test_errors_name_the_offender(name, settings, reason):
    with pytest.raises(EsError) as err:
        get_analyzer(name, settings)
    assert (err.value.status, err.value.type, err.value.reason) == (400, "illegal_argument_exception", reason)


def test_unsupported_components_are_a_400_not_a_guess():
    for name, settings in [
        ("french", None),
        ("my", {"analyzer": {"my": {"tokenizer": "ngram"}}}),
        ("my", {"analyzer": {"my": {"tokenizer": "standard", "filter": ["asciifolding"]}}}),
        ("my", {"analyzer": {"my": {"tokenizer": "standard", "char_filter": ["html_strip"]}}}),
        (
            "my",
            {
                "analyzer": {"my": {"tokenizer": "standard", "filter": ["s"]}},
                "filter": {"s": {"type": "stemmer", "language": "light_english"}},
            },
        ),
    ]:
        with pytest.raises(EsError) as err:
            get_analyzer(name, settings)
        assert err.value.status == 400 and "not supported" in err.value.reason


def test_build_analyzer_like_analyze_api():
    assert build_analyzer("standard", ["lowercase", "porter_stem"])("Running FOXES") == ["run", "fox"]
    with pytest.raises(EsError, match=r"failed to find global token filter under \[foo\]"):
        build_analyzer("standard", ["foo"])
    with pytest.raises(EsError, match=r"failed to find token filter under \[foo\]"):
        build_analyzer("standard", ["foo"], {"filter": {}})
    with pytest.raises(EsError, match=r"failed to find global tokenizer under \[nope\]"):
        build_analyzer("nope")


# ------------------------------------------------------------------------------------------- fuzz


def _random_strings(n: int, seed: int = 20240611) -> list[str]:
    rng = random.Random(seed)
    pools = [
        lambda: chr(rng.randint(0, 0x10FFFF)),  # any code point, lone surrogates included
        lambda: chr(
            rng.choice(
                [
                    rng.randint(0x1F300, 0x1FAFF),
                    0x200D,
                    0xFE0F,
                    0x20E3,
                    rng.randint(0x1F1E6, 0x1F1FF),
                    rng.randint(0x1F3FB, 0x1F3FF),
                    rng.randint(0xE0020, 0xE007F),
                ]
            )
        ),  # emoji parts
        lambda: chr(
            rng.choice(
                [
                    rng.randint(0x4E00, 0x9FFF),
                    rng.randint(0x3040, 0x30FF),
                    rng.randint(0xAC00, 0xD7A3),
                    rng.randint(0x0E00, 0x0E7F),
                    rng.randint(0x0590, 0x05FF),
                ]
            )
        ),  # CJK, kana, Thai, Hebrew
        lambda: chr(rng.randint(0, 0x3F)),  # controls, spaces, ASCII punctuation and digits
        lambda: rng.choice("aZ_.'’:,-\"\u00ad\u0301\u202f "),  # the joiners of the word rules
    ]
    out = []
    for i in range(n):
        length = 10_000 if i % 500 == 0 else rng.randint(0, 60)
        out.append("".join(rng.choice(pools)() for _ in range(length)))
    return out


def test_fuzz_tokenizer_never_raises_and_tokens_are_sane():
    rng = random.Random(7)
    for text in _random_strings(2000):
        n = rng.choice((1, 2, 3, 5, 255))
        tokens = standard_tokenize(text, n)
        for t in tokens:
            assert t, text
            assert not any(c.isspace() and c != "\u202f" for c in t), (text, t)  # U+202F is ExtendNumLet
            assert len(t.encode("utf-16-le", "surrogatepass")) // 2 <= n, (text, n, t)


def test_fuzz_analyzers_never_raise():
    analyzers = [get_analyzer(name) for name in BUILTIN_ANALYZERS]
    for text in _random_strings(300, seed=3):
        for analyzer in analyzers:
            assert all(isinstance(t, str) for t in analyzer(text))


def test_ascii_patterns_tokenize_ascii_text_as_the_full_ones():
    """ASCII text goes through the StandardTokenizer patterns restricted to ASCII (tokenizer._cc
    ascii_only: compiled in milliseconds instead of ~0.35 s per process); on ASCII text they
    must match exactly what the full patterns match."""
    from scholar_es.engine.analysis import tokenizer as tok

    rng = random.Random(11)
    alphabet = [chr(c) for c in range(128)]
    joiners = list("aZ9_.'\":,;-#*@ \t\n")
    for i in range(3000):
        length = 2000 if i % 300 == 0 else rng.randint(0, 40)
        text = "".join(rng.choice(joiners if rng.random() < 0.6 else alphabet) for _ in range(length))
        assert tok._FINDALL_ASCII.findall(text) == tok._findall_bmp().findall(text), text
        assert tok._FINDALL_ASCII.findall(text) == tok._findall_full().findall(text), text
    for c in alphabet:
        assert bool(tok._SLOW_ASCII.search(c)) == bool(tok._SLOW_BMP.search(c)), repr(c)


def test_ascii_text_never_compiles_the_full_patterns(tmp_path):
    import subprocess
    import sys

    code = (
        "from scholar_es.engine.analysis import tokenizer as t\n"
        'assert t.standard_tokenize("The 2 QUICK Brown-Foxes jumped over the lazy dog\'s bone.") == '
        "['The', '2', 'QUICK', 'Brown', 'Foxes', 'jumped', 'over', 'the', 'lazy', \"dog's\", 'bone']\n"
        "assert t._findall_bmp.cache_info().currsize == t._findall_full.cache_info().currsize == 0\n"
        "assert t.standard_tokenize('caf\\u00e9 na\\u00efve') == ['caf\\u00e9', 'na\\u00efve']\n"
        "assert t._findall_bmp.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path, timeout=120)
