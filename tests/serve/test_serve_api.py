"""``scholar-es serve`` over real HTTP: a subprocess on a loopback port, the official client, raw
requests as curl sends them, and the search API's answers against the in-process Python API."""

from __future__ import annotations

import base64
import http.client
import json
from urllib.parse import urlsplit

import pytest
from elasticsearch import BadRequestError, Elasticsearch, NotFoundError

from querybuilder.render import to_console
from querybuilder.run import embed_question
from querybuilder.strategies import build_search, make_plan, search
from scholar_es.multisection.flow import multisection_search

pytestmark = pytest.mark.slow

QUESTION = "How is information carried between windows of a long document?"


def raw(url: str, method: str, path: str, body: bytes | str | None = None, headers: dict | None = None):
    """One HTTP request as curl would send it: (status, headers, parsed JSON body or None)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    data = body.encode() if isinstance(body, str) else body
    conn.request(method, path, body=data, headers=headers or {})
    resp = conn.getresponse()
    payload = resp.read()
    conn.close()
    headers_: dict[str, str] = {}
    for k, v in resp.getheaders():  # a repeated header (WWW-Authenticate) joined as one
        headers_[k.lower()] = f"{headers_[k.lower()]}, {v}" if k.lower() in headers_ else v
    parsed = (
        json.loads(payload) if payload and "json" in headers_.get("content-type", "") else payload or None
    )
    return resp.status, headers_, parsed


def post(url: str, path: str, body: dict):
    return raw(url, "POST", path, json.dumps(body), {"Content-Type": "application/json"})


@pytest.fixture(scope="module")
def client(served_demo):
    es = Elasticsearch(served_demo.url)
    yield es
    es.close()


# --- the Elasticsearch REST API ------------------------------------------------------------------


def test_official_client_reads_the_same_answers_as_in_process(client, served_demo):
    assert client.info()["tagline"] == "You Know, for Search"
    body = {"query": {"match": {"chunk_text": "reciprocal rank fusion"}}, "size": 5}
    over_http = client.search(index="chunks", body=body).body
    in_process = served_demo.es.search(index="chunks", body=body).body
    over_http.pop("took"), in_process.pop("took")
    assert over_http == in_process
    assert over_http["hits"]["hits"][0]["_id"] == "demo-006#abs"


def test_official_client_errors_are_the_cluster_error_classes(client, served_demo):
    with pytest.raises(NotFoundError) as http_err:
        client.search(index="no-such-index", query={"match_all": {}})
    with pytest.raises(NotFoundError) as local_err:
        served_demo.es.search(index="no-such-index", query={"match_all": {}})
    assert http_err.value.body == local_err.value.body
    assert http_err.value.body["error"]["type"] == "index_not_found_exception"
    with pytest.raises(BadRequestError) as bad:
        client.search(index="chunks", query={"query_string": {"query": "a AND"}})
    assert bad.value.meta.status == 400


def test_product_header_and_compatible_media_type(served_demo):
    # what the 8.x client sends: the answer echoes compatible-with=8 (RestCompatibleVersionHelper)
    compat = "application/vnd.elasticsearch+json; compatible-with=8"
    status, headers, body = raw(served_demo.url, "GET", "/", headers={"Accept": compat})
    assert status == 200 and headers["x-elastic-product"] == "Elasticsearch"
    assert headers["content-type"] == "application/vnd.elasticsearch+json;compatible-with=8"
    status, headers, body = raw(served_demo.url, "GET", "/")
    assert headers["content-type"] == "application/json"
    assert body["version"]["number"].startswith("8.")


def test_compatible_with_9_is_refused_as_an_8x_cluster_does(served_demo):
    v9 = "application/vnd.elasticsearch+json; compatible-with=9"
    status, headers, body = raw(
        served_demo.url, "POST", "/chunks/_search", "{}", {"Content-Type": v9, "Accept": v9}
    )
    assert status == 400
    assert body["error"]["type"] == "media_type_header_exception"
    assert headers["x-elastic-product"] == "Elasticsearch"


def test_curl_without_a_json_content_type_gets_406(served_demo):
    # curl -d sends application/x-www-form-urlencoded; Elasticsearch answers 406 with a plain error
    status, _, body = raw(
        served_demo.url,
        "POST",
        "/chunks/_search",
        "{}",
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 406
    assert body == {
        "error": "Content-Type header [application/x-www-form-urlencoded] is not supported",
        "status": 406,
    }


def test_malformed_json_is_a_400_not_a_traceback(served_demo):
    status, _, body = raw(
        served_demo.url, "POST", "/chunks/_search", '{"query": {', {"Content-Type": "application/json"}
    )
    assert status == 400
    assert body["error"]["type"] == "x_content_parse_exception"
    assert "Traceback" not in json.dumps(body)


def test_bulk_ndjson_then_search_and_head(served_demo):
    lines = [
        {"index": {"_index": "notes-http", "_id": "1"}},
        {"text": "Context length limits long documents"},
        {"index": {"_index": "notes-http", "_id": "2"}},
        {"text": "Reciprocal rank fusion of rankings"},
    ]
    ndjson = "".join(json.dumps(x) + "\n" for x in lines)
    status, _, body = raw(
        served_demo.url, "POST", "/_bulk?refresh=true", ndjson, {"Content-Type": "application/x-ndjson"}
    )
    assert status == 200 and body["errors"] is False and len(body["items"]) == 2
    # Elasticsearch reads a _bulk body as lines whatever JSON type it is sent with
    status, _, body = raw(
        served_demo.url,
        "POST",
        "/_bulk",
        json.dumps({"delete": {"_index": "notes-http", "_id": "2"}}) + "\n",
        {"Content-Type": "application/json"},
    )
    assert status == 200 and body["items"][0]["delete"]["result"] == "deleted"
    status, headers, body = raw(served_demo.url, "HEAD", "/notes-http")
    assert status == 200 and body is None
    assert raw(served_demo.url, "HEAD", "/notes-missing")[0] == 404
    status, _, body = post(served_demo.url, "/notes-http/_search?pretty", {"query": {"match_all": {}}})
    assert [h["_id"] for h in body["hits"]["hits"]] == ["1"]


def test_msearch_and_aliases(client):
    resp = client.msearch(
        searches=[{"index": "chunks"}, {"query": {"match": {"chunk_text": "memory"}}, "size": 1}, {}, {}]
    )
    assert resp["responses"][0]["status"] == 200
    assert resp["responses"][1]["status"] == 400  # no index named
    aliases = client.indices.get_alias(name="chunks").body
    assert list(aliases) == ["chunks-v1"]


def test_url_parameters_text_tables_and_filter_path_over_http(served_demo, client):
    """Issue 26: the dispatcher's checks and shapes, as a cluster answers them over HTTP."""
    status, headers, body = raw(served_demo.url, "GET", "/chunks/_search?bogus_param=1")
    assert (status, body["error"]["reason"]) == (
        400,
        "request [/chunks/_search] contains unrecognized parameter: [bogus_param]",
    )
    status, headers, body = raw(served_demo.url, "GET", "/_cat/count/chunks?v")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert body.decode().splitlines()[0].split() == ["epoch", "timestamp", "count"]
    assert isinstance(client.cat.indices(index="chunks").body, str)
    rows = client.cat.indices(index="chunks", format="json", h="index").body  # an alias: its index
    assert rows == [{"index": "chunks-v1"}]
    assert client.search(index="chunks", size=1, filter_path="hits.hits._id").body.keys() == {"hits"}


