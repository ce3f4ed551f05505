"""The phrase and multi-term queries: ``match_phrase``, ``prefix``, ``wildcard``, ``query_string``
and ``simple_query_string`` (through :mod:`engine.query.query_string` and
:mod:`engine.query.simple_query_string`).

:class:`TextQueryParser` is the engine's query parser: :class:`~engine.query.dsl.QueryParser` plus
these clauses.

* ``match_phrase`` (MatchPhraseQueryBuilder: ``query``, ``analyzer``, ``slop``,
  ``zero_terms_query``, ``boost``, ``_name``): the text analyzed with the field's search-quote
  analyzer; no term: ``zero_terms_query``; one term: a term query; more: a phrase
  (:class:`~engine.query.phrase.PhraseNode`). On keyword, numeric, date and boolean fields it is
  the term query of the value, as Elasticsearch's field types build it.
* ``prefix`` / ``wildcard`` (PrefixQueryBuilder, WildcardQueryBuilder: ``value`` (``wildcard``
  too for the latter), ``boost``, ``rewrite``, ``case_insensitive``, ``_name``): the terms of the
  field's term dictionary that match, as one constant-score filter scoring ``boost``
  (Elasticsearch's default rewrite, ``constant_score_blended``, scores every match ``boost`` and
  never hits the clause limit); other rewrites are refused by name. On a keyword field the value
  goes through the field's normalizer first (KeywordFieldType#normalizeWildcardPattern). Wildcard
  syntax: ``*`` any sequence, ``?`` any one character, ``\\`` escapes (WildcardQuery#toAutomaton).
"""

from __future__ import annotations

import re

import numpy as np

from scholar_es.engine.analysis.analyzers import get_analyzer, lowercase
from scholar_es.engine.analysis.tokens import positions
from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index.mapping import KEYWORD, TEXT, VECTOR
from scholar_es.engine.query import query_string, simple_query_string
from scholar_es.engine.query.dsl import (
    MAX_CLAUSE_COUNT,
    QueryParser,
    _check_params,
    _float,
    _too_many_clauses,
    min_should_match,
    query_text,
    scalar_text,
)
from scholar_es.engine.query.nodes import (
    BoolNode,
    BoostNode,
    ConstNode,
    Ctx,
    DisMaxNode,
    MatchNoneNode,
    Node,
    TermNode,
)
from scholar_es.engine.query.phrase import PhraseNode
from scholar_es.engine.search.hits import union_docs

#: rewrite methods (MultiTermQuery rewrites by their Elasticsearch names); the default is the
#: only one implemented
DEFAULT_REWRITE = "constant_score_blended"
REWRITES = {
    "constant_score",
    "constant_score_blended",
    "constant_score_boolean",
    "scoring_boolean",
}
_REWRITE_PREFIXES = ("top_terms_boost_", "top_terms_blended_freqs_", "top_terms_")


def phrase_analyzer(fs, opts: dict) -> str:
    """The analyzer a phrase is analyzed with: the request's, else the field's search-quote
    analyzer (its search analyzer, else its analyzer, else the index's ``default_search_quoted``)."""
    if opts.get("analyzer"):
        return str(opts["analyzer"])
    if fs.search_analyzer:
        return fs.search_analyzer
    return fs.analyzer if fs.analyzer != "default" else "default_search_quoted"


