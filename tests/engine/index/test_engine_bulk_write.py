"""The bulk write path: orjson parsing and serializing pinned to the json path they replace,
batched SQLite writes, Elasticsearch's delete versions, and the indexer's embed-ahead thread."""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from elasticsearch import BadRequestError, NotFoundError, helpers
from elasticsearch.serializer import JsonSerializer

from scholar_es.engine import xcontent
from scholar_es.engine.analysis.analyzers import get_analyzer
from scholar_es.engine.errors import EsError
from scholar_es.engine.index import store as store_mod
from scholar_es.engine.rest.client_json import EngineJsonSerializer

REPO = Path(__file__).resolve().parents[3]

# --- request parsing: orjson path == json path ---------------------------------------------------

TEXTS = [
    '{"a": 1, "b": [1.5, -0.0, -0, 1e5, 1E+5, 1e-5, 5e-324, 0.1], "c": null, "d": true}',
    '{"a": 1, "a": 2, "b": 3}',  # duplicate keys: the last value, the first position
    '{"b": 1, "a": 2, "b": 3}',
    "[1, 12345678901234567890]",  # beyond 64 bits: orjson would give a float
    "-9223372036854775809",
    "18446744073709551615",
    "[1234567890123456789.5, 1234567890123456789e2]",
    "1" * 5000,  # over Jackson's number length
    "0." + "1" * 1200,
    "1e400",  # beyond the double range: refused
    "-1e400",
    "1e-400",
    "[NaN]",
    "[Infinity]",
    "[-Infinity]",
    '"\\ud800"',  # a lone surrogate escape: the json path accepts it
    '"\\ud83d\\ude00"',
    '"\ud800"',  # a lone surrogate in the text itself
    '"\\u0000 \u00e9 \u4e2d"',
    "\ufeff{}",
    "",
    "   ",
    "{",
    '{"a": }',
    "[1,]",
    "01",
    "+1",
    ".5",
    "1 2",
    '"\x01"',
    "[" * 1001 + "]" * 1001,  # past Jackson's nesting depth
    "[" * 900 + "]" * 900,
    '{"x": "' + "9" * 30 + '"}',  # digits inside a string: the slow path, same answer
]


def outcome(fn, text):
    try:
        return "ok", repr(fn(text))
    except EsError as e:
        return "error", (e.status, e.type, e.reason)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_loads_answers_as_the_json_path(text):
    assert outcome(xcontent.loads, text) == outcome(_json_path, text)


def _json_path(text):
    # xcontent.loads without its orjson step: the nesting check, then loads_json
    if text.count("[") + text.count("{") > xcontent.MAX_NESTING_DEPTH:
        depth = xcontent.nesting_depth(text)
        if depth > xcontent.MAX_NESTING_DEPTH:
            raise xcontent.x_content_parse_error(
                f"Document nesting depth ({depth}) exceeds the maximum allowed ({xcontent.MAX_NESTING_DEPTH}, "
                "from `StreamReadConstraints.getMaxNestingDepth()`)"
            )
    return xcontent.loads_json(text)


def test_loads_reads_floats_as_the_json_path():
    rnd = random.Random(16)
    texts = []
    for _ in range(20000):
        k = rnd.random()
        if k < 0.4:
            v = struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0]
            if v != v or v in (float("inf"), float("-inf")):
                continue
            texts.append(repr(v))
        elif k < 0.7:
            digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 25)))
            texts.append(f"{rnd.randint(0, 10**6)}.{digits}e{rnd.randint(-320, 300)}")
        else:
            texts.append(repr(float(np.float32(rnd.gauss(0, 0.05)))))
    body = "[" + ", ".join(texts) + "]"
    assert repr(xcontent.loads(body)) == repr(_json_path(body))


def test_number_risk_flags_integers_beyond_18_digits_only():
    assert xcontent.number_risk(b"[1, 1234567890123456789]")
    assert xcontent.number_risk(b"1234567890123456789")
    assert xcontent.number_risk(b"-1234567890123456789")
    assert xcontent.number_risk(b"9" * 80)
    assert not xcontent.number_risk(b"[123456789012345678, 0.00012345678901234567, 1234567890123456789.5]")
    assert not xcontent.number_risk(b"[1234567890123456789e5]")