def test_method_not_allowed_is_405(served_demo):
    status, _, body = raw(served_demo.url, "DELETE", "/_cluster/health")
    assert status == 405
    assert "Incorrect HTTP method" in body["error"]


# --- the search API ------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["bm25", "dense", "hybrid", "sections", "rrf-client"])
def test_search_api_equals_the_python_api(served_demo, strategy):
    status, _, body = post(
        served_demo.url, "/_scholar/search", {"question": QUESTION, "strategy": strategy, "size": 5}
    )
    assert status == 200
    ref = search(served_demo.es, QUESTION, strategy=strategy, embedder=served_demo.embedder, size=5)
    assert [(h["chunk_id"], h["score"]) for h in body["hits"]] == [(h.chunk_id, h.score) for h in ref.hits]
    assert body["strategy"] == strategy and body["index"] == "chunks"


def test_search_api_hits_carry_full_text_paragraph_ids_and_score_parts(served_demo):
    status, _, body = post(
        served_demo.url,
        "/_scholar/search",
        {"question": QUESTION, "strategy": "sections", "size": 3, "papers": True, "explain": True},
    )
    assert status == 200
    top = body["hits"][0]
    src = served_demo.es.get(index="chunks", id=top["chunk_id"])["_source"]
    assert top["chunk_text"] == src["chunk_text"]
    assert top["paragraph_ids"] == src["paragraph_ids"] == [top["chunk_id"]]
    assert top["section_type"] == src["section_type"]
    assert body["papers"][0]["paper_id"] == "demo-001"
    for paper in body["papers"]:
        for hit in paper["chunks"]:
            bar = hit["score_bar"]
            # score = (text + knn) x multiplier: the three parts add up to the score
            assert bar["bm25"] + bar["knn"] + bar["section"] == pytest.approx(hit["score"], rel=1e-6)
            expl = hit["explanation"]
            assert bar["bm25"] == pytest.approx(expl["text"]) and bar["knn"] == pytest.approx(expl["knn"])