def _wildcard_regex(pattern: str, case_insensitive: bool) -> re.Pattern[str]:
    """WildcardQuery#toAutomaton: ``*``, ``?``, and ``\\`` escaping the next character (a trailing
    backslash is itself)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out), re.DOTALL | (re.IGNORECASE if case_insensitive else 0))


class TextQueryParser(QueryParser):
    """The query DSL with the phrase, multi-term and query-string clauses."""

    # --- match_phrase -------------------------------------------------------------------
    def _q_match_phrase(self, p):
        field, v = self._single_field("match_phrase", p)
        opts = v if isinstance(v, dict) else {"query": v}
        _check_params(
            "match_phrase", opts, {"query", "analyzer", "slop", "zero_terms_query", "boost", "_name"}
        )
        if "query" not in opts:
            raise parsing_error(f"[match_phrase] requires query value for field [{field}]")
        slop = opts.get("slop", 0)
        if isinstance(slop, bool) or not isinstance(slop, (int, str)):
            raise parsing_error(f"[match_phrase] [slop] must be an integer, got [{slop}]")
        try:
            slop = int(slop)
        except ValueError:
            raise parsing_error(f"[match_phrase] [slop] must be an integer, got [{slop}]") from None
        if slop < 0:  # MatchPhraseQueryBuilder#slop
            raise illegal_argument("No negative slop allowed.")
        zero = str(opts.get("zero_terms_query", "none")).lower()
        if zero not in ("none", "all"):
            raise illegal_argument(f"Unsupported zero_terms_query value [{opts['zero_terms_query']}]")
        return self.phrase_field(
            field, opts["query"], opts, slop, _float("match_phrase", "boost", opts.get("boost", 1.0))
        )

    def phrase_field(self, field: str, text, opts: dict, slop: int, boost: float) -> Node:
        fs = self.mapping.get(field)
        if fs is None:
            return MatchNoneNode()
        if fs.type != TEXT:  # keyword, numbers, dates: the term query of the value
            return self.match_field(field, text, {k: opts[k] for k in ("analyzer",) if k in opts}, boost)
        if not fs.index:
            raise illegal_argument(f"Cannot search on field [{field}] since it is not indexed.")
        text = query_text("match_phrase", text)
        terms, _ = positions(get_analyzer(phrase_analyzer(fs, opts), self.ctx.analysis), text)
        if not terms:
            if str(opts.get("zero_terms_query", "none")).lower() == "all":
                return self._q_match_all({})
            return MatchNoneNode()
        if len(terms) > MAX_CLAUSE_COUNT:
            raise _too_many_clauses()
        self._count(len(terms))
        if len(terms) == 1:
            return TermNode(field, terms[0][0], boost)
        if fs.raw.get("index_options") in ("docs", "freqs"):  # TextFieldMapper#checkForPositions
            raise EsError(
                400,
                "query_shard_exception",
                f"failed to create query: field:[{field}] was indexed without position data; cannot run PhraseQuery",
            )
        return PhraseNode(field, terms, slop, boost)

    # --- prefix / wildcard --------------------------------------------------------------
    def _multi_term(self, clause: str, p, value_keys: tuple[str, ...]) -> tuple[str, str, bool, float]:
        field, v = self._single_field(clause, p)
        opts = v if isinstance(v, dict) else {value_keys[0]: v}
        _check_params(clause, opts, {*value_keys, "boost", "rewrite", "case_insensitive", "_name"})
        value = next((opts[k] for k in value_keys if k in opts), None)
        if value is None or isinstance(value, (dict, list)):
            raise parsing_error(
                f"[{clause}] requires a value" if value is None else f"[{clause}] value must be a string"
            )
        rewrite = opts.get("rewrite")
        if rewrite is not None and rewrite != DEFAULT_REWRITE:
            if rewrite not in REWRITES and not str(rewrite).startswith(_REWRITE_PREFIXES):
                raise illegal_argument(
                    f"[{clause}] unknown rewrite method [{rewrite}]"
                )  # QueryParsers.parseRewriteMethod
            raise unsupported(
                f"{clause}.rewrite [{rewrite}]", f"only the default [{DEFAULT_REWRITE}] is implemented"
            )
        ci = opts.get("case_insensitive", False)
        if not isinstance(ci, bool):
            raise parsing_error(f"[{clause}] [case_insensitive] must be a boolean, got [{ci}]")
        value = scalar_text(value)
        fs = self.mapping.get(field)
        if fs is not None and fs.type == KEYWORD:  # KeywordFieldType: the value through the normalizer
            value = self._keyword_value(fs, value)
        return field, value, ci, _float(clause, "boost", opts.get("boost", 1.0))

    def _q_prefix(self, p):
        field, value, ci, boost = self._multi_term("prefix", p, ("value",))
        low = value.lower()

        def test(term: str) -> bool:
            return term.lower().startswith(low) if ci else term.startswith(value)

        return self.term_filter("prefix", field, value, test, boost, f"{field}:{value}*")

    def _q_wildcard(self, p):
        field, value, ci, boost = self._multi_term("wildcard", p, ("value", "wildcard"))
        rx = _wildcard_regex(value, ci)
        return self.term_filter(
            "wildcard", field, value, lambda t: rx.fullmatch(t) is not None, boost, f"{field}:{value}"
        )

    def term_filter(self, kind: str, field: str, value: str, test, boost: float, name: str) -> Node:
        """A constant-score filter on the terms of ``field`` that pass ``test``."""
        self._count(1)
        fs = self.mapping.get(field)
        if fs is None:
            return MatchNoneNode()
        if fs.type not in (TEXT, KEYWORD) or fs.type == VECTOR:
            raise EsError(
                400,
                "query_shard_exception",
                f"Can only use {kind} queries on keyword, text and wildcard fields - not on [{field}] "
                f"which is of type [{fs.type}]",
            )
        if not fs.index:
            raise illegal_argument(f"Cannot search on field [{field}] since it is not indexed.")
        store = "text" if fs.type == TEXT else "keyword"

        def docs(ctx: Ctx) -> np.ndarray:
            col = getattr(ctx.seg, store).get(field)
            if col is None:
                return np.zeros(0, dtype=np.int64)
            parts = []
            for term in col.postings.vocab:
                if test(term):
                    found = col.postings.postings(term)
                    if found is not None and len(found[0]):
                        parts.append(found[0])
            return union_docs(parts)

        def matcher(ctx: Ctx) -> np.ndarray:
            mask = np.zeros(ctx.n, dtype=bool)
            mask[docs(ctx)] = True
            return mask

        node = ConstNode(name, matcher, boost, docs=docs)
        node.lucene = True
        return node

    # --- query_string ---------------------------------------------------------------------
    def _q_query_string(self, p):
        query_string.check_params(p)
        q = p["query"]
        q = scalar_text(q)
        and_default = str(p.get("default_operator", "or")).lower() == "and"
        if "fields" in p:
            patterns = query_string.field_patterns(p["fields"], "fields")
        else:
            patterns = query_string.field_patterns(p.get("default_field", "*"), "default_field")
        self._qs = {
            "patterns": patterns,
            "and": and_default,
            "lenient": p.get("lenient") in (True, "true"),
            "analyzer": p.get("analyzer"),
            "quote_analyzer": p.get("quote_analyzer", p.get("analyzer")),
            "phrase_slop": int(p.get("phrase_slop", 0)),
            "tie": _float("query_string", "tie_breaker", p.get("tie_breaker", 0.0)),
            "allow_leading": p.get("allow_leading_wildcard", True) not in (False, "false"),
        }
        if not q.strip():
            return MatchNoneNode()
        try:
            tree = query_string.parse(q, and_default)
        except query_string.QsSyntaxError as e:
            raise query_string.syntax_error(q, e) from None
        node = self._qs_group(tree, top=True, msm=p.get("minimum_should_match"))
        if node is None:
            return MatchNoneNode()
        boost = _float("query_string", "boost", p.get("boost", 1.0))
        return BoostNode(node, boost) if boost != 1.0 else node

    def _q_simple_query_string(self, p):
        return simple_query_string.build(self, p)

    def _qs_group(self, g, top: bool = False, msm=None) -> Node | None:
        occurs: dict[str, list[Node]] = {"must": [], "should": [], "must_not": []}
        default = "must" if self._qs["and"] else "should"
        for occur, child in g.clauses:
            if isinstance(child, query_string.Group):
                node = self._qs_group(child)
                if node is not None:
                    occurs[occur].append(node)
                continue
            node = self._qs_leaf(child)
            if node is None:
                continue
            if (
                child.kind == "multi"
                and isinstance(node, BoolNode)
                and all(isinstance(c, TermNode) for c in node.must + node.should)
            ):
                occurs[default].extend(node.must + node.should)  # addMultiTermClauses: all term queries
            else:
                occurs[occur].append(node)
        if not any(occurs.values()):
            return None
        filters: list[Node] = []
        if not occurs["must"] and not occurs["should"]:  # Queries.fixNegativeQueryIfNeeded
            filters.append(self._q_match_all({}))
        n_should = len(occurs["should"])
        count = min_should_match(n_should, msm) if (top and msm is not None) else 0
        if n_should and not occurs["must"]:
            count = max(count, 1)
        group: Node = BoolNode(occurs["must"], occurs["should"], filters, occurs["must_not"], count, 1.0)
        return BoostNode(group, g.boost) if g.boost != 1.0 else group

    def _qs_fields(self, leaf) -> tuple[list[tuple[str, float]], bool]:
        patterns = [(leaf.field, 1.0)] if leaf.field is not None else self._qs["patterns"]
        return query_string.resolve_fields(self.mapping, patterns)

    def _qs_leaf(self, leaf) -> Node | None:
        if leaf.kind == "all":
            return self._q_match_all({"boost": leaf.boost})
        fields, all_fields = self._qs_fields(leaf)
        lenient = self._qs["lenient"] or all_fields
        per: list[Node] = []
        nulls = 0
        for name, fboost in fields:
            try:
                node = self._qs_field(leaf, name, fboost)
            except EsError as e:
                if lenient and e.type in ("query_shard_exception", "illegal_argument_exception"):
                    continue
                raise
            if node is None:
                nulls += 1
            elif not isinstance(node, MatchNoneNode):
                per.append(node)
        if not per:
            return None if nulls and nulls == len(fields) else MatchNoneNode()
        node = per[0] if len(per) == 1 else DisMaxNode(per, self._qs["tie"], 1.0)
        return BoostNode(node, leaf.boost) if leaf.boost != 1.0 else node

    def _qs_field(self, leaf, name: str, fboost: float) -> Node | None:
        """One leaf on one field (None: the analyzer left no term, so the clause is dropped)."""
        fs = self.mapping.get(name)
        kind, value = leaf.kind, leaf.value
        if kind == "exists":
            return self._q_exists({"field": name, "boost": fboost})
        if fs is None:
            return MatchNoneNode()
        if kind in ("text", "multi", "phrase"):
            analyzer = self._qs["quote_analyzer" if kind == "phrase" else "analyzer"]
            if fs.type == TEXT:
                an = analyzer or (phrase_analyzer(fs, {}) if kind == "phrase" else fs.query_analyzer)
                if not positions(get_analyzer(an, self.ctx.analysis), str(value))[0]:
                    return None
            opts = {"operator": "and" if self._qs["and"] else "or"}
            if analyzer:
                opts["analyzer"] = analyzer
            if kind == "phrase":
                slop = leaf.slop if leaf.slop is not None else self._qs["phrase_slop"]
                return self.phrase_field(name, value, opts, slop, fboost)
            return self.match_field(name, value, opts, boost=fboost)
        if kind == "range":
            lo, hi, inc_lo, inc_hi = value
            bounds = {}
            if lo is not None:
                bounds["gte" if inc_lo else "gt"] = lo
            if hi is not None:
                bounds["lte" if inc_hi else "lt"] = hi
            return self._q_range({name: {**bounds, "boost": fboost}})
        # prefix / wildcard: the text normalized as the field's search analyzer normalizes
        text = str(value)
        if fs.type == TEXT:
            an = get_analyzer(self._qs["analyzer"] or fs.query_analyzer, self.ctx.analysis)
            if lowercase in an.filters:
                text = text.lower()
        if not self._qs["allow_leading"] and text[:1] in ("*", "?"):
            raise query_string.syntax_error(
                text, query_string.QsSyntaxError("'*' or '?' not allowed as first character in WildcardQuery")
            )
        if kind == "prefix":
            return self._q_prefix({name: {"value": text, "boost": fboost}})
        return self._q_wildcard({name: {"value": text, "boost": fboost}})


__all__ = ["TextQueryParser"]
