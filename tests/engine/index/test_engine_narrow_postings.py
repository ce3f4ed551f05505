"""Term ids and frequencies are saved in the narrowest integer type that holds them (issue 16,
disk: ~1 GB less at 1M chunks), and read back mapped as they are. A value too wide for a saved
array -- a term frequency over 255 or 65,535, a term id over 255 in a new document -- must keep
its value through every path that joins narrow and wide arrays: appends to an opened base,
deltas read back onto it, deletes (compaction) and a merged base.

Expected values: a term's frequency is the count of its tokens in the document (what Lucene's
``freq`` is; the explanation reports it), and under BM25 a higher frequency at equal length scores
higher. The reference for the scores is the same documents indexed without any save or reopen.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from scholar_es.engine.index import commit
from scholar_es.engine.index import indices as core
from scholar_es.engine.index.indices import Engine
from scholar_es.engine.index.segment import buffers
from scholar_es.engine.rest.handler import handle as rest_handle

MAPPING = {"properties": {"body": {"type": "text"}, "tag": {"type": "keyword"}}}
BASE_WORDS = [f"b{i}" for i in range(40)]


def _rest(engine: Engine, method: str, path: str, body=None) -> dict:
    status, resp = rest_handle(engine, method, path, {}, body)
    assert status in (200, 201), resp
    return resp


def _base_docs() -> list[tuple[str, dict]]:
    return [
        (
            f"d{i}",
            {"body": " ".join(BASE_WORDS[(i * j) % 40] for j in range(1, 2 + i % 9)), "tag": f"t{i % 3}"},
        )
        for i in range(300)
    ]


#: a document whose values fit the base's types: its delta is saved narrow too (a delta of one
#: byte types, read back onto the base in a buffer of one byte types, then wider rows after it)
SMALL_DOC = ("small", {"body": "b1 b2 b2", "tag": "t1"})
#: documents whose values do not fit the base's narrow arrays
WIDE_DOCS = [
    ("wide300", {"body": " ".join(["x"] * 300), "tag": "w"}),  # freq 300 > 255 (uint8)
    ("wide100", {"body": " ".join(["x"] * 100 + ["y"] * 200), "tag": "w"}),  # same length, freq 100
    ("wide70k", {"body": " ".join(["z"] * 70_000), "tag": "w"}),  # freq 70,000 > 65,535 (uint16)
    ("newterms", {"body": " ".join(f"n{i}" for i in range(300)) + " n299 n299", "tag": "w"}),  # ids > 255
]

QUERIES = [
    {"match": {"body": "x"}},
    {"match": {"body": "z"}},
    {"match": {"body": "n299"}},
    {"match": {"body": "n0 b3"}},
    {"match": {"body": "b7 b11 y"}},
    {"term": {"tag": "w"}},
]


def _answers(engine: Engine) -> list:
    out = []
    for q in QUERIES:
        hits = _rest(engine, "POST", "/p/_search", {"query": q, "size": 200})["hits"]["hits"]
        out.append([(h["_id"], h["_score"]) for h in hits])
    return out


def _freq(engine: Engine, doc_id: str, term: str) -> float:
    """The ``freq`` of ``term`` in the explanation of ``doc_id``'s score."""
    resp = _rest(
        engine, "POST", "/p/_search", {"query": {"term": {"body": term}}, "explain": True, "size": 200}
    )
    (hit,) = [h for h in resp["hits"]["hits"] if h["_id"] == doc_id]
    found: list[float] = []

    def walk(node: dict) -> None:
        if node["description"].startswith("freq, occurrences of term"):
            found.append(node["value"])
        for child in node.get("details", []):
            walk(child)

    walk(hit["_explanation"])
    assert len(found) == 1, hit["_explanation"]
    return found[0]


def _check(engine: Engine, reference: list) -> None:
    assert _freq(engine, "wide300", "x") == 300.0
    assert _freq(engine, "wide100", "x") == 100.0
    assert _freq(engine, "wide70k", "z") == 70_000.0
    assert _freq(engine, "newterms", "n299") == 3.0
    answers = _answers(engine)
    x_hits = [doc for doc, _ in answers[0]]
    assert x_hits[:2] == ["wide300", "wide100"]  # equal length: the higher frequency scores higher
    assert [doc for doc, _ in answers[2]] == ["newterms"]
    assert answers == reference


