"""Tests for the embedded engine's Painless score-expression interpreter (engine/script/painless.py).

Expected values are worked out by hand from Java/Painless semantics and the Elasticsearch sources
(ScoreScriptUtils, VectorScoreScriptUtils, DenseVector.checkDimensions, ScriptDocValues).
"""

from __future__ import annotations

import math
import random
import time

import numpy as np
import pytest

from scholar_es.engine.errors import EsError
from scholar_es.engine.script.painless import CompiledScript, compile_script


class ArrayScriptContext:
    """A ScriptContext over plain arrays.

    ``fields`` maps a field name to ``(kind, values)``; a NaN value means the document has no value.
    ``vectors`` maps a dense_vector field to a float32 ``[n, dim]`` array; a row of NaN means no vector.
    """

    def __init__(self, n: int, scores=None, fields=None, vectors=None) -> None:
        self.n = n
        self._scores = None if scores is None else np.asarray(scores, np.float64)
        self._fields = {k: (kind, np.asarray(v, np.float64)) for k, (kind, v) in (fields or {}).items()}
        self._vectors = {k: np.asarray(v, np.float32) for k, v in (vectors or {}).items()}

    def score(self) -> np.ndarray:
        if self._scores is None:
            raise EsError(400, "illegal_argument_exception", "no scores in this context")
        return self._scores

    def field_kind(self, field: str) -> str:
        if field in self._vectors:
            return "dense_vector"
        if field not in self._fields:
            raise EsError(400, "illegal_argument_exception", f"No field found for [{field}] in mapping")
        return self._fields[field][0]

    def doc_values(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        self.field_kind(field)
        values = self._fields[field][1]
        has = ~np.isnan(values)
        return np.where(has, values, 0.0), has

    def doc_value_count(self, field: str) -> np.ndarray:
        if field in self._vectors:
            return self.vectors(field)[1].astype(np.int64)
        return self.doc_values(field)[1].astype(np.int64)

    def vectors(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        v = self._vectors[field]
        has = ~np.isnan(v).any(axis=1)
        return np.where(has[:, None], v, 0).astype(np.float32), has


NAN = float("nan")
CTX = ArrayScriptContext(
    3,
    scores=[0.0, 10.0, 30.0],
    fields={
        "views": ("long", [0, 15, 28]),
        "likes": ("long", [5, NAN, 7]),
        "rating": ("float", [0.1, 0.5, 2.5]),
        "price": ("double", [1.5, -2.0, NAN]),
        "dval": ("double", [20, 30, 40]),
        "flag": ("boolean", [1, 0, 1]),
        "title": ("keyword", [1, 2, 3]),
        "published": ("date", [1700000000123, -1500, 2000]),  # epoch millis
    },
    vectors={"vector": [[1, 0], [0, 1], [3, 4]], "sparse_vec": [[2, 0], [NAN, NAN], [0, 3]]},
)


def run(source: str, ctx: ArrayScriptContext = CTX, **params) -> list[float]:
    out = compile_script({"source": source, "params": params}).evaluate(ctx)
    assert out.dtype == np.float64 and out.shape == (ctx.n,)
    return out.tolist()


def fails(source: str, ctx: ArrayScriptContext = CTX, **params) -> EsError:
    with pytest.raises(EsError) as info:
        compile_script({"source": source, "params": params}).evaluate(ctx)
    return info.value


def caused_by(err: EsError) -> tuple[str, str]:
    assert err.type == "script_exception"
    cause = err.extra["caused_by"]
    return cause["type"], cause["reason"]


# ----------------------------------------------------------------------------- score helpers


def test_saturation_of_score():
    assert run("saturation(_score, 10)") == [0.0, 0.5, 0.75]


def test_sigmoid_of_score():
    # value^a / (k^a + value^a) with k=10, a=2: 0/100, 100/200, 900/1000
    assert run("sigmoid(_score, 10, 2)") == [0.0, 0.5, 0.9]


def test_documented_examples():
    assert run("doc['views'].value / 10") == [0.0, 1.0, 2.0]  # Longs: integer division
    assert run("Math.log(2 + doc['views'].value)") == [math.log(2), math.log(17), math.log(30)]
    assert run("Math.log10(doc['views'].value * params.factor + 1)", factor=5) == [
        0.0,
        math.log10(76),
        math.log10(141),
    ]
    assert run("params.weight * _score", weight=2) == [0.0, 20.0, 60.0]


def test_decay_numeric_functions():
    p = {"origin": 20, "scale": 10, "offset": 0, "decay": 0.5}
    # linear: scaling = 10 / (1 - 0.5) = 20; distance 0, 10, 20 -> 1, 0.5, 0
    assert run(
        "decayNumericLinear(params.origin, params.scale, params.offset, params.decay, doc['dval'].value)", **p
    ) == [1.0, 0.5, 0.0]
    exp = run(
        "decayNumericExp(params.origin, params.scale, params.offset, params.decay, doc['dval'].value)", **p
    )
    assert exp == [math.exp(math.log(0.5) / 10 * d) for d in (0, 10, 20)]
    assert exp == pytest.approx([1.0, 0.5, 0.25])
    gauss = run(
        "decayNumericGauss(params.origin, params.scale, params.offset, params.decay, doc['dval'].value)", **p
    )
    assert gauss == pytest.approx([1.0, 0.5, 0.0625])


# ----------------------------------------------------------------------------- Java arithmetic


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("params.a / 2", 2.0),
        ("params.a / 2.0", 2.5),
        ("-7 / 2", -3.0),
        ("-7 % 2", -1.0),
        ("7 % -2", 1.0),
        ("5.5 % 2", 1.5),
        ("-5.5 % 2", -1.5),
        ("1 / 2 * 2.0", 0.0),
        ("1 / 2.0 * 2", 1.0),
        ("2147483647 + 1", -2147483648.0),
        ("2147483647L + 1", 2147483648.0),
        ("params.a * 1000000000", 705032704.0),  # 5e9 wraps around in int
        ("params.big / 2", 1500000000.0),  # 3000000000 does not fit an int: it is a Long
        ("-2147483648 / -1", -2147483648.0),
        ("(int) 3.99 + (int) -3.99", 0.0),
        ("(long) 1e30", 9.223372036854775807e18),
        ("(int) Math.sqrt(-1)", 0.0),
        ("(double) params.a / 2", 2.5),
        ("0x1F + 017", 46.0),
        ("2L * 3", 6.0),
        ("1e3 + 2d / 4", 1000.5),
        ("-2147483648", -2147483648.0),
        ("0.1 + 0.2", 0.30000000000000004),
        ("0.1f + 0.2f", float(np.float32(0.1) + np.float32(0.2))),
        ("2f / 3", float(np.float32(2) / np.float32(3))),
        ("(true ? 1 : 2.0) / 2", 0.5),  # static ternary: promoted to double
        ("(params.flag ? 1 : 2.0) / 2", 0.5),
        ("(true ? 1 : 2) / 2", 0.0),
        ("params.a > 3 && !(params.a == 4) ? 1 : 0", 1.0),
        ("1 < 2 == true ? 3 : 4", 3.0),
    ],
)
def test_java_arithmetic(source, expected):
    assert run(source, a=5, big=3000000000, flag=True) == [expected] * 3


