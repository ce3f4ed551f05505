"""Runs of equal rows (engine/index/segment/runs.py, issue 29): a field repeated across consecutive
documents (a paper's title and abstract in each of its chunks) is scored once per run.

The reference is the dense path (``use_sparse(False)``: every term over every document), which the
Elasticsearch fixtures check; the runs path must give the same hits, order and scores, exactly, in
every state a segment's runs can be in: found on the first search, with documents appended past
them, after deletions compacted them, and read back from a saved base.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
from chunk_queries import text_strategies
from elasticsearch import helpers
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.index import indices
from scholar_es.engine.index.commit import read_commit
from scholar_es.engine.index.indices import Engine, open_engine
from scholar_es.engine.index.segment.postings import Postings
from scholar_es.engine.index.segment.runs import MIN_RUN_LENGTH, find_runs, same_as_previous
from scholar_es.engine.query import sparse
from scholar_es.engine.rest.transport import embedded_client

WORDS = ["graph", "neural", "model", "data", "protein", "cell", "gene", "tree", "the", "of", "results"]
MAPPING = {"properties": {f: {"type": "text"} for f in ("title", "abstract", "body")}}
STATES = ["fresh", "appended", "deleted"]  # runs found by a search; read back, then appended to; deleted from


def _papers(seed: int, n_papers: int) -> list[tuple[str, dict]]:
    """Chunks of papers, in order: each chunk repeats its paper's title and abstract."""
    rnd = random.Random(seed)
    docs = []
    for p in range(n_papers):
        title = " ".join(rnd.choices(WORDS, k=rnd.randint(1, 4)))
        abstract = " ".join(rnd.choices(WORDS, k=rnd.randint(0, 10))) if rnd.random() < 0.9 else None
        for c in range(rnd.randint(3, 10)):
            doc = {"title": title, "body": " ".join(rnd.choices(WORDS, k=rnd.randint(0, 12)))}
            if abstract is not None:
                doc["abstract"] = abstract
            docs.append((f"{p}-{c}", doc))
    return docs


def _bulk(es, index: str, docs) -> None:
    helpers.bulk(es, ({"_index": index, "_id": i, "_source": d} for i, d in docs), refresh=True)


def _search_once(es, index: str) -> None:
    """A best_fields multi_match of two words (per field a bool of terms): the first one finds the
    runs of the fields it reads."""
    es.search(
        index=index, query={"multi_match": {"query": "model graph", "fields": ["title", "abstract", "body"]}}
    )


def _reopen(path, client):
    """The client of a fresh engine on ``path``, as a new process opens it: the base it saved is
    read back (runs included) instead of the segment this process built."""
    client.close()
    root = str(Path(path).expanduser().resolve())
    indices._ENGINES.pop(root).store.close()
    return embedded_client(path)


@pytest.fixture(scope="module")
def clients(tmp_path_factory):
    """Per state, a client on an engine whose index ``p`` is in that state."""
    docs = _papers(7, 60)
    cut = len(docs) * 3 // 5
    out = {}
    for state in STATES:
        path = tmp_path_factory.mktemp(state)
        client = embedded_client(path)
        client.indices.create(index="p", mappings=MAPPING)
        _bulk(client, "p", docs if state != "appended" else docs[:cut])
        _search_once(client, "p")
        if state != "fresh":
            client = _reopen(path, client)  # a saved base, its runs read back
        if state == "appended":
            _bulk(client, "p", docs[cut:])  # past the runs: scored per document
        if state == "deleted":  # a third of the chunks, and the whole of paper 5: runs shrink or go
            gone = {i for i, _ in docs[::3]} | {i for i, _ in docs if i.startswith("5-")}
            helpers.bulk(
                client, ({"_op_type": "delete", "_index": "p", "_id": i} for i in gone), refresh=True
            )
        engine = open_engine(path)
        col = engine.handle("p").segment().text["abstract"]
        runs = col.runs()
        assert runs.view is not None, state  # the runs path is the one these tests exercise
        if state == "appended":
            assert runs.covered == cut < len(col.lengths)  # documents past the runs
        out[state] = (client, engine)
    yield out
    for client, _ in out.values():
        client.close()


def _answer(es, index, query):
    try:
        resp = es.search(index=index, size=1000, query=query)
    except Exception as e:  # the same error from both paths is the same answer
        return ("error", type(e).__name__, str(e))
    hits = resp["hits"]["hits"]
    return resp["hits"]["total"], [h["_id"] for h in hits], [h["_score"] for h in hits]


