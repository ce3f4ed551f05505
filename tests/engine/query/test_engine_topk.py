"""The best hits of a score-ordered search without scoring every match (engine/query/topk.py,
issue 29).

The reference is the same search scoring every match (``topk.ENABLED`` off), itself checked against
the dense path and the Elasticsearch fixtures elsewhere: the pruned search must return the same
hits, in the same order, with the same scores, ``max_score`` and ``hits.total``, exactly, whatever
the query, ``from``/``size`` and count limit; where it cannot prune it must not change anything.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from chunk_queries import text_strategies
from elasticsearch import helpers
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.query import sparse, topk
from scholar_es.engine.query.functions import ScriptScoreNode
from scholar_es.engine.query.nodes import MatchNoneNode
from scholar_es.engine.rest.transport import embedded_client

WORDS = ["graph", "neural", "model", "data", "protein", "cell", "gene", "tree", "of", "results"]
MAPPING = {
    "properties": {
        **{f: {"type": "text"} for f in ("title", "abstract", "body")},
        "vec": {"type": "dense_vector", "dims": 3, "similarity": "cosine"},
        "paper": {"type": "keyword"},
        "year": {"type": "integer"},
        "section": {"type": "keyword"},
    }
}


def _papers(seed: int, n_papers: int) -> list[tuple[str, dict]]:
    """Chunks of papers, in order: each chunk repeats its paper's title and abstract; some papers
    repeat whole (equal scores: ties broken by document order), some right after themselves
    (runs, and pieces, that hold two papers: two collapse groups)."""
    rnd = random.Random(seed)
    papers = []
    for _ in range(n_papers):
        if papers and rnd.random() < 0.15:  # a copy, often right after its original: one run
            papers.append(papers[-1] if rnd.random() < 0.5 else papers[rnd.randrange(len(papers))])
            continue
        year = rnd.choice([2019, 2020, 2021, None])
        title = " ".join(rnd.choices(WORDS, k=rnd.randint(1, 4)))
        abstract = " ".join(rnd.choices(WORDS, k=rnd.randint(0, 10))) if rnd.random() < 0.9 else None
        bodies = [" ".join(rnd.choices(WORDS, k=rnd.randint(0, 12))) for _ in range(rnd.randint(3, 10))]
        papers.append((title, abstract, bodies, year))
    docs = []
    for p, (title, abstract, bodies, year) in enumerate(papers):
        for c, body in enumerate(bodies):
            doc = {"title": title, "body": body, "vec": [rnd.uniform(-1, 1) for _ in range(3)]}
            if abstract is not None:
                doc["abstract"] = abstract
            if p % 13:  # the others collapse into the group of documents without a value
                doc["paper"] = str(p)
            if year is not None:
                doc["year"] = year
            # a group that changes within some papers: pieces that hold several groups
            doc["section"] = f"s{(p + c) % 7}" if p % 2 else f"s{p % 7}"
            docs.append((f"{p}-{c}", doc))
    return docs


@pytest.fixture(scope="module")
def es(tmp_path_factory):
    """An index of ~100 papers' chunks, its runs found, then more chunks appended past them."""
    docs = _papers(11, 110)
    cut = len(docs) * 4 // 5
    client = embedded_client(tmp_path_factory.mktemp("topk"))
    client.indices.create(index="p", mappings=MAPPING)
    helpers.bulk(client, ({"_index": "p", "_id": i, "_source": d} for i, d in docs[:cut]), refresh=True)
    client.search(index="p", query={"multi_match": {"query": "model graph", "fields": ["title", "abstract"]}})
    helpers.bulk(client, ({"_index": "p", "_id": i, "_source": d} for i, d in docs[cut:]), refresh=True)
    yield client
    client.close()


@pytest.fixture
def pruned(monkeypatch):
    """How many searches took the pruned path, and their candidates."""
    seen: list[int] = []
    original = topk.top_k

    def counting(*args, **kwargs):
        top = original(*args, **kwargs)
        if top is not None:
            seen.append(len(top.docs))
        return top

    monkeypatch.setattr(topk, "top_k", counting)
    return seen


