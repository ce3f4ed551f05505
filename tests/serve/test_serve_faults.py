"""``scholar-es serve`` under hostile input and process faults, over real HTTP and real signals:
the request head bounded before authentication, the in-flight requests breaker, fuzzed bodies
answered 4xx (never 500), deep JSON, undecodable credentials, an empty API key, secrets in the
access log, workers whose master is killed with SIGKILL, SIGTERM with workers."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scholar_es.serve.breaker import byte_size
from scholar_es.serve.logs import mask_query

pytestmark = pytest.mark.slow

KEY = "f4ult-key"


def request(port: int, data: bytes, timeout: float = 30) -> tuple[int, dict | None, bytes]:
    """``data`` (a whole request, as bytes) sent on a new connection: the answer's status, JSON
    body and raw bytes, read until the server closes or the body is complete."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        return read_answer(s)


def read_answer(s: socket.socket) -> tuple[int, dict | None, bytes]:
    raw = b""
    while b"\r\n\r\n" not in raw:
        chunk = s.recv(65536)
        if not chunk:
            break
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    status = int(head.split(b" ")[1])
    return status, json.loads(body) if body else None, raw


def http_json(port: int, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, json.loads(data) if data else None


def es_error(status: int, type_: str, reason: str, **extra) -> dict:
    cause = {"type": type_, "reason": reason, **extra}
    return {"error": {"root_cause": [cause], **cause}, "status": status}


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """A server over an engine of its own (no model wait), an index ``fz`` with a few documents,
    and an in-process client on another engine directory for reference answers."""
    from serving import serving

    from scholar_es.engine.rest.transport import embedded_client

    with serving(tmp_path_factory.mktemp("bare") / "engine") as server:
        mapping = {"properties": {"t": {"type": "text"}, "k": {"type": "keyword"}, "n": {"type": "long"}}}
        assert http_json(server.port, "PUT", "/fz", json.dumps({"mappings": mapping}).encode())[0] == 200
        bulk = "".join(
            json.dumps({"index": {"_index": "fz", "_id": str(i)}})
            + "\n"
            + json.dumps({"t": f"w{i}", "n": i})
            + "\n"
            for i in range(5)
        )
        status, _ = http_json(server.port, "POST", "/_bulk?refresh=true", bulk.encode())
        assert status == 200
        reference = embedded_client(tmp_path_factory.mktemp("reference") / "engine")
        reference.indices.create(index="fz", mappings=mapping)
        yield server, reference
        reference.close()


# --- the request head: bounded before authentication --------------------------------------------


def test_headers_over_the_limit_are_refused_before_authentication(tmp_path):
    from serving import serving

    with serving(
        tmp_path / "engine", "--max-header-size", "2kb", env={"SCHOLAR_ES_SERVE_API_KEY": KEY}
    ) as server:
        port = server.port
        under = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 1500 + b"\r\n\r\n"
        status, body, _ = request(port, under)
        assert status == 401 and body["error"]["type"] == "security_exception"  # the key is checked
        over = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 2100 + b"\r\n\r\n"
        status, body, raw = request(port, over)
        # Netty's HeaderParser, answered by RestController.dispatchBadRequest as a 400
        assert status == 400
        assert body == es_error(
            400, "too_long_http_header_exception", "HTTP header is larger than 2048 bytes."
        )
        assert b"connection: close" in raw.lower()
        many = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(400)) + b"\r\n"
        assert request(port, many)[1]["error"]["type"] == "too_long_http_header_exception"
        line = b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        status, body, _ = request(port, line)
        assert status == 400
        assert body == es_error(
            400, "too_long_http_line_exception", "An HTTP line is larger than 4096 bytes."
        )

        # 10 connections each streaming a header that never ends: each is answered and closed
        # after a few kB, long before its 4 MB are sent (uvicorn alone buffered all of them)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(10)]
        for s in socks:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ")
        refused = 0
        for s in socks:
            sent = 0
            try:
                while sent < 4 * 1024 * 1024:
                    s.sendall(b"b" * 65536)
                    sent += 65536
            except OSError:  # reset or broken pipe: the server closed the connection
                refused += 1
                continue
            finally:
                s.close()
        assert refused == 10
        # and the server still answers
        status, _, _ = request(
            port, b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: ApiKey " + KEY.encode() + b"\r\n\r\n"
        )
        assert status == 200