def test_integer_division_by_zero_raises():
    for source in ("params.a / 0", "params.a % 0", "10 / doc['views'].value"):
        assert caused_by(fails(source, a=5)) == ("arithmetic_exception", "/ by zero")
    assert run("1.0 / 0") == [math.inf] * 3
    assert run("-1 / 0.0") == [-math.inf] * 3
    assert all(math.isnan(x) for x in run("0.0 / 0"))
    assert run("params.z == 0 ? 0 : 10 / params.z", z=0) == [0.0] * 3
    assert run("doc['views'].value == 0 ? -1 : 30 / doc['views'].value") == [-1.0, 2.0, 1.0]


def test_invalid_constants_are_compile_errors():
    for source in ("2147483648", "9223372036854775808L", "-2147483649"):
        err = fails(source)
        assert err.reason == "compile error"
        assert caused_by(err)[1].startswith("Invalid")


# ----------------------------------------------------------------------------- Math

# Golden values: each expression compiled as Java by OpenJDK 25 (Temurin) and printed with
# Double.toHexString((double) (expr)).  Painless whitelists Math methods for double only, hence the casts.
JAVA_GOLDEN = [
    ("2147483647 * 3 + 7 / 2", "-0x1.0p31"),
    ("-9223372036854775808L - 1", "0x1.0p63"),
    ("(int) 3000000000L", "-0x1.34be88p30"),
    ("(int) 1e10f", "0x1.fffffffcp30"),
    ("(long) -1e300", "-0x1.0p63"),
    ("(int) (0.0 / 0.0)", "0x0.0p0"),
    ("16777217f + 1", "0x1.0p24"),
    ("(float) 0.1 + 0.2", "0x1.3333334cccccdp-2"),
    ("0.1f * 3", "0x1.333334p-2"),
    ("1.0f / 3 + 1.0 / 3", "0x1.555555aaaaaaap-1"),
    ("(double) (1.0f / 3)", "0x1.555556p-2"),
    ("7 % -3 * 1.5", "0x1.8p0"),
    ("-7.5 % 2", "-0x1.8p0"),
    ("1e308 * 10 - 1e308 * 10", "NaN"),
    ("Math.round((double) 2.4999999999999996) + Math.round((double) -0.5)", "0x1.0p1"),
    ("Math.round((double) 9.223372036854776E18)", "0x1.0p63"),
    ("Math.round((double) -1e300)", "-0x1.0p63"),
    ("Math.floor((double) -0.5) + Math.ceil((double) -0.5)", "-0x1.0p0"),
    ("Math.log10((double) 1000) + Math.log10((double) 2)", "0x1.a68826a13ef4p1"),
    ("Math.log10((double) 7) * 10", "0x1.0e6e6e72b7fa7p3"),
    ("Math.log((double) (2 + 15))", "0x1.6aa6bc1fa7f7ap1"),
    ("Math.log1p((double) 99)", "0x1.26bb1bbb55516p2"),
    ("Math.sqrt((double) 2) * Math.sqrt((double) 2)", "0x1.0000000000001p1"),
    ("Math.pow((double) 10, (double) -2)", "0x1.47ae147ae147bp-7"),
    ("Math.pow((double) 2.5, (double) 2)", "0x1.9p2"),
    ("Math.exp((double) -1.5)", "0x1.c8f87724b5c1dp-3"),
    ("Math.max((double) 3, (double) 4.5f) / 2", "0x1.2p1"),
    ("Math.abs((double) -7) / 2", "0x1.cp1"),
    ("10 / 4 * 4 + 10 % 4", "0x1.4p3"),
    ("(5 > 3 ? 1 : 2.5f) / 2", "0x1.0p-1"),
    ("100000 * 100000", "0x1.502f9p30"),
    ("100000L * 100000", "0x1.2a05f2p33"),
    ("0x7fffffff + 0x7fffffff", "-0x1.0p1"),
    ("017 * 3L", "0x1.68p5"),
    ("2.5 / 0 + -2.5 / 0", "NaN"),
    ("Math.signum((double) -0.0) + Math.signum((double) 1e-300)", "0x1.0p0"),
    ("Math.toDegrees((double) 1) + Math.toRadians((double) 90)", "0x1.d6eebf505e361p5"),
    ("Math.sin((double) 1) + Math.cos((double) 1) + Math.tan((double) 1)", "0x1.78371560ef6b2p1"),
    ("Math.cbrt((double) 10) + Math.tanh((double) 0.5)", "0x1.4eeb2bc2341adp1"),
]