# --- client serializer ------------------------------------------------------------------------


def _parsed(raw: bytes):
    return json.loads(raw, parse_constant=lambda c: ("constant", c))


@pytest.mark.parametrize(
    "body",
    [
        {"a": 1, "b": [1.5, 0.1, 1e-5], "c": None, "d": "é中"},
        {"v": float("nan")},  # json writes NaN (the engine refuses it); orjson would write null
        {"v": [0.5, float("inf")]},
        {"n": 10**30},
        {"s": "\ud800"},
        {1: "int key"},
        {"f": np.float32(0.1), "a": np.arange(3, dtype=np.float32), "i": np.int64(7)},
        {"t": dt.datetime(2024, 1, 2, 3, 4, 5)},
        {"text": "nullable"},
    ],
    ids=range(9),
)
def test_serializer_writes_what_json_serializer_writes(body):
    ours, plain = EngineJsonSerializer().dumps(body), JsonSerializer().dumps(body)
    assert _parsed(ours) == _parsed(plain)


def test_serializer_reads_big_integers_exactly():
    ser = EngineJsonSerializer()
    assert ser.loads(b'{"n": 123456789012345678901234567890, "f": 0.1}') == {
        "n": 123456789012345678901234567890,
        "f": 0.1,
    }
    assert ser.loads(b"") is None


def test_nan_in_a_document_is_refused_not_dropped(tmp_engine):
    tmp_engine.indices.create(index="n", mappings={"properties": {"x": {"type": "double"}}})
    with pytest.raises(BadRequestError) as e:
        tmp_engine.index(index="n", id="1", document={"x": float("nan")})
    assert "Non-standard token 'NaN'" in str(e.value)


# --- vectors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vector", "reason"),
    [
        ([0.5, 1e39, 0.5], "[dense_vector] only supports finite float values, got [1e+39]"),
        ([0.5, 10**400, 1.0], "[dense_vector] only supports finite float values, got [1" + "0" * 39 + "]"),
        ([0.5, True, 1.0], "expected an array of numbers"),
        ([0.5, "1.0", 1.0], "expected an array of numbers"),
    ],
)
def test_vector_refusals_keep_their_messages(tmp_engine, vector, reason):
    tmp_engine.indices.create(index="v", mappings={"properties": {"v": {"type": "dense_vector", "dims": 3}}})
    r = tmp_engine.bulk(operations=[{"index": {"_index": "v", "_id": "1"}}, {"v": vector}])
    assert r["errors"] and reason in r["items"][0]["index"]["error"]["reason"]


def test_vectors_written_in_bulk_are_searchable(tmp_engine):
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((40, 8)).astype(np.float32)
    tmp_engine.indices.create(
        index="v",
        mappings={"properties": {"v": {"type": "dense_vector", "dims": 8, "similarity": "l2_norm"}}},
    )
    ok = sum(
        ok
        for ok, _ in helpers.streaming_bulk(
            tmp_engine,
            ({"_index": "v", "_id": str(i), "v": vecs[i].tolist()} for i in range(40)),
            chunk_size=7,
        )
    )
    assert ok == 40
    tmp_engine.indices.refresh(index="v")
    hit = tmp_engine.search(
        index="v", knn={"field": "v", "query_vector": vecs[11].tolist(), "k": 1, "num_candidates": 40}
    )
    assert hit["hits"]["hits"][0]["_id"] == "11"


# --- analysis cache ---------------------------------------------------------------------------


def test_repeated_texts_analyze_alike_and_callers_cannot_change_the_cache():
    english = get_analyzer("english", None)
    text = "The Running Dogs were running quickly"
    first = english(text)
    first.append("mutated")
    assert english(text) == ["run", "dog", "were", "run", "quickli"] == english(text)


# --- versions (Elasticsearch's internal versioning) ---------------------------------------------


