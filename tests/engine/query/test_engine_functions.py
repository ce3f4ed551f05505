"""function_score and script_score, pinned to hand-computed values (docs/es-semantics.md §5, §6).

function_score: the factor of the functions whose filter matches (score_mode; no match -> 1),
capped by max_boost, combined with the sub-query score (boost_mode). The query's own ``boost``
multiplies the SUB-QUERY score (it is pushed into the sub-query weight), so it is lost with
boost_mode replace and is not applied to the factor with sum/avg/max/min.
"""

from __future__ import annotations

import math

import pytest
from elasticsearch import ApiError, BadRequestError


def bm25(freq, dl, avgdl, n, N, boost=1.0):
    idf = math.log(1 + (N - n + 0.5) / (n + 0.5))
    return boost * 2.2 * idf * freq / (freq + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))


DOCS = {
    "d1": {
        "title": "graph neural network",
        "section": "abstract",
        "citations": 10,
        "rating": 4.0,
        "vec": [1, 0, 0],
    },
    "d2": {"title": "graph theory", "section": "method", "citations": 0, "rating": 2.5, "vec": [0, 1, 0]},
    "d3": {"title": "neural graph graph", "section": "results", "citations": 99, "vec": [1, 1, 0]},
    "d4": {"title": "deep learning", "section": "abstract", "citations": 3, "rating": 5.0, "vec": [0, 0, 1]},
}
# title: N = 4, lengths 3, 2, 3, 2 -> avgdl 2.5; "graph": n = 3 (d1 tf 1, d2 tf 1, d3 tf 2)
Q = {"d1": bm25(1, 3, 2.5, 3, 4), "d2": bm25(1, 2, 2.5, 3, 4), "d3": bm25(2, 3, 2.5, 3, 4)}
GRAPH = {"match": {"title": "graph"}}
# three weight functions: abstract x2 (d1), results x3 (d3), citations >= 5 x5 (d1, d3); d2 matches none
FUNCTIONS = [
    {"filter": {"term": {"section": "abstract"}}, "weight": 2},
    {"filter": {"term": {"section": "results"}}, "weight": 3},
    {"filter": {"range": {"citations": {"gte": 5}}}, "weight": 5},
]
MATCHED = {"d1": [2, 5], "d2": [], "d3": [3, 5]}  # weights of the matching functions, in order


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("functions"))
    client.indices.create(
        index="f",
        mappings={
            "properties": {
                "title": {"type": "text"},
                "section": {"type": "keyword"},
                "citations": {"type": "integer"},
                "rating": {"type": "float"},
                "vec": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
            }
        },
    )
    for doc_id, src in DOCS.items():
        client.index(index="f", id=doc_id, document=src)
    client.indices.refresh(index="f")
    yield client
    client.close()


def scores(es, query, **kw):
    hits = es.search(index="f", query=query, size=20, **kw)["hits"]["hits"]
    return {h["_id"]: h["_score"] for h in hits}


def approx(d):
    return pytest.approx(d, rel=1e-5)


def fs(**kw):
    return {"function_score": {"query": GRAPH, "functions": FUNCTIONS, **kw}}


# --- score_mode ------------------------------------------------------------------------------

SCORE_MODES = {
    "multiply": lambda ws: math.prod(ws) if ws else 1.0,
    "sum": lambda ws: sum(ws) if ws else 1.0,
    "avg": lambda ws: 1.0 if ws else 1.0,  # weighted average of (w·1) by w: always 1 for weight functions
    "first": lambda ws: ws[0] if ws else 1.0,
    "max": lambda ws: max(ws) if ws else 1.0,
    "min": lambda ws: min(ws) if ws else 1.0,
}


@pytest.mark.parametrize("mode", list(SCORE_MODES))
def test_score_modes(es, mode):
    expected = {d: Q[d] * SCORE_MODES[mode](MATCHED[d]) for d in Q}
    assert scores(es, fs(score_mode=mode)) == approx(expected)


def test_default_modes_are_multiply(es):
    assert scores(es, fs()) == approx({"d1": Q["d1"] * 10, "d2": Q["d2"], "d3": Q["d3"] * 15})


