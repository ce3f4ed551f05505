"""The sparse query path (engine/query/sparse.py) against the dense one it replaces.

The dense path (every clause over N-length arrays) is kept behind ``use_sparse(False)`` as the
reference: on random corpora and random query trees both must give the same hits, in the same
order, with the same scores (to 1e-6; in practice bit-identical) and the same totals.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.query import sparse

WORDS = ["graph", "neural", "model", "data", "protein", "cell", "gene", "tree", "the", "of"]
KEYS = ["A", "B", "C", "D"]
FIELDS = ["t", "u", "k"]


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    from scholar_es.engine.rest.transport import embedded_client

    client = embedded_client(tmp_path_factory.mktemp("sparse"))
    for seed, n_docs in ((1, 40), (2, 150)):
        rnd = random.Random(seed)
        index = f"c{seed}"
        client.indices.create(
            index=index,
            mappings={
                "properties": {
                    "t": {"type": "text"},
                    "u": {"type": "text"},
                    "k": {"type": "keyword"},
                    "n": {"type": "integer"},
                    "v": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
                    "w": {"type": "dense_vector", "dims": 3, "similarity": "l2_norm"},
                }
            },
        )
        for i in range(n_docs):
            src: dict = {"t": " ".join(rnd.choices(WORDS, k=rnd.randint(0, 12)))}
            if rnd.random() < 0.7:
                src["u"] = " ".join(rnd.choices(WORDS[:5], k=rnd.randint(1, 4)))
            if rnd.random() < 0.8:
                src["k"] = rnd.choice(KEYS)
            if rnd.random() < 0.8:
                src["n"] = rnd.randint(0, 20)
            if rnd.random() < 0.9:  # few distinct vectors: many ties at the top-k cut-off
                src["v"] = [rnd.choice([1, 2]), rnd.choice([0, 1]), rnd.choice([1, 3])]
                src["w"] = [rnd.choice([0, 1]), rnd.choice([0, 1]), rnd.random()]
            client.index(index=index, id=str(i), document=src)
        client.indices.refresh(index=index)
    yield client
    client.close()


words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)
boosts = st.sampled_from([1.0, 1.0, 0.5, 2.0, 3.5])
knn_leaf = st.builds(
    lambda f, qv, k, filt, b: {
        "knn": {
            "field": f,
            "query_vector": qv,
            "k": k,
            "num_candidates": 50,
            "boost": b,
            **({"filter": filt} if filt else {}),
        }
    },
    st.sampled_from(["v", "w"]),
    st.lists(st.sampled_from([0.5, 1.0, 2.0, -1.0]), min_size=3, max_size=3),
    st.integers(1, 12),
    st.sampled_from([None, {"term": {"k": "A"}}, {"range": {"n": {"lte": 10}}}]),
    boosts,
)
leaf = st.one_of(
    st.builds(
        lambda f, w, b: {"match": {f: {"query": w, "boost": b}}}, st.sampled_from(["t", "u"]), words, boosts
    ),
    st.builds(lambda w: {"match": {"t": {"query": w, "operator": "and"}}}, words),
    st.builds(
        lambda w, m: {"match": {"t": {"query": w, "minimum_should_match": m}}},
        words,
        st.sampled_from(["1", "2", "50%"]),
    ),
    st.builds(lambda k, b: {"term": {"k": {"value": k, "boost": b}}}, st.sampled_from(KEYS), boosts),
    st.builds(
        lambda w, t, ty: {
            "multi_match": {"query": w, "fields": ["t^2", "u", "k"], "tie_breaker": t, "type": ty}
        },
        words,
        st.sampled_from([0.0, 0.3, 1.0]),
        st.sampled_from(["best_fields", "most_fields"]),
    ),
    st.builds(lambda lo: {"range": {"n": {"gte": lo}}}, st.integers(0, 20)),
    st.builds(
        lambda f, vs, b: {"terms": {f: vs, "boost": b}},
        st.sampled_from(["k", "t"]),
        st.lists(st.sampled_from([*KEYS, *WORDS[:4], "absent"]), min_size=1, max_size=4),
        boosts,
    ),
    st.builds(  # ids: repeated, absent and numeric ids among them
        lambda vs, b: {"ids": {"values": vs, "boost": b}},
        st.lists(st.sampled_from(["0", "3", "3", "17", "39", "120", "absent", 5]), max_size=5),
        boosts,
    ),
    st.just({"match_all": {}}),
    st.just({"exists": {"field": "u"}}),
    st.just({"match_none": {}}),
    knn_leaf,
)


def _compound(children):
    clause_list = st.lists(children, min_size=0, max_size=3)
    return st.one_of(
        st.builds(
            lambda must, should, filt, must_not, msm, b: {
                "bool": {
                    k: v
                    for k, v in {
                        "must": must,
                        "should": should,
                        "filter": filt,
                        "must_not": must_not,
                        "minimum_should_match": msm,
                        "boost": b,
                    }.items()
                    if v not in ([], None)
                }
            },
            clause_list,
            clause_list,
            clause_list,
            st.lists(children, max_size=1),
            st.sampled_from([None, None, 1, 2]),
            boosts,
        ),
        st.builds(
            lambda qs, t: {"dis_max": {"queries": qs, "tie_breaker": t}},
            st.lists(children, min_size=1, max_size=3),
            st.sampled_from([0.0, 0.7]),
        ),
        st.builds(lambda q, b: {"constant_score": {"filter": q, "boost": b}}, children, boosts),
        st.builds(
            lambda q, fs, mode, bmode, b: {
                "function_score": {
                    "query": q,
                    "functions": fs,
                    "score_mode": mode,
                    "boost_mode": bmode,
                    "boost": b,
                }
            },
            children,
            st.lists(
                st.builds(lambda f, w: {"filter": f, "weight": w}, leaf, st.sampled_from([0.5, 1.3, 2.0])),
                min_size=1,
                max_size=3,
            ),
            st.sampled_from(["first", "multiply", "sum", "avg", "max", "min"]),
            st.sampled_from(["multiply", "replace", "sum", "avg", "max", "min"]),
            boosts,
        ),
        st.builds(
            lambda q, src, b: {
                "script_score": {
                    "query": q,
                    "script": {"source": src, "params": {"p": 8.0, "qv": [1.0, 0.5, 2.0]}},
                    **({} if b == 1.0 else {"boost": b}),
                }
            },
            children,
            st.sampled_from(
                [
                    "saturation(_score, params.p)",
                    "_score * 2 + 1",
                    "doc['n'].size() == 0 ? _score : _score + doc['n'].value",
                    "doc['v'].size() == 0 ? _score : cosineSimilarity(params.qv, 'v') + 1.0 + _score",
                ]
            ),
            boosts,
        ),
    )


queries = st.recursive(leaf, _compound, max_leaves=8)


def _answer(es, index, query, knn=None):
    try:
        resp = es.search(index=index, size=1000, **({"knn": knn} if knn else {"query": query}))
    except Exception as e:  # the same error from both paths is the same answer
        return ("error", type(e).__name__, str(e))
    hits = resp["hits"]["hits"]
    return resp["hits"]["total"], [h["_id"] for h in hits], [h["_score"] for h in hits]


@settings(max_examples=150, deadline=None)
@given(index=st.sampled_from(["c1", "c2"]), query=queries)
def test_sparse_equals_dense(es, index, query):
    sparse.use_sparse(False)
    try:
        dense = _answer(es, index, query)
    finally:
        sparse.use_sparse(True)
    fast = _answer(es, index, query)
    if dense[0] == "error":
        assert fast == dense
        return
    assert fast[0] == dense[0] and fast[1] == dense[1], query
    assert fast[2] == pytest.approx(dense[2], rel=1e-6, abs=1e-9), query


@settings(max_examples=40, deadline=None)
@given(index=st.sampled_from(["c1", "c2"]), query=knn_leaf)
def test_top_level_knn_sparse_equals_dense(es, index, query):
    knn = query["knn"]
    sparse.use_sparse(False)
    try:
        dense = _answer(es, index, None, knn)
    finally:
        sparse.use_sparse(True)
    assert _answer(es, index, None, knn) == dense


def test_sparse_is_on_by_default():
    assert sparse.sparse_enabled()


def _rescored(es, index, query, rescore):
    try:
        resp = es.search(index=index, size=50, query=query, rescore=rescore)
    except Exception as e:
        return ("error", type(e).__name__, str(e))
    hits = resp["hits"]["hits"]
    return resp["hits"]["total"], [h["_id"] for h in hits], [h["_score"] for h in hits]


@settings(max_examples=120, deadline=None)
@given(
    index=st.sampled_from(["c1", "c2"]),
    query=queries,
    rescore_query=queries,
    window=st.sampled_from([1, 5, 20, 60]),
    weights=st.sampled_from([(1.0, 1.0), (0.0, 1.0), (0.7, 1.2)]),
    mode=st.sampled_from(["total", "multiply", "avg", "max", "min"]),
)
def test_rescore_window_only_equals_dense(es, index, query, rescore_query, window, weights, mode):
    """The rescore scores only its window's documents (``Ctx.restrict``); the dense reference runs
    the rescore query over every document. Same hits, order and scores; a query whose script fails
    outside the window may fail densely only (Elasticsearch evaluates the window alone)."""
    rescore = {
        "window_size": window,
        "query": {
            "rescore_query": rescore_query,
            "query_weight": weights[0],
            "rescore_query_weight": weights[1],
            "score_mode": mode,
        },
    }
    sparse.use_sparse(False)
    try:
        dense = _rescored(es, index, query, rescore)
    finally:
        sparse.use_sparse(True)
    fast = _rescored(es, index, query, rescore)
    if fast[0] == "error":
        assert dense[0] == "error" and dense[1] == fast[1], (query, rescore, fast)
        return
    if dense[0] == "error":
        assert "invalid" in dense[2] or "Must be a non-negative" in dense[2], dense
        return
    assert fast[0] == dense[0] and fast[1] == dense[1], (query, rescore)
    assert fast[2] == pytest.approx(dense[2], rel=1e-6, abs=1e-9), (query, rescore)


def _answer_with_span(es, index, query, span):
    saved = sparse.DENSE_SPAN
    sparse.DENSE_SPAN = span
    try:
        return _answer(es, index, query)
    finally:
        sparse.DENSE_SPAN = saved


multi_match_like = st.builds(
    lambda w, t, b, fb: {
        "dis_max": {
            "tie_breaker": t,
            "queries": [
                {"bool": {"should": [{"term": {f: x}} for x in w.split()], "boost": fb}} for f in ("t", "u")
            ]
            + [{"match": {"t": {"query": w, "boost": b}}}],
        }
    },
    words,
    st.sampled_from([0.0, 0.3, 1.0]),
    boosts,
    st.sampled_from([1.0, 1.5, 0.0]),
)


@settings(max_examples=150, deadline=None)
@given(index=st.sampled_from(["c1", "c2"]), query=st.one_of(queries, multi_match_like))
def test_dense_accumulators_equal_merges(es, index, query):
    """bool and dis_max combine their clauses over dense arrays spanning the matches (issue 29) or
    by sorted merges (a few scattered matches, ``DENSE_SPAN``): the same hits, order and scores,
    exactly, and both equal the dense reference path."""
    merged = _answer_with_span(es, index, query, 0)  # never dense: sorted merges only
    accumulated = _answer_with_span(es, index, query, 10**9)  # always dense
    assert accumulated == merged, query
    sparse.use_sparse(False)
    try:
        dense = _answer(es, index, query)
    finally:
        sparse.use_sparse(True)
    if dense[0] == "error":
        assert accumulated == dense
        return
    assert accumulated[0] == dense[0] and accumulated[1] == dense[1], query
    assert accumulated[2] == dense[2], query


def _with_memo(es, index, query, rescore, memo: bool):
    saved = sparse.MEMO
    sparse.MEMO = memo
    try:
        return _rescored(es, index, query, rescore)
    finally:
        sparse.MEMO = saved


text_leaf = st.one_of(
    st.builds(
        lambda w, t, ty, b: {
            "multi_match": {"query": w, "fields": ["t^2", "u", "k"], "tie_breaker": t, "type": ty, "boost": b}
        },
        words,
        st.sampled_from([0.0, 0.3]),
        st.sampled_from(["best_fields", "most_fields"]),
        boosts,
    ),
    st.builds(lambda f, w: {"match": {f: w}}, st.sampled_from(["t", "u"]), words),
    st.builds(lambda k: {"term": {"k": k}}, st.sampled_from(KEYS)),
)


@settings(max_examples=80, deadline=None)
@given(
    index=st.sampled_from(["c1", "c2"]),
    text=text_leaf,
    other=text_leaf,
    window=st.sampled_from([1, 5, 20, 60]),
    first_weight=st.sampled_from([1e-6, 0.75]),
    nested=st.booleans(),
)
def test_rescore_reusing_first_pass_text_hits(es, index, text, other, window, first_weight, nested):
    """The hybrid's shape (issue 29): the rescore repeats the first pass's text query, whose hits
    the search keeps (``Ctx.memo``) and the rescore reads for its window. The same hits, order
    and scores, exactly, as scoring the window again, and as the dense reference."""
    saturated = {
        "script_score": {
            "query": text,
            "script": {"source": "saturation(_score, params.k) * params.w", "params": {"k": 3.0, "w": 0.75}},
        }
    }
    first = {
        "bool": {
            "should": [
                {
                    **saturated,
                    "script_score": {
                        **saturated["script_score"],
                        "script": {
                            "source": "saturation(_score, params.k) * params.w",
                            "params": {"k": 3.0, "w": first_weight},
                        },
                    },
                },
                other,
            ]
        }
    }
    rescore_query = {"bool": {"should": [saturated, {"bool": {"must": [text]}} if nested else other]}}
    rescore = {
        "window_size": window,
        "query": {"rescore_query": rescore_query, "query_weight": 0.0, "rescore_query_weight": 1.0},
    }
    _memo_equals_rescoring_and_dense(es, index, first, rescore)


def _memo_equals_rescoring_and_dense(es, index, query, rescore, errors_alike: bool = False):
    """The memo's answer equals scoring again (the memo off), exactly, and the dense reference
    (``errors_alike``: an error must be an error on the dense path too, and nothing more)."""
    kept = _with_memo(es, index, query, rescore, True)
    again = _with_memo(es, index, query, rescore, False)
    assert kept == again, (query, rescore)
    sparse.use_sparse(False)
    try:
        dense = _rescored(es, index, query, rescore)
    finally:
        sparse.use_sparse(True)
    if errors_alike and kept[0] == "error":
        assert dense[0] == "error"
        return
    assert kept[0] == dense[0] and kept[1] == dense[1], (query, rescore)
    assert kept[2] == pytest.approx(dense[2], rel=1e-6, abs=1e-9), (query, rescore)


vector_script = st.sampled_from(
    [
        "doc['v'].size() == 0 ? 0.0 : (cosineSimilarity(params.query_vector, 'v') + 1.0) / 2.0 * params.w",
        "doc['n'].size() == 0 ? params.w : doc['n'].value * params.w + _score",
        "saturation(_score + 1.0, 2.0) * params.w",
    ]
)


@settings(max_examples=80, deadline=None)
@given(
    index=st.sampled_from(["c1", "c2"]),
    text=text_leaf,
    source=vector_script,
    inner=st.sampled_from(["match_all", "text"]),
    windows=st.sampled_from([(60, 20), (20, 60), (5, 5), (40, 1)]),
    weights=st.sampled_from([(1.0, 1.0), (1.0, 0.5)]),
)
def test_two_rescore_phases_repeating_a_script_score(es, index, text, source, inner, windows, weights):
    """The default request's shape (issue 29): the second rescore phase repeats the first's
    script_score over the best of its window; its hits among that window are kept (``Within``)
    and read for the second window when it is a subset (the same hits, order and scores as
    scoring it again, and as the dense reference); a wider second window scores again."""

    def phase(window, w):
        query = {"match_all": {}} if inner == "match_all" else text
        script = {"source": source, "params": {"query_vector": [1.0, 0.5, 2.0], "w": w}}
        return {
            "window_size": window,
            "query": {
                "rescore_query": {
                    "bool": {"should": [{"script_score": {"query": query, "script": script}}, text]}
                },
                "query_weight": 0.0,
                "rescore_query_weight": 1.0,
            },
        }

    rescore = [phase(windows[0], weights[0]), phase(windows[1], weights[1])]
    _memo_equals_rescoring_and_dense(es, index, text, rescore, errors_alike=True)