def test_delete_of_a_missing_id_is_version_1_not_found(tmp_engine):
    # InternalEngine.planDeletionAsPrimary: no version -> VersionType.INTERNAL.updateVersion(NOT_FOUND) = 1
    tmp_engine.indices.create(index="d")
    with pytest.raises(NotFoundError) as e:
        tmp_engine.delete(index="d", id="nope")
    assert e.value.body["result"] == "not_found" and e.value.body["_version"] == 1
    r = tmp_engine.bulk(operations=[{"delete": {"_index": "d", "_id": "gone"}}])
    item = r["items"][0]["delete"]
    assert (item["status"], item["result"], item["_version"]) == (404, "not_found", 1)


def test_a_document_written_again_after_its_delete_continues_its_version(tmp_engine):
    # delete/10_basic.yml: index -> _version 1, delete -> _version 2; the delete's version stays
    # for index.gc_deletes (60 s), so the next index is version 3, result created
    tmp_engine.indices.create(index="d")
    assert tmp_engine.index(index="d", id="1", document={"foo": "bar"})["_version"] == 1
    assert tmp_engine.delete(index="d", id="1")["_version"] == 2
    again = tmp_engine.index(index="d", id="1", document={"foo": "baz"})
    assert (again["result"], again["_version"]) == ("created", 3)
    assert tmp_engine.get(index="d", id="1")["_version"] == 3


def test_one_bulk_request_writing_an_id_several_times(tmp_engine):
    tmp_engine.indices.create(index="d")
    r = tmp_engine.bulk(
        operations=[
            {"index": {"_index": "d", "_id": "b"}},
            {"f": 1},
            {"index": {"_index": "d", "_id": "b"}},
            {"f": 2},
            {"delete": {"_index": "d", "_id": "b"}},
            {"delete": {"_index": "d", "_id": "b"}},
            {"index": {"_index": "d", "_id": "b"}},
            {"f": 3},
            {"index": {"_index": "d", "_id": "c"}},
            {"f": 4},
        ]
    )
    got = [(k, v["status"], v["result"], v["_version"]) for it in r["items"] for k, v in it.items()]
    assert got == [
        ("index", 201, "created", 1),
        ("index", 200, "updated", 2),
        ("delete", 200, "deleted", 3),
        ("delete", 404, "not_found", 4),
        ("index", 201, "created", 5),
        ("index", 201, "created", 1),
    ]
    seqs = [it["index"]["_seq_no"] for it in r["items"] if "index" in it]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    tmp_engine.indices.refresh(index="d")
    hits = tmp_engine.search(index="d", sort=["_doc"])["hits"]["hits"]
    assert [(h["_id"], h["_source"]) for h in hits] == [("b", {"f": 3}), ("c", {"f": 4})]
    # a seq given to a row that a later op of the same request replaced is not given again
    later = tmp_engine.index(index="d", id="e", document={"f": 5})
    assert later["_seq_no"] > max(seqs)


def test_tombstones_expire_after_gc_deletes(tmp_engine, monkeypatch):
    tmp_engine.indices.create(index="d")
    tmp_engine.index(index="d", id="1", document={"f": 1})
    tmp_engine.delete(index="d", id="1")
    monkeypatch.setattr(store_mod, "GC_DELETES_SECONDS", -1.0)  # every tombstone is past it now
    assert tmp_engine.index(index="d", id="1", document={"f": 2})["_version"] == 1


# --- indexer: embedding ahead of the writes ---------------------------------------------------


@pytest.fixture(scope="module")
def embedder():
    from indexer.embedder import Embedder

    return Embedder()


def _index(path, embedder, ahead):
    from indexer.pipeline import IndexRun
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(path)
    summary = IndexRun(es, embedder, embed_ahead=ahead).run([REPO / "scripts" / "demo_papers.jsonl"], "jsonl")
    return es, summary