def _answer(es, body: dict):
    try:
        resp = es.search(index="p", **body)
    except Exception as e:  # the same error from both paths is the same answer
        return ("error", type(e).__name__, str(e))
    hits = resp["hits"]
    return hits.get("total"), hits["max_score"], [_hit(h) for h in hits["hits"]]


def _hit(h: dict) -> tuple:
    """A hit's id, score, collapse value and inner hits (their totals, ids, scores and sort values)."""
    inner = {
        name: (
            ih["hits"]["total"],
            ih["hits"]["max_score"],
            [(x["_id"], x["_score"], x.get("sort")) for x in ih["hits"]["hits"]],
        )
        for name, ih in h.get("inner_hits", {}).items()
    }
    return h["_id"], h["_score"], h.get("fields"), inner


def _reference(es, body: dict):
    topk.ENABLED = False
    try:
        return _answer(es, body)
    finally:
        topk.ENABLED = True


words, _, multi_match = text_strategies(WORDS, 5)
scripts = st.sampled_from(
    [
        {"source": "saturation(_score, params.k) * params.w", "params": {"k": 8, "w": 0.8}},
        {"source": "saturation(_score, params.k)", "params": {"k": 0.5}},
        {"source": "_score * 2 + 1"},
        {"source": "_score / params.d", "params": {"d": 3}},
        {"source": "Math.log(1 + _score)"},  # not recognized as monotone: scored in full
        {"source": "1 / (1 + _score)"},  # decreasing: scored in full
    ]
)
text = st.one_of(
    multi_match,
    st.builds(lambda q, s: {"script_score": {"query": q, "script": s}}, multi_match, scripts),
    st.builds(lambda f, w: {"match": {f: w}}, st.sampled_from(["abstract", "title", "body"]), words),
)
vectors = st.lists(st.floats(-1, 1), min_size=3, max_size=3).filter(lambda v: any(abs(x) > 0.1 for x in v))
hybrid = st.builds(  # the hybrid: text and knn as optional clauses of a bool, in either order
    lambda t, v, k, first, b: {
        "bool": {
            "should": [t, {"knn": {"field": "vec", "query_vector": v, "k": k, "num_candidates": 30}}][
                :: 1 if first else -1
            ],
            "minimum_should_match": 1,
            "boost": b,
        }
    },
    text,
    vectors,
    st.integers(1, 12),
    st.booleans(),
    st.sampled_from([1.0, 0.5]),
)
filters = st.one_of(
    st.builds(lambda y: {"range": {"year": {"gte": y}}}, st.sampled_from([2019, 2020, 2021])),
    st.builds(lambda s: {"terms": {"section": s}}, st.lists(st.sampled_from(["s0", "s3", "s6"]), min_size=1)),
    st.builds(
        lambda ids: {"ids": {"values": ids}},
        st.lists(st.sampled_from(["0-0", "1-2", "5-1", "17-0", "40-3", "nope"]), max_size=4),
    ),
    st.builds(lambda w: {"match": {"body": w}}, st.sampled_from(WORDS)),
)
# the project's filtered requests (querybuilder.dsl: bm25_query, hybrid_query with filters): pruned
# with their filters and must_not clauses; minimum_should_match 0 beside a filter is not pruned
filtered = st.one_of(
    st.builds(
        lambda h, f, neg, msm: {
            "bool": {
                **h["bool"],
                "filter": f,
                **({"must_not": [neg]} if neg is not None else {}),
                **({"minimum_should_match": msm} if msm is not None else {}),
            }
        },
        hybrid,
        st.lists(filters, min_size=0, max_size=2),
        st.one_of(st.none(), filters),
        st.sampled_from([None, None, 0, 2]),
    ),
    st.builds(
        lambda t, f, neg, b: {
            "bool": {"must": [t], "filter": f, "boost": b, **({"must_not": [neg]} if neg is not None else {})}
        },
        text,
        st.lists(filters, min_size=1, max_size=2),
        st.one_of(st.none(), filters),
        st.sampled_from([1.0, 0.5]),
    ),
    st.builds(lambda t, f: {"bool": {"should": [t], "filter": [f]}}, text, filters),
)
# the sections strategy: function_score of weight functions (the intent's section multipliers)
# around the hybrid; pruned with score_mode max/min/first and boost_mode multiply, else scored
functions = st.lists(
    st.builds(
        lambda f, w: {**({"filter": f} if f is not None else {}), "weight": w},
        st.one_of(
            st.none(),
            st.builds(lambda s: {"term": {"section": s}}, st.sampled_from(["s0", "s2", "s5"])),
            filters,
        ),
        st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.5, 0.0]),
    ),
    min_size=1,
    max_size=3,
)
function_scored = st.builds(
    lambda q, fs, sm, bm, extra: {
        "function_score": {"query": q, "functions": fs, "score_mode": sm, "boost_mode": bm, **extra}
    },
    st.one_of(text, hybrid, filtered),
    functions,
    st.sampled_from(["max", "max", "min", "first", "multiply", "sum"]),
    st.sampled_from(["multiply", "multiply", "multiply", "sum", "replace"]),
    st.sampled_from([{}, {}, {"max_boost": 1.2}, {"boost": 0.5}, {"boost": 2.0}, {"min_score": 0.01}]),
)
# queries the pruning does not take (every match scored): answered from their matches alone,
# without arrays of the index's size (SearchRun._answers_from_matches), where the request allows
unpruned = st.one_of(
    filters,
    st.builds(lambda f: {"bool": {"filter": [f]}}, filters),
    st.builds(
        lambda f, b: {"constant_score": {"filter": f, "boost": b}}, filters, st.sampled_from([1.0, 2.5])
    ),
    st.builds(
        lambda t: {"function_score": {"query": t, "field_value_factor": {"field": "year", "missing": 1}}},
        text,
    ),
)
queries = st.one_of(text, hybrid, filtered, function_scored, unpruned)