def test_search_api_filters(served_demo):
    status, _, body = post(
        served_demo.url,
        "/_scholar/search",
        {"question": QUESTION, "strategy": "bm25", "filters": {"section_types": ["results"]}},
    )
    assert status == 200 and body["hits"]
    assert {h["section_type"] for h in body["hits"]} == {"results"}


def test_query_api_gives_the_dsl_and_console_text(served_demo):
    status, _, body = post(served_demo.url, "/_scholar/query", {"question": QUESTION, "strategy": "hybrid"})
    assert status == 200
    plan = make_plan(QUESTION, strategy="hybrid")
    built = build_search(plan, embed_question(served_demo.es, plan, served_demo.embedder))
    assert body["request"] == built.to_dict()
    assert body["console"] == to_console(built, "chunks")
    assert body["console"].startswith("GET chunks/_search\n")


def test_multisection_api_equals_the_python_api(served_demo):
    q = "How do they handle long documents, and how well does it work?"
    status, _, body = post(served_demo.url, "/_scholar/multisection", {"question": q, "papers": 3})
    assert status == 200
    ref = multisection_search(served_demo.es, q, embedder=served_demo.embedder, papers=3)
    assert [p["paper_id"] for p in body["papers"]] == [p.paper_id for p in ref.papers]
    assert len(body["plan"]["sections"]) == len(ref.plan.sections)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"question": ""}, "question: String should have at least 1 character"),
        ({"question": "x", "size": 0}, "size: Input should be greater than or equal to 1"),
        ({"question": "x", "strategy": "nope"}, "unknown strategy 'nope'"),
        ({"question": "x", "profile": "/etc/passwd"}, "unknown profile '/etc/passwd'"),
        ({"question": "x", "filters": {"section_types": ["methods"]}}, "unknown section type 'methods'"),
        ({"question": "x", "colour": 1}, "colour: Extra inputs are not permitted"),
        # a filter sent at the top level: the valid fields, and where filters go (issue 27)
        ({"question": "x", "year_from": 2020}, "valid fields: explain, filters, from, heads, papers"),
        ({"question": "x", "year_from": 2020}, 'filters such as year_from go inside "filters"'),
    ],
)
def test_search_api_bad_input_is_a_clear_400(served_demo, body, fragment):
    status, headers, answer = post(served_demo.url, "/_scholar/search", body)
    assert status == 400
    assert headers["content-type"] == "application/json"
    assert fragment in answer["error"]["reason"]


