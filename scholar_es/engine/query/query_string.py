"""``query_string`` (and the ``q`` URL parameter): Lucene's classic QueryParser syntax, as
Elasticsearch's QueryStringQueryParser builds queries from it.

Implemented: bare terms; ``field:term``; ``field:(group)``; quoted phrases with an optional
``~slop``; ``AND``/``&&``, ``OR``/``||``, ``NOT``/``!``, ``+``/``-``; parentheses; boosts
``term^2`` and ``(group)^2``; ``*`` and wildcard field names (``title*:x``, ``*:x``); prefix
``foo*`` and wildcard ``f?o*`` terms; ``*`` (match all) and ``field:*`` (exists);
``_exists_:field``; ranges ``[a TO b]``, ``{a TO b}`` (``*`` open) and ``field:>a``, ``>=``,
``<``, ``<=``. Fuzzy terms (``foo~``) and regular expressions (``/re/``) are refused by name.

Building follows QueryParserBase: a run of bare terms (the parser's ``MultiTerm``, since it no
longer splits on whitespace) is analyzed as one text; every clause is added with
``addClause``'s rules for the conjunction, the modifier and ``default_operator``; a term is a
``match`` of its text on each field (several fields: their ``dis_max`` with ``tie_breaker``, the
``best_fields`` type); a quoted text a ``match_phrase``; a pure negative group matches everything
else (Queries.fixNegativeQueryIfNeeded). Fields: ``fields``, else ``default_field``, else
``*``: every indexed text, keyword, numeric, date and boolean field, leniently (a value a field
cannot parse matches nothing there), as ``index.query.default_field`` defaults to.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported, wrapped

#: query_string parameters (QueryStringQueryBuilder): implemented, and known but refused when set
IMPLEMENTED = {
    "query",
    "default_field",
    "fields",
    "default_operator",
    "analyzer",
    "quote_analyzer",
    "boost",
    "lenient",
    "phrase_slop",
    "tie_breaker",
    "type",
    "minimum_should_match",
    "allow_leading_wildcard",
    "analyze_wildcard",
    "_name",
}
REFUSED = {
    "enable_position_increments",
    "fuzziness",
    "fuzzy_max_expansions",
    "fuzzy_prefix_length",
    "fuzzy_transpositions",
    "fuzzy_rewrite",
    "auto_generate_synonyms_phrase_query",
    "time_zone",
    "quote_field_suffix",
    "rewrite",
    "max_determinized_states",
    "escape",
    "split_on_whitespace",
    "all_fields",
}

_SPECIAL = set(' \t\n\r\u3000+-!():^[]"{}~*?\\/')
_TERM_START_EXCLUDED = _SPECIAL


class QsSyntaxError(Exception):
    pass


@dataclass
class Tok:
    kind: str  # TERM PREFIX WILD STAR QUOTED AND OR NOT PLUS MINUS LP RP COLON CARAT FUZZY RANGE REGEX CMP
    text: str
    at: int
    extra: object = None


def _lex(q: str) -> list[Tok]:
    out: list[Tok] = []
    i, n = 0, len(q)
    while i < n:
        c = q[i]
        if c in " \t\n\r\u3000":
            i += 1
            continue
        start = i
        if q.startswith("&&", i) or q.startswith("||", i):
            out.append(Tok("AND" if c == "&" else "OR", q[i : i + 2], i))
            i += 2
            continue
        simple = {"+": "PLUS", "-": "MINUS", "!": "NOT", "(": "LP", ")": "RP", ":": "COLON"}
        if c in simple:
            out.append(Tok(simple[c], c, i))
            i += 1
            continue
        if c in "<>" and out and out[-1].kind == "COLON":
            op = q[i : i + 2] if q.startswith("=", i + 1) else c
            out.append(Tok("CMP", op, i))
            i += len(op)
            continue
        if c == "^":
            m = re.compile(r"\^(\d+(?:\.\d+)?)").match(q, i)
            if m is None:
                raise QsSyntaxError(f'Encountered "^" at line 1, column {i}.')
            out.append(Tok("CARAT", m[1], i))
            i = m.end()
            continue
        if c == "~":
            m = re.compile(r"~(\d+(?:\.\d+)?)?").match(q, i)
            assert m is not None
            out.append(Tok("FUZZY", m[1] or "", i))
            i = m.end()
            continue
        if c == '"':
            j, buf = i + 1, []
            while j < n and q[j] != '"':
                if q[j] == "\\" and j + 1 < n:
                    j += 1
                buf.append(q[j])
                j += 1
            if j >= n:
                raise QsSyntaxError(
                    f'Lexical error at line 1, column {n + 1}.  Encountered: <EOF> after : "{q[i:]}"'
                )
            out.append(Tok("QUOTED", "".join(buf), i))
            i = j + 1
            continue
        if c == "/":
            raise EsError(*_REFUSE_REGEX)
        if c in "[{":
            close = {"[": "]", "{": "}"}
            m = re.compile(r"[\[{]\s*(\"[^\"]*\"|[^\s\]}]+)\s+TO\s+(\"[^\"]*\"|[^\s\]}]+)\s*([\]}])").match(
                q, i
            )
            if m is None:
                raise QsSyntaxError(f'Encountered "{c}" at line 1, column {i}: a range is [from TO to]')
            lo, hi = (v.strip('"') for v in (m[1], m[2]))
            out.append(Tok("RANGE", m[0], i, (lo, hi, c == "[", m[3] == "]")))
            del close
            i = m.end()
            continue
        if c == "*" and (i + 1 >= n or q[i + 1] in _SPECIAL and q[i + 1] not in "*?"):
            out.append(Tok("STAR", "*", i))
            i += 1
            continue
        # a term: start char (or an escaped char, or a wildcard), then term chars (- and + too)
        buf, wild = [], False
        while i < n:
            ch = q[i]
            if ch == "\\" and i + 1 < n:
                buf.append("\\" + q[i + 1])
                i += 2
                continue
            if ch in "*?":
                wild = True
                buf.append(ch)
                i += 1
                continue
            if ch in _SPECIAL and not (ch in "-+" and i > start):
                break
            buf.append(ch)
            i += 1
        if i == start:  # pragma: no cover - every special character is handled above
            raise QsSyntaxError(f'Encountered "{c}" at line 1, column {i}.')
        raw = "".join(buf)
        if raw in ("AND", "OR", "NOT"):
            out.append(Tok(raw, raw, start))
            continue
        kind = "TERM"
        if wild:
            body = raw[:-1]
            kind = "PREFIX" if raw.endswith("*") and not re.search(r"(?<!\\)[*?]", body) else "WILD"
        out.append(Tok(kind, raw, start))
    return out


_REFUSE_REGEX = (
    400,
    "parsing_exception",
    "[query_string regular expression /.../] is not supported by the scholar-es embedded engine",
)


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


# --- AST -----------------------------------------------------------------------------------
@dataclass
class Leaf:
    kind: str  # text, phrase, prefix, wild, range, all, exists
    field: str | None
    value: object
    boost: float = 1.0
    slop: int | None = None


@dataclass
class Group:
    clauses: list[tuple[str, object]] = field(default_factory=list)  # (occur, node)
    boost: float = 1.0
    field: str | None = None


CONJ_NONE, CONJ_AND, CONJ_OR = 0, 1, 2
MOD_NONE, MOD_NOT, MOD_REQ = 0, 10, 11


class _Parser:
    def __init__(self, toks: list[Tok], and_default: bool) -> None:
        self.toks, self.i, self.and_default = toks, 0, and_default
        self.depth = 0

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.toks[j].kind if j < len(self.toks) else "EOF"

    def take(self, kind: str | None = None) -> Tok:
        if self.i >= len(self.toks):
            raise QsSyntaxError('Encountered "<EOF>" at the end of the query.')
        t = self.toks[self.i]
        if kind is not None and t.kind != kind:
            raise QsSyntaxError(f'Encountered "{t.text}" at line 1, column {t.at}.')
        self.i += 1
        return t

    def add(self, clauses: list, conj: int, mods: int, q) -> None:
        """QueryParserBase#addClause."""
        if clauses and conj == CONJ_AND and clauses[-1][0] != "must_not":
            clauses[-1] = ("must", clauses[-1][1])
        if clauses and self.and_default and conj == CONJ_OR and clauses[-1][0] != "must_not":
            clauses[-1] = ("should", clauses[-1][1])
        if q is None:
            return
        prohibited = mods == MOD_NOT
        if not self.and_default:
            required = mods == MOD_REQ or (conj == CONJ_AND and not prohibited)
        else:
            required = not prohibited and conj != CONJ_OR
        clauses.append(("must" if required else "must_not" if prohibited else "should", q))

    def _multi_term_next(self, k: int) -> bool:
        return self.peek(k) == "TERM" and self.peek(k + 1) not in (
            "COLON",
            "STAR",
            "FUZZY",
            "CARAT",
            "AND",
            "OR",
        )

    def query(self, fld: str | None) -> Group:
        self.depth += 1
        if self.depth > 100:
            raise QsSyntaxError("the query nests groups too deeply")
        g = Group(field=fld)
        first = True
        while self.peek() not in ("EOF", "RP"):
            if self.peek() == "TERM" and self._multi_term_next(1):
                words = [self.take().text]
                while self._multi_term_next(0):
                    words.append(self.take().text)
                # addMultiTermClauses: the run's clauses take the default occur
                g.clauses.append(
                    ("must" if self.and_default else "should", Leaf("multi", fld, unescape(" ".join(words))))
                )
                first = False
                continue
            conj = CONJ_NONE
            if not first and self.peek() in ("AND", "OR"):
                conj = CONJ_AND if self.take().kind == "AND" else CONJ_OR
            mods = MOD_NONE
            if self.peek() in ("PLUS", "MINUS", "NOT"):
                k = self.take().kind
                mods = MOD_REQ if k == "PLUS" else MOD_NOT
            self.add(g.clauses, conj, mods, self.clause(fld))
            first = False
        self.depth -= 1
        return g

    def clause(self, fld: str | None):
        if self.peek() in ("TERM", "STAR") and self.peek(1) == "COLON":
            t = self.take()
            self.take("COLON")
            fld = "*" if t.kind == "STAR" else unescape(t.text)
        if self.peek() == "LP":
            self.take()
            g = self.query(fld)
            self.take("RP")
            if self.peek() == "CARAT":
                g.boost = float(self.take().text)
            return g if g.clauses else None
        return self.term(fld)

    def term(self, fld: str | None) -> Leaf:
        t = self.take()
        leaf: Leaf
        if t.kind == "CMP":
            v = self.take()
            if v.kind not in ("TERM", "QUOTED"):
                raise QsSyntaxError(f'Encountered "{v.text}" at line 1, column {v.at}.')
            val = unescape(v.text) if v.kind == "TERM" else v.text
            op = {
                "<": (None, val, True, False),
                "<=": (None, val, True, True),
                ">": (val, None, False, True),
                ">=": (val, None, True, True),
            }[t.text]
            leaf = Leaf("range", fld, op)
        elif t.kind == "TERM":
            leaf = Leaf("text", fld, unescape(t.text))
        elif t.kind == "STAR":
            leaf = Leaf("all" if fld in (None, "*") else "exists", fld, "*")
        elif t.kind == "PREFIX":
            leaf = Leaf("prefix", fld, unescape(t.text[:-1]))
        elif t.kind == "WILD":
            leaf = Leaf("wild", fld, t.text)
        elif t.kind == "QUOTED":
            leaf = Leaf("phrase", fld, t.text)
        elif t.kind == "RANGE":
            bounds: tuple[str, str, bool, bool] = t.extra  # type: ignore[assignment]
            lo, hi, inc_lo, inc_hi = bounds
            leaf = Leaf("range", fld, (None if lo == "*" else lo, None if hi == "*" else hi, inc_lo, inc_hi))
        else:
            raise QsSyntaxError(f'Encountered "{t.text}" at line 1, column {t.at}.')
        if self.peek() == "FUZZY":
            f = self.take()
            if leaf.kind != "phrase":
                raise unsupported("query_string fuzzy term [~]", "fuzzy queries are not implemented")
            leaf.slop = int(float(f.text)) if f.text else None
        if self.peek() == "CARAT":
            leaf.boost = float(self.take().text)
        if leaf.field == "_exists_" and leaf.kind == "text":
            leaf = Leaf("exists", str(leaf.value), "*", leaf.boost)
        return leaf