collapses = st.one_of(
    st.none(),
    st.builds(
        lambda f, n, start, order: {
            "field": f,
            "inner_hits": {"name": "best", "size": n, "from": start, "_source": False, **order},
        },
        st.sampled_from(["paper", "year", "section"]),
        st.integers(1, 4),
        st.sampled_from([0, 0, 2]),
        st.sampled_from([{}, {}, {"sort": [{"year": "desc"}, "_score"]}, {"sort": ["_score"]}]),
    ),
    st.just({"field": "paper"}),
)
rescores = st.one_of(
    st.none(),
    st.builds(
        lambda w, q, qw: {
            "window_size": w,
            "query": {"rescore_query": q, "query_weight": qw, "rescore_query_weight": 1.5},
        },
        st.integers(1, 30),
        st.one_of(multi_match, st.builds(lambda w: {"match": {"body": w}}, words)),
        st.sampled_from([1.0, 0.0, 0.7]),
    ),
)


@settings(max_examples=250, deadline=None)
@given(
    query=queries,
    size=st.integers(1, 15),
    from_=st.sampled_from([0, 0, 3]),
    track=st.sampled_from([False, 5, 40, None]),
    collapse=collapses,
    rescore=rescores,
    same=st.booleans(),
    doc_bounds=st.sampled_from([0, topk.MIN_DOC_BOUNDS]),
)
def test_pruned_hits_equal_scoring_every_match(
    es, query, size, from_, track, collapse, rescore, same, doc_bounds
):
    body = {"query": query, "size": size, "from": from_, "_source": False}
    text = _multi_match_in(query)
    if rescore is not None and same and text is not None:  # the query's text again (read from it)
        rescore = {**rescore, "query": {**rescore["query"], "rescore_query": text}}
    if track is not None:
        body["track_total_hits"] = track
    if collapse is not None:
        body["collapse"] = collapse
    if rescore is not None:
        body["rescore"] = rescore
    saved, topk.MIN_DOC_BOUNDS = topk.MIN_DOC_BOUNDS, doc_bounds  # 0: every candidate's own bound
    try:
        assert _answer(es, body) == _reference(es, body), body
    finally:
        topk.MIN_DOC_BOUNDS = saved