def _saved_types(path) -> dict[str, set[str]]:
    """The types of the saved term-id and frequency arrays of field ``body``, by kind."""
    (folder,) = (path / "segments").iterdir()
    found = commit.open_commit(folder)
    assert found is not None
    out: dict[str, set[str]] = {"term ids": set(), "freqs": set()}
    for seg in [found.meta["segment"], *(d["segment"] for d in found.meta.get("deltas") or [])]:
        ((_, _, refs),) = [t for t in seg["text"] if t[0] == "body"]
        out["term ids"].add(str(found.arrays[refs[1]].dtype))
        out["freqs"].add(str(found.arrays[refs[2]].dtype))
        if len(refs) == 8:
            out["freqs"].add(str(found.arrays[refs[7]].dtype))
    return out


LATE_DOC = ("late", {"body": "x y b3", "tag": "t2"})


def _ops() -> list[tuple[str, str, dict | None]]:
    """The writes after the base, in order, with the states whose answers are compared."""
    return [
        ("PUT", SMALL_DOC[0], SMALL_DOC[1]),
        *(("PUT", doc_id, doc) for doc_id, doc in WIDE_DOCS),
        ("STATE", "A", None),
        ("PUT", LATE_DOC[0], LATE_DOC[1]),
        ("STATE", "B", None),
        ("DELETE", "d5", None),
        ("PUT", "d6", dict(_base_docs()[6][1])),  # an update: delete + add (moves to the end)
        ("STATE", "C", None),
    ]


def _ops_deleting_early() -> list[tuple[str, str, dict | None]]:
    """Writes that delete while the wide rows are still apart from the narrow base."""
    return [
        ("PUT", SMALL_DOC[0], SMALL_DOC[1]),
        *(("PUT", doc_id, doc) for doc_id, doc in WIDE_DOCS),
        ("DELETE", "d5", None),
        ("STATE", "D", None),
    ]


@pytest.fixture
def reference(tmp_path) -> dict[str, list]:
    """Answers of the same writes in one process, never saved and reopened, at each state."""
    states: dict[str, list] = {}
    for n, ops in enumerate((_ops(), _ops_deleting_early())):
        engine = Engine(tmp_path / f"reference{n}")
        try:
            _rest(engine, "PUT", "/p", {"mappings": MAPPING})
            for doc_id, doc in _base_docs():
                _rest(engine, "PUT", f"/p/_doc/{doc_id}", doc)
            for op, name, doc in ops:
                if op == "STATE":
                    states[name] = _answers(engine)
                else:
                    _rest(engine, op, f"/p/_doc/{name}", doc)
            with engine.handle("p").reading() as (seg, _reader):  # in memory, never from a file
                assert seg.text["body"].postings.data.dtype == np.int32
        finally:
            engine.store.close()
    return states


def _check_reopened(path, reference: list) -> None:
    """``_check`` on a new engine opened on ``path`` (every array read from its files)."""
    engine = Engine(path)
    try:
        _check(engine, reference)
    finally:
        engine.store.close()


def _save_base(path) -> list:
    """Index the base documents into a new engine at ``path``, save them as a base, and return
    the answers before closing."""
    engine = Engine(path)
    try:
        _rest(engine, "PUT", "/p", {"mappings": MAPPING})
        for doc_id, doc in _base_docs():
            _rest(engine, "PUT", f"/p/_doc/{doc_id}", doc)
        _rest(engine, "POST", "/p/_refresh")
        return _answers(engine)
    finally:
        engine.store.close()