# --- the in-flight requests breaker ---------------------------------------------------------------


def _bulk_body(index: str, n: int, pad: int) -> bytes:
    return "".join(
        json.dumps({"index": {"_index": index, "_id": str(i)}}) + "\n" + json.dumps({"t": "x" * pad}) + "\n"
        for i in range(n)
    ).encode()


def test_in_flight_breaker_answers_429_and_releases(tmp_path):
    """A body in flight holds its bytes; a second one that would take twice the sum past the
    limit is refused with Elasticsearch's ``circuit_breaking_exception``; once the first
    request is answered its bytes are released and the second one passes."""
    from serving import serving

    limit = 1024 * 1024
    a = _bulk_body("ba", 30, 10_000)  # ~300 kB each: either alone fits (x2 < 1 MiB), both do not
    b = _bulk_body("bb", 30, 10_000)
    assert 2 * len(a) < limit and 2 * len(b) < limit < 2 * (len(a) + len(b))
    head = (
        "POST /_bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: {}\r\n\r\n"
    )
    with serving(tmp_path / "engine", "--max-in-flight", "1mb", "--max-body", "4mb") as server:
        first = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        first.sendall(head.format(len(a)).encode() + a[:1000])  # in flight: charged whole
        time.sleep(0.5)
        # the second request's head only: the answer comes before its body is read
        status, body, raw = request(server.port, head.format(len(b)).encode())
        wanted = 2 * (len(a) + len(b))
        reason = (
            f"[in_flight_requests] Data too large, data for [<http_request>] would be "
            f"[{wanted}/{byte_size(wanted)}], which is larger than the limit of [{limit}/1mb]"
        )
        assert status == 429
        assert body == es_error(
            429,
            "circuit_breaking_exception",
            reason,
            bytes_wanted=wanted,
            bytes_limit=limit,
            durability="TRANSIENT",
        )
        assert b"connection: close" in raw.lower()
        first.sendall(a[1000:])
        status, body, _ = read_answer(first)
        first.close()
        assert status == 200 and body["errors"] is False
        status, body = http_json(server.port, "POST", "/_bulk", b, {"Content-Type": "application/x-ndjson"})
        assert status == 200 and body["errors"] is False  # the first request's bytes were released

        # a chunked body is charged as it arrives
        conn = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        conn.sendall(
            b"POST /_bulk HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        big = a + b
        try:
            for at in range(0, len(big), 32768):
                piece = big[at : at + 32768]
                conn.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # closed by the server after its answer
        status, body, _ = read_answer(conn)
        conn.close()
        assert status == 429 and body["error"]["type"] == "circuit_breaking_exception"
        assert body["error"]["bytes_limit"] == limit and body["error"]["bytes_wanted"] > limit


def test_byte_size_is_elasticsearch_s_to_string():
    # ByteSizeValue.toString(): the largest unit reached, one decimal truncated, ".0" dropped
    assert [byte_size(n) for n in (0, 512, 1024, 1536, 1048575, 1048576, 1228800, 3 * 1024**3)] == [
        "0b",
        "512b",
        "1kb",
        "1.5kb",
        "1023.9kb",
        "1mb",
        "1.1mb",
        "3gb",
    ]


# --- malformed input: 4xx, never 500 --------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)
PREFIX = st.text(alphabet='ab*?,-_ /\\.:#<>|"é', max_size=6)


def _scholar_bodies():
    from querybuilder.registry import names

    return st.fixed_dictionaries(
        {"question": st.text(max_size=30) | JSON},
        optional={
            "prefix": PREFIX | JSON,
            "strategy": st.sampled_from([*names(), "nope"]) | JSON,
            "size": st.integers(-3, 20_000) | JSON,
            "from": st.integers(-3, 20_000) | JSON,
            "papers": st.booleans() | JSON,
            "explain": st.booleans(),
            "heads": st.none() | st.text(max_size=6),
            "profile": st.none() | st.sampled_from(["default", "nope"]),
            "filters": st.none()
            | JSON
            | st.fixed_dictionaries(
                {},
                optional={
                    "year_from": st.integers(-5, 3000) | JSON,
                    "year_max": st.integers(-5, 3000),  # the old name of year_to, still read
                    "venues": st.lists(st.text(max_size=6), max_size=2),
                    "paper_ids": st.lists(st.text(max_size=6), max_size=2),
                    "section_types": st.lists(st.sampled_from(["abstract", "methods", "nope"]), max_size=2),
                },
            ),
        },
    )


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    route=st.sampled_from(
        ["/_scholar/search", "/_scholar/search", "/_scholar/query", "/_scholar/multisection"]
    ),
    body=st.deferred(_scholar_bodies) | st.binary(max_size=40).map(lambda b: b"\x00" + b),
)
@example(route="/_scholar/search", body={"question": "windows", "prefix": "a*", "strategy": "hybrid"})
@example(route="/_scholar/query", body={"question": "windows", "prefix": "?"})
def test_fuzzed_search_api_bodies_are_never_a_500(served_demo, route, body):
    port = int(served_demo.url.rsplit(":", 1)[1])
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, answer = http_json(port, "POST", route, data)
    assert status < 500, (route, body, answer)


