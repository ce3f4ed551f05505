"""``function_score`` and ``script_score``: rescoring a query's documents by functions.

The combination rules follow Elasticsearch's ``FunctionScoreQuery`` (score modes, which
functions apply to a document, ``max_boost``) and ``CombineFunction`` (boost modes); see
docs/es-semantics.md for the source references.
"""

from __future__ import annotations

import math

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.query.dsl import _check_params, _float
from scholar_es.engine.query.nodes import ConstNode, Ctx, Node, _boosted, expl
from scholar_es.engine.script.painless import compile_script

SCORE_MODES = ("multiply", "sum", "avg", "first", "max", "min")
BOOST_MODES = ("multiply", "replace", "sum", "avg", "max", "min")
FVF_MODIFIERS = ("none", "log", "log1p", "log2p", "ln", "ln1p", "ln2p", "square", "sqrt", "reciprocal")
_FLOAT_MAX = float(np.finfo(np.float32).max)


class SegmentScriptContext:
    """What a Painless score script may read, for every document of the segment."""

    def __init__(self, ctx: Ctx, scores: np.ndarray | None) -> None:
        self._ctx, self._scores = ctx, scores
        self.n = ctx.n

    def score(self) -> np.ndarray:
        if self._scores is None:
            raise EsError(400, "script_exception", "_score is not available in this context")
        return self._scores

    def field_kind(self, field: str) -> str:
        fs = self._ctx.seg.mapping.get(field)
        if fs is None:
            raise EsError(400, "illegal_argument_exception", f"No field found for [{field}] in mapping")
        if fs.type in ("long", "integer", "short", "byte"):
            return "long"
        return fs.type  # double/float/half_float/scaled_float/date/boolean/keyword/...

    def doc_values(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        kind = self.field_kind(field)
        if kind in ("text", "keyword", "dense_vector", "object"):
            raise EsError(
                400,
                "illegal_argument_exception",
                f"field [{field}] of type [{kind}] has no numeric doc values for scripts",
            )
        col = self._ctx.seg.numeric.get(field)
        if col is None:
            return np.zeros(self.n), np.zeros(self.n, dtype=bool)
        first = col.stats()[0]
        has = ~np.isnan(first)
        return np.where(has, first, 0.0), has

    def doc_value_count(self, field: str) -> np.ndarray:
        seg = self._ctx.seg
        if field in seg.numeric:
            return seg.numeric[field].count().astype(np.int64)
        if field in seg.keyword:
            return seg.keyword[field].postings.row_counts().astype(np.int64)
        if field in seg.vectors:
            return seg.vectors[field].present.astype(np.int64)
        self.field_kind(field)
        return np.zeros(self.n, dtype=np.int64)

    def vectors(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        col = self._ctx.seg.vectors.get(field)
        if col is None:
            if self.field_kind(field) != "dense_vector":
                raise EsError(
                    400, "illegal_argument_exception", f"Field [{field}] is not a dense_vector field"
                )
            return np.zeros((self.n, 0), dtype=np.float32), np.zeros(self.n, dtype=bool)
        return col.matrix, col.present


class FunctionScoreNode(Node):
    def __init__(
        self,
        query: Node,
        functions: list[tuple[Node | None, str, dict, float | None]],
        score_mode: str,
        boost_mode: str,
        max_boost: float,
        min_score: float | None,
        boost: float,
    ) -> None:
        self.query, self.functions = query, functions
        self.score_mode, self.boost_mode = score_mode, boost_mode
        self.max_boost, self.min_score, self.boost = max_boost, min_score, boost

    def _run(self, ctx: Ctx):
        qmask, qscore = self.query.run(ctx)
        n = ctx.n
        # The query's boost is pushed into the sub-query's weight (FunctionScoreQuery#createWeight),
        # so functions and boost_mode see the boosted score; sub-scores are floats in Lucene.
        sub = (qscore * self.boost).astype(np.float32).astype(np.float64)
        if not self.functions:  # FunctionFactorScorer.score: no function, the sub-query's score
            mask = qmask if self.min_score is None else qmask & (sub >= self.min_score)
            self._factor = np.ones(n)
            return mask, np.where(mask, sub, 0.0)
        factor = np.ones(n)
        matched_any = np.zeros(n, dtype=bool)
        total = np.zeros(n)
        weight_sum = np.zeros(n)
        best = np.full(n, -np.inf if self.score_mode == "max" else np.inf)
        first_done = np.zeros(n, dtype=bool)
        self._fvalues = []
        for filt, kind, spec, weight in self.functions:
            applies = qmask.copy()
            if filt is not None:
                applies &= filt.run(ctx)[0]
            value = self._function_value(ctx, kind, spec, sub, applies)
            if weight is not None:
                value = value * weight
            self._fvalues.append((applies, value))
            if self.score_mode == "multiply":
                factor = np.where(applies, factor * value, factor)
            elif self.score_mode == "first":
                take = applies & ~first_done
                factor = np.where(take, value, factor)
                first_done |= applies
            elif self.score_mode == "max":
                best = np.where(applies, np.maximum(best, value), best)
            elif self.score_mode == "min":
                best = np.where(applies, np.minimum(best, value), best)
            else:  # sum / avg
                total = np.where(applies, total + value, total)
                weight_sum = np.where(
                    applies, weight_sum + (weight if weight is not None else 1.0), weight_sum
                )
            matched_any |= applies
        if self.score_mode in ("max", "min"):
            factor = np.where(np.isfinite(best), best, 1.0)
        elif self.score_mode in ("sum", "avg"):
            has = weight_sum != 0
            factor = np.where(
                has, total / np.where(has, weight_sum, 1.0) if self.score_mode == "avg" else total, 1.0
            )
        capped = np.minimum(factor, self.max_boost)
        combined = _combine(self.boost_mode, sub, capped)
        final = combined.astype(np.float32).astype(np.float64)
        bad = qmask & ((final < 0) | np.isnan(final))
        if bad.any():
            raise EsError(
                400,
                "illegal_argument_exception",
                f"function score query returned an invalid score: {final[bad][0]} for doc: {int(np.flatnonzero(bad)[0])}",
            )
        mask = qmask.copy()
        if self.min_score is not None:
            mask &= final >= self.min_score
        self._factor = capped
        return mask, np.where(mask, final, 0.0)

    def _function_value(
        self, ctx: Ctx, kind: str, spec: dict, sub: np.ndarray, applies: np.ndarray
    ) -> np.ndarray:
        if kind == "weight":
            return np.ones(ctx.n)
        if kind == "field_value_factor":
            return _field_value_factor(ctx, spec, applies)
        if kind == "script_score":
            script = compile_script(spec.get("script"))
            return _checked(script.evaluate(SegmentScriptContext(ctx, sub)), applies, "script_score function")
        raise unsupported(f"function_score function {kind}")

    def explain(self, pos: int) -> dict:
        if not self.functions:  # the sub-query's explanation (CustomBoostFactorWeight.explain)
            return {**self.query.explain(pos), "value": self.scores[pos]}
        details = [self.query.explain(pos)]
        fdetails = [expl(v[pos], "function score") for applies, v in self._fvalues if applies[pos]]
        details.append(
            expl(
                self._factor[pos],
                f"min of: (function score, score mode [{self.score_mode}])",
                fdetails + [expl(self.max_boost, "maxBoost")],
            )
        )
        return expl(
            self.scores[pos],
            f"function score, score mode [{self.score_mode}], boost mode "
            f"[{self.boost_mode}], query boost [{self.boost:g}]",
            details,
        )


def _combine(mode: str, q: np.ndarray, f: np.ndarray) -> np.ndarray:
    """CombineFunction: how the capped function factor meets the query score."""
    if mode == "multiply":
        return q * f
    if mode == "replace":
        return f
    if mode == "sum":
        return q + f
    if mode == "avg":
        return (q + f) / 2.0
    if mode == "max":
        return np.maximum(q, f)
    return np.minimum(q, f)


def _checked(values: np.ndarray, applies: np.ndarray, what: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.shape != applies.shape:
        values = np.broadcast_to(values, applies.shape).astype(np.float64)
    return values


def _field_value_factor(ctx: Ctx, spec: dict, applies: np.ndarray) -> np.ndarray:
    _check_params("field_value_factor", spec, {"field", "factor", "modifier", "missing"})
    field = spec.get("field")
    if field is None:
        raise parsing_error("[field_value_factor] required field 'field' missing")
    if not isinstance(field, str):
        raise parsing_error(f"[field_value_factor] [field] must be a string, got [{field}]")
    modifier = str(spec.get("modifier", "none")).lower()
    if modifier not in FVF_MODIFIERS:
        raise parsing_error(f"Illegal modifier: {modifier}; expected one of {list(FVF_MODIFIERS)}")
    factor = _float("field_value_factor", "factor", spec.get("factor", 1.0))
    fs = ctx.seg.mapping.get(field)
    col = ctx.seg.numeric.get(field)
    if col is not None:
        first = col.stats()[0]
    else:
        first = np.full(ctx.n, np.nan)
        if fs is not None and not fs.is_numeric:
            raise EsError(
                400,
                "illegal_argument_exception",
                f"Field [{field}] of type [{fs.type}] is not supported for field_value_factor",
            )
    missing = spec.get("missing")
    lacking = applies & np.isnan(first)
    if lacking.any():
        if missing is None:
            raise EsError(
                400, "illegal_argument_exception", f"Missing value for field [{field}]"
            )  # FieldValueFactorFunction
        first = np.where(np.isnan(first), _float("field_value_factor", "missing", missing), first)
    x = factor * np.where(np.isnan(first), 0.0, first)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {
            "none": lambda: x,
            "log": lambda: np.log10(x),
            "log1p": lambda: np.log10(x + 1),
            "log2p": lambda: np.log10(x + 2),
            "ln": lambda: np.log(x),
            "ln1p": lambda: np.log1p(x),
            "ln2p": lambda: np.log(x + 2),
            "square": lambda: x * x,
            "sqrt": lambda: np.sqrt(x),
            "reciprocal": lambda: 1.0 / x,
        }[modifier]()
    bad = applies & (np.isnan(out) | np.isinf(out) | (out < 0))
    if bad.any():
        raise EsError(
            400,
            "illegal_argument_exception",
            f"field value function must not produce negative scores, but got: [{out[bad][0]}] for field value: "
            f"[{first[bad][0]}]",
        )
    return out


class ScriptScoreNode(Node):
    def __init__(self, query: Node, script: dict, min_score: float | None, boost: float) -> None:
        self.query, self.script, self.min_score, self.boost = query, compile_script(script), min_score, boost

    def _run(self, ctx: Ctx):
        qmask, qscore = self.query.run(ctx)
        if ctx.window is not None:  # a rescore query: the script runs on the window's documents only
            qmask = qmask & ctx.window
        sub = qscore.astype(np.float32).astype(np.float64)
        values = np.asarray(self.script.evaluate(SegmentScriptContext(ctx, sub), qmask), dtype=np.float64)
        values = np.where(qmask, values, 0.0).astype(np.float32).astype(np.float64)
        bad = qmask & ((values < 0) | np.isnan(values))
        if bad.any():
            pos = int(np.flatnonzero(bad)[0])
            raise EsError(
                400,
                "illegal_argument_exception",
                f"script_score script returned an invalid score [{values[pos]}] for doc [{pos}]. "
                "Must be a non-negative score!",
            )
        boosted = (values * self.boost).astype(np.float32).astype(np.float64)
        mask = qmask.copy()
        if self.min_score is not None:
            mask &= boosted >= self.min_score  # ScriptScoreQuery compares the boosted score
        return mask, np.where(mask, boosted, 0.0)

    def explain(self, pos: int) -> dict:
        return _boosted(
            expl(
                self.scores[pos] / (self.boost or 1.0),
                f'script score function, computed with script:"{self.script.source}"',
                [self.query.explain(pos)],
            ),
            self.boost,
        )


def _java_float(value: float) -> float:
    """A number Elasticsearch parses with ``parser.floatValue()`` (a function's ``weight``,
    ``max_boost``, ``min_score``): the Java float it becomes, as a double (1.2 is
    1.2000000476837158, which scores one float step apart from 1.2 in about half the documents)."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def parse_function_score(parser, p: dict, script_query: bool = False) -> Node:
    if script_query:
        _check_params("script_score", p, {"query", "script", "min_score", "boost", "_name"})
        if "query" not in p or "script" not in p:
            raise parsing_error("[script_score] requires 'query' and 'script' fields")
        return ScriptScoreNode(
            parser.parse(p["query"]),
            p["script"],
            _java_float(_float("script_score", "min_score", p["min_score"])) if "min_score" in p else None,
            _float("script_score", "boost", p.get("boost", 1.0)),
        )
    single = {"weight", "field_value_factor", "script_score", "random_score", "gauss", "exp", "linear"}
    _check_params(
        "function_score",
        p,
        {
            "query",
            "functions",
            "score_mode",
            "boost_mode",
            "max_boost",
            "min_score",
            "boost",
            "_name",
            "filter",
        }
        | single,
    )
    if "filter" in p and "query" not in p:
        raise parsing_error("[function_score] query does not support [filter]")
    query = (
        parser.parse(p["query"])
        if "query" in p
        else ConstNode("*:*", lambda ctx: np.ones(ctx.n, dtype=bool), matches_all=True)
    )
    functions = []
    top_level = {k: p[k] for k in single if k in p}
    if top_level and "functions" in p:
        raise parsing_error(
            "failed to parse [function_score] query. already found [functions] array, "
            "now encountering [" + next(iter(top_level)) + "]."
        )
    specs = p.get("functions", [top_level] if top_level else [])
    if not isinstance(specs, list):
        raise parsing_error("[function_score] [functions] must be an array")
    for spec in specs:
        functions.append(_parse_function(parser, spec))
    score_mode = str(p.get("score_mode", "multiply")).lower()
    boost_mode = str(p.get("boost_mode", "multiply")).lower()
    if score_mode not in SCORE_MODES:
        raise parsing_error(f"failed to parse [function_score] query. illegal score_mode [{score_mode}]")
    if boost_mode not in BOOST_MODES:
        raise parsing_error(f"failed to parse [function_score] query. illegal boost_mode [{boost_mode}]")
    return FunctionScoreNode(
        query,
        functions,
        score_mode,
        boost_mode,
        _java_float(_float("function_score", "max_boost", p.get("max_boost", _FLOAT_MAX))),
        _java_float(_float("function_score", "min_score", p["min_score"])) if "min_score" in p else None,
        _float("function_score", "boost", p.get("boost", 1.0)),
    )


def _parse_function(parser, spec: dict):
    if not isinstance(spec, dict):
        raise parsing_error("[function_score] malformed function, expected an object")
    _check_params(
        "function_score",
        spec,
        {"filter", "weight", "field_value_factor", "script_score", "random_score", "gauss", "exp", "linear"},
    )
    filt = parser.parse(spec["filter"]) if "filter" in spec else None
    weight = _java_float(_float("function_score", "weight", spec["weight"])) if "weight" in spec else None
    if weight is not None and math.copysign(1.0, weight) < 0:  # Float.compare(weight, 0) < 0: -0.0 too
        raise illegal_argument("[weight] cannot be negative for a filtering function")
    kinds = [k for k in spec if k not in ("filter", "weight")]
    if len(kinds) > 1:
        raise parsing_error(
            f"failed to parse function_score functions: more than one function [{', '.join(kinds)}]"
        )
    if not kinds:
        if weight is None:
            raise parsing_error("failed to parse [function_score] query. function has no type and no weight")
        return filt, "weight", {}, weight
    kind = kinds[0]
    if kind in ("random_score", "gauss", "exp", "linear"):
        raise unsupported(f"function_score {kind}", "use weight, field_value_factor or script_score")
    if kind == "script_score":
        compile_script(spec[kind].get("script") if isinstance(spec[kind], dict) else None)  # fail early
    return filt, kind, spec[kind], weight