def test_avg_is_weighted_by_function_weights(es):
    # (2·1 + 3·ln(2 + citations)) / (2 + 3) for the abstract doc, 3·ln(2 + c)/3 for the others
    functions = [
        {"filter": {"term": {"section": "abstract"}}, "weight": 2},
        {"field_value_factor": {"field": "citations", "modifier": "ln2p"}, "weight": 3},
    ]
    q = {"function_score": {"query": GRAPH, "functions": functions, "score_mode": "avg"}}
    assert scores(es, q) == approx(
        {
            "d1": Q["d1"] * (2 + 3 * math.log(12)) / 5,
            "d2": Q["d2"] * math.log(2),
            "d3": Q["d3"] * math.log(101),
        }
    )


# --- boost_mode ------------------------------------------------------------------------------

FACTOR = {"d1": 10.0, "d2": 1.0, "d3": 15.0}  # score_mode multiply
BOOST_MODES = {
    "multiply": lambda q, f: q * f,
    "replace": lambda q, f: f,
    "sum": lambda q, f: q + f,
    "avg": lambda q, f: (q + f) / 2,
    "max": max,
    "min": min,
}


@pytest.mark.parametrize("mode", list(BOOST_MODES))
def test_boost_modes(es, mode):
    expected = {d: BOOST_MODES[mode](Q[d], FACTOR[d]) for d in Q}
    assert scores(es, fs(boost_mode=mode)) == approx(expected)


@pytest.mark.parametrize("mode", list(BOOST_MODES))
def test_function_score_boost_multiplies_the_sub_query_only(es, mode):
    expected = {d: BOOST_MODES[mode](1.5 * Q[d], FACTOR[d]) for d in Q}
    assert scores(es, fs(boost_mode=mode, boost=1.5)) == approx(expected)


def test_max_boost_caps_the_factor_not_the_score(es):
    assert scores(es, fs(max_boost=7)) == approx({"d1": Q["d1"] * 7, "d2": Q["d2"], "d3": Q["d3"] * 7})
    assert scores(es, fs(max_boost=7, boost_mode="sum")) == approx(
        {"d1": Q["d1"] + 7, "d2": Q["d2"] + 1, "d3": Q["d3"] + 7}
    )


def test_min_score_compares_the_final_score(es):
    final = {d: Q[d] * FACTOR[d] for d in Q}
    threshold = (final["d1"] + final["d3"]) / 2
    got = scores(es, fs(min_score=threshold))
    assert got == approx({d: s for d, s in final.items() if s >= threshold}) and len(got) == 1
    assert set(scores(es, fs(min_score=0))) == {"d1", "d2", "d3"}


def test_single_top_level_weight_and_no_functions(es):
    q = {"function_score": {"query": GRAPH, "weight": 4}}
    assert scores(es, q) == approx({d: 4 * s for d, s in Q.items()})
    assert scores(es, {"function_score": {"query": GRAPH}}) == approx(Q)
    assert scores(es, {"function_score": {"weight": 2}}) == {
        d: 2.0 for d in DOCS
    }  # query defaults to match_all


def test_no_functions_leaves_the_query_score_as_it_is(es):
    """FunctionScoreQueryBuilder builds ``FunctionScoreQuery(query, minScore, maxBoost)`` without
    functions, whose FunctionFactorScorer returns the sub-query's score: boost_mode and max_boost
    change nothing (replace gave every hit 1.0, max_boost 0.5 halved it); min_score still applies."""
    for extra in ({"boost_mode": "replace"}, {"boost_mode": "sum"}, {"functions": [], "max_boost": 0.5}):
        assert scores(es, {"function_score": {"query": GRAPH, **extra}}) == approx(Q)
    kept = scores(
        es, {"function_score": {"query": GRAPH, "boost_mode": "replace", "min_score": Q["d2"] * 1.01}}
    )
    assert kept == approx({d: s for d, s in Q.items() if s >= Q["d2"] * 1.01})


