"""The Kibana-style console: parsing, one JSON line per response, errors, NDJSON bodies, pipes,
and the same input against an HTTP endpoint (the client's real HTTP transport)."""

from __future__ import annotations

import io
import json
import os
import queue
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from scholar_es.engine.rest.console import run_console

REPO = Path(__file__).resolve().parents[3]

SCRIPT = '''# create an index
PUT books
{"mappings": {"properties": {"title": {"type": "text"}, "year": {"type": "integer"}}}}

// bulk: NDJSON body
POST books/_bulk?refresh=true
{"index": {"_id": "1"}}
{"title": "The quick brown fox", "year": 2001}
{"index": {"_id": "2"}}
{"title": "Lazy dogs", "year": 2005}

GET books/_search
{
  "query": {
    "match": {"title": "fox"}
  }
}
GET books/_count
GET /books/_doc/2

POST _msearch
{"index": "books"}
{"query": {"match_all": {}}, "size": 0}
{"index": "nope"}
{"query": {"match_all": {}}}

GET books/_search
{"query": {"fuzzy": {"title": "fox"}}}

HEAD books
HEAD nope
DELETE books/_doc/1
GET books/_search?size=1
{"query": {"match": {"title": """brown
fox"""}}}
'''


def run(es, text: str) -> tuple[list, int]:
    out = io.StringIO()
    failures = run_console(es, io.StringIO(text), out)
    lines = out.getvalue().splitlines()
    return [json.loads(line) for line in lines], failures


def test_script(tmp_engine):
    responses, failures = run(tmp_engine, SCRIPT)
    assert len(responses) == 11
    create, bulk, search, count, get, msearch, bad, head, head404, delete, last = responses
    assert create == {"acknowledged": True, "shards_acknowledged": True, "index": "books"}
    assert bulk["errors"] is False and len(bulk["items"]) == 2
    assert [h["_id"] for h in search["hits"]["hits"]] == ["1"]
    assert count["count"] == 2
    assert get["_source"] == {"title": "Lazy dogs", "year": 2005}
    assert msearch["responses"][0]["hits"]["total"]["value"] == 2
    assert msearch["responses"][1]["status"] == 404
    assert bad["status"] == 400 and bad["error"]["type"] == "parsing_exception"
    assert "[fuzzy]" in bad["error"]["reason"]
    assert head == {"status": 200} and head404 == {"status": 404}
    assert delete["result"] == "deleted"
    assert last["hits"]["hits"] == []  # doc 1 (the fox) is gone; the triple-quoted text was a JSON string
    assert failures == 2  # the fuzzy search and HEAD nope


def test_each_response_is_one_line_even_when_pretty(tmp_engine):
    out = io.StringIO()
    run_console(
        tmp_engine, io.StringIO('PUT x\n{"settings": {"number_of_shards": 1}}\nGET x/_mapping\n'), out
    )
    assert out.getvalue().count("\n") == 2


def test_error_shape_and_status(tmp_engine):
    (resp,), failures = run(tmp_engine, "GET missing/_search\n")
    assert failures == 1
    assert resp["status"] == 404
    assert resp["error"]["type"] == "index_not_found_exception"
    assert resp["error"]["reason"] == "no such index [missing]"
    assert resp["error"]["root_cause"][0]["type"] == "index_not_found_exception"


def test_invalid_json_is_reported_and_not_sent(tmp_engine):
    responses, failures = run(
        tmp_engine, 'PUT a\n{"mappings": \n\nPUT b\n{}\nPOST b/_bulk\n{"index": {}}\n{oops\n'
    )
    assert failures == 2 and len(responses) == 3
    assert responses[0]["error"]["type"] == "console_parse_exception" and responses[0]["status"] == 400
    assert "PUT a" in responses[0]["error"]["reason"]
    assert responses[1]["acknowledged"] is True
    assert (
        responses[2]["error"]["type"] == "console_parse_exception"
        and "line 2" in responses[2]["error"]["reason"]
    )
    assert not tmp_engine.indices.exists(index="a")


def test_stray_text_and_comments(tmp_engine):
    responses, failures = run(tmp_engine, "# only a comment\n\nthis is not a request\n\n// another\nGET /\n")
    assert failures == 1
    assert (
        responses[0]["error"]["type"] == "console_parse_exception"
        and "line 3" in responses[0]["error"]["reason"]
    )
    assert responses[1]["tagline"] == "You Know, for Search"