ES_ROUTES = [
    ("POST", "/fz/_search"),
    ("POST", "/fz/_count"),
    ("POST", "/_search"),
    ("PUT", "/fz/_doc/9"),
    ("POST", "/fz/_update/1"),
    ("POST", "/_bulk"),
    ("POST", "/_msearch"),
    ("POST", "/_mget"),
    ("PUT", "/fz/_mapping"),
    ("PUT", "/fz2"),
    ("POST", "/fz/_delete_by_query"),
    ("GET", "/fz/_search"),
]
PARAMS = st.dictionaries(
    st.sampled_from(["size", "from", "q", "pretty", "refresh", "sort", "_source", "routing"]),
    st.text(alphabet="ab0-:*,_ ", max_size=5),
    max_size=2,
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    route=st.sampled_from(ES_ROUTES),
    params=PARAMS,
    body=JSON.map(lambda v: json.dumps(v).encode())
    | st.lists(JSON, min_size=1, max_size=4).map(
        lambda vs: "".join(json.dumps(v) + "\n" for v in vs).encode()
    )
    | st.binary(max_size=40),
)
def test_fuzzed_es_api_requests_are_never_a_500(bare, route, params, body):
    from urllib.parse import urlencode

    server, _ = bare
    method, path = route
    ctype = "application/x-ndjson" if path in ("/_bulk", "/_msearch") else "application/json"
    target = path + ("?" + urlencode(params) if params else "")
    status, answer = http_json(server.port, method, target, body, {"Content-Type": ctype})
    assert status < 500, (method, target, body, answer)


def test_deep_json_is_the_in_process_400(bare):
    """JSON nested past what Python's parser recurses through (956+ levels) or past Jackson's
    1000: the answer over HTTP is the in-process node's 400, not a 500 RecursionError."""
    server, reference = bare
    node = reference.transport.node_pool.get()
    for body in (
        "[" * 3000 + "]" * 3000,
        '{"a":' * 990 + "1" + "}" * 990,
        '{"query":' + "[" * 1200 + "]" * 1200 + "}",
    ):
        data = body.encode()
        status, answer = http_json(server.port, "POST", "/fz/_search", data)
        expected = node.perform_request(
            "POST", "/fz/_search", body=data, headers={"content-type": "application/json"}
        )
        assert status == 400 and status == expected.meta.status, answer
        assert answer["error"]["type"] == json.loads(expected.body)["error"]["type"]
    status, answer = http_json(server.port, "POST", "/_scholar/search", ("[" * 3000 + "]" * 3000).encode())
    assert status == 400


# --- credentials, the API key, the log -----------------------------------------------------------