words, fields, multi_match = text_strategies(WORDS, 4)
# the same shape spelled out: per field a bool of term queries (its boost may be 0), and a clause
# that is not a field of terms, in any order
spelled = st.builds(
    lambda w, t, fb, order: {
        "dis_max": {
            "tie_breaker": t,
            "queries": [
                [
                    {"bool": {"should": [{"term": {"abstract": x}} for x in w.split()], "boost": fb}},
                    {"bool": {"should": [{"term": {"title": x}} for x in w.split()]}},
                    {"match": {"body": w}},
                ][i]
                for i in order
            ],
        }
    },
    words,
    st.sampled_from([0.0, 0.7]),
    st.sampled_from([1.0, 1.5, 0.0]),
    st.permutations([0, 1, 2]),
)
other_shapes = st.one_of(  # a bool of one field's terms on its own: scored per run as well
    st.builds(
        lambda f, w, b: {"match": {f: {"query": w, "boost": b}}},
        st.sampled_from(["abstract", "title", "body"]),
        words,
        st.sampled_from([1.0, 2.0, 0.0]),
    ),
    multi_match.map(lambda q: {"multi_match": {**q["multi_match"], "type": "most_fields"}}),
    st.builds(lambda w: {"match": {"abstract": {"query": w, "operator": "and"}}}, words),
    st.builds(  # one word: a term query, per run as well (alone, or as a field of a multi_match)
        lambda f, w: {"term": {f: w}}, st.sampled_from(["abstract", "title"]), st.sampled_from(WORDS)
    ),
    st.builds(
        lambda w, fs: {"multi_match": {"query": w, "fields": fs, "tie_breaker": 0.3}},
        st.sampled_from(WORDS),
        fields,
    ),
)
queries = st.one_of(
    multi_match,
    spelled,
    other_shapes,
    multi_match.map(
        lambda q: {
            "script_score": {
                "query": q,
                "script": {"source": "saturation(_score, params.k)", "params": {"k": 8}},
            }
        }
    ),
    st.builds(lambda q, w: {"bool": {"should": [q], "filter": [{"match": {"body": w}}]}}, multi_match, words),
)


@settings(max_examples=150, deadline=None)
@given(state=st.sampled_from(STATES), query=queries)
def test_runs_equal_the_dense_reference(clients, state, query):
    es = clients[state][0]
    sparse.use_sparse(False)
    try:
        dense = _answer(es, "p", query)
    finally:
        sparse.use_sparse(True)
    fast = _answer(es, "p", query)
    assert fast == dense, query  # hits, order, totals and scores: exactly


def _rows(col, pos: int) -> tuple[list[int], list[int], int]:
    p = col.postings
    lo, hi = int(p.indptr[pos]), int(p.indptr[pos + 1])
    return list(p.indices[lo:hi]), list(p.data[lo:hi]), int(col.lengths[pos])


@pytest.mark.parametrize("state", STATES)
def test_every_run_holds_equal_rows_and_its_heads_postings(clients, state):
    """What the scores above rest on, checked directly: each run's documents have its head's row
    (terms, frequencies, length), and the term -> runs view is the heads' postings."""
    col = clients[state][1].handle("p").segment().text["abstract"]
    runs = col.runs()
    starts = runs.starts
    for r in range(runs.count):
        head = _rows(col, int(starts[r]))
        assert all(_rows(col, d) == head for d in range(int(starts[r]), int(starts[r + 1])))
    ptr, run_ids, freqs = runs.view
    heads = {int(starts[r]): r for r in range(runs.count)}
    for term, tid in col.postings.vocab.items():
        docs, doc_freqs = col.postings.postings(term)
        want = [(heads[d], int(f)) for d, f in zip(docs, doc_freqs, strict=True) if int(d) in heads]
        got = list(
            zip(
                run_ids[ptr[tid] : ptr[tid + 1]].tolist(),
                freqs[ptr[tid] : ptr[tid + 1]].tolist(),
                strict=True,
            )
        )
        assert got == want, term


def _postings(rows: list[list[str]]) -> Postings:
    p = Postings()
    p.append(rows)
    return p


