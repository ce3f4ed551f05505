"""Answers show a Java ``float`` as Elasticsearch writes one.

``SearchHit.toXContent`` writes ``_score`` with ``builder.field(name, float)``, ``SearchHits``
``max_score`` likewise, explanations their float ``value``, a ``_score`` sort key a ``Float``, and
the fields API a ``float``/``half_float`` field's value as ``NumberType.parse`` gives it (a Java
float); Jackson writes a float as ``Float.toString`` does (JDK 19+, Schubfach): the shortest
decimal that reads back as the float, of at least two digits where one would do. So a client reads
``0.2876821``, not the float's double expansion ``0.28768208622932434``. ``docvalue_fields`` of a
float field are doubles (``DocValueFormat.RAW``), and show the expansion.

The expected text is computed here independently of the engine: the correctly rounded decimals
of 1, 2, ... 9 significant digits of the float (Python's ``%g``), the first that reads back.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.rest.transport import embedded_client
from scholar_es.engine.xcontent import java_float


def _java_text(value: float) -> float:
    """The number Float.toString's text of ``float(value)`` reads as, by the JDK 19+ definition,
    in exact integers: R = the decimals that round to the float (its rounding interval, ends
    included when its significand is even); m = their shortest length; T = those of length m
    (of length 1 or 2 where m is 1); the one of T closest to the float, ties to an even last digit.
    (Checked against JDK 25's Float.toString on 19.9M bit patterns when written.)"""
    bits = int(np.float32(value).view(np.uint32))
    negative, exponent, mantissa = bits >> 31, (bits >> 23) & 0xFF, bits & 0x7FFFFF
    c, q = (mantissa, -149) if exponent == 0 else (mantissa | (1 << 23), exponent - 150)
    if c == 0:
        return -0.0 if negative else 0.0
    scale = 160  # 10^scale makes the float and its half-ulp boundaries integers
    shift = q - 2
    unit = (10**scale) << shift if shift >= 0 else (10**scale * 5**-shift) // 10**-shift
    v, high = 4 * c * unit, (4 * c + 2) * unit
    low = (4 * c - 1) * unit if (mantissa == 0 and exponent > 1) else (4 * c - 2) * unit  # a power of two
    inclusive = c % 2 == 0

    def candidates(p: int) -> range:  # integers k with k * 10^p in R
        step = 10 ** (p + scale)
        lo, hi = -(-low // step), high // step
        if not inclusive:
            lo += lo * step == low
            hi -= hi * step == high
        return range(lo, hi + 1)

    def length(k: int) -> int:
        while k % 10 == 0:
            k //= 10
        return len(str(k))

    p = len(str(high)) - scale
    while not len(candidates(p)):
        p -= 1
    found = [(length(k), k, pp) for pp in (p, p - 1, p - 2, p - 3) for k in candidates(pp)]
    shortest = min(n for n, _, _ in found)
    chosen = [(k, pp) for n, k, pp in found if (n <= 2 if shortest == 1 else n == shortest)]

    def closeness(t: tuple[int, int]) -> tuple[int, int]:
        k, pp = t
        digits = k
        while digits % 10 == 0:
            digits //= 10
        return abs(k * 10 ** (pp + scale) - v), digits % 2

    k, pp = min(chosen, key=closeness)
    number = float(Fraction(k) * Fraction(10) ** pp)
    return -number if negative else number


@settings(max_examples=2000, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_java_float_is_the_shortest_decimal_of_two_digits_or_more(x):
    assert java_float(x) == _java_text(x)
    assert np.float32(java_float(x)) == np.float32(x)


@pytest.mark.parametrize(
    "value, text",
    [
        (float(np.uint32(0x0F800000).view(np.float32)), 1.2621775e-29),  # a power of two: a lopsided interval
        (0.28768208622932434, 0.2876821),  # a BM25 score: ln(4/3) as a float
        (1e-45, 1.4e-45),  # Float.MIN_VALUE: "1.4E-45" (two digits where one would do)
        (0.1, 0.1),
        (1.099609375, 1.0996094),  # half_float 1.1 as a Java float
        (3.4028234663852886e38, 3.4028235e38),  # Float.MAX_VALUE
    ],
)
def test_java_float_examples(value, text):
    assert java_float(value) == text


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    client = embedded_client(tmp_path_factory.mktemp("floats"))
    client.indices.create(
        index="f",
        mappings={"properties": {"t": {"type": "text"}, "p": {"type": "float"}, "h": {"type": "half_float"}}},
    )
    docs = ["graph model data", "graph", "model of a graph of data", "protein"]
    for i, text in enumerate(docs):
        client.index(index="f", id=str(i), document={"t": text, "p": 1.1 + i, "h": 1.1 + i})
    client.indices.refresh(index="f")
    yield client
    client.close()


def _floats(es, body: dict) -> dict:
    node = es.transport.node_pool.get()
    meta, raw = node.perform_request(
        "POST", "/f/_search", body=json.dumps(body).encode(), headers={"content-type": "application/json"}
    )
    assert meta.status == 200, raw
    return json.loads(raw, parse_float=str)


def test_scores_explanations_and_float_fields_read_as_elasticsearch_writes_them(es):
    body = {
        "query": {"match": {"t": "graph model"}},
        "explain": True,
        "fields": ["p", "h"],
        "sort": ["_score", {"p": "asc"}],
        "track_scores": True,
    }
    hits = _floats(es, body)["hits"]
    assert hits["hits"]
    plain = es.search(index="f", query=body["query"])["hits"]
    seen = 0
    for hit in hits["hits"]:
        score = float(hit["_score"])
        assert hit["_score"] == repr(_java_text(score)), hit["_score"]
        assert hit["sort"][0] == hit["_score"]  # a Float sort value, written as the score is
        p, h = hit["fields"]["p"][0], hit["fields"]["h"][0]
        assert p == repr(_java_text(float(p))) and h == repr(_java_text(float(np.float16(float(h)))))
        stack = [hit["_explanation"]]
        while stack:
            e = stack.pop()
            if e["description"].startswith(("n, number of documents", "N, total number of documents")):
                assert isinstance(e["value"], int)  # Lucene's Explanation.match(long df / docCount)
            else:
                assert e["value"] == repr(_java_text(float(e["value"])))
            stack.extend(e["details"])
            seen += 1
    assert seen > 3 * len(hits["hits"])
    assert plain["max_score"] == _java_text(plain["max_score"])
    assert float(hits["hits"][0]["_score"]) == plain["hits"][0]["_score"]


def test_docvalue_fields_of_a_float_field_are_doubles(es):
    """``DocValueFormat.RAW`` formats the doc value (a double) as a double: 1.1 stored as a float
    reads 1.100000023841858."""
    hit = es.search(index="f", query={"term": {"_id": "0"}}, docvalue_fields=["p"])["hits"]["hits"][0]
    assert hit["fields"]["p"] == [float(np.float32(1.1))]


def test_a_retrievers_max_score_reads_as_a_float_written(es):
    hits = _floats(es, {"retriever": {"standard": {"query": {"match": {"t": "graph model"}}}}})["hits"]
    assert hits["max_score"] == hits["hits"][0]["_score"] == repr(_java_text(float(hits["max_score"])))


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    client = embedded_client(tmp_path_factory.mktemp("float_pages"))
    client.indices.create(
        index="g",
        mappings={
            "properties": {
                "t": {"type": "text"},
                "k": {"type": "keyword"},
                "p": {"type": "float"},
                "h": {"type": "half_float"},
                "s": {"type": "scaled_float", "scaling_factor": 100},
            }
        },
    )
    docs = [
        ("graph", 0.1234567891, 1.1, 0.125),
        ("graph", 0.1234567892, 1.0997, 0.135),
        ("model", 2.0, 2.0, 0.145),
    ]
    for i, (t, p, h, s) in enumerate(docs):
        client.index(index="g", id=str(i), document={"t": t, "k": f"k{i}", "p": p, "h": h, "s": s})
    client.indices.refresh(index="g")
    yield client
    client.close()


def test_search_after_the_shown_score_pages_on(pages):
    """SearchAfterBuilder reads a ``_score`` value with ``floatValue()``: the shown decimal of a
    score is that score, and the tied next hit is on the next page."""
    body = {"query": {"match": {"t": "graph"}}, "size": 1, "sort": [{"_score": "desc"}, {"k": "asc"}]}
    first = pages.search(index="g", **body)["hits"]["hits"]
    second = pages.search(index="g", **body, search_after=first[-1]["sort"])["hits"]["hits"]
    assert [h["_id"] for h in first + second] == ["0", "1"]
    assert first[0]["_score"] == second[0]["_score"]


def test_min_score_at_the_shown_score_keeps_the_hit(pages):
    """``min_score`` is a float compared with the float score (SearchSourceBuilder.minScore)."""
    shown = pages.search(index="g", query={"match": {"t": "graph"}})["hits"]["max_score"]
    hits = pages.search(index="g", query={"match": {"t": "graph"}}, min_score=shown)["hits"]["hits"]
    assert len(hits) == 2
    retriever = {"standard": {"query": {"match": {"t": "graph"}}, "min_score": shown}}
    assert len(pages.search(index="g", retriever=retriever)["hits"]["hits"]) == 2


def test_float_fields_sort_as_floats_and_show_as_floats(pages):
    """FLOAT and HALF_FLOAT sort as ``SortField.Type.FLOAT``: two values one float apart are
    equal (the next key decides), and a sort value is the float, written as Elasticsearch writes
    one; search_after reads its value as a float too."""
    hits = pages.search(index="g", sort=[{"p": "asc"}, {"k": "desc"}])["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["1", "0", "2"]  # 0.1234567891 and ...892 are one float
    assert [h["sort"][0] for h in hits] == [0.12345679, 0.12345679, 2.0]
    after = pages.search(index="g", sort=[{"p": "asc"}, {"k": "desc"}], search_after=[0.1234567891, "k1"])
    assert [h["_id"] for h in after["hits"]["hits"]] == ["0", "2"]
    halves = pages.search(index="g", sort=[{"h": "asc"}, {"k": "asc"}])["hits"]["hits"]
    assert [h["sort"][0] for h in halves] == [1.0996094, 1.0996094, 2.0]  # 1.1 and 1.0997 as halves


def test_scaled_float_fields_round_half_up(pages):
    """ScaledFloatFieldMapper: ``Math.round(value * scaling_factor) / scaling_factor`` in doubles,
    half up: 0.125 -> 12.5 -> 0.13 (half to even would give 0.12); 0.145 * 100 is
    14.499999999999998 -> 0.14."""
    hits = pages.search(index="g", fields=["s"], sort=[{"k": "asc"}])["hits"]["hits"]
    assert [h["fields"]["s"] for h in hits] == [[0.13], [0.14], [0.14]]