def test_weight_max_boost_and_min_score_are_java_floats(es):
    """``parser.floatValue()``: a weight of 1.2 is 1.2f (1.2000000476837158), the product is the
    float of the sub-query's float times it; min_score 0.7 is 0.7f, so a factor of 0.7f replacing
    the score is kept (as a double, 0.7 < 0.7f dropped every hit)."""
    import numpy as np

    got = scores(es, {"function_score": {"query": GRAPH, "weight": 1.2}})
    plain = scores(es, GRAPH)
    for doc, s in plain.items():
        want = np.float32(np.float64(np.float32(s)) * np.float64(np.float32(1.2)))
        assert np.float32(got[doc]) == want, doc
    replaced = {"function_score": {"query": GRAPH, "weight": 0.7, "boost_mode": "replace", "min_score": 0.7}}
    assert scores(es, replaced) == {d: pytest.approx(0.7) for d in Q}
    capped = {"function_score": {"query": GRAPH, "weight": 3, "max_boost": 1.2}}
    for doc, s in scores(es, capped).items():
        assert np.float32(s) == np.float32(np.float64(np.float32(plain[doc])) * np.float64(np.float32(1.2)))


@pytest.mark.parametrize("weight", [-1, -0.0])
def test_a_negative_weight_is_refused_when_parsed(es, weight):
    """WeightBuilder/ScoreFunctionBuilder.setWeight: ``Float.compare(weight, 0) < 0`` (-0.0 too),
    even when the function's filter matches nothing."""
    query = {
        "function_score": {
            "query": GRAPH,
            "functions": [{"filter": {"term": {"section": "none"}}, "weight": weight}],
        }
    }
    with pytest.raises(BadRequestError) as e:
        scores(es, query)
    assert e.value.body["error"]["type"] == "illegal_argument_exception"
    assert e.value.body["error"]["reason"] == "[weight] cannot be negative for a filtering function"


# --- field_value_factor ----------------------------------------------------------------------

X = {"d1": 1.5 * 4.0, "d2": 1.5 * 2.5, "d3": 1.5 * 1.0, "d4": 1.5 * 5.0}  # factor 1.5, missing 1 for d3
MODIFIERS = {
    "none": lambda x: x,
    "log": math.log10,
    "log1p": lambda x: math.log10(x + 1),
    "log2p": lambda x: math.log10(x + 2),
    "ln": math.log,
    "ln1p": math.log1p,
    "ln2p": lambda x: math.log(x + 2),
    "square": lambda x: x * x,
    "sqrt": math.sqrt,
    "reciprocal": lambda x: 1 / x,
}


@pytest.mark.parametrize("modifier", list(MODIFIERS))
def test_field_value_factor_modifiers(es, modifier):
    q = {
        "function_score": {
            "field_value_factor": {"field": "rating", "factor": 1.5, "modifier": modifier, "missing": 1},
            "boost_mode": "replace",
        }
    }
    assert scores(es, q) == approx({d: MODIFIERS[modifier](x) for d, x in X.items()})


def test_field_value_factor_multiplies_the_query_score(es):
    q = {
        "function_score": {"query": GRAPH, "field_value_factor": {"field": "citations", "modifier": "log1p"}}
    }
    assert scores(es, q) == approx(
        {"d1": Q["d1"] * math.log10(11), "d2": 0.0, "d3": Q["d3"] * math.log10(100)}
    )


def test_field_value_factor_missing_value_is_an_error(es):
    q = {"function_score": {"field_value_factor": {"field": "rating"}}}
    with pytest.raises(ApiError) as e:
        es.search(index="f", query=q)
    assert e.value.meta.status == 400
    assert "Missing value for field [rating]" in str(e.value.body)


def test_field_value_factor_negative_result_is_an_error(es):
    q = {
        "function_score": {
            "query": {"ids": {"values": ["d3"]}},  # 99 * 0.001 -> ln < 0
            "field_value_factor": {"field": "citations", "factor": 0.001, "modifier": "ln"},
        }
    }
    with pytest.raises(BadRequestError) as e:
        es.search(index="f", query=q)
    assert "must not produce negative scores" in e.value.body["error"]["reason"]


# --- script_score ----------------------------------------------------------------------------


def test_script_score_saturation(es):
    q = {
        "script_score": {
            "query": GRAPH,
            "script": {"source": "saturation(_score, params.pivot)", "params": {"pivot": 2.0}},
        }
    }
    assert scores(es, q) == approx({d: s / (s + 2.0) for d, s in Q.items()})
    q["script_score"]["boost"] = 3
    assert scores(es, q) == approx({d: 3 * s / (s + 2.0) for d, s in Q.items()})


def test_script_score_sees_the_inner_clause_boost(es):
    inner = {"match": {"title": {"query": "graph", "boost": 2}}}
    q = {"script_score": {"query": inner, "script": {"source": "_score * 10"}}}
    assert scores(es, q) == approx({d: 20 * s for d, s in Q.items()})


