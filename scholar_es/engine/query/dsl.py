"""Query DSL -> executable nodes (:mod:`engine.query.nodes`), with Elasticsearch's parsing rules.

Anything outside the supported subset raises an :class:`~engine.errors.EsError` naming the
clause, with Elasticsearch's wording where it has one.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re

import numpy as np
import orjson

from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index.mapping import (
    INTEGER_RANGES,
    KEYWORD,
    TEXT,
    VECTOR,
    keyword_normalizer,
    parse_date,
)
from scholar_es.engine.query.nodes import (
    BoolNode,
    BoostNode,
    ConstantScoreNode,
    ConstNode,
    Ctx,
    DisMaxNode,
    MatchNoneNode,
    Node,
    TermNode,
)
from scholar_es.engine.search.hits import union_docs
from scholar_es.engine.search.named import query_name
from scholar_es.engine.validate import check_number

MAX_NESTED_DEPTH = 30  # Elasticsearch's indices.query.max_nested_depth default
# indices.query.bool.max_clause_count: Elasticsearch 8.x sets Lucene's IndexSearcher.maxClauseCount
# from the node (SearchUtils.calculateMaxClauseValue: heap MB * 64 / search threads) and never
# below SearchUtils.DEFAULT_MAX_CLAUSE_COUNT = 1024, the value for a small node (and the 7.x/Lucene
# default); the embedded engine uses that floor.  One BooleanQuery with more clauses fails in
# BooleanQuery.Builder.add (IndexSearcher.TooManyClauses); a whole query with more leaf clauses fails
# IndexSearcher's clause-count visitor (TooManyNestedClauses).  Elasticsearch 8.15 answers them as a
# 500; 8.16+ (elastic/elasticsearch#112177) as a 400, which the engine follows: it is the request's fault.
MAX_CLAUSE_COUNT = 1024
# index.max_terms_count (IndexSettings.MAX_TERMS_COUNT_SETTING, default 65536): values of one terms query
MAX_TERMS_COUNT = 65_536
SUPPORTED_QUERIES = (
    "match_all",
    "match_none",
    "match",
    "multi_match",
    "term",
    "terms",
    "range",
    "exists",
    "ids",
    "bool",
    "dis_max",
    "constant_score",
    "function_score",
    "script_score",
    "knn",
    "match_phrase",
    "prefix",
    "wildcard",
    "query_string",
    "simple_query_string",
)
_UNSUPPORTED_KNOWN = {
    "match_phrase_prefix",
    "match_bool_prefix",
    "regexp",
    "fuzzy",
    "nested",
    "has_child",
    "has_parent",
    "geo_distance",
    "more_like_this",
    "combined_fields",
    "boosting",
    "intervals",
    "span_term",
    "distance_feature",
    "rank_feature",
    "script",
    "semantic",
    "sparse_vector",
    "text_expansion",
    "pinned",
    "rule",
    "percolate",
    "wrapper",
}


def _float(clause: str, key: str, value) -> float:
    """A finite number for a boost, weight, factor...: NaN, Infinity and 10**400 are refused."""
    return check_number(clause, key, value)


def _check_params(clause: str, body: dict, allowed: set[str]) -> None:
    if not isinstance(body, dict):
        raise parsing_error(f"[{clause}] query malformed, no start_object after query name")
    for key in body:
        if key not in allowed:
            raise parsing_error(f"[{clause}] query does not support [{key}]")


class QueryParser:
    """Parses a query body into nodes, with the index's mapping for field types."""

    def __init__(self, ctx: Ctx, function_parser=None, knn_parser=None) -> None:
        self.ctx = ctx
        self.mapping = ctx.seg.mapping
        self._function_parser = function_parser
        self._knn_parser = knn_parser

    _depth = 0
    _leaves = 0  # leaf clauses of the whole query, as Lucene's clause-count visitor counts them
    #: (``_name``, node) of the named queries parsed while a search collects them (matched_queries)
    named: list[tuple[str, Node]] | None = None

    def _count(self, leaves: int) -> None:
        self._leaves += leaves
        if self._leaves > MAX_CLAUSE_COUNT:
            raise EsError(
                400,
                "too_many_nested_clauses",
                f"Query contains too many nested clauses; maxClauseCount is set to {MAX_CLAUSE_COUNT} "
                "(indices.query.bool.max_clause_count)",
            )

    def parse(self, body) -> Node:
        if self._depth == 0:
            # a top-level query (the query, a rescore query, a post_filter) is rewritten on its own
            # in Lucene, so its clauses are counted on their own (IndexSearcher.rewrite)
            self._leaves = 0
        self._depth += 1
        try:
            if self._depth > MAX_NESTED_DEPTH:
                raise parsing_error(
                    "The nested depth of the query exceeds the maximum nested depth for queries set "
                    f"in [indices.query.max_nested_depth] ({MAX_NESTED_DEPTH})"
                )
            return self._parse(body)
        finally:
            self._depth -= 1

    def _parse(self, body) -> Node:
        if not isinstance(body, dict) or not body:
            raise parsing_error(
                "query malformed, empty clause found"
                if body == {}
                else f"[_na] query malformed, expected an object but found [{body}]"
            )
        if len(body) != 1:
            keys = list(body)
            raise parsing_error(f"[{keys[0]}] malformed query, expected [END_OBJECT] but found [FIELD_NAME]")
        name, params = next(iter(body.items()))
        handler = getattr(self, "_q_" + name, None)
        if handler is None:
            if name in _UNSUPPORTED_KNOWN:
                raise unsupported(name, "supported queries: " + ", ".join(SUPPORTED_QUERIES))
            raise parsing_error(f"unknown query [{name}]", line=1, col=1)
        if name in _LEAF_QUERIES:
            self._count(1)
        node = handler(params)
        if name in _MEMO_QUERIES or (name == "script_score" and _script_memo(node)):
            # the same query twice in a search is scored once (sparse.py): a text query, or the
            # same script in two rescore phases
            node.memo_key = _memo_key(name, params)
        if self.named is not None:
            qname = query_name(params)
            if qname is not None:
                self.named.append((qname, node))
        return node

    # --- leaves ----------------------------------------------------------------------
    def _q_match_all(self, p):
        _check_params("match_all", p, {"boost", "_name"})
        return ConstNode(
            "*:*",
            lambda ctx: np.ones(ctx.n, dtype=bool),
            _float("match_all", "boost", p.get("boost", 1.0)),
            matches_all=True,
        )

    def _q_match_none(self, p):
        _check_params("match_none", p, {"boost", "_name"})
        return MatchNoneNode()

    def _single_field(self, clause: str, p) -> tuple[str, dict]:
        if not isinstance(p, dict) or len(p) != 1:
            raise parsing_error(
                f"[{clause}] query doesn't support multiple fields, found [{', '.join(p) if isinstance(p, dict) else p}]"
            )
        field, value = next(iter(p.items()))
        return field, value

    def _q_match(self, p):
        field, v = self._single_field("match", p)
        opts = v if isinstance(v, dict) else {"query": v}
        _check_params(
            "match",
            opts,
            {
                "query",
                "operator",
                "minimum_should_match",
                "boost",
                "analyzer",
                "zero_terms_query",
                "lenient",
                "auto_generate_synonyms_phrase_query",
                "_name",
                "fuzzy_transpositions",
                "max_expansions",
                "prefix_length",
            },
        )
        if "query" not in opts:
            raise parsing_error(f"[match] requires query value for field [{field}]")
        return self.match_field(
            field, opts["query"], opts, boost=_float("match", "boost", opts.get("boost", 1.0))
        )

    def match_field(self, field: str, text, opts: dict, boost: float = 1.0) -> Node:
        """A match query on one field: analyze, then OR/AND the terms (Lucene QueryBuilder)."""
        fs = self.mapping.get(field)
        if fs is None:
            return MatchNoneNode()  # unmapped field: matches nothing, as Elasticsearch
        if fs.type == VECTOR:
            raise illegal_argument(f"Field [{field}] of type [dense_vector] does not support match queries")
        if fs.type not in (TEXT, KEYWORD):
            self._count(1)
            return self._exact(field, text, boost)
        if not fs.index:
            raise illegal_argument(f"Cannot search on field [{field}] since it is not indexed.")
        text = query_text("match", text)
        if fs.type == KEYWORD:
            tokens = [self._keyword_value(fs, text)]
        else:
            tokens = get_analyzer(opts.get("analyzer") or fs.query_analyzer, self.ctx.analysis)(text)
        if len(tokens) > MAX_CLAUSE_COUNT:  # one BooleanQuery clause per token (QueryBuilder)
            raise _too_many_clauses()
        self._count(max(len(tokens), 1))
        if not tokens:
            if opts.get("zero_terms_query", "none") == "all":
                return self._q_match_all({})
            return MatchNoneNode()
        operator = str(opts.get("operator", "or")).lower()
        if operator not in ("or", "and"):
            raise illegal_argument(
                f"No enum constant org.elasticsearch.index.query.Operator.{operator.upper()}"
            )
        msm_spec = opts.get("minimum_should_match")
        if operator == "and" or msm_spec is None or min_should_match(len(tokens), msm_spec) <= 1:
            # Lucene's BooleanQuery rewrite folds repeated SHOULD/MUST terms into one
            # term query boosted by the repeat count ("foo foo" -> foo^2).
            counts: dict[str, int] = {}
            for t in tokens:
                counts[t] = counts.get(t, 0) + 1
            terms = [TermNode(field, t, float(c)) for t, c in counts.items()]
        else:
            terms = [TermNode(field, t) for t in tokens]
        if len(terms) == 1:
            node: Node = terms[0]
            return BoostNode(node, boost) if boost != 1.0 else node
        if operator == "and":
            return BoolNode(terms, [], [], [], 0, boost)
        msm = min_should_match(len(terms), msm_spec) if msm_spec is not None else 1
        return BoolNode([], terms, [], [], max(msm, 1), boost)

    def _exact(self, field: str, value, boost: float) -> Node:
        """term/match on a numeric, date or boolean field: a constant-score point query."""
        fs = self.mapping.get(field)
        target = _to_number(fs, value, exact=True)
        col_name = field

        def matcher(ctx: Ctx):
            col = ctx.seg.numeric.get(col_name)
            mask = np.zeros(ctx.n, dtype=bool)
            if col is not None:
                mask[col.doc[col.values == target]] = True
            return mask

        return ConstNode(f"{field}:[{value} TO {value}]", matcher, boost)

    def _q_multi_match(self, p):
        _check_params(
            "multi_match",
            p,
            {
                "query",
                "fields",
                "type",
                "tie_breaker",
                "operator",
                "minimum_should_match",
                "boost",
                "analyzer",
                "zero_terms_query",
                "lenient",
                "auto_generate_synonyms_phrase_query",
                "_name",
            },
        )
        if "query" not in p:
            raise parsing_error("[multi_match] requires query value")
        mtype = p.get("type", "best_fields")
        if mtype not in ("best_fields", "most_fields"):
            raise unsupported(f"multi_match type {mtype}", "use best_fields or most_fields")
        if "fields" not in p:
            raise unsupported("multi_match without fields", "list the fields to search")
        fields = self._expand_fields(p["fields"])
        opts = {
            k: p[k] for k in ("operator", "minimum_should_match", "analyzer", "zero_terms_query") if k in p
        }
        per_field = []
        for name, fboost in fields:
            node = self.match_field(name, p["query"], opts, boost=fboost)
            if not isinstance(node, MatchNoneNode):
                per_field.append(node)
        boost = _float("multi_match", "boost", p.get("boost", 1.0))
        if not per_field:
            return MatchNoneNode()
        if len(per_field) == 1:
            return BoostNode(per_field[0], boost) if boost != 1.0 else per_field[0]
        # MultiMatchQueryParser: both types are a dis_max; most_fields uses tie_breaker 1.0
        # (a sum) unless the request sets one.
        default_tie = 1.0 if mtype == "most_fields" else 0.0
        return DisMaxNode(
            per_field, _float("multi_match", "tie_breaker", p.get("tie_breaker", default_tie)), boost
        )

    def _expand_fields(self, fields) -> list[tuple[str, float]]:
        if isinstance(fields, str):
            fields = [fields]
        if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
            raise parsing_error(
                f"[multi_match] [fields] must be a string or an array of strings, got [{fields}]"
            )
        out: dict[str, float] = {}
        for f in fields:
            name, _, b = f.partition("^")
            boost = _float("multi_match", f"fields] [{f}", b) if b else 1.0
            if any(c in name for c in "*?"):
                matched = [
                    n
                    for n, fs in self.mapping.fields.items()
                    if fnmatch.fnmatchcase(n, name) and fs.type in (TEXT, KEYWORD)
                ]
                for m in matched:
                    out[m] = out.get(m, 1.0) * boost
            else:
                out[name] = out.get(name, 1.0) * boost
        return list(out.items())

    def _keyword_value(self, fs, value: str) -> str:
        """A query value for a keyword field, through the field's normalizer as Elasticsearch
        does for term, terms and match queries (KeywordFieldType normalizes search values)."""
        normalize = keyword_normalizer(fs, self.ctx.analysis)
        return value if normalize is None else normalize(value)

    def _q_term(self, p):
        field, v = self._single_field("term", p)
        opts = v if isinstance(v, dict) else {"value": v}
        _check_params("term", opts, {"value", "term", "boost", "case_insensitive", "_name"})
        if "term" in opts:  # TermQueryBuilder.TERM_FIELD: "term" is read as the value
            opts = {**{k: x for k, x in opts.items() if k != "term"}, "value": opts["term"]}
        if "value" not in opts:
            raise parsing_error("[term] query requires a value")
        if opts.get("case_insensitive"):
            raise unsupported("term.case_insensitive")
        boost = _float("term", "boost", opts.get("boost", 1.0))
        if field == "_id":  # IdFieldType.termQuery: the ids query of that one id (constant score)
            return self._q_ids({"values": [opts["value"]], "boost": boost})
        fs = self.mapping.get(field)
        if fs is None:
            return MatchNoneNode()
        if fs.type in (TEXT, KEYWORD):
            value = opts["value"]
            value = (
                value
                if isinstance(value, str)
                else ("true" if value is True else "false" if value is False else str(value))
            )
            return TermNode(field, self._keyword_value(fs, value) if fs.type == KEYWORD else value, boost)
        if fs.type == VECTOR:
            raise illegal_argument(f"Field [{field}] of type [dense_vector] does not support term queries")
        return self._exact(field, opts["value"], boost)

    def _q_terms(self, p):
        _check_params("terms", p, set(p) if isinstance(p, dict) else set())
        opts = dict(p)
        boost = _float("terms", "boost", opts.pop("boost", 1.0))
        opts.pop("_name", None)
        if len(opts) != 1:
            raise parsing_error("[terms] query does not support multiple fields")
        field, values = next(iter(opts.items()))
        if not isinstance(values, list):
            raise parsing_error(
                f"[terms] query does not support [{field}]"
                if isinstance(values, dict)
                else "[terms] query requires an array of values"
            )
        if len(values) > MAX_TERMS_COUNT:
            raise illegal_argument(
                f"The number of terms [{len(values)}] used in the Terms Query request has exceeded the allowed "
                f"maximum of [{MAX_TERMS_COUNT}]. This maximum can be set by changing the [index.max_terms_count] "
                "index level setting."
            )
        if any(isinstance(v, (dict, list)) or v is None for v in values):
            raise parsing_error(
                f"[terms] query values must be strings, numbers or booleans, got [{values!r:.80}]"
            )
        fs = self.mapping.get(field)
        if fs is None:
            return MatchNoneNode()
        if fs.type in (TEXT, KEYWORD):
            strs = [v if isinstance(v, str) else str(v) for v in values]
            if fs.type == KEYWORD:
                strs = [self._keyword_value(fs, v) for v in strs]
            store = "text" if fs.type == TEXT else "keyword"

            def matcher(ctx: Ctx):
                mask = np.zeros(ctx.n, dtype=bool)
                col = getattr(ctx.seg, store).get(field)
                if col is not None:
                    for v in strs:
                        found = col.postings.postings(v)
                        if found is not None:
                            mask[found[0]] = True
                return mask

            def docs(ctx: Ctx) -> np.ndarray:
                col = getattr(ctx.seg, store).get(field)
                parts = []
                if col is not None:
                    for v in dict.fromkeys(strs):
                        found = col.postings.postings(v)
                        if found is not None and len(found[0]):
                            parts.append(found[0])
                return union_docs(parts)

            return ConstNode(f"{field}:({' '.join(map(str, values))})", matcher, boost, docs=docs)
        else:
            targets = np.array([_to_number(fs, v, exact=True) for v in values], dtype=np.float64)

            def matcher(ctx: Ctx):
                mask = np.zeros(ctx.n, dtype=bool)
                col = ctx.seg.numeric.get(field)
                if col is not None:
                    mask[col.doc[np.isin(col.values, targets)]] = True
                return mask

        return ConstNode(f"{field}:({' '.join(map(str, values))})", matcher, boost)

    def _q_range(self, p):
        field, v = self._single_field("range", p)
        _check_params(
            "range",
            v,
            {
                "gte",
                "gt",
                "lte",
                "lt",
                "boost",
                "format",
                "time_zone",
                "relation",
                "_name",
                "from",
                "to",
                "include_lower",
                "include_upper",
            },
        )
        for bad in ("format", "time_zone"):
            if bad in v:
                raise unsupported(f"range.{bad}", "give dates as ISO-8601 or epoch milliseconds")
        boost = _float("range", "boost", v.get("boost", 1.0))
        fs = self.mapping.get(field)
        if fs is None:
            return MatchNoneNode()
        if fs.type == KEYWORD or fs.type == TEXT:
            raise unsupported(f"range on {fs.type} field [{field}]", "use a numeric or date field")
        bounds = {k: _to_number(fs, v[k]) for k in ("gte", "gt", "lte", "lt") if v.get(k) is not None}

        def matcher(ctx: Ctx):
            mask = np.zeros(ctx.n, dtype=bool)
            col = ctx.seg.numeric.get(field)
            if col is None:
                return mask
            ok = np.ones(len(col.values), dtype=bool)
            vals = col.values
            if "gte" in bounds:
                ok &= vals >= bounds["gte"]
            if "gt" in bounds:
                ok &= vals > bounds["gt"]
            if "lte" in bounds:
                ok &= vals <= bounds["lte"]
            if "lt" in bounds:
                ok &= vals < bounds["lt"]
            mask[col.doc[ok]] = True
            return mask

        return ConstNode(f"{field}:{bounds}", matcher, boost)

    def _q_exists(self, p):
        _check_params("exists", p, {"field", "boost", "_name"})
        if "field" not in p:
            raise parsing_error("[exists] must be provided with a [field]")
        pattern = p["field"]
        if not isinstance(pattern, str):
            raise parsing_error(f"[exists] [field] must be a string, got [{pattern}]")
        boost = _float("exists", "boost", p.get("boost", 1.0))

        def matcher(ctx: Ctx):
            seg = ctx.seg
            mask = np.zeros(ctx.n, dtype=bool)
            for name in [n for n in seg.mapping.fields if fnmatch.fnmatchcase(n, pattern)]:
                if name in seg.text:
                    mask |= seg.text[name].present
                elif name in seg.keyword:
                    mask |= seg.keyword[name].first >= 0
                elif name in seg.numeric:
                    mask |= seg.numeric[name].count() > 0
                elif name in seg.vectors:
                    mask |= seg.vectors[name].present
            return mask

        return ConstNode(f"FieldExistsQuery [field={pattern}]", matcher, boost)

    def _q_ids(self, p):
        _check_params("ids", p, {"values", "boost", "_name"})
        values = p.get("values", [])
        if not isinstance(values, list) or any(isinstance(v, (dict, list)) or v is None for v in values):
            raise parsing_error(f"[ids] [values] must be an array of ids, got [{values}]")
        boost = _float("ids", "boost", p.get("boost", 1.0))

        def docs(ctx: Ctx) -> np.ndarray:  # the ids' positions: work follows the ids, not the index
            found = (ctx.seg.position_of(str(v)) for v in values)
            return np.unique(np.array([pos for pos in found if pos is not None], dtype=np.int64))

        def matcher(ctx: Ctx):
            mask = np.zeros(ctx.n, dtype=bool)
            mask[docs(ctx)] = True
            return mask

        return ConstNode(f"_id:({' '.join(map(str, values))})", matcher, boost, docs=docs)

    # --- compound --------------------------------------------------------------------
    def _clauses(self, value) -> list[Node]:
        if value is None:
            return []
        if isinstance(value, dict):
            return [self.parse(value)]
        if isinstance(value, list):
            if len(value) > MAX_CLAUSE_COUNT:
                raise _too_many_clauses()
            return [self.parse(v) for v in value]
        raise parsing_error(f"[bool] query does not support [{value}]")

    def _q_bool(self, p):
        _check_params(
            "bool",
            p,
            {
                "must",
                "should",
                "filter",
                "must_not",
                "minimum_should_match",
                "boost",
                "_name",
                "adjust_pure_negative",
            },
        )
        must, should = self._clauses(p.get("must")), self._clauses(p.get("should"))
        filter_, must_not = self._clauses(p.get("filter")), self._clauses(p.get("must_not"))
        spec = p.get("minimum_should_match")
        msm = min_should_match(len(should), spec) if spec is not None else 0
        if should and not must and not filter_:
            msm = max(msm, 1)  # a should-only BooleanQuery still needs one clause to match
        return BoolNode(must, should, filter_, must_not, msm, _float("bool", "boost", p.get("boost", 1.0)))

    def _q_dis_max(self, p):
        _check_params("dis_max", p, {"queries", "tie_breaker", "boost", "_name"})
        if "queries" not in p:
            raise parsing_error("[dis_max] requires 'queries' field with at least one clause")
        return DisMaxNode(
            self._clauses(p["queries"]),
            _float("dis_max", "tie_breaker", p.get("tie_breaker", 0.0)),
            _float("dis_max", "boost", p.get("boost", 1.0)),
        )

    def _q_constant_score(self, p):
        _check_params("constant_score", p, {"filter", "boost", "_name"})
        if "filter" not in p:
            raise parsing_error("[constant_score] requires a 'filter' element")
        return ConstantScoreNode(
            self.parse(p["filter"]), _float("constant_score", "boost", p.get("boost", 1.0))
        )

    def _q_function_score(self, p):
        return self._function_parser(self, p)

    def _q_script_score(self, p):
        return self._function_parser(self, p, script_query=True)

    def _q_knn(self, p):
        return self._knn_parser(self, p)


