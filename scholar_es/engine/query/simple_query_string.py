"""``simple_query_string``: Lucene's SimpleQueryParser, as Elasticsearch's
SimpleQueryStringBuilder / SimpleQueryStringQueryParser build queries from it.

Syntax (each part behind its flag): ``+`` AND, ``|`` OR, ``-`` NOT (a negated clause is
``bool(must_not: clause, should: match_all)``), ``"phrase"`` with ``~N`` slop (NEAR), ``term*``
prefix, ``( )`` precedence, ``\\`` escape, whitespace as a separator, ``term~N`` fuzzy (``~0``
is the plain term; a fuzzy term with a distance is refused by name: the engine has no fuzzy
query). The parser never fails on syntax: an unclosed ``(`` or ``"`` is taken as text, a stray
``)`` or operator is skipped. Clauses combine as SimpleQueryParser#buildQueryTree does: a change
of operator wraps the tree so far as one clause of a new boolean query.

Each term is ``newDefaultQuery``: a ``most_fields`` multi_match of the term on the fields with
the default operator (a per-field dis_max with tie 1.0, so the field scores add up); a phrase a
``phrase`` multi_match (dis_max, tie 0.0); a prefix a per-field prefix query on the normalized
text (dis_max, tie 1.0). A term the analyzer leaves empty on every field is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.query import query_string
from scholar_es.engine.query.dsl import _float, scalar_text
from scholar_es.engine.query.nodes import BoolNode, BoostNode, MatchNoneNode

# SimpleQueryStringFlag (org.elasticsearch.index.query.SimpleQueryStringFlag)
AND, NOT, OR, PREFIX, PHRASE, PRECEDENCE, ESCAPE, WHITESPACE, FUZZY, NEAR = (1 << i for i in range(10))
FLAGS = {
    "ALL": -1,
    "NONE": 0,
    "AND": AND,
    "NOT": NOT,
    "OR": OR,
    "PREFIX": PREFIX,
    "PHRASE": PHRASE,
    "PRECEDENCE": PRECEDENCE,
    "ESCAPE": ESCAPE,
    "WHITESPACE": WHITESPACE,
    "FUZZY": FUZZY,
    "NEAR": NEAR,
    "SLOP": NEAR,
}
IMPLEMENTED = {
    "query",
    "fields",
    "default_operator",
    "analyzer",
    "flags",
    "lenient",
    "analyze_wildcard",
    "auto_generate_synonyms_phrase_query",
    "boost",
    "_name",
}
REFUSED = {
    "minimum_should_match",
    "quote_field_suffix",
    "fuzzy_prefix_length",
    "fuzzy_max_expansions",
    "fuzzy_transpositions",
}
NAME = "simple_query_string"


def resolve_flags(value) -> int:
    """SimpleQueryStringFlag#resolveFlags (a string ``A|B``) or a number (negative: ALL)."""
    if isinstance(value, bool):
        raise parsing_error(f"[{NAME}] flags must be a string or a number")
    if isinstance(value, (int, float)):
        return -1 if int(value) < 0 else int(value)
    if not isinstance(value, str):
        raise parsing_error(f"[{NAME}] unknown token [START_OBJECT] after [flags]")
    if not value:
        return -1
    out = 0
    for s in value.split("|"):
        flag = FLAGS.get(s.strip().upper())
        if flag is None:
            raise illegal_argument(f"Unknown {NAME} flag [{s}]")
        if flag == -1:
            return -1
        out |= flag
    return out


def check_params(p) -> None:
    if not isinstance(p, dict):
        raise parsing_error(f"[{NAME}] query malformed, no start_object after query name")
    for key in p:
        if key in REFUSED:
            raise unsupported(f"{NAME}.{key}")
        if key not in IMPLEMENTED:
            # SimpleQueryStringBuilder#fromXContent
            raise parsing_error(f"[{NAME}] unsupported field [{key}]")
    if "query" not in p:
        raise parsing_error(f"[{NAME}] query text missing")
    if p.get("analyze_wildcard") not in (None, False, "false"):
        raise unsupported(f"{NAME}.analyze_wildcard [true]")
    if p.get("auto_generate_synonyms_phrase_query") not in (None, True, "true"):
        raise unsupported(f"{NAME}.auto_generate_synonyms_phrase_query [false]")
    op = str(p.get("default_operator", "or")).lower()
    if op not in ("or", "and"):
        raise illegal_argument(f"No enum constant org.elasticsearch.index.query.Operator.{op.upper()}")