def test_non_ascii_authorization_is_a_401(tmp_path):
    from serving import serving

    with serving(tmp_path / "engine", env={"SCHOLAR_ES_SERVE_API_KEY": KEY}) as server:
        for value in (
            "ApiKey é€".encode(),
            b"Basic \xff\xfe",
            "Bearer ключ".encode(),
            b"Basic " + "é:x".encode(),
        ):
            status, body, _ = request(
                server.port, b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: " + value + b"\r\n\r\n"
            )
            assert status == 401, value
            assert body["error"]["type"] == "security_exception"
            assert "unable to authenticate" in body["error"]["reason"]


def test_an_empty_api_key_is_refused_at_start(tmp_path):
    env = {**os.environ, "SCHOLAR_ES_SERVE_API_KEY": ""}
    cmd = [sys.executable, "-m", "scholar_es.cli", "serve", "--es", str(tmp_path / "e"), "--port", "0"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: $SCHOLAR_ES_SERVE_API_KEY is set but empty: set it to the key every request must send, "
        "or unset it to serve without a key"
    ]
    assert "Uvicorn running" not in done.stdout + done.stderr


def test_access_log_masks_secrets(tmp_path):
    from serving import serving

    with serving(tmp_path / "engine", env={"SCHOLAR_ES_SERVE_API_KEY": KEY}, access_log=True) as server:
        auth = {"Authorization": f"ApiKey {KEY}"}
        http_json(server.port, "GET", "/?api_key=s3cretA&pretty", headers=auth)
        http_json(server.port, "GET", "/_cat/indices?password=s3cretB&v=true", headers=auth)
        http_json(server.port, "GET", "/?access_token=s3cretC&Api-Key=s3cretD")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and sum('"GET /' in line for line in server.log) < 3:
            time.sleep(0.1)
        server.stop()
    log = "".join(server.log)
    assert sum('"GET /' in line for line in server.log) == 3, log
    for secret in ("s3cretA", "s3cretB", "s3cretC", "s3cretD", KEY):
        assert secret not in log
    assert "/?api_key=***&pretty" in log and "password=***&v=true" in log


def test_mask_query():
    assert mask_query("/i/_search") == "/i/_search"
    assert mask_query("/?api_key=a&size=3&PassWord=b&q=c&my%5Ftoken=d&flag") == (
        "/?api_key=***&size=3&PassWord=***&q=c&my%5Ftoken=***&flag"
    )


# --- process faults --------------------------------------------------------------------------------


def _workers_up(server, n: int = 2, timeout: float = 120) -> list[int]:
    """The worker pids once ``n`` workers answer, read from their startup lines."""
    import re

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [
            int(m[1]) for line in server.log if (m := re.search(r"Started server process \[(\d+)\]", line))
        ]
        ready = sum("Application startup complete" in line for line in server.log)
        if len(pids) >= n and ready >= n:
            return pids
        time.sleep(0.2)
    raise AssertionError("workers did not start:\n" + "".join(server.log[-30:]))


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to see the workers")
def test_workers_exit_when_their_master_is_killed(tmp_path):
    from serving import serving

    with serving(tmp_path / "engine", "--workers", "2") as server:
        workers = _workers_up(server)
        assert http_json(server.port, "GET", "/")[0] == 200
        server.proc.kill()  # SIGKILL: the master cannot stop its workers itself
        server.proc.wait(10)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(_gone(p) for p in workers):
            time.sleep(0.1)
        assert all(_gone(p) for p in workers), "workers still serving after their master died"
        with socket.socket() as s:  # nobody listens on the port any more
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", server.port))


def test_sigterm_with_workers_exits_0(tmp_path):
    from serving import serving

    with serving(tmp_path / "engine", "--workers", "2") as server:
        workers = _workers_up(server)
        assert server.stop(signal.SIGTERM) == 0
        assert all(_gone(p) for p in workers)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=st.text(alphabet='[]{}"\\ab', max_size=40), window=st.sampled_from([1, 2, 3, 7, 1 << 18]))
def test_windowed_depth_is_nesting_depth(text, window):
    """The HTTP path's nesting check (in windows, bounded memory) answers as the in-process one."""
    import scholar_es.serve.body as body
    from scholar_es.engine.xcontent import nesting_depth

    saved, body._WINDOW = body._WINDOW, window
    try:
        assert body.depth(memoryview(text.encode())) == nesting_depth(text)
    finally:
        body._WINDOW = saved
