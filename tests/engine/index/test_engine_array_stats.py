"""The range checks of an open read facts about each integer array (engine/index/array_stats.py).

The writer records them beside each array's CRC32; a commit point written before that gets them
computed from the arrays at load. Expected values come from numpy's reductions and Python's
comparisons over the whole array.
A commit point whose checksums are all correct but whose ids are out of range (what a writer bug
would produce: its facts then record the out-of-range value) must still be refused at open and
rebuilt from SQLite, answers unchanged. Outside what this defends: a tool that rewrites array
bytes and fixes their CRC32 but not the recorded facts (docs/storage.md section 6).
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scholar_es.engine.index import commit
from scholar_es.engine.index.array_stats import ArrayStats
from scholar_es.engine.index.indices import Engine
from scholar_es.engine.rest.handler import handle as rest_handle
from scholar_es.engine.rest.transport import embedded_client


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=60),
    dtype=st.sampled_from([np.int32, np.int64]),
    sort=st.sampled_from([None, "ascending", "strict"]),
)
def test_facts_are_numpys_reductions(values, dtype, sort):
    arr = np.array(values, dtype=dtype)
    if sort == "ascending":
        arr = np.sort(arr)
    elif sort == "strict":
        arr = np.unique(arr)
    got = ArrayStats.of(arr)
    assert got is not None
    assert ArrayStats.from_json(json.loads(json.dumps(got.to_json()))) == got  # as a commit point holds it
    if len(arr):
        assert (got.min, got.max) == (int(arr.min()), int(arr.max()))
    assert got.total == int(arr.sum(dtype=np.int64))
    if dtype == np.int64:
        assert got.nondecreasing == all(a <= b for a, b in itertools.pairwise(arr.tolist()))
        assert got.increasing == all(a < b for a, b in itertools.pairwise(arr.tolist()))
    else:
        assert got.nondecreasing is None and got.increasing is None


def test_only_1d_integer_arrays_have_facts():
    assert ArrayStats.of(np.zeros(3, dtype=np.float32)) is None
    assert ArrayStats.of(np.zeros((2, 2), dtype=np.int64)) is None
    assert ArrayStats.of(np.zeros(3, dtype=np.uint8)) is not None


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "engine"
    es = embedded_client(path)
    es.indices.create(
        index="p",
        mappings={
            "properties": {
                "title": {"type": "text"},
                "tag": {"type": "keyword"},
                "year": {"type": "integer"},
            }
        },
    )
    words = ["graph", "neural", "model", "data", "cell", "gene"]
    for i in range(300):
        title = " ".join(words[(i * j + j) % len(words)] for j in range(1 + i % 7))
        es.index(index="p", id=str(i), document={"title": title, "tag": f"t{i % 4}", "year": 2000 + i % 9})
    es.indices.refresh(index="p")
    queries = [
        {"match": {"title": "graph neural"}},
        {"term": {"tag": "t2"}},
        {"range": {"year": {"gte": 2004}}},
    ]
    answers = [es.search(index="p", query=q, size=300)["hits"] for q in queries]
    es.close()
    (folder,) = (path / "segments").iterdir()
    return path, folder, queries, answers


def _answers_of_a_new_engine(path, queries) -> list:
    """Each query's hits from a new Engine on ``path`` (a client of this process would share the
    engine already open), every answer a 200."""
    engine = Engine(path)
    try:
        got = []
        for q in queries:
            status, resp = rest_handle(engine, "POST", "/p/_search", {}, {"query": q, "size": 300})
            assert status == 200, resp
            got.append(resp["hits"])
    finally:
        engine.store.close()
    return got


def _write_point(point, entry: dict) -> None:
    """Write a commit point's body with a matching header (its CRC32 and size), as commit.py does."""
    body = json.dumps(entry).encode()
    point.write_bytes(json.dumps({"crc32": zlib.crc32(body), "size": len(body)}).encode() + b"\n" + body)


def _strip_recorded_facts(folder) -> None:
    """Rewrite the commit point as one written before the facts were recorded."""

    (point,) = folder.glob("segments_*.json")
    entry = json.loads(point.read_bytes().partition(b"\n")[2])
    for f in entry["files"]:
        for a in f["arrays"]:
            a.pop("facts", None)
    _write_point(point, entry)


@pytest.mark.parametrize("source", ["recorded by the writer", "computed at load"])
def test_each_integer_arrays_facts_are_those_of_its_bytes(saved, source):
    path, folder, queries, answers = saved
    if source == "computed at load":  # a commit point written before the facts were recorded
        _strip_recorded_facts(folder)
    found = commit.open_commit(folder)
    assert found is not None and len(found.stats) == len(found.arrays)
    checked = 0
    for arr, facts in zip(found.arrays, found.stats, strict=True):
        if source == "computed at load":
            assert facts is None
            facts = ArrayStats.of(arr)  # what Segment.from_arrays computes for it
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            assert facts is None
            continue
        assert facts is not None
        checked += 1
        if len(arr):
            assert (facts.min, facts.max) == (int(arr.min()), int(arr.max()))
        assert facts.total == int(arr.sum(dtype=np.int64))
        if arr.dtype == np.int64:
            assert facts.nondecreasing == bool(np.all(np.diff(arr) >= 0))
            assert facts.increasing == bool(np.all(np.diff(arr) > 0))
    assert checked >= 8  # seqs, postings (both directions) of two fields, keyword values, numeric ids
    assert _answers_of_a_new_engine(path, queries) == answers  # it opens from them, answers as before