@pytest.mark.parametrize(("source", "java_hex"), JAVA_GOLDEN)
def test_bit_exact_against_java(source, java_hex):
    (value,) = run(source, ArrayScriptContext(1))
    expected = float.fromhex(java_hex.replace("Infinity", "inf"))
    assert (math.isnan(value) and java_hex == "NaN") or value.hex() == expected.hex()


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("Math.round(2.5)", 3.0),
        ("Math.round(-2.5)", -2.0),
        ("Math.round(0.49999999999999994)", 0.0),
        ("Math.round(2.5) / 2", 1.0),  # round(double) is a long
        ("Math.abs(-3) / 2", 1.5),  # Painless whitelists only abs(double)
        ("Math.max(1, 2) / 4", 0.5),
        ("Math.min(3, params.a)", 3.0),
        ("Math.log10(1000)", 3.0),
        ("Math.pow(2, 10)", 1024.0),
        ("Math.sqrt(16) + Math.cbrt(27)", 7.0),
        ("Math.floor(-1.5) + Math.ceil(-1.5)", -3.0),
        ("Math.signum(-3.2) + Math.signum(0.0)", -1.0),
        ("Math.hypot(3, 4)", 5.0),
        ("Math.atan2(1, 1)", math.atan2(1, 1)),
        ("Math.exp(0) + Math.log1p(0) + Math.expm1(0)", 1.0),
        ("Math.E * Math.PI", math.e * math.pi),
        ("Math.sin(Math.PI / 2) + Math.cos(0) + Math.tan(0) + Math.atan(0)", 2.0),
    ],
)
def test_math(source, expected):
    assert run(source, a=5) == [expected] * 3