#: queries whose hits are a function of the segment and their own JSON alone (no script, no
#: stored field read, no request state): :attr:`Node.memo_key` is set on them
_MEMO_QUERIES = frozenset({"multi_match", "match", "term"})
_LEAF_QUERIES = {"match_all", "term", "terms", "range", "exists", "ids", "knn"}  # match: per token


def _script_memo(node: Node) -> bool:
    """Whether a ``script_score``'s hits are a function of the segment and its JSON, each
    document's its own whatever the others (a restricted run's hits answer a subset of them):
    its query is ``match_all`` or one of :data:`_MEMO_QUERIES` (a score script reads the
    document, its params and that query's score; painless has no randomness)."""
    inner = getattr(node, "query", None)
    return (isinstance(inner, ConstNode) and inner.matches_all) or getattr(
        inner, "memo_key", None
    ) is not None


def _memo_key(name: str, params) -> str:
    """A query's JSON, keys sorted, as its memo key: orjson's text (the default request's cosine
    script with a QASPER question's 384-float vector: 9.6 us, where ``json.dumps`` takes 109),
    ``json``'s where orjson refuses the params (an integer beyond 64 bits)."""
    try:
        return name + orjson.dumps(params, option=orjson.OPT_SORT_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return name + json.dumps(params, sort_keys=True, default=repr)


def scalar_text(value) -> str:
    """A JSON scalar as the text a query searches for (booleans as Java prints them)."""
    return (
        value
        if isinstance(value, str)
        else ("true" if value is True else "false" if value is False else str(value))
    )


def query_text(clause: str, text) -> str:
    """The ``query`` of a match-like clause: a scalar, as text (an object or array is refused as
    Elasticsearch's parser refuses it)."""
    if isinstance(text, (dict, list)):
        raise parsing_error(
            f"[{clause}] unknown token [START_{'OBJECT' if isinstance(text, dict) else 'ARRAY'}] after [query]"
        )
    return scalar_text(text)


def _too_many_clauses() -> EsError:
    return EsError(
        400,
        "too_many_clauses",
        f"maxClauseCount is set to {MAX_CLAUSE_COUNT} (indices.query.bool.max_clause_count)",
    )


def _to_number(fs, value, exact: bool = False) -> float:
    """A query value in a numeric, date or boolean field's value space; ``exact`` (term, terms):
    an integer field's value must fit its type (NumberFieldMapper.NumberType#parse), else a 400."""
    out = _parse_number(fs, value)
    if exact and fs.type in INTEGER_RANGES:
        lo, hi = INTEGER_RANGES[fs.type]
        n = value if isinstance(value, int) else math.trunc(out)
        if not lo <= n <= hi:
            raise EsError(
                400,
                "query_shard_exception",
                f"failed to create query: Value [{value}] is out of range for "
                f"{'an' if fs.type == 'integer' else 'a'} {fs.type} (field [{fs.name}] accepts {lo} to {hi})",
            )
    return out


def _parse_number(fs, value) -> float:
    try:
        if fs.type == "date":
            return parse_date(value)
        if fs.type == "boolean":
            if value in (True, "true"):
                return 1.0
            if value in (False, "false"):
                return 0.0
            raise ValueError(value)
        if isinstance(value, bool):
            raise ValueError(value)
        out = float(value)
        if not math.isfinite(out):
            raise ValueError(value)
        return out
    except (TypeError, ValueError, OverflowError):
        raise EsError(
            400,
            "query_shard_exception",
            f'failed to create query: For input string: "{value}" (field [{fs.name}] of type [{fs.type}])',
        ) from None


_MSM_COND = re.compile(r"\s*<\s*")


def min_should_match(optional: int, spec) -> int:
    """Elasticsearch's Queries.calculateMinShouldMatch: "3", "-1", "75%", "-25%", "3<90%"."""
    if isinstance(spec, bool):
        raise parsing_error(f"[minimum_should_match] invalid value [{spec}]")
    if isinstance(spec, int):
        spec = str(spec)
    spec = str(spec).strip()
    try:
        if "<" in spec:
            result = optional
            for part in _MSM_COND.sub("<", spec).split():
                upper, _, rest = part.partition("<")
                if optional <= int(upper):
                    return result
                result = min_should_match(optional, rest)
            return result
        if spec.endswith("%"):
            percent = int(spec[:-1])
            calc = np.float32(optional * percent) * np.float32(1 / 100)  # Java float arithmetic
            result = optional + int(calc) if calc < 0 else int(calc)
        else:
            count = int(spec)
            result = optional + count if count < 0 else count
    except ValueError:
        raise parsing_error(f"[minimum_should_match] invalid value [{spec}]") from None
    return max(result, 0)