# --- the tree ------------------------------------------------------------------------------
@dataclass
class Leaf:
    kind: str  # term, phrase, prefix
    text: str
    slop: int = 0


@dataclass
class Bool:
    clauses: list[tuple[str, object]] = field(default_factory=list)  # ("must" | "should", node)
    negation: bool = False  # must_not the one clause, should match_all


@dataclass
class _State:
    start: int
    end: int
    top: object = None
    not_: int = 0
    current: str | None = None
    previous: str | None = None


class _Parser:
    """SimpleQueryParser, line by line (parseSubQuery, consumeSubQuery, consumePhrase,
    consumeToken, buildQueryTree, parseFuzziness, tokenFinished)."""

    def __init__(self, data: str, flags: int, default: str, make) -> None:
        self.data, self.flags, self.default, self.make = data, flags, default, make

    def on(self, flag: int) -> bool:
        return (self.flags & flag) != 0

    def sub_query(self, st: _State, i: int) -> int:
        d = self.data
        while i < st.end:
            c = d[i]
            if c == "(" and self.on(PRECEDENCE):
                i = self.consume_sub(st, i)
            elif c == ")" and self.on(PRECEDENCE):
                i += 1
            elif c == '"' and self.on(PHRASE):
                i = self.consume_phrase(st, i)
            elif c == "+" and self.on(AND):
                if st.current is None and st.top is not None:
                    st.current = "must"
                i += 1
            elif c == "|" and self.on(OR):
                if st.current is None and st.top is not None:
                    st.current = "should"
                i += 1
            elif c == "-" and self.on(NOT):
                st.not_ += 1
                i += 1
                continue
            elif c in " \t\n\r" and self.on(WHITESPACE):
                i += 1
            else:
                i = self.consume_token(st, i)
            st.not_ = 0
        return i

    def consume_sub(self, st: _State, i: int) -> int:
        d = self.data
        i += 1
        start, depth, escaped = i, 1, False
        while i < st.end:
            if not escaped:
                if d[i] == "\\" and self.on(ESCAPE):
                    escaped = True
                    i += 1
                    continue
                if d[i] == "(":
                    depth += 1
                elif d[i] == ")":
                    depth -= 1
                    if depth == 0:
                        break
            escaped = False
            i += 1
        if i == st.end:  # never closed: the "(" is extraneous
            return start
        if i == start:  # "()": the pending operation is dropped
            st.current = None
            return i + 1
        sub = _State(start, i)
        self.sub_query(sub, start)
        self.build(st, sub.top)
        return i + 1

    def consume_phrase(self, st: _State, i: int) -> int:
        d = self.data
        i += 1
        start, buf, escaped, has_slop = i, [], False, False
        while i < st.end:
            if not escaped:
                if d[i] == "\\" and self.on(ESCAPE):
                    escaped = True
                    i += 1
                    continue
                if d[i] == '"':
                    if st.end > i + 1 and d[i + 1] == "~" and self.on(NEAR):
                        i += 1
                        has_slop = st.end > i + 1
                    break
            escaped = False
            buf.append(d[i])
            i += 1
        if i == st.end:  # never closed: the '"' is extraneous
            return start
        if i == start:  # '""'
            st.current = None
            return i + 1
        slop = 0
        if has_slop:
            slop, i = self.fuzziness(st, i)
        self.build(st, self.make(Leaf("phrase", "".join(buf), slop)))
        return i + 1

    def consume_token(self, st: _State, i: int) -> int:
        d = self.data
        buf: list[str] = []
        escaped = prefix = fuzzy = False
        while i < st.end:
            if not escaped:
                if d[i] == "\\" and self.on(ESCAPE):
                    escaped, prefix = True, False
                    i += 1
                    continue
                if self.finished(i):
                    break
                if buf and d[i] == "~" and self.on(FUZZY):
                    fuzzy = True
                    break
                prefix = bool(buf) and d[i] == "*" and self.on(PREFIX)
            escaped = False
            buf.append(d[i])
            i += 1
        if not buf:
            return i
        token = "".join(buf)
        if fuzzy:
            distance, i = self.fuzziness(st, i)
            if min(distance, 2) != 0:  # LevenshteinAutomata.MAXIMUM_SUPPORTED_DISTANCE
                raise unsupported(
                    f"{NAME} fuzzy term [{token}~{distance}]", "fuzzy queries are not implemented"
                )
            branch = Leaf("term", token)
        elif prefix:
            branch = Leaf("prefix", token[:-1])
        else:
            branch = Leaf("term", token)
        self.build(st, self.make(branch))
        return i

    def fuzziness(self, st: _State, i: int) -> tuple[int, int]:
        """parseFuzziness: the digits after ``~`` (none: 2; not a number: 0); the index after."""
        text = []
        if self.data[i] != "~":
            return 0, i
        while i < st.end:
            i += 1
            if i < st.end:
                if self.finished(i):
                    break
                text.append(self.data[i])
        s = "".join(text)
        if not s:
            return 2, i
        try:
            value = int(s)
        except ValueError:
            return 0, i
        if not -(2**31) <= value < 2**31:
            return 0, i
        return max(value, 0), i

    def finished(self, i: int) -> bool:
        c = self.data[i]
        return (
            (c == '"' and self.on(PHRASE))
            or (c == "|" and self.on(OR))
            or (c == "+" and self.on(AND))
            or (c == "(" and self.on(PRECEDENCE))
            or (c == ")" and self.on(PRECEDENCE))
            or (c in " \t\n\r" and self.on(WHITESPACE))
        )

    def build(self, st: _State, branch) -> None:
        if branch is None:
            return
        if st.not_ % 2 == 1:
            branch = Bool([("must_not", branch)], negation=True)
        if st.top is None:
            st.top = branch
        else:
            if st.current is None:
                st.current = self.default
            if st.previous != st.current:
                st.top = Bool([(st.current, st.top)])
            assert isinstance(st.top, Bool)
            st.top = Bool([*st.top.clauses, (st.current, branch)])
            st.previous = st.current
        st.current = None