def test_math_special_values():
    assert all(math.isnan(x) for x in run("Math.log(-1)"))
    assert all(math.isnan(x) for x in run("Math.pow(1, 0.0 / 0.0)"))  # Java: NaN exponent -> NaN
    assert all(math.copysign(1, x) == -1 for x in run("Math.min(-0.0, 0.0)"))
    assert all(math.copysign(1, x) == 1 for x in run("Math.max(-0.0, 0.0)"))


# ----------------------------------------------------------------------------- doc values


def test_doc_access_forms():
    expected = [0.0, 15.0, 28.0]
    for source in (
        "doc['views'].value",
        'doc["views"].value',
        "doc.views.value",
        "doc['views'].getValue()",
        "doc['views'][0]",
        "doc['views'].get(0)",
        "doc[params.f].value",
    ):
        assert run(source, f="views") == expected
    assert run("doc['likes'].size()") == [1.0, 0.0, 1.0]
    assert run("doc['likes'].length") == [1.0, 0.0, 1.0]
    assert run("doc['likes'].empty ? 1 : 0") == [0.0, 1.0, 0.0]
    assert run("doc['likes'].isEmpty() ? 1 : 0") == [0.0, 1.0, 0.0]
    assert run("doc['flag'].value ? 2 : 1") == [2.0, 1.0, 2.0]
    # a float field reads back the stored float, widened to double
    assert run("doc['rating'].value") == [float(np.float32(0.1)), 0.5, 2.5]


def test_missing_value_raises_like_elasticsearch():
    for source in ("doc['likes'].value", "doc['likes'].value * 0", "doc['price'].value + 1"):
        err = fails(source)
        assert err.reason == "runtime error"
        assert caused_by(err) == (
            "illegal_state_exception",
            "A document doesn't have a value for a field! Use doc[<field>].size()==0 "
            "to check if a document is missing a field!",
        )