def test_embedding_ahead_writes_what_the_sequential_path_writes(tmp_path, embedder):
    seq_es, seq = _index(tmp_path / "seq", embedder, 0)
    par_es, par = _index(tmp_path / "par", embedder, 2)
    try:
        assert (par.papers, par.chunks, par.rejected) == (seq.papers, seq.chunks, seq.rejected) != (0, 0, 0)
        q = embedder.encode(["transformer attention for parsing"])[0].tolist()
        answers = []
        for es in (seq_es, par_es):
            r = es.search(
                index="chunks",
                knn={"field": "vector", "query_vector": q, "k": 10, "num_candidates": 100},
                size=10,
            )
            answers.append([(h["_id"], round(h["_score"], 6), h["_source"]) for h in r["hits"]["hits"]])
        assert answers[0] == answers[1] and answers[0]
        assert not [t for t in threading.enumerate() if t.name == "scholar-es-embed-ahead"]
    finally:
        seq_es.close()
        par_es.close()


class _Fails:
    """An embedder that fails on its second batch (a model error mid-run)."""

    name, dims, encode_seconds = "fails-8", 8, 0.0

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("model failed on batch 2")
        return np.ones((len(texts), 8), dtype=np.float32) / np.sqrt(8)


def test_an_error_while_embedding_ahead_reaches_the_caller_with_its_place(tmp_path):
    from indexer.pipeline import EMBED_BATCH, IndexRun
    from scholar_es.engine.rest.transport import embedded_client

    src = tmp_path / "p.jsonl"
    src.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "title": f"paper {i}", "abstract": "words " * 20}) + "\n"
            for i in range(3 * EMBED_BATCH)
        )
    )
    es = embedded_client(tmp_path / "e")
    try:
        with pytest.raises(RuntimeError, match="model failed on batch 2") as e:
            IndexRun(es, _Fails(), embed_ahead=2).run([src], "jsonl")
        frames = [f.name for f in e.traceback]
        assert "encode" in frames and "_embed" in frames  # where it was raised, in the thread
    finally:
        es.close()
    assert not [t for t in threading.enumerate() if t.name == "scholar-es-embed-ahead"]


def test_closing_the_actions_stops_the_thread(tmp_path):
    from indexer.models import Paper
    from indexer.pipeline import IndexRun

    embedder = _Fails()
    embedder.calls = -(10**6)  # never reaches its failing call here
    run = IndexRun(None, embedder, embed_ahead=1)
    run._fresh = True  # a fresh index: no look-up of earlier chunks (no client needed)
    items = ((Paper(id=f"p{i}", title=f"t {i}", abstract="a b c"), "src") for i in range(10_000))
    gen = run.actions(items, {"chunks": "c", "papers": "p"})
    first = next(gen)
    assert first["_index"] == "c"
    gen.close()
    assert not [t for t in threading.enumerate() if t.name == "scholar-es-embed-ahead"]


@pytest.mark.parametrize(
    "source",
    [
        {"a": [1, 2.5, 1e-05, -0.0], "b": 'é\n"', "c": {"d": None}},
        {"n": 10**30},
        {"s": "\ud800"},
        {"f": float("nan")},
        {"t": "nullable", "u": True},
    ],
    ids=range(5),
)
def test_stored_source_text_reads_back_as_json_dumps(source):
    ours = xcontent.dumps_text(source)
    assert isinstance(ours, str)
    assert repr(json.loads(ours)) == repr(json.loads(json.dumps(source, ensure_ascii=False)))


def test_big_integers_in_a_bulk_body_keep_every_digit(tmp_engine):
    # one scan of the whole NDJSON body finds them (node._decode_body), and the client reads them back
    tmp_engine.indices.create(index="b", mappings={"dynamic": False})
    big = 123456789012345678901234567890
    r = tmp_engine.bulk(
        operations=[
            {"index": {"_index": "b", "_id": "1"}},
            {"n": 1.5},
            {"index": {"_index": "b", "_id": "2"}},
            {"n": big},
        ]
    )
    assert not r["errors"]
    assert tmp_engine.get(index="b", id="2")["_source"] == {"n": big}
    assert tmp_engine.get(index="b", id="1")["_source"] == {"n": 1.5}