@settings(max_examples=400, deadline=None)
@given(
    query=filtered,
    size=st.sampled_from([1, 5, 15]),
    from_=st.sampled_from([0, 0, 3]),
    track=st.sampled_from([False, 5, 40, None]),
    collapse=collapses,
    rescore=rescores,
)
def test_filtered_pruned_hits_equal_scoring_every_match(es, query, size, from_, track, collapse, rescore):
    """The property above for the filtered shapes alone (they prune less often than the plain
    ones: a wrong bound or count among the documents let through shows in ~1-3% of draws)."""
    body = {"query": query, "size": size, "from": from_, "_source": False}
    for key, value in (("track_total_hits", track), ("collapse", collapse), ("rescore", rescore)):
        if value is not None:
            body[key] = value
    assert _answer(es, body) == _reference(es, body), body


@settings(max_examples=400, deadline=None)
@given(
    query=function_scored,
    size=st.sampled_from([1, 5, 15]),
    from_=st.sampled_from([0, 0, 3]),
    track=st.sampled_from([False, 5, 40, None]),
    collapse=collapses,
    rescore=rescores,
)
def test_function_scored_pruned_hits_equal_scoring_every_match(
    es, query, size, from_, track, collapse, rescore
):
    """The property above for function_score of weight functions around the text, the hybrid
    or a filtered request (the sections strategy's shape) alone."""
    body = {"query": query, "size": size, "from": from_, "_source": False}
    for key, value in (("track_total_hits", track), ("collapse", collapse), ("rescore", rescore)):
        if value is not None:
            body[key] = value
    assert _answer(es, body) == _reference(es, body), body


def _multi_match_in(query):
    """The first multi_match inside ``query`` (None: none)."""
    if isinstance(query, dict):
        if "multi_match" in query:
            return query
        found = (_multi_match_in(v) for v in query.values())
    elif isinstance(query, list):
        found = (_multi_match_in(v) for v in query)
    else:
        return None
    return next((q for q in found if q is not None), None)


def test_the_property_prunes_often(es, pruned):
    """The property above is not vacuous: the project's shapes take the pruned path, with fewer
    candidates than matches."""
    query = {
        "script_score": {
            "query": {
                "multi_match": {
                    "query": "graph model results",
                    "fields": ["body^2", "abstract^1.5", "title"],
                    "tie_breaker": 0.3,
                }
            },
            "script": {"source": "saturation(_score, params.k) * params.w", "params": {"k": 8, "w": 0.8}},
        }
    }
    body = {"query": query, "size": 5, "track_total_hits": 100}
    got = _answer(es, body)
    assert got == _reference(es, body)
    assert len(pruned) == 1
    full = es.search(index="p", query=query, size=0, track_total_hits=True)["hits"]["total"]["value"]
    assert got[0] == {"value": 100, "relation": "gte"} and full > 100
    assert pruned[0] < full / 3  # scored a few pieces, not every match


@pytest.mark.parametrize("shape", ["hybrid", "must", "sections"])
def test_a_filtered_search_prunes_among_the_documents_let_through(es, pruned, shape, monkeypatch):
    """The project's filtered requests (hybrid_query, bm25_query with filters, and the sections
    strategy's function_score of section multipliers around them) take the pruned path: their
    candidates are fewer than their matches, and every hit passes the filters."""
    text = {
        "script_score": {
            "query": {
                "multi_match": {"query": "graph model results", "fields": ["body^2", "abstract", "title"]}
            },
            "script": {"source": "saturation(_score, params.k) * params.w", "params": {"k": 8, "w": 0.8}},
        }
    }
    knn = {"knn": {"field": "vec", "query_vector": [0.3, -0.2, 0.9], "k": 5, "num_candidates": 30}}
    filters = [{"terms": {"section": ["s0", "s1", "s2", "s3"]}}]
    hybrid = {
        "bool": {
            "should": [text, knn],
            "filter": filters,
            "must_not": [{"term": {"year": 2019}}],
            "minimum_should_match": 1,
        }
    }
    query = {"bool": {"must": [text], "filter": filters, "must_not": [{"term": {"year": 2019}}]}}
    if shape == "hybrid":
        query = hybrid
    elif shape == "sections":  # querybuilder.dsl.with_section_multipliers
        multipliers = [
            {"filter": {"term": {"section": s}}, "weight": w} for s, w in (("s1", 1.5), ("s3", 1.2))
        ]
        query = {
            "function_score": {
                "query": hybrid,
                "functions": multipliers,
                "score_mode": "max",
                "boost_mode": "multiply",
            }
        }
    body = {"query": query, "size": 5, "track_total_hits": 50, "_source": ["section", "year"]}
    monkeypatch.setattr(topk, "MIN_DOC_BOUNDS", 0)  # each candidate's own bound (its own factor)
    got = es.search(index="p", **body)
    pruned_candidates = list(pruned)
    assert _answer(es, body) == _reference(es, body)
    full = es.search(index="p", query=query, size=0, track_total_hits=True)["hits"]["total"]["value"]
    assert len(pruned_candidates) == 1 and pruned_candidates[0] < full / 3 and full > 50
    assert got["hits"]["total"] == {"value": 50, "relation": "gte"}
    for hit in got["hits"]["hits"]:
        assert hit["_source"]["section"] in ("s0", "s1", "s2", "s3") and hit["_source"].get("year") != 2019