def test_script_score_cosine_similarity_plus_one(es):
    q = {
        "script_score": {
            "query": {"match_all": {}},
            "script": {"source": "cosineSimilarity(params.qv, 'vec') + 1.0", "params": {"qv": [2, 2, 0]}},
        }
    }
    r = 1 / math.sqrt(2)  # cos([1,1,0], [1,0,0])
    assert scores(es, q) == approx({"d1": 1 + r, "d2": 1 + r, "d3": 2.0, "d4": 1.0})


@pytest.mark.parametrize("qv", [[2, 2, 0], [2.0, 2.0, 0.0], [2, 2.0, 0], [2.0, 2, 0.0]])
def test_script_score_query_vector_of_floats_or_ints_scores_alike(es, qv):
    q = {
        "script_score": {
            "query": {"match_all": {}},
            "script": {"source": "cosineSimilarity(params.qv, 'vec') + 1.0", "params": {"qv": qv}},
        }
    }
    r = 1 / math.sqrt(2)
    assert scores(es, q) == approx({"d1": 1 + r, "d2": 1 + r, "d3": 2.0, "d4": 1.0})


@pytest.mark.parametrize("qv", [[1.0, True, 0.0], [1.0, "2", 0.0], [1.0, None, 0.0]])
def test_script_score_query_vector_elements_must_be_numbers(es, qv):
    from elasticsearch import BadRequestError

    q = {
        "script_score": {
            "query": {"match_all": {}},
            "script": {"source": "cosineSimilarity(params.qv, 'vec')", "params": {"qv": qv}},
        }
    }
    with pytest.raises(BadRequestError) as e:
        es.search(index="f", query=q)
    assert "query vector elements must be numbers" in str(e.value.body)


@pytest.mark.parametrize("source", ["_score - 100", "Math.sqrt(-_score)"])
def test_script_score_negative_or_nan_is_refused(es, source):
    from elasticsearch import BadRequestError

    q = {"script_score": {"query": GRAPH, "script": {"source": source}}}
    with pytest.raises(BadRequestError) as e:
        es.search(index="f", query=q)
    reason = str(e.value.body)
    assert (
        "script_score script returned an invalid score" in reason
        and "Must be a non-negative score!" in reason
    )


def test_script_score_doc_values_and_math(es):
    q = {
        "script_score": {
            "query": GRAPH,
            "script": {
                "source": "_score * Math.log(2 + doc['citations'].value) + params.bonus",
                "params": {"bonus": 0.5},
            },
        }
    }
    assert scores(es, q) == approx(
        {
            "d1": Q["d1"] * math.log(12) + 0.5,
            "d2": Q["d2"] * math.log(2) + 0.5,
            "d3": Q["d3"] * math.log(101) + 0.5,
        }
    )


def test_script_score_min_score_uses_the_boosted_score(es):
    # Q: d3 > d2 > d1; compared with the unboosted score nothing would pass 10·Q(d2)
    q = {
        "script_score": {
            "query": GRAPH,
            "script": {"source": "_score"},
            "boost": 10,
            "min_score": 10 * Q["d2"] * (1 - 1e-4),
        }
    }
    assert scores(es, q) == approx({"d2": 10 * Q["d2"], "d3": 10 * Q["d3"]})


def test_script_score_function_inside_function_score(es):
    q = {
        "function_score": {
            "query": GRAPH,
            "functions": [
                {"script_score": {"script": {"source": "saturation(_score, 1.0)"}}},
                {"filter": {"term": {"section": "results"}}, "weight": 3},
            ],
            "score_mode": "sum",
            "boost_mode": "replace",
        }
    }
    assert scores(es, q) == approx(
        {"d1": Q["d1"] / (Q["d1"] + 1), "d2": Q["d2"] / (Q["d2"] + 1), "d3": Q["d3"] / (Q["d3"] + 1) + 3}
    )


def test_script_score_negative_score_is_an_error(es):
    q = {"script_score": {"query": GRAPH, "script": {"source": "_score - 100"}}}
    with pytest.raises(BadRequestError) as e:
        es.search(index="f", query=q)
    assert "Must be a non-negative score" in str(e.value.body)