def parse(q: str, and_default: bool) -> Group:
    """The query text as a tree of groups and leaves (QsSyntaxError on a syntax error)."""
    p = _Parser(_lex(q), and_default)
    g = p.query(None)
    if p.peek() != "EOF":
        t = p.toks[p.i]
        raise QsSyntaxError(f'Encountered "{t.text}" at line 1, column {t.at}.')
    return g


def syntax_error(q: str, e: QsSyntaxError) -> EsError:
    """Elasticsearch's answer to a query_string it cannot parse (QueryStringQueryParser#parse)."""
    return wrapped(
        400,
        "query_shard_exception",
        f"Failed to parse query [{q}]",
        EsError(400, "parse_exception", f"Cannot parse '{q}': {e}"),
    )


def check_params(p: dict) -> None:
    if not isinstance(p, dict):
        raise parsing_error("[query_string] query malformed, no start_object after query name")
    for key in p:
        if key in REFUSED:
            raise unsupported(f"query_string.{key}")
        if key not in IMPLEMENTED:
            raise parsing_error(f"[query_string] query does not support [{key}]")
    if "query" not in p:
        raise parsing_error("[query_string] must be provided with a [query]")
    if p.get("type", "best_fields") != "best_fields":
        raise unsupported(f"query_string type [{p['type']}]", "only best_fields is implemented")
    if p.get("analyze_wildcard") not in (None, False, "false"):
        raise unsupported("query_string.analyze_wildcard [true]")
    op = str(p.get("default_operator", "or")).lower()
    if op not in ("or", "and"):
        raise illegal_argument(f"No enum constant org.elasticsearch.index.query.Operator.{op.upper()}")