def test_unknown_scholar_route_and_bad_json(served_demo):
    status, _, body = raw(served_demo.url, "GET", "/_scholar/nope")
    assert status == 404 and "/_scholar/openapi.json" in body["error"]["reason"]
    status, _, body = raw(
        served_demo.url, "POST", "/_scholar/search", "{nope", {"Content-Type": "application/json"}
    )
    assert status == 400 and "JSON" in body["error"]["reason"]


def test_health_strategies_and_openapi(served_demo):
    status, _, health = raw(served_demo.url, "GET", "/_scholar/health")
    assert status == 200
    assert health["status"] == "green" and health["engine"] == "embedded" and health["model_loaded"]
    names = [s["name"] for s in raw(served_demo.url, "GET", "/_scholar/strategies")[2]]
    assert {"bm25", "hybrid", "sections", "multisection"} <= set(names)
    schema = raw(served_demo.url, "GET", "/_scholar/openapi.json")[2]
    assert {"/_scholar/search", "/_scholar/query", "/_scholar/multisection", "/_scholar/health"} <= set(
        schema["paths"]
    )
    props = schema["components"]["schemas"]["ServeHit"]["properties"]
    assert {"chunk_text", "paragraph_ids", "section_type", "score", "score_bar"} <= set(props)


def test_search_page_is_served(served_demo):
    parts = urlsplit(served_demo.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    conn.request("GET", "/_scholar/ui")
    resp = conn.getresponse()
    html = resp.read().decode()
    assert resp.status == 200 and resp.getheader("content-type").startswith("text/html")
    assert "/_scholar/ui/static/app.js" in html
    conn.request("GET", "/_scholar/ui/static/app.js")
    resp = conn.getresponse()
    assert resp.status == 200 and b"/search" in resp.read()
    conn.close()


def test_bound_to_loopback_by_default(served_demo):
    assert any("Uvicorn running on http://127.0.0.1:" in line for line in served_demo.server.log)


# --- API key, body limit, graceful shutdown: servers of their own --------------------------------


def test_api_key_guards_every_route(tmp_path):
    from serving import serving

    key = "s3cret-key"
    with serving(tmp_path / "engine", "--max-body", "2kb", env={"SCHOLAR_ES_SERVE_API_KEY": key}) as server:
        for path in ("/", "/_scholar/health", "/_scholar/ui", "/_cat/indices"):
            status, headers, body = raw(server.url, "GET", path)
            assert status == 401, path
            assert body["error"]["type"] == "security_exception"
            # one challenge per header, as Elasticsearch sends them
            assert headers["www-authenticate"] == 'Basic realm="scholar-es", charset="UTF-8", ApiKey'

            assert key not in json.dumps(body)
        wrong = raw(server.url, "GET", "/", headers={"Authorization": "ApiKey nope"})
        assert wrong[0] == 401 and "unable to authenticate" in wrong[2]["error"]["reason"]
        # the official client with api_key, an (id, key) pair, Bearer and a browser's Basic all pass
        with Elasticsearch(server.url, api_key=key) as es:
            assert es.info()["tagline"] == "You Know, for Search"
            es.index(index="k", id="1", document={"t": "x"}, refresh=True)
            assert es.count(index="k")["count"] == 1
        with Elasticsearch(server.url, api_key=("some-id", key)) as es:
            assert es.count(index="k")["count"] == 1
        # past the key: an engine without the chunk index is not green (503), never 401
        health = raw(server.url, "GET", "/_scholar/health", headers={"Authorization": f"Bearer {key}"})
        assert health[0] == 503 and health[2]["status"] == "yellow"
        basic = base64.b64encode(f"anyone:{key}".encode()).decode()
        assert raw(server.url, "GET", "/_scholar/ui", headers={"Authorization": f"Basic {basic}"})[0] == 200
        # the body limit: 2kb
        auth = {"Authorization": f"ApiKey {key}", "Content-Type": "application/json"}
        big = json.dumps({"query": {"match": {"t": "x" * 3000}}})
        status, _, body = raw(server.url, "POST", "/k/_search", big, auth)
        assert status == 413 and body["error"]["type"] == "content_too_long_exception"
        small = json.dumps({"query": {"match": {"t": "x"}}})
        assert raw(server.url, "POST", "/k/_search", small, auth)[0] == 200


def test_sigterm_lets_the_request_in_flight_finish(tmp_path):
    """SIGTERM arrives while a _bulk request is half sent: the server keeps running until that
    request is answered in full, then exits; every document is stored."""
    import signal
    import time

    from serving import serving

    docs = 300
    lines = []
    for i in range(docs):
        lines += [{"index": {"_index": "many", "_id": str(i)}}, {"text": f"document number {i}"}]
    data = "".join(json.dumps(x) + "\n" for x in lines).encode()
    with serving(tmp_path / "engine") as server:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        conn.putrequest("POST", "/_bulk")
        conn.putheader("Content-Type", "application/x-ndjson")
        conn.putheader("Content-Length", str(len(data)))
        conn.endheaders()
        conn.send(data[: len(data) // 2])  # the request is in flight: headers and half its body
        time.sleep(0.5)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(1.0)
        assert server.proc.poll() is None, "the server exited with a request in flight"
        conn.send(data[len(data) // 2 :])
        resp = conn.getresponse()
        body = json.loads(resp.read())
        assert resp.status == 200 and body["errors"] is False and len(body["items"]) == docs
        code = server.proc.wait(30)
        assert code == 0  # a stop asked for and done cleanly (uvicorn alone would die of the signal)
        server.stop()
        assert any("Waiting for application shutdown" in line for line in server.log), server.log
    from scholar_es.engine.rest.transport import embedded_client

    es = embedded_client(tmp_path / "engine")
    assert es.count(index="many")["count"] == docs


def test_readme_curl_examples_run(served_demo):
    import re
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("curl") is None:
        print("\n[serve] no curl binary; README curl examples not run")
        pytest.skip("no curl binary")
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    serving_section = readme.split("## Serving", 1)[1].split("\n## ", 1)[0]
    commands = [
        re.sub(r"\\\n\s*", "", c) for c in re.findall(r"^\s*(curl .*?(?:\\\n.*?)*)$", serving_section, re.M)
    ]
    assert len(commands) == 2
    host = served_demo.url.removeprefix("http://")
    for command in commands:
        out = subprocess.run(
            ["bash", "-c", command.replace("localhost:9200", host)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        answer = json.loads(out)
        assert answer["hits"], command
    es_answer = json.loads(
        subprocess.run(
            ["bash", "-c", commands[0].replace("localhost:9200", host)], capture_output=True, text=True
        ).stdout
    )
    assert es_answer["hits"]["hits"][0]["_source"] == {"paper_id": "demo-006", "section_type": "abstract"}


def test_against_a_cluster_the_es_api_is_off_and_search_goes_to_the_cluster(served_demo):
    """A second server whose target is a URL (here the first server's Elasticsearch API, a
    stand-in cluster): its root is not an Elasticsearch API, its search API answers the same."""
    from serving import serving

    with serving(served_demo.url, wait_model=True) as front:
        status, _, body = raw(front.url, "GET", "/")
        assert status == 404 and body["status"] == 404
        assert raw(front.url, "POST", "/chunks/_search", "{}", {"Content-Type": "application/json"})[0] == 404
        health = raw(front.url, "GET", "/_scholar/health")[2]
        assert health["engine"] == "cluster" and health["target"] == served_demo.url
        status, _, answer = post(front.url, "/_scholar/search", {"question": QUESTION, "size": 5})
        assert status == 200
        direct = post(served_demo.url, "/_scholar/search", {"question": QUESTION, "size": 5})[2]
        assert answer["hits"] == direct["hits"]
