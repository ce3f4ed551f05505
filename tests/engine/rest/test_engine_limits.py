"""Issue 12: hostile requests get Elasticsearch's limits and errors, never a hang, a traceback or a 500.

The console tests drive the real ``scholar-es console`` process through a pipe (one request in, one
JSON line out) and check, after every hostile request, that the next request is still answered.
Expected types, reasons and setting names come from Elasticsearch/Jackson/Lucene source (see
docs/es-semantics.md section 14).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from elasticsearch import ApiError, BadRequestError

from scholar_es.engine.analysis.tokenizer import standard_tokenize
from scholar_es.engine.rest.console import run_console
from scholar_es.engine.rest.handler import _ROUTES, handle, route

REPO = Path(__file__).resolve().parents[3]
SCHOLAR_ES = Path(sys.executable).with_name("scholar-es")


def _reader(stream, q: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        q.put(line)
    q.put(None)


class Console:
    """``scholar-es console --es DIR`` as a subprocess, driven one request at a time."""

    def __init__(self, engine_dir: Path) -> None:
        cmd = (
            [str(SCHOLAR_ES)]
            if SCHOLAR_ES.exists()
            else [sys.executable, "-c", "from scholar_es.cli import main; main()"]
        )
        self.proc = subprocess.Popen(
            [*cmd, "console", "--es", str(engine_dir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            cwd=str(REPO),
        )
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        self._threads = [
            threading.Thread(target=_reader, args=(self.proc.stdout, self.lines), daemon=True),
            threading.Thread(target=self._drain_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    def _drain_stderr(self) -> None:
        for line in iter(self.proc.stderr.readline, ""):
            self.stderr.append(line)

    def ask(self, request: str, timeout: float = 120) -> dict:
        self.proc.stdin.write(request + "\n\n")
        self.proc.stdin.flush()
        line = self.lines.get(timeout=timeout)
        assert line is not None, "".join(self.stderr)
        return json.loads(line)

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(timeout=120)
        for t in self._threads:  # they end at the pipes' end of file
            t.join(10)
        self.proc.stdout.close()  # not left to the garbage collector (a ResourceWarning elsewhere)
        self.proc.stderr.close()
        return code


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    engine_dir = tmp_path_factory.mktemp("limits") / "eng"
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(engine_dir)  # --es needs an existing engine
    es.indices.create(index="t", mappings={"properties": {"t": {"type": "text"}, "n": {"type": "integer"}}})
    es.index(index="t", id="1", document={"t": "apple pie", "n": 1}, refresh=True)
    es.close()
    c = Console(engine_dir)
    yield c
    c.close()
    assert "Traceback" not in "".join(c.stderr)


def _error(resp: dict, status: int, type_: str, *needles: str) -> None:
    assert resp.get("status") == status, resp
    err = resp["error"]
    assert err["type"] == type_, err
    assert err["root_cause"][0]["type"] == type_
    for needle in needles:
        assert needle in err["reason"], err["reason"]


def _still_answers(console: Console) -> None:
    assert console.ask("GET t/_count")["count"] >= 1


def test_console_10000_level_nesting(console):
    body = '{"query": ' + '{"bool": {"must": [' * 10_000 + '{"match_all": {}}' + "]}}" * 10_000 + "}"
    _error(
        console.ask(f"GET t/_search\n{body}"),
        400,
        "x_content_parse_exception",
        "Document nesting depth (30003) exceeds the maximum allowed (1000",
        "getMaxNestingDepth",
    )
    _still_answers(console)
    array = "[" * 10_000 + "]" * 10_000
    _error(console.ask(f'PUT t/_doc/deep\n{{"a": {array}}}'), 400, "x_content_parse_exception", "(10001)")
    _still_answers(console)


def test_console_5000_digit_integer(console):
    _error(
        console.ask('GET t/_search\n{"size": ' + "7" * 5000 + "}"),
        400,
        "x_content_parse_exception",
        "Number value length (5000) exceeds the maximum allowed (1000",
        "getMaxNumberLength",
    )
    _still_answers(console)
    doc = '{"n": ' + "1" * 5000 + "}"
    _error(console.ask(f"PUT t/_doc/big\n{doc}"), 400, "x_content_parse_exception", "(5000)")
    _still_answers(console)


@pytest.mark.parametrize("boost", ["NaN", '"NaN"', '"Infinity"', "1" + "0" * 400, "1e39", "-1e400"])
def test_console_non_finite_and_huge_boosts(console, boost):
    """Before: a NaN boost answered 200 with total 20 and no hits, 10**400 raised OverflowError."""
    resp = console.ask(
        f'GET t/_search\n{{"query": {{"match": {{"t": {{"query": "apple", "boost": {boost}}}}}}}}}'
    )
    assert resp["status"] == 400, resp
    assert resp["error"]["type"] in ("parsing_exception", "x_content_parse_exception")
    if resp["error"]["type"] == "parsing_exception":
        assert "[match] [boost] must be a finite number" in resp["error"]["reason"]
    _still_answers(console)


def test_console_huge_weight_and_range_bound(console):
    big = "1" + "0" * 400
    resp = console.ask(
        'GET t/_search\n{"query": {"function_score": {"query": {"match_all": {}}, '
        f'"functions": [{{"weight": {big}}}]}}}}}}'
    )
    _error(resp, 400, "parsing_exception", "[function_score] [weight] must be a finite number")
    resp = console.ask(f'GET t/_search\n{{"query": {{"range": {{"n": {{"gte": {big}}}}}}}}}')
    _error(resp, 400, "query_shard_exception", "field [n] of type [integer]")
    _still_answers(console)


def test_console_nested_sections_over_100_items(console):
    """Before: never returned (100**5 section passes)."""
    template = "{{#items}}" * 5 + "{{.}}" + "{{/items}}" * 5
    body = {
        "source": '{"query": {"match_all": {}}, "size": "' + template + '"}',
        "params": {"items": list(range(100))},
    }
    _error(
        console.ask(f"GET t/_search/template\n{json.dumps(body)}"),
        400,
        "parse_exception",
        "Mustache template rendering exceeded [1000000]",
    )
    _still_answers(console)
    body = {
        "source": "{{#items}}{{#items}}{{#items}}xxxxxxxxxx{{/items}}{{/items}}{{/items}}",
        "params": body["params"],
    }
    _error(
        console.ask(f"GET _render/template\n{json.dumps(body)}"),
        400,
        "parse_exception",
        "Mustache script result size limit exceeded",
        "exceeds the size limit [1048576]",
    )
    _still_answers(console)


def test_console_2mb_single_word_query(console):
    """Before: 92 s in the tokenizer.  Lucene cuts the word into 255-char tokens: 7,844 SHOULD
    clauses, more than indices.query.bool.max_clause_count (1024)."""
    body = json.dumps({"query": {"match": {"t": "a" * 2_000_000}}})
    _error(
        console.ask(f"GET t/_search\n{body}", timeout=60),
        400,
        "too_many_clauses",
        "maxClauseCount is set to 1024",
        "indices.query.bool.max_clause_count",
    )
    _still_answers(console)


def test_console_5000_field_document(console):
    """Before: 40,001 cache files and 8.7 s for every later write."""
    doc = json.dumps({f"f{i}": "x" for i in range(5000)})
    _error(
        console.ask(f"PUT t/_doc/wide\n{doc}"),
        400,
        "document_parsing_exception",
        "Limit of total fields [1000] has been exceeded while adding new fields [",
    )
    mapping = console.ask("GET t/_mapping")
    assert sorted(mapping["t"]["mappings"]["properties"]) == ["n", "t"]  # the refused doc added nothing
    assert console.ask('PUT t/_doc/2?refresh=true\n{"t": "banana"}')["result"] == "created"
    _still_answers(console)


def test_console_bytes_that_are_not_utf8(tmp_path):
    """Before: UnicodeDecodeError traceback, and the requests after it were never answered."""
    from scholar_es.engine.rest.transport import embedded_client

    embedded_client(tmp_path / "eng").indices.create(index="x")
    cmd = (
        [str(SCHOLAR_ES)]
        if SCHOLAR_ES.exists()
        else [sys.executable, "-c", "from scholar_es.cli import main; main()"]
    )
    proc = subprocess.run(
        [*cmd, "console", "--es", str(tmp_path / "eng")],
        input=b'PUT x/_doc/1\n{"t": "\xff\xfe"}\n\nGET /x\xff\n\nGET x/_count\n',
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    lines = [json.loads(line) for line in proc.stdout.decode("utf-8").splitlines()]
    assert b"Traceback" not in proc.stderr, proc.stderr
    assert [r.get("status") for r in lines[:2]] == [400, 400]
    assert "line 2 is not valid UTF-8" in lines[0]["error"]["reason"]
    assert lines[2]["count"] == 0  # nothing was sent, and the next request was answered
    assert proc.returncode == 1


# --- in process: the same limits through the client --------------------------------------------


@pytest.fixture()
def es(tmp_engine):
    tmp_engine.indices.create(
        index="t", mappings={"properties": {"t": {"type": "text"}, "u": {"type": "text"}}}
    )
    tmp_engine.index(index="t", id="1", document={"t": "apple pie"}, refresh=True)
    return tmp_engine


def _bad(call) -> dict:
    with pytest.raises(ApiError) as e:
        call()
    return {"status": e.value.meta.status, **e.value.body}


def test_total_fields_limit_on_create_and_put_mapping(es):
    many = {f"f{i}": {"type": "keyword"} for i in range(1001)}
    _error(
        _bad(lambda: es.indices.create(index="wide", mappings={"properties": many})),
        400,
        "illegal_argument_exception",
        "Limit of total fields [1000] has been exceeded",
    )
    del many["f1000"]
    es.indices.create(index="wide", mappings={"properties": many})  # exactly 1000 is allowed
    _error(
        _bad(lambda: es.indices.put_mapping(index="wide", properties={"one_more": {"type": "keyword"}})),
        400,
        "illegal_argument_exception",
        "Limit of total fields [1000] has been exceeded",
    )
    # multi-fields count: 600 new strings are 600 text + 600 keyword sub-fields
    _error(
        _bad(lambda: es.index(index="t", id="2", document={f"s{i}": "x" for i in range(600)})),
        400,
        "illegal_argument_exception",
        "Limit of total fields [1000] has been exceeded",
    )
    assert sorted(es.indices.get_mapping(index="t")["t"]["mappings"]["properties"]) == ["t", "u"]


def test_mapping_depth_limit(es):
    doc: dict = {"leaf": 1}
    for _ in range(25):
        doc = {"o": doc}
    _error(
        _bad(lambda: es.index(index="t", id="deep", document=doc)),
        400,
        "document_parsing_exception",
        "Limit of mapping depth [20] has been exceeded due to object field [o.o.o",
    )


def test_max_clause_count(es):
    words = " ".join(f"w{i}" for i in range(1025))
    _error(_bad(lambda: es.search(index="t", query={"match": {"t": words}})), 400, "too_many_clauses", "1024")
    ok = " ".join(f"w{i}" for i in range(1024))
    assert es.search(index="t", query={"match": {"t": ok}})["hits"]["total"]["value"] == 0
    half = " ".join(f"w{i}" for i in range(600))
    _error(
        _bad(lambda: es.search(index="t", query={"multi_match": {"query": half, "fields": ["t", "u"]}})),
        400,
        "too_many_nested_clauses",
        "Query contains too many nested clauses; maxClauseCount is set to 1024",
    )
    should = [{"term": {"t": f"w{i}"}} for i in range(1025)]
    _error(_bad(lambda: es.search(index="t", query={"bool": {"should": should}})), 400, "too_many_clauses")


def test_max_terms_count(es):
    _error(
        _bad(lambda: es.search(index="t", query={"terms": {"t": ["x"] * 65_537}})),
        400,
        "illegal_argument_exception",
        "The number of terms [65537] used in the Terms Query request has exceeded the allowed maximum of [65536]",
        "[index.max_terms_count]",
    )
    assert es.search(index="t", query={"terms": {"t": ["apple"] * 65_536}})["hits"]["total"]["value"] == 1


def test_an_infinite_script_score_is_written_as_jackson_writes_it(es):
    """ScriptScoreQuery refuses negative and NaN scores only; Jackson writes Infinity as a string."""
    query = {
        "script_score": {
            "query": {"match_all": {}},
            "script": {"source": "params.a * 10", "params": {"a": 1e308}},
        }
    }
    resp = es.perform_request(
        "POST",
        "/t/_search",
        body={"query": query},
        headers={"accept": "application/json", "content-type": "application/json"},
    )
    assert resp.body["hits"]["hits"][0]["_score"] == "Infinity"


HOSTILE = [None, [], {}, "x", -1, True, [[1]], {"a": 1}, "NaN", 10**400, 1e308, ["t", 1], "t^x"]
BODIES = [
    {"query": {"match": {"t": {"query": "apple", "operator": "and", "boost": 2}}}},
    {"query": {"multi_match": {"query": "apple", "fields": ["t^2", "u"], "tie_breaker": 0.3}}},
    {"query": {"bool": {"must": [{"exists": {"field": "t"}}], "must_not": [{"ids": {"values": ["3"]}}]}}},
    {
        "query": {
            "function_score": {
                "query": {"match": {"t": "apple"}},
                "functions": [
                    {"weight": 2},
                    {"field_value_factor": {"field": "t", "factor": 1.2, "missing": 1}},
                ],
                "max_boost": 10,
            }
        }
    },
    {"query": {"match_all": {}}, "size": 2, "_source": ["t"], "track_total_hits": 10, "min_score": 0.1},
    {"query": {"match": {"t": "apple"}}, "collapse": {"field": "t", "inner_hits": {"name": "x", "size": 1}}},
    {
        "retriever": {
            "rrf": {"retrievers": [{"standard": {"query": {"match_all": {}}}}], "rank_window_size": 5}
        }
    },
]


def _paths(obj, path=()):
    yield path
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else []
    for k, v in items:
        yield from _paths(v, (*path, k))


def _replace(obj, path, value):
    if not path:
        return value
    if isinstance(obj, dict):
        return {k: _replace(v, path[1:], value) if k == path[0] else v for k, v in obj.items()}
    return [_replace(v, path[1:], value) if i == path[0] else v for i, v in enumerate(obj)]


def test_malformed_values_anywhere_are_400s_never_500s(tmp_path):
    """Every leaf of a few valid bodies replaced by hostile values: each answer is a 200 or a 4xx
    with an Elasticsearch type (the old catch-all turned these into 400 "malformed request";
    without it they would now surface as 500 internal_error), and a 200 is valid JSON."""
    from scholar_es.engine.index.indices import open_engine

    engine = open_engine(tmp_path)
    handle(
        engine,
        "PUT",
        "/t",
        {},
        {"mappings": {"properties": {"t": {"type": "text"}, "u": {"type": "keyword"}}}},
    )
    handle(engine, "PUT", "/t/_doc/1", {"refresh": "true"}, {"t": "apple pie", "u": "x"})
    checked = 0
    for body in BODIES:
        for path in list(_paths(body)):
            for value in HOSTILE:
                status, out = handle(engine, "POST", "/t/_search", {}, _replace(body, path, value))
                checked += 1
                assert status == 200 or 400 <= status < 500, (path, value, out)
                if status != 200:
                    assert out["error"]["type"] != "internal_error", (path, value, out)
                json.dumps(out, allow_nan=False)
    assert checked > 500


OTHER_REQUESTS = [
    (
        "PUT",
        "/idx",
        {
            "settings": {
                "analysis": {
                    "analyzer": {"my": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase"]}}
                },
                "index": {"similarity": {"default": {"type": "BM25", "k1": 1.2, "b": 0.5}}},
            },
            "mappings": {
                "_source": {"excludes": ["v"]},
                "properties": {
                    "t": {"type": "text", "analyzer": "my", "fields": {"k": {"type": "keyword"}}},
                    "v": {"type": "dense_vector", "dims": 2},
                    "o": {"properties": {"n": {"type": "long"}}},
                },
            },
            "aliases": {"al": {"is_write_index": True}},
        },
    ),
    ("PUT", "/idx/_doc/1", {"t": "hello world", "v": [1, 2], "o": {"n": 3}}),
    (
        "POST",
        "/idx/_bulk",
        [{"index": {"_id": "2", "_index": "idx"}}, {"t": "a b"}, {"delete": {"_id": "1"}}],
    ),
    ("POST", "/_msearch", [{"index": "idx"}, {"query": {"match_all": {}}}, {"index": ["idx"]}, {"size": 1}]),
    ("POST", "/_aliases", {"actions": [{"add": {"index": "idx", "alias": "a2", "is_write_index": False}}]}),
    ("PUT", "/_scripts/s1", {"script": {"lang": "mustache", "source": {"query": {"match": {"t": "{{q}}"}}}}}),
    ("POST", "/idx/_search/template", {"id": "s1", "params": {"q": "hello"}}),
    ("POST", "/_render/template", {"source": '{"size": {{n}}}', "params": {"n": 1}}),
    ("PUT", "/idx/_mapping", {"properties": {"new": {"type": "keyword"}}}),
    ("PUT", "/idx/_alias/a3", {"is_write_index": True}),
]


@pytest.mark.parametrize(
    ("method", "path", "body"), OTHER_REQUESTS, ids=[f"{m} {p}" for m, p, _ in OTHER_REQUESTS]
)
def test_malformed_values_in_other_requests_are_never_500s(tmp_path, method, path, body):
    from scholar_es.engine.index.indices import open_engine

    engine = open_engine(tmp_path)
    setup = OTHER_REQUESTS[0]
    for value_path in list(_paths(body)):
        for value in HOSTILE:
            if path != "/idx":
                handle(engine, *setup[:2], {}, setup[2])
            status, out = handle(engine, method, path, {}, _replace(body, value_path, value))
            assert status < 500, (value_path, value, out)
            json.dumps(out, allow_nan=False)
            handle(engine, "DELETE", "/idx", {}, None)


# --- unexpected exceptions: 500 internal_error, never a 400, never a traceback in the body ---------


@pytest.fixture()
def buggy_route():
    """A route whose handler has a bug (a KeyError), registered for the test only."""
    before = len(_ROUTES)

    @route("GET", "/_test_bug")
    def _bug(engine, params, body):
        return 200, {}["missing"]

    yield
    del _ROUTES[before:]


def test_an_engine_bug_is_a_500_naming_the_request(tmp_engine, buggy_route, caplog):
    with pytest.raises(ApiError) as e:
        tmp_engine.perform_request("GET", "/_test_bug", headers={"accept": "application/json"})
    assert e.value.meta.status == 500
    err = e.value.body["error"]
    assert err["type"] == "internal_error"
    assert "[GET /_test_bug]" in err["reason"] and "KeyError" in err["reason"]
    assert "Traceback" not in json.dumps(e.value.body)
    assert any("Traceback" in (r.exc_text or "") or r.exc_info for r in caplog.records)


def test_console_goes_on_after_an_engine_bug(tmp_engine, buggy_route):
    import io

    out = io.StringIO()
    failures = run_console(tmp_engine, io.StringIO("GET _test_bug\n\nGET /\n"), out)
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert failures == 1
    assert first["status"] == 500 and first["error"]["type"] == "internal_error"
    assert second["tagline"] == "You Know, for Search"


# --- the tokenizer keeps Lucene's max_token_length behaviour on long input ---------------------


def test_long_words_split_at_max_token_length():
    assert standard_tokenize("a" * 600) == ["a" * 255, "a" * 255, "a" * 90]
    assert [len(t) for t in standard_tokenize("ab1" * 200, 100)] == [100] * 6
    # an emoji forces the token-by-token path: each ExtendNumLet start's buffer must reach the letter
    text = "\U0001f600" + "_" * 300 + "a"
    assert standard_tokenize(text) == ["\U0001f600", "_" * 254 + "a"]
    # a ZWJ run before an emoji: a ZWJ start succeeds once its buffer (255 UTF-16 units) holds the emoji
    assert standard_tokenize("# " + "\u200d" * 300 + "\U0001f600") == ["\u200d" * 253 + "\U0001f600"]


def test_bad_request_types_are_unchanged(es):
    with pytest.raises(BadRequestError) as e:
        es.search(index="t", body={"min_score": "x"})
    assert e.value.body["error"]["type"] == "parsing_exception"