def parse(text: str, flags: int, default: str, make=lambda leaf: leaf):
    """The query text as a tree of :class:`Bool` and what ``make`` turns each :class:`Leaf` into
    (None: the clause is dropped, as a null branch is) -- None: nothing to search; ``"*"``:
    match all."""
    if text.strip() == "*":
        return "*"
    st = _State(0, len(text))
    _Parser(text, flags, default, make).sub_query(st, 0)
    return st.top


def build(qp, p):
    """The query's node, built with :class:`~engine.query.text.TextQueryParser` ``qp``'s
    query_string leaves (SimpleQueryStringBuilder#doToQuery)."""
    check_params(p)
    text = scalar_text(p["query"])
    and_default = str(p.get("default_operator", "or")).lower() == "and"
    flags = resolve_flags(p.get("flags", -1))
    analyzer = p.get("analyzer")
    if analyzer is not None:
        try:
            get_analyzer(str(analyzer), qp.ctx.analysis)
        except EsError:
            raise EsError(400, "query_shard_exception", f"[{NAME}] analyzer [{analyzer}] not found") from None
    boost = _float(NAME, "boost", p.get("boost", 1.0))
    qp._qs = {
        "patterns": query_string.field_patterns(p.get("fields", "*"), "fields"),
        "and": and_default,
        "lenient": p.get("lenient") in (True, "true"),
        "analyzer": analyzer,
        "quote_analyzer": analyzer,
        "phrase_slop": 0,
        "tie": 1.0,
        "allow_leading": True,
    }

    def make(t: Leaf):
        # newDefaultQuery (most_fields), newPhraseQuery (phrase), newPrefixQuery: dis_max tie 1, 0, 1
        qp._qs["tie"] = 0.0 if t.kind == "phrase" else 1.0
        kind = {"term": "multi", "phrase": "phrase", "prefix": "prefix"}[t.kind]
        return qp._qs_leaf(query_string.Leaf(kind, None, t.text, slop=t.slop))

    tree = parse(text, flags, "must" if and_default else "should", make)
    if tree is None:
        return MatchNoneNode()
    if tree == "*":
        return qp._q_match_all({"boost": boost})

    def node(t):
        if not isinstance(t, Bool):
            return t
        occurs: dict[str, list] = {"must": [], "should": [], "must_not": []}
        for occur, child in t.clauses:
            occurs[occur].append(node(child))
        if t.negation:
            occurs["should"].append(qp._q_match_all({}))
        msm = 1 if occurs["should"] and not occurs["must"] else 0
        return BoolNode(occurs["must"], occurs["should"], [], occurs["must_not"], msm, 1.0)

    out = node(tree)
    return BoostNode(out, boost) if boost != 1.0 else out