def test_a_collapsed_rescored_search_prunes_by_group(es, pruned):
    """``scholar-es search``'s shape: a hybrid first pass collapsed on the paper with inner hits,
    rescored; pruned by group, and every shown group's inner hits (its total included) complete."""
    text = {"multi_match": {"query": "graph model data", "fields": ["body^2", "abstract^1.5", "title"]}}
    knn = {"knn": {"field": "vec", "query_vector": [0.3, -0.2, 0.9], "k": 8, "num_candidates": 30}}
    saturated = {"script_score": {"query": text, "script": {"source": "saturation(_score, 5) * 0.001"}}}
    body = {
        "query": {"bool": {"should": [saturated, knn], "minimum_should_match": 1}},
        "collapse": {"field": "paper", "inner_hits": {"name": "best", "size": 3, "_source": False}},
        "rescore": {"window_size": 12, "query": {"rescore_query": text, "rescore_query_weight": 0.5}},
        "size": 5,
        "track_total_hits": 60,
        "_source": False,
    }
    got = _answer(es, body)
    assert got == _reference(es, body)
    assert len(pruned) == 1
    assert got[0] == {"value": 60, "relation": "gte"}
    totals = [inner["best"][0]["value"] for _, _, _, inner in got[2]]
    assert max(totals) > 3  # inner hits counted every match of their group, not the candidates


@pytest.mark.parametrize(
    "extra",
    [
        {"track_total_hits": True},  # an exact total: every match counted
        {"aggs": {"n": {"value_count": {"field": "_id"}}}},
        {"sort": ["_score"]},
        {"min_score": 0.1},
        {"post_filter": {"match": {"title": "graph"}}},
        {"explain": True},
    ],
)
def test_a_request_that_reads_every_match_is_not_pruned(es, pruned, extra):
    query = {"multi_match": {"query": "graph model", "fields": ["body", "abstract", "title"]}}
    body = {"query": query, "size": 3, **extra}
    got, want = _answer(es, body), _reference(es, body)
    assert not pruned
    assert got == want


def test_a_search_the_pruning_does_not_take_is_answered_from_its_matches(es, monkeypatch):
    """The property above covers such searches (``unpruned``); this one shows they take the
    matches' path (no arrays of the index's size), collapse and inner hits included."""
    from scholar_es.engine.search.execute import SearchRun

    taken: list[bool] = []
    original = SearchRun._run_pruned

    def spy(self, start):
        taken.append(self._top is None)
        return original(self, start)

    monkeypatch.setattr(SearchRun, "_run_pruned", spy)
    body = {
        "query": {"bool": {"filter": [{"range": {"year": {"gte": 2020}}}]}},
        "size": 4,
        "collapse": {"field": "paper", "inner_hits": {"name": "b", "size": 3, "_source": False}},
        "_source": False,
    }
    got = _answer(es, body)
    assert taken == [True]  # the reference (topk.ENABLED off) scores into arrays of the index's size
    assert got == _reference(es, body) and taken == [True]
    matching = sum(1 for _, doc in _papers(11, 110) if doc.get("year", 0) >= 2020)  # the fixture's
    assert got[0] == {"value": matching, "relation": "eq"} and len(got[2]) == 4
    assert all(inner["b"][0]["value"] >= len(inner["b"][2]) for *_, inner in got[2])