def _rewrite_with(folder, change):
    """A new commit point whose arrays carry correct checksums but ``change`` applied."""
    found = commit.open_commit(folder)
    assert found is not None
    arrays = [np.array(a) for a in found.arrays]
    change(arrays, found.meta["segment"])
    commit.write_commit(folder, arrays, found.meta)


@pytest.mark.parametrize("facts", ["recorded", "computed at load"])
@pytest.mark.parametrize("which", ["term_id", "doc_position", "keyword_value", "numeric_doc", "seqs_order"])
def test_checksummed_but_inconsistent_arrays_are_refused_and_rebuilt(saved, which, facts, caplog):
    path, folder, queries, answers = saved
    n = None

    def change(arrays, desc):
        nonlocal n
        n = desc["n"]
        _, vocab, refs = desc["text"][0]
        if which == "term_id":
            ids = arrays[refs[1]]  # saved in the narrowest type that holds them (postings.narrowed)
            ids[5] = np.iinfo(ids.dtype).max  # no such term
            assert ids[5] >= len(json.loads(arrays[vocab].tobytes()))
        elif which == "doc_position":
            arrays[refs[6]][0] = desc["n"]  # one past the last document
        elif which == "keyword_value":
            _, _, krefs = desc["keyword"][0]
            arrays[krefs[3]][3] = 10**6
        elif which == "numeric_doc":
            _, nrefs = desc["numeric"][0]
            arrays[nrefs[0]][-1] = desc["n"]
        else:
            seqs = arrays[desc.get("seqs", 0)]
            seqs[1], seqs[2] = seqs[2], seqs[1]

    _rewrite_with(folder, change)
    if facts == "computed at load":
        _strip_recorded_facts(folder)
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        got = _answers_of_a_new_engine(path, queries)
    assert got == answers
    assert n == 300
    assert "rebuilding from SQLite" in caplog.text, caplog.text


@pytest.mark.parametrize("damage", [b"'<i8')", b"(99999999999999999999999,)"])
def test_a_damaged_array_header_is_a_checksum_failure_not_a_crash(saved, damage, caplog):
    """The header is parsed before the CRC pass (it says where the elements start); bytes that
    make numpy's header parser raise something else than ValueError (tokenize.TokenError for an
    unbalanced bracket in the dtype or in the shape; OverflowError is another) must still end as
    a failed checksum and a rebuild from SQLite (found by a review probe: a 500 on every request)."""
    path, folder, queries, answers = saved
    (point,) = folder.glob("segments_*.json")
    entry = json.loads(point.read_bytes().partition(b"\n")[2])
    f = entry["files"][0]
    data_file = folder / f["name"]
    raw = bytearray(data_file.read_bytes())
    a = f["arrays"][0]
    header = bytes(raw[a["offset"] : a["offset"] + 128])
    target = b"'<i8'," if damage.startswith(b"'") else re.search(rb"\(\d+,\)", header).group(0)
    at = a["offset"] + header.index(target)
    new = damage[: len(target)].ljust(len(target), b" ")
    raw[at : at + len(target)] = new
    data_file.write_bytes(bytes(raw))
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        got = _answers_of_a_new_engine(path, queries)
    assert got == answers
    assert "fails its CRC32 checksum" in caplog.text, caplog.text


@pytest.mark.parametrize(
    "facts", [[0, 1], ["0", 5, 5, None, None], [0, 5, 5, 1, None], {"min": 0}, [0, 5, 5.5, None, None]]
)
def test_malformed_recorded_facts_make_the_generation_unusable(saved, facts, caplog):

    path, folder, queries, answers = saved
    (point,) = folder.glob("segments_*.json")
    entry = json.loads(point.read_bytes().partition(b"\n")[2])
    entry["files"][0]["arrays"][0]["facts"] = facts
    _write_point(point, entry)
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        assert _answers_of_a_new_engine(path, queries[:1]) == answers[:1]
    assert "facts are malformed" in caplog.text, caplog.text


def test_the_fast_crc_is_zlibs_crc32():
    """commit.crc32 (ISA-L's when installed) must give zlib's CRC-32: files written with either
    verify with the other (the format records zlib's checksum)."""
    rng = np.random.default_rng(5)
    for size in (0, 1, 7, 4096, 1 << 20):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert commit.crc32(data) == zlib.crc32(data)
        assert commit.crc32(data[size // 2 :], commit.crc32(data[: size // 2])) == zlib.crc32(data)


def _json_bytes(value) -> np.ndarray:
    return np.frombuffer(json.dumps(value).encode(), dtype=np.uint8).copy()


@pytest.mark.parametrize("which", ["repeated_term", "deeply_nested_ids"])
def test_checksummed_but_malformed_names_are_refused_and_rebuilt(saved, which, caplog):
    """A vocabulary holding a term twice (term ids are positions: the dict would shadow one id,
    and its postings would never be found) and an ids array nested past the JSON parser's
    recursion limit are refused at open, as any inconsistent array is (found by a review probe:
    0 hits for the shadowed term; a 400 'nested too deeply' on every search)."""
    path, folder, queries, answers = saved

    def change(arrays, desc):
        if which == "repeated_term":
            _, vocab_ref, _ = desc["keyword"][0]
            terms = json.loads(arrays[vocab_ref].tobytes())
            arrays[vocab_ref] = _json_bytes([*terms[:-1], terms[0]])
        else:
            arrays[desc["ids"]] = np.frombuffer(b"[" * 5000 + b"]" * 5000, dtype=np.uint8).copy()

    _rewrite_with(folder, change)
    with caplog.at_level(logging.WARNING, logger="scholar_es.engine"):
        got = _answers_of_a_new_engine(path, queries)
    assert got == answers
    assert "rebuilding from SQLite" in caplog.text, caplog.text