@pytest.mark.parametrize("layout", ["split", "copied"])
def test_wide_values_after_a_narrow_base_keep_their_value(tmp_path, monkeypatch, reference, layout, caplog):
    # split: a mapped array stays the base of a two-part column (buffers.Split), rows appended
    # after it held apart; copied: it is copied into a growable buffer first
    monkeypatch.setattr(buffers, "SPLIT_MIN_ROWS", 1 if layout == "split" else 10**12)
    caplog.set_level("WARNING", logger="scholar_es.engine")
    path = tmp_path / "engine"
    _save_base(path)
    # 40 terms, frequencies under 10: one byte each
    assert _saved_types(path) == {"term ids": {"uint8"}, "freqs": {"uint8"}}

    engine = Engine(path)
    try:
        _rest(engine, "PUT", f"/p/_doc/{SMALL_DOC[0]}", SMALL_DOC[1])
        _rest(engine, "POST", "/p/_refresh")  # a delta of one byte types
    finally:
        engine.store.close()
    assert _saved_types(path) == {"term ids": {"uint8"}, "freqs": {"uint8"}}

    early = tmp_path / "early"  # the same, then a delete before any save: a take across the parts
    shutil.copytree(path, early)
    engine = Engine(early)
    try:
        for doc_id, doc in WIDE_DOCS:
            _rest(engine, "PUT", f"/p/_doc/{doc_id}", doc)
        _rest(engine, "POST", "/p/_refresh")  # applied (and saved): the parts are narrow, then wide
        _rest(engine, "DELETE", "/p/_doc/d5")
        _check(engine, reference["D"])
        monkeypatch.setenv(core.FULL_SAVE_ENV, "1")
        _rest(engine, "POST", "/p/_refresh")  # the compacted arrays saved whole
        monkeypatch.delenv(core.FULL_SAVE_ENV)
    finally:
        engine.store.close()
    _check_reopened(early, reference["D"])

    engine = Engine(path)  # the base and the narrow delta mapped; wide documents appended after them
    try:
        for doc_id, doc in WIDE_DOCS:
            _rest(engine, "PUT", f"/p/_doc/{doc_id}", doc)
        _check(engine, reference["A"])
        _rest(engine, "POST", "/p/_refresh")  # a delta of wider types
    finally:
        engine.store.close()
    types = _saved_types(path)
    assert types["term ids"] == {"uint8", "uint16"} and types["freqs"] == {"uint8", "int32"}

    monkeypatch.setenv(core.FULL_SAVE_ENV, "1")  # the next save writes one base: whole arrays
    engine = Engine(path)  # the narrow base, the narrow delta, then the wider delta after them
    try:
        _check(engine, reference["A"])
        _rest(engine, "PUT", f"/p/_doc/{LATE_DOC[0]}", LATE_DOC[1])
        _check(engine, reference["B"])
        _rest(engine, "POST", "/p/_refresh")
    finally:
        engine.store.close()
    monkeypatch.delenv(core.FULL_SAVE_ENV)
    assert _saved_types(path) == {"term ids": {"uint16"}, "freqs": {"int32"}}

    engine = Engine(path)
    try:
        _check(engine, reference["B"])
        _rest(engine, "DELETE", "/p/_doc/d5")  # a delete compacts every column
        _rest(engine, "PUT", "/p/_doc/d6", dict(_base_docs()[6][1]))
        _check(engine, reference["C"])
        _rest(engine, "POST", "/p/_refresh")
    finally:
        engine.store.close()
    _check_reopened(path, reference["C"])
    # every reopen read its files (a save that wrote cut values would fail the open's checks and
    # be rebuilt from SQLite, answering right while the files were wrong)
    assert "rebuilding from SQLite" not in caplog.text


def test_a_saved_array_of_another_integer_type_is_refused(tmp_path, caplog):
    """Only the types a save writes are read as postings; another one (int8 here: negative ids
    would wrap) makes the segment unusable and it is rebuilt from SQLite, answering the same."""
    path = tmp_path / "engine"
    before = _save_base(path)
    (folder,) = (path / "segments").iterdir()
    found = commit.open_commit(folder)
    assert found is not None
    arrays = [np.array(a) for a in found.arrays]
    ((_, _, refs),) = [t for t in found.meta["segment"]["text"] if t[0] == "body"]
    arrays[refs[2]] = arrays[refs[2]].astype(np.int8)
    commit.write_commit(folder, arrays, found.meta)
    engine = Engine(path)
    try:
        with caplog.at_level("WARNING", logger="scholar_es.engine"):
            assert _answers(engine) == before
    finally:
        engine.store.close()
    assert "rebuilding from SQLite" in caplog.text
    assert "int8" in caplog.text


def test_saved_types_are_the_narrowest_that_hold_the_values():
    from scholar_es.engine.index.segment.postings import narrowed

    for values, expected in [
        ([0, 255], np.uint8),
        ([0, 256], np.uint16),
        ([1, 65_535], np.uint16),
        ([1, 65_536], np.int32),
        ([], np.int32),
    ]:
        got = narrowed(np.array(values, dtype=np.int32))
        assert got.dtype == expected, values
        assert got.tolist() == values