def test_guards_evaluate_only_the_reached_branch():
    assert run("doc['likes'].size() == 0 ? 0 : doc['likes'].value") == [5.0, 0.0, 7.0]
    assert run("doc['likes'].size() > 0 && doc['likes'].value > 6 ? 1 : 0") == [0.0, 0.0, 1.0]
    assert run("doc['likes'].empty || doc['likes'].value < 6 ? 1 : 0") == [1.0, 1.0, 0.0]
    assert run("Math.log10((doc['likes'].size() == 0 ? 1 : doc['likes'].value) * 10)") == [
        math.log10(50),
        1.0,
        math.log10(70),
    ]


def test_def_ternary_keeps_each_documents_runtime_type():
    # def branches: Long for documents with a value (long division), Double 0.5 for the missing one
    assert run("(doc['likes'].size() == 0 ? 0.5 : doc['likes'].value) / 2") == [2.0, 0.25, 3.0]


def test_date_fields_through_zoned_date_time():
    assert run("doc['published'].value.toInstant().toEpochMilli()") == [1700000000123.0, -1500.0, 2000.0]
    assert run("doc['published'].value.toEpochSecond()") == [1700000000.0, -2.0, 2.0]  # floors
    assert "[keyword] field" in fails("doc['title'].value.toEpochSecond()").reason


def test_unknown_and_non_numeric_fields():
    err = fails("doc['nope'].value")
    assert err.type == "illegal_argument_exception" and "nope" in err.reason
    for field, kind in (("title", "keyword"), ("published", "date")):
        err = fails(f"doc['{field}'].value")
        assert err.type == "script_exception" and f"[{kind}] field" in err.reason


# ----------------------------------------------------------------------------- params


def test_params_access():
    p = {"a": 1, "v": [10, 20, 30], "m": {"k": 100}}
    assert (
        run("params['a'] + params.v[1] + params.v[-1] + params.v.length + params.v.size() + params.m.k", **p)
        == [157.0] * 3
    )
    assert run("params.v.get(0) + params.m['k'] + params.v.0", **p) == [120.0] * 3
    assert caused_by(fails("params.missing + 1", **p))[0] == "null_pointer_exception"
    assert caused_by(fails("params.v[5]", **p))[0] == "index_out_of_bounds_exception"
    assert run("params.x", x=2.5) == [2.5] * 3
    # Def.lookupGetter: a whitelisted getter (isEmpty) wins over the map key, otherwise map.get
    assert run("params.m.empty ? 1 : params.m.size", m={"size": 4}) == [4.0] * 3


# ----------------------------------------------------------------------------- vectors


def test_vector_functions_on_hand_made_vectors():
    # documents: [1, 0], [0, 1], [3, 4]
    cos = run("cosineSimilarity(params.query_vector, 'vector') + 1.0", query_vector=[1, 0])
    assert cos == [2.0, 1.0, 1.0 + float(np.float32(0.6))]  # 3f / 5f, computed in float
    assert run("dotProduct(params.query_vector, 'vector')", query_vector=[1, 2]) == [1.0, 2.0, 11.0]
    assert run("l1norm(params.query_vector, 'vector')", query_vector=[1, 2]) == [2.0, 2.0, 4.0]
    assert run("l2norm(params.query_vector, 'vector')", query_vector=[1, 2]) == [
        2.0,
        math.sqrt(2),
        math.sqrt(8),
    ]
    assert run("1 / (1 + l2norm(params.q, 'vector'))", q=[0, 0]) == [0.5, 0.5, 1 / 6]
    assert run("cosineSimilarity(params.q, params.field)", q=[0, 2], field="vector") == [
        0.0,
        1.0,
        float(np.float32(0.8)),
    ]