def resolve_fields(mapping, patterns: list[tuple[str, float]]) -> tuple[list[tuple[str, float]], bool]:
    """Field patterns with boosts -> (fields with boosts, all-fields mode). ``*`` alone: every
    searchable field (lenient); a pattern: the fields it matches."""
    out: dict[str, float] = {}
    all_fields = False
    for pat, boost in patterns:
        if pat == "*":
            all_fields = True
        if any(c in pat for c in "*?"):
            for name, fs in mapping.fields.items():
                if fnmatch.fnmatchcase(name, pat) and _searchable(fs):
                    out[name] = out.get(name, 1.0) * boost
        else:
            out[pat] = out.get(pat, 1.0) * boost
    return list(out.items()), all_fields


def _searchable(fs) -> bool:
    return fs.index and fs.type not in ("dense_vector", "object")


def field_patterns(spec, what: str) -> list[tuple[str, float]]:
    items = [spec] if isinstance(spec, str) else spec
    if not isinstance(items, list) or not all(isinstance(f, str) for f in items):
        raise parsing_error(f"[query_string] [{what}] must be a string or an array of strings")
    out = []
    for f in items:
        name, _, b = f.partition("^")
        try:
            out.append((name, float(b) if b else 1.0))
        except ValueError:
            raise parsing_error(f"[query_string] [{what}] invalid boost in [{f}]") from None
    return out