@pytest.mark.parametrize("track", [40, 50, 20])
def test_a_document_past_the_runs_holding_several_terms_counts_once(tmp_path, track):
    """``hits.total`` under a count limit: a document appended past a field's runs that holds
    two of the query's terms is one match (it was counted once per term: 60 where 30 match, so
    ``gte 40`` was answered for exactly 30)."""
    client = embedded_client(tmp_path)
    client.indices.create(
        index="r", mappings={"properties": {"title": {"type": "text"}, "body": {"type": "text"}}}
    )
    papers = [{"title": f"paper{p} graph study", "body": f"chunk {c}"} for p in range(60) for c in range(5)]
    helpers.bulk(
        client, ({"_index": "r", "_id": f"a{i}", "_source": d} for i, d in enumerate(papers)), refresh=True
    )
    query = {"multi_match": {"query": "alpha beta", "fields": ["title", "body"]}}
    client.search(index="r", query=query)  # the title's runs are found: later documents are past them
    appended = [{"title": "alpha beta", "body": "other"} for _ in range(30)]
    helpers.bulk(
        client, ({"_index": "r", "_id": f"b{i}", "_source": d} for i, d in enumerate(appended)), refresh=True
    )
    got = client.search(index="r", query=query, track_total_hits=track, size=3)["hits"]["total"]
    client.close()
    assert got == ({"value": 30, "relation": "eq"} if track > 30 else {"value": track, "relation": "gte"})


@pytest.mark.parametrize("sort", [False, True])
def test_a_malformed_collapse_fails_before_its_field_is_looked_up(es, sort):
    """A ``collapse`` with an unknown key fails as CollapseBuilder's parser fails it, before its
    field is looked at, whether or not the request could be pruned (a sort cannot)."""
    from elasticsearch import BadRequestError

    query = {"multi_match": {"query": "graph model", "fields": ["body", "abstract", "title"]}}
    body = {"query": query, "collapse": {"field": "nope", "bogus": 1}, "track_total_hits": 5}
    with pytest.raises(BadRequestError) as e:
        es.search(index="p", **body, **({"sort": ["_score"]} if sort else {}))
    assert e.value.body["error"]["type"] == "parsing_exception"
    assert e.value.body["error"]["reason"] == "[collapse] unknown field [bogus]"


def test_the_default_count_limit_gives_an_exact_total_below_it(es, pruned):
    """Fewer matches than 10,000 (the default track_total_hits): the total is exact, so the search
    scores every match (hits.total "eq")."""
    body = {"query": {"multi_match": {"query": "graph", "fields": ["body", "abstract"]}}, "size": 3}
    got = _answer(es, body)
    assert got == _reference(es, body) and got[0]["relation"] == "eq"
    assert not pruned


def test_the_dense_reference_agrees(es):
    """The pruned answer is also the dense path's (every node over every document)."""
    body = {
        "query": {"multi_match": {"query": "neural data of", "fields": ["body^2", "abstract", "title"]}},
        "size": 7,
        "track_total_hits": False,
    }
    got = _answer(es, body)
    sparse.use_sparse(False)
    try:
        assert got == _answer(es, body)
    finally:
        sparse.use_sparse(True)


TEXT = {"multi_match": {"query": "graph model", "fields": ["body", "abstract", "title"]}}


@pytest.mark.parametrize("rank", [1, 2, 5])
def test_a_script_that_gives_nan_fails_as_scoring_every_match_does(es, rank):
    """The best documents' _score * w overflows to infinity and saturation(inf, 1) is NaN: the
    full path's error, not hits without those documents (found by review)."""
    top = es.search(index="p", query=TEXT, size=100, track_total_hits=True, _source=False)["hits"]["hits"]
    scores = sorted({h["_score"] for h in top}, reverse=True)
    w = float(np.finfo(np.float64).max) / ((scores[rank - 1] + scores[rank]) / 2)  # the top `rank` overflow
    script = {"source": "saturation(_score * params.w, 1)", "params": {"w": w}}
    body = {"query": {"script_score": {"query": TEXT, "script": script}}, "size": 10, "track_total_hits": 100}
    got = _answer(es, body)
    assert got == _reference(es, body)
    assert got[0] == "error" and "invalid score [nan]" in got[2]