def test_vector_errors():
    err = fails("cosineSimilarity(params.query_vector, 'vector')", query_vector=[1, 2, 3])
    assert caused_by(err) == (
        "illegal_argument_exception",
        "The query vector has a different number of dimensions [3] than the document vectors [2].",
    )
    err = fails("cosineSimilarity(params.q, 'sparse_vec')", q=[1, 0])
    assert caused_by(err) == (
        "illegal_argument_exception",
        "A document doesn't have a value for a vector field!",
    )
    assert run("doc['sparse_vec'].size() == 0 ? 0 : cosineSimilarity(params.q, 'sparse_vec')", q=[1, 0]) == [
        1.0,
        0.0,
        0.0,
    ]
    # 8.x takes the field name; the 7.3-7.5 doc['field'] form is rejected
    assert (
        caused_by(fails("cosineSimilarity(params.q, doc['vector'])", q=[1, 0]))[0] == "class_cast_exception"
    )
    assert caused_by(fails("dotProduct(params.q, 'views')", q=[1, 0]))[0] == "class_cast_exception"
    assert caused_by(fails("dotProduct(params.q, 'vector')", q=[0, 1e39])) == (
        "illegal_argument_exception",
        "element_type [float] vectors do not support infinite values but found [Infinity] at dim [1];",
    )


# ----------------------------------------------------------------------------- rejected scripts


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("for (int i = 0; i < 1; i++) {}", "[for] at offset 0"),
        ("x = 1", "[assignment =] at offset 2"),
        ("params.a += 1", "[assignment +=]"),
        ("doc['views'].value.foo()", "[.foo()] at offset 18"),
        ("'abc'.length()", "[.length()]"),
        ("randomScore(1)", "[randomScore] at offset 0"),
        ("randomScore(100, '_seq_no')", "[randomScore]"),
        ("decayGeoExp('40, -70', '200km', '0km', 0.2, doc['loc'].value)", "[decayGeoExp]"),
        ("def x = 1; return x", "[declaration def x]"),
        ("double s = _score; return s", "[declaration double s]"),
        ("if (true) { return 1 } else { return 2 }", "[if]"),
        ("new ArrayList()", "[new]"),
        ("Math.random()", "[Math.random()]"),
        ("Integer.MAX_VALUE", "[Integer]"),
        ("1 + x", "[x] at offset 4"),
        ("1 << 2", "[operator <<]"),
        ("params.a ?: 1", "[elvis operator ?:]"),
        ("_termStats.termFreq()", "[_termStats]"),
        ("doc['views'].value == 'x' ? 1 : 0", "[string literal]"),
        ("'a' + 'b'", "[string literal]"),
        ("1; 2", "[multiple statements]"),
        ("_score++", "[operator ++]"),
        ("params.v.stream().count()", "[.stream()]"),
    ],
)
def test_unsupported_constructs_are_named(source, named):
    err = fails(source, a=1, v=[1])
    assert err.type == "script_exception" and err.status == 400
    assert err.reason.startswith("unsupported construct ")
    assert named in err.reason
    assert err.extra["script"] == source and err.extra["lang"] == "painless"


@pytest.mark.parametrize(
    "source",
    [
        "1 +",
        "(1",
        "doc['views'].value /",
        "1 2",
        "#",
        "'unterminated",
        "return",
        "",
        "doc['views']. value",
        "true",
        "1 == 1",
    ],
)
def test_compile_errors(source):
    err = fails(source)
    assert err.type == "script_exception" and err.reason == "compile error"
    assert err.extra["caused_by"]["type"] == "illegal_argument_exception"
    assert "offset" in err.extra["position"] and err.extra["script_stack"][-1].endswith("^---- HERE")


def test_error_body_shape():
    body = fails("params.a / 0", a=1).to_body()
    assert body["status"] == 400
    root = body["error"]["root_cause"][0]
    assert root["type"] == "script_exception" and root["reason"] == "runtime error"
    assert root["lang"] == "painless" and root["script"] == "params.a / 0"
    assert root["caused_by"] == {"type": "arithmetic_exception", "reason": "/ by zero"}