def test_rows_are_equal_only_with_the_same_terms_frequencies_and_length():
    rows = [["a", "b"], ["a", "b"], ["a", "b", "b"], ["a", "b", "b"], ["a", "c"], [], [], ["a", "b"]]
    p = _postings(rows)
    lengths = np.array([2, 2, 3, 3, 2, 0, 0, 2], dtype=np.int32)
    assert same_as_previous(p, p.indptr, lengths).tolist() == [
        False,
        True,
        False,
        True,
        False,
        False,
        True,
        False,
    ]
    # the same terms and frequencies but another field length (e.g. stop words removed): not equal
    lengths[1] = 5
    assert same_as_previous(p, p.indptr, lengths).tolist()[:2] == [False, False]


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(st.lists(st.sampled_from("abc"), max_size=4), max_size=30),
    block=st.integers(1, 8),
)
def test_equal_rows_are_found_across_blocks(rows, block):
    """The comparison runs over blocks of postings (``_BLOCK``); with tiny blocks every boundary
    case happens, and the answer is the plain row-by-row comparison's."""
    from scholar_es.engine.index.segment import runs as runs_module

    rows = rows + rows[-2:] * 2  # some repeats for sure
    p = _postings(rows)
    lengths = np.array([len(r) for r in rows], dtype=np.int32)
    saved = runs_module._BLOCK
    runs_module._BLOCK = block
    try:
        got = same_as_previous(p, p.indptr, lengths).tolist()
    finally:
        runs_module._BLOCK = saved

    def row(i):
        lo, hi = int(p.indptr[i]), int(p.indptr[i + 1])
        return list(p.indices[lo:hi]), list(p.data[lo:hi]), int(lengths[i])

    assert got == [i > 0 and row(i) == row(i - 1) for i in range(len(rows))]


def test_runs_too_short_keep_no_view():
    many = [["x", str(i)] for i in range(10)]  # no two rows equal
    p = _postings(many)
    runs = find_runs(p, p.indptr, np.full(10, 2, dtype=np.int32), len(p.vocab))
    assert runs.view is None and runs.covered == 10
    same = [["x"]] * (MIN_RUN_LENGTH * 3)
    p = _postings(same)
    runs = find_runs(p, p.indptr, np.ones(len(same), dtype=np.int32), len(p.vocab))
    assert runs.count == 1 and runs.view is not None