@pytest.mark.parametrize("shape", ["must", "hybrid"])
def test_a_script_nan_among_documents_the_filters_drop_fails_as_scoring_every_match_does(es, shape):
    """As above, the NaN documents dropped by a must_not: the full path scores every text match
    before the filters apply, so its error is the answer of the pruned path too (found by review:
    the pruned path had answered hits, having bounded only the documents let through)."""
    top = es.search(index="p", query=TEXT, size=100, track_total_hits=True, _source=False)["hits"]["hits"]
    scores = sorted({h["_score"] for h in top}, reverse=True)
    w = float(np.finfo(np.float64).max) / ((scores[0] + scores[1]) / 2)  # only the best overflow
    best = [h["_id"] for h in top if h["_score"] == scores[0]]
    text = {
        "script_score": {
            "query": TEXT,
            "script": {"source": "saturation(_score * params.w, 1)", "params": {"w": w}},
        }
    }
    dropped = [{"ids": {"values": best}}]
    query = (
        {"bool": {"must": [text], "must_not": dropped}}
        if shape == "must"
        else {"bool": {"should": [text], "must_not": dropped, "minimum_should_match": 1}}
    )
    body = {"query": query, "size": 5, "track_total_hits": 10, "_source": False}
    got = _answer(es, body)
    assert got == _reference(es, body)
    assert got[0] == "error" and "invalid score [nan]" in got[2]


@pytest.mark.parametrize("boost", [1e37, 5e37, 1e38, 3e38])
@pytest.mark.parametrize("where", ["body", "title", "query"])
def test_scores_past_the_largest_float_are_left_to_the_full_path(es, boost, where):
    """Scores a float cannot hold become infinity in the answer, ties by document order: what
    the bounds cannot order (found by review)."""
    fields = ["title", "abstract", "body"]
    extra = {"boost": boost} if where == "query" else {}
    fields = [f"{f}^{boost}" if f == where else f for f in fields]
    query = {"multi_match": {"query": "graph model", "fields": fields, **extra}}
    body = {"query": query, "size": 5, "track_total_hits": 5, "_source": False}
    assert _answer(es, body) == _reference(es, body)


@pytest.mark.parametrize(
    ("source", "params", "monotone"),
    [
        ("saturation(_score, params.k) * params.w", {"k": 100.0, "w": 0.8}, True),
        ("_score", {}, True),
        ("_score * 2 + 1", {}, True),
        ("params.w * _score / params.d", {"w": 2, "d": 4}, True),
        ("saturation(_score, params.k)", {"k": 0}, False),  # k must be positive
        ("_score * params.w", {"w": -1}, False),  # a negative factor reverses the order
        ("_score - 1", {}, False),  # can go negative
        ("1 / _score", {}, False),
        ("Math.log(_score)", {}, False),  # not in the recognized forms
        ("doc['year'].value * _score", {}, False),  # reads the document
        ("_score * params.w", {"w": True}, False),
        ("_score * params.w", {"w": "2"}, False),
        ("(2147483647 + 1) * _score", {}, False),  # int overflow: negative
    ],
)
def test_scripts_recognized_as_monotone(source, params, monotone):
    node = ScriptScoreNode(MatchNoneNode(), {"source": source, "params": params}, None, 1.0)
    assert topk.monotone_script(node) is monotone


@pytest.mark.parametrize(
    ("source", "params"),
    [
        ("saturation(_score, params.k) * params.w", {"k": 100.0, "w": 0.8}),
        ("_score * 2 + 1", {}),
        ("params.w * _score / params.d", {"w": 2, "d": 4}),
        ("saturation(_score * 3, 7) + saturation(_score, 0.5)", {}),
    ],
)
def test_a_monotone_scripts_bound_function_is_the_script(source, params):
    """The numpy function the bounds use gives the script engine's values (the same doubles)."""

    class Scores:
        def __init__(self, s):
            self._s, self.n = s, len(s)

        def score(self):
            return self._s

    node = ScriptScoreNode(MatchNoneNode(), {"source": source, "params": params}, None, 1.0)
    x = np.random.default_rng(3).random(1000) * 50
    f = topk._bound_function(node)
    assert f is not None
    assert np.array_equal(np.broadcast_to(f(x), x.shape), node.script.evaluate(Scores(x)))