def test_garbage_strings_only_raise_es_errors():
    rng = random.Random(20240607)
    fragments = [
        "doc['views']",
        "doc['likes']",
        ".value",
        ".size()",
        "_score",
        "params.a",
        "params.v",
        "[0]",
        "(",
        ")",
        "?",
        ":",
        "+",
        "-",
        "*",
        "/",
        "%",
        "==",
        "<",
        ">=",
        "&&",
        "||",
        "!",
        "1",
        "2.5",
        "0x1F",
        "07",
        "2L",
        "3f",
        "1e400",
        " ",
        "Math.log",
        "Math.max",
        ",",
        "'vector'",
        "cosineSimilarity",
        "saturation",
        ";",
        "return ",
        "true",
        '"',
        "'",
        "\\",
        ".",
        "[",
        "]",
        "{",
        "}",
        "=",
        "for",
        "/*",
        "*/",
        "//",
        "\n",
        "#",
        "é",
        "(int)",
        "2147483648",
        "decayNumericGauss",
        "doc",
        "params",
        "Math",
    ]
    start = time.monotonic()
    evaluated = 0
    for i in range(1000):
        if i % 2:
            source = "".join(rng.choice(fragments) for _ in range(rng.randint(1, 12)))
        else:
            source = "".join(chr(rng.randint(9, 126)) for _ in range(rng.randint(0, 40)))
        params = {"a": rng.choice([5, 0, 2.5, None, True, [1, 2], "x"]), "v": [1, 2]}
        try:
            out = compile_script({"source": source, "params": params}).evaluate(CTX)
        except EsError:
            continue
        assert out.shape == (3,) and out.dtype == np.float64
        evaluated += 1
    assert time.monotonic() - start < 30
    assert evaluated < 1000


def test_deep_nesting_is_rejected_not_crashing():
    for source in ("(" * 3000 + "1" + ")" * 3000, "1" + " + 1" * 3000, "!" * 3000 + "true", "0" * 20000):
        assert fails(source).type == "script_exception"


# ----------------------------------------------------------------------------- API


def test_compile_script_forms_and_cache():
    a = compile_script({"source": "params.w * _score", "params": {"w": 2}, "lang": "painless"})
    b = compile_script({"source": "params.w * _score", "params": {"w": 3}})
    assert isinstance(a, CompiledScript) and a._root is b._root
    assert a.evaluate(CTX).tolist() == [0.0, 20.0, 60.0] and b.evaluate(CTX).tolist() == [0.0, 30.0, 90.0]
    assert compile_script("_score + 1").evaluate(CTX).tolist() == [1.0, 11.0, 31.0]
    assert compile_script("/* c */ return _score * 2; // trailing\n").evaluate(CTX).tolist() == [
        0.0,
        20.0,
        60.0,
    ]
    assert a.uses_score() and not compile_script("doc['views'].value").uses_score()
    assert compile_script("false ? _score : 1").uses_score()
    with pytest.raises(EsError) as info:
        compile_script({"id": "my-stored-script"})
    assert info.value.type == "parsing_exception" and "stored scripts" in info.value.reason
    with pytest.raises(EsError):
        compile_script({"source": "1", "lang": "expression"})
    with pytest.raises(EsError):
        compile_script({"lang": "painless"})
    with pytest.raises(EsError):
        compile_script({"source": "1", "inline": "1"})


def test_context_without_scores_and_empty_candidate_sets():
    no_scores = ArrayScriptContext(2, fields={"views": ("long", [1, 2])})
    assert compile_script("doc['views'].value * 2").evaluate(no_scores).tolist() == [2.0, 4.0]
    with pytest.raises(EsError):
        compile_script("_score * 2").evaluate(no_scores)
    empty = ArrayScriptContext(0, scores=[], fields={"likes": ("long", [])}, vectors={"v": np.zeros((0, 2))})
    for source in ("doc['likes'].value", "cosineSimilarity(params.q, 'v')", "10 / doc['likes'].value"):
        assert compile_script({"source": source, "params": {"q": [1, 2, 3]}}).evaluate(empty).shape == (0,)