def test_requests_end_at_next_request_line_and_at_end_of_input(tmp_engine):
    responses, _ = run(tmp_engine, 'PUT i1\nPUT i2\n{"mappings": {}}\nget _cat/indices')
    assert [r.get("index") for r in responses[:2]] == ["i1", "i2"]
    assert sorted(row["index"] for row in responses[2]) == ["i1", "i2"]


def test_reads_from_an_iterable_of_lines(tmp_engine):
    out = io.StringIO()
    assert run_console(tmp_engine, ["PUT it\n", "\n", "HEAD it\n"], out) == 0
    assert [json.loads(x) for x in out.getvalue().splitlines()][1] == {"status": 200}


# --- driving the console through a pipe -----------------------------------------------------------


def _reader(stream, q: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        q.put(line)
    q.put(None)


def test_pipe_one_request_at_a_time(tmp_path):
    code = (
        "import sys\nfrom scholar_es.engine.rest.console import run_console\nfrom scholar_es.engine.rest.transport import embedded_client\n"
        f"sys.exit(min(run_console(embedded_client({str(tmp_path / 'eng')!r}), sys.stdin, sys.stdout), 1))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(REPO),
    )
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True)
    reader.start()

    def ask(request: str) -> dict:
        proc.stdin.write(request + "\n\n")  # a blank line ends the request: no need to close stdin
        proc.stdin.flush()
        line = lines.get(timeout=60)
        assert line is not None, proc.stderr.read()
        return json.loads(line)

    try:
        assert (
            ask('PUT pipe\n{"mappings": {"properties": {"n": {"type": "integer"}}}}')["acknowledged"] is True
        )
        for i in range(3):
            assert ask(f'PUT pipe/_doc/{i}?refresh=true\n{{"n": {i}}}')["result"] == "created"
            # the answer depends on the previous request: it really ran before this one was sent
            assert ask("GET pipe/_count")["count"] == i + 1
        assert ask('GET pipe/_search\n{"query": {"range": {"n": {"gte": 1}}}}')["hits"]["total"]["value"] == 2
        assert ask("GET nope/_search")["status"] == 404
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        reader.join(10)  # it ends at the pipe's end of file
        proc.stdout.close()  # not left to the garbage collector (a ResourceWarning elsewhere)
        proc.stderr.close()
    assert proc.returncode == 1  # one failed request


# --- the same input over HTTP (what a real cluster URL exercises) --------------------------------


class _EsOverHttp(BaseHTTPRequestHandler):
    """Serves engine.rest.handler.handle over HTTP, so the client's real HTTP transport (headers,
    compatibility mimetypes, NDJSON bodies) is exercised as against a cluster."""

    engine = None

    def _serve(self) -> None:
        from scholar_es.engine.rest.handler import handle

        parts = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        ctype = self.headers.get("content-type", "")
        body = None
        if raw:
            text = raw.decode()
            body = (
                [json.loads(x) for x in text.splitlines() if x.strip()]
                if "ndjson" in ctype
                else json.loads(text)
            )
        status, out = handle(self.engine, self.command, parts.path, dict(parse_qsl(parts.query)), body)
        data = b"" if out is None or self.command == "HEAD" else json.dumps(out).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("x-elastic-product", "Elasticsearch")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    def log_message(self, *args) -> None:
        pass


def _strip_took(obj):
    if isinstance(obj, dict):
        return {k: _strip_took(v) for k, v in obj.items() if k not in ("took", "uuid", "creation_date")}
    if isinstance(obj, list):
        return [_strip_took(v) for v in obj]
    return obj


def test_same_output_over_http(tmp_path):
    from elasticsearch import Elasticsearch

    from scholar_es.engine.index.indices import open_engine
    from scholar_es.engine.rest.transport import embedded_client

    handler = type("H", (_EsOverHttp,), {"engine": open_engine(tmp_path / "http")})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    es_http = Elasticsearch(f"http://127.0.0.1:{server.server_port}", request_timeout=30)
    try:
        over_http, failures_http = run(es_http, SCRIPT)
    finally:
        es_http.close()
        server.shutdown()
        server.server_close()  # the listening socket, not left to the garbage collector
    direct = embedded_client(tmp_path / "direct")
    try:
        embedded, failures = run(direct, SCRIPT)
    finally:
        direct.close()
    assert failures_http == failures == 2
    assert _strip_took(over_http) == _strip_took(embedded)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9"])
def test_unreachable_cluster_gives_an_error_line(url):
    from elasticsearch import Elasticsearch

    es = Elasticsearch(url, request_timeout=2, max_retries=0)
    try:
        responses, failures = run(es, "GET /\n")
    finally:
        es.close()
    assert failures == 1 and responses[0]["status"] is None
    assert responses[0]["error"]["type"] == "transport_error"