def test_ranges_lists_the_documents_of_sorted_ranges():
    starts, ends = np.array([0, 4, 5, 9]), np.array([2, 5, 7, 10])
    assert topk._ranges(starts, ends).tolist() == [0, 1, 4, 5, 6, 9]
    assert topk._ranges(starts[:0], ends[:0]).tolist() == []


def _runs(groups: np.ndarray) -> np.ndarray:
    return np.cumsum(np.r_[0, groups[1:] != groups[:-1]])


def test_a_piece_holding_several_groups_counts_for_none():
    """Collapse: the threshold counts distinct groups, each by a piece holding that group alone
    (a piece's best document could be in any group it holds)."""
    groups = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 2])
    starts, ends = np.array([0, 3, 5, 7]), np.array([3, 5, 7, 10])  # the third holds groups 1 and 2
    low = np.array([1.0, 5.0, 9.0, 2.0])

    def kth(low, k):
        return topk._kth_group_bound(groups, _runs(groups), starts, ends, np.arange(4), low, k)

    assert [kth(low, k) for k in (1, 2, 3, 4)] == [5.0, 2.0, 1.0, None]
    # a group's best piece counts, once
    assert [kth(np.array([1.0, 5.0, 9.0, 7.0]), k) for k in (1, 2, 3, 4)] == [7.0, 5.0, 1.0, None]
    # a piece whose first and last documents share a group, another group between them
    groups = np.array([0, 0, 1, 0, 0, 2])
    starts, ends = np.array([0, 1, 4, 5]), np.array([1, 4, 5, 6])
    low = np.array([1.0, 9.0, 2.0, 4.0])
    got = [
        topk._kth_group_bound(groups, _runs(groups), starts, ends, np.arange(4), low, k) for k in (1, 2, 3)
    ]
    assert got == [4.0, 2.0, None]


@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=60),
    st.lists(st.integers(1, 4), min_size=1, max_size=60),
    st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0, 7.5]), min_size=60, max_size=60),
    st.integers(1, 8),
)
@settings(max_examples=300, deadline=None)
def test_kth_group_bound_equals_grouping_every_piece(codes, lengths, lows, k):
    """Grouping only the pieces above a cut (grown until k groups are above it) gives the k-th
    best group of all pieces: many pieces of one group at the top, ties at the cut, few groups."""
    groups = np.array(codes)
    bounds = np.cumsum([0, *lengths])
    bounds = bounds[bounds < len(groups)]
    starts, ends = bounds, np.r_[bounds[1:], len(groups)]
    low = np.array(lows[: len(starts)])
    matched = np.flatnonzero(low > 0.5)  # some pieces unmatched
    single = [len(set(groups[s:e].tolist())) == 1 for s, e in zip(starts, ends, strict=True)]
    best: dict[int, float] = {}
    for i in matched:
        if single[i]:
            g = int(groups[starts[i]])
            best[g] = max(best.get(g, 0.0), float(low[i]))
    expected = sorted(best.values(), reverse=True)[k - 1] if len(best) >= k else None
    got = topk._kth_group_bound(groups, _runs(groups), starts, ends, matched, low, k)
    assert got == expected


def test_pieces_are_kept_per_runs_and_go_with_them():
    """The pieces of a segment's runs are computed once, for the document count they were made
    for, and their entry goes when the runs do (no growth over an engine's lifetime)."""
    import gc

    from scholar_es.engine.index.segment.runs import Runs

    def fields(runs):
        zero = np.zeros(runs.count)
        return [(sparse.RunSums(runs, zero, zero.astype(bool), [], 1.0), 1.0)]

    runs = Runs(np.array([0, 4, 9, 12], dtype=np.int64), None)
    first = topk._pieces(fields(runs), 12)
    assert first is not None and first.starts.tolist() == [0, 4, 9]
    assert topk._pieces(fields(runs), 12) is first  # kept
    more = topk._pieces(fields(runs), 14)  # two documents appended past the runs
    assert more is not None and more.starts.tolist() == [0, 4, 9, 12, 13]
    assert more.runs_at[0].tolist() == [0, 1, 2, -1, -1]
    key = (id(runs),)
    assert key in topk._PIECES
    del runs, first, more
    gc.collect()
    assert key not in topk._PIECES