def test_a_saved_base_keeps_its_runs_and_an_older_one_finds_them(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(index="p", mappings=MAPPING)
    _bulk(es, "p", _papers(3, 40))
    query = {
        "multi_match": {
            "query": "graph model of",
            "fields": ["body^2", "abstract^1.5", "title"],
            "tie_breaker": 0.3,
        }
    }
    want = _answer(es, "p", query)
    es.close()
    (folder,) = (path / "segments").iterdir()
    _, arrays, meta = read_commit(folder)
    refs = {name: r for name, _, r in meta["segment"]["text"]}
    assert len(refs["abstract"]) == 12 and len(refs["body"]) in (9, 12)  # saved with the base
    engine = Engine(path)
    try:
        col = engine.handle("p").segment().text["abstract"]
        loaded = col._runs  # read with the segment, before any search
        assert loaded is not None and loaded.view is not None
        fresh = find_runs(col.postings, col.postings.indptr, col.lengths, len(col.postings.vocab))
        assert np.array_equal(loaded.starts, fresh.starts)
        for a, b in zip(loaded.view, fresh.view, strict=True):
            assert np.array_equal(a, b)
    finally:
        engine.store.close()
    es = embedded_client(path)
    assert _answer(es, "p", query) == want
    es.close()


def _fresh_runs_after_reopen(path, client, index: str = "p"):
    """The abstract column's runs as a fresh process reads them, before any search (None: the
    base was not read back, e.g. refused and rebuilt from SQLite, which finds no runs by itself)."""
    es = _reopen(path, client)
    return es, open_engine(path).handle(index).segment().text["abstract"]._runs


def _ten_papers(es) -> None:
    es.indices.create(
        index="p", mappings={"properties": {"abstract": {"type": "text"}, "body": {"type": "text"}}}
    )
    docs = ({"abstract": f"graph model paper{p}", "body": "text"} for p in range(10) for _ in range(6))
    _bulk(es, "p", ((f"{i}", d) for i, d in enumerate(docs)))
    _search_once(es, "p")


def test_a_term_seen_only_past_the_runs_scores_there(tmp_path):
    """Review finding: terms with no posting among the run heads (new words of appended papers)
    gave an integer array of sums and a 500; they score the appended documents as per document."""
    es = embedded_client(tmp_path)
    _ten_papers(es)
    es.index(index="p", id="new", document={"abstract": "zeta", "body": "text"}, refresh=True)
    for query in (
        {"multi_match": {"query": "zeta absent", "fields": ["abstract", "body"]}},
        {"multi_match": {"query": "zeta graph", "fields": ["abstract", "body"], "type": "most_fields"}},
        {"match": {"abstract": "zeta absent"}},
    ):
        sparse.use_sparse(False)
        try:
            dense = _answer(es, "p", query)
        finally:
            sparse.use_sparse(True)
        assert dense[0] != "error" and _answer(es, "p", query) == dense, query
    es.close()


def test_a_base_saved_after_new_terms_came_and_went_reads_back(tmp_path, monkeypatch):
    """Review finding: runs found before new terms were added (and deleted again) were saved with
    fewer term offsets than the vocabulary holds, and the base was refused on open (rebuilt from
    SQLite). The offsets are padded to the vocabulary when saved."""
    es = embedded_client(tmp_path)
    _ten_papers(es)
    es.index(index="p", id="new", document={"abstract": "brandnewterm graph", "body": "x"}, refresh=True)
    _search_once(es, "p")
    monkeypatch.setenv("SCHOLAR_ES_FULL_SAVE", "1")
    es.delete(index="p", id="new", refresh=True)
    open_engine(tmp_path).handle("p").save()
    es, runs = _fresh_runs_after_reopen(tmp_path, es)
    assert runs is not None and runs.view is not None and runs.covered == 60
    assert _answer(es, "p", {"match": {"abstract": "graph brandnewterm"}})[0]["value"] == 60
    es.close()


def test_runs_emptied_by_deletions_save_and_read_back(tmp_path, monkeypatch):
    """Review finding: deleting every document the runs covered left starts ``[0]`` with a view,
    which the base saved and its reader refused."""
    es = embedded_client(tmp_path)
    _ten_papers(es)
    monkeypatch.setenv("SCHOLAR_ES_FULL_SAVE", "1")
    es.delete_by_query(index="p", query={"match_all": {}}, refresh=True)
    assert _answer(es, "p", {"match": {"abstract": "graph"}})[0]["value"] == 0
    open_engine(tmp_path).handle("p").save()
    es, runs = _fresh_runs_after_reopen(tmp_path, es)
    assert runs is not None and runs.covered == 0
    es.close()


def test_saved_runs_that_disagree_with_their_rows_are_refused():
    """``Runs.load`` checks the runs against the rows they describe (beyond checksums and ranges):
    a run whose documents have another field length than its head, or a view with another number
    of postings than the heads' rows, is refused (the segment is then rebuilt from SQLite)."""
    from scholar_es.engine.index.segment.runs import Runs
    from scholar_es.engine.index.segment.saved import SavedArrays

    rows = [["a", "b"]] * 4 + [["c"]] * 4
    p = _postings(rows)
    lengths = np.array([len(r) for r in rows], dtype=np.int32)
    good = find_runs(p, p.indptr, lengths, len(p.vocab))
    arrays = good.to_save(len(p.vocab))
    loaded = Runs.load(SavedArrays(arrays), [0, 1, 2, 3], p.indptr, lengths, len(p.vocab))
    assert np.array_equal(loaded.starts, good.starts)
    # one run over rows of two lengths, its view the first row's postings (a, b): consistent ranges
    one_run = [
        np.array([0, 8], dtype=np.int64),
        np.array([0, 1, 2, 2], dtype=np.int64),
        np.zeros(2, dtype=np.int32),
        np.ones(2, dtype=np.uint8),
    ]
    with pytest.raises(ValueError, match="do not match"):
        Runs.load(SavedArrays(one_run), [0, 1, 2, 3], p.indptr, lengths, len(p.vocab))
    ptr, run_ids, freqs = arrays[1:]
    short = [arrays[0], np.array([0, 1, 1, 2], dtype=np.int64), run_ids[:2], freqs[:2]]  # a posting lost
    with pytest.raises(ValueError, match="do not match"):
        Runs.load(SavedArrays(short), [0, 1, 2, 3], p.indptr, lengths, len(p.vocab))
