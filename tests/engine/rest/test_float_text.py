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

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.rest.transport import embedded_client
from scholar_es.engine.xcontent import java_float


def _java_text(value: float) -> float:
    """The number Float.toString's text of ``float(value)`` reads as (the JDK 19+ definition)."""
    f = np.float32(value)
    for digits in range(1, 10):
        # one digit is never written alone: Java takes the closest of one or two digits
        text = f"{float(f):.{max(digits, 2)}g}"
        with np.errstate(over="ignore"):
            back = np.float32(float(text))
        if back == f:
            return float(text)
    raise AssertionError(value)


@settings(max_examples=2000, deadline=None)
@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_java_float_is_the_shortest_decimal_of_two_digits_or_more(x):
    assert java_float(x) == _java_text(x)
    assert np.float32(java_float(x)) == np.float32(x)


@pytest.mark.parametrize(
    "value, text",
    [
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
