"""Every strategy of the registry through ``scholar-es serve``'s search API (POST /_scholar/search
and /_scholar/query), over real HTTP against a server subprocess, each answer compared with the
in-process Python API on the same engine; GET /_scholar/strategies is the registry's list.

The data is tests/toyworld.py's (heads ``toy`` trained, so multihead and multihead-hybrid run
with trained heads, as in tests/cli/test_strategies.py). Parametrized over ``names()``: a strategy
added to the registry is served, and tested, without touching this file.
"""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest
from toyworld import DOCS, EXPECTED, HEADS, PREFIX, QUESTION, build_world

from querybuilder import registry
from querybuilder.strategies import search, show_query
from scholar_es.engine.rest.transport import embedded_client

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toy_server(tmp_path_factory):
    """(server, in-process client on the same engine, embedder)."""
    from serving import serving

    _, engine, embedder = build_world(tmp_path_factory.mktemp("serve-strategies"))
    es = embedded_client(engine)
    with serving(engine, wait_model=True) as server:
        yield server, es, embedder
    es.close()


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    conn.close()
    return resp.status, answer


def get(url: str, path: str) -> tuple[int, object]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    conn.request("GET", path)
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    conn.close()
    return resp.status, answer


@pytest.mark.parametrize("name", registry.names())
def test_every_registry_strategy_through_the_search_api(toy_server, name):
    server, es, embedder = toy_server
    heads = HEADS if "heads" in registry.get(name).takes else None
    body = {"question": QUESTION, "strategy": name, "prefix": PREFIX, "size": 3, "papers": True}
    status, answer = post(server.url, "/_scholar/search", {**body, **({"heads": heads} if heads else {})})
    assert status == 200, answer
    ref = search(
        es, QUESTION, strategy=name, embedder=embedder, prefix=PREFIX, size=3, papers=True, heads=heads
    )
    assert answer["strategy"] == name and answer["index"] == f"{PREFIX}chunks"
    assert [(h["chunk_id"], h["score"]) for h in answer["hits"]] == [(h.chunk_id, h.score) for h in ref.hits]
    assert [p["paper_id"] for p in answer["papers"]] == [p.paper_id for p in ref.papers]
    top = answer["hits"][0]
    assert top["paper_id"] == EXPECTED
    # the full chunk text and paragraph ids come with the strategy's own hits (no extra search)
    assert top["chunk_text"] == DOCS[EXPECTED][1] and top["paragraph_ids"] == [f"{EXPECTED}#abs"]
    if registry.get(name).needs.heads:
        assert answer["routing"]["heads"] == HEADS and answer["routing"]["top_heads"]
    else:
        assert answer["routing"] is None

    # /_scholar/query: what `scholar-es query` prints for it
    status, query = post(server.url, "/_scholar/query", {**body, **({"heads": heads} if heads else {})})
    assert status == 200, query
    expected = show_query(
        QUESTION, strategy=name, es=es, embedder=embedder, size=3, papers=True, prefix=PREFIX, heads=heads
    )
    assert query["request"] == json.loads(expected)
    assert query["console"].startswith(f"GET {PREFIX}chunks/_")


def test_strategies_route_is_the_registry(toy_server):
    server, _, _ = toy_server
    status, listed = get(server.url, f"/_scholar/strategies?prefix={PREFIX}")
    assert status == 200 and isinstance(listed, list)
    assert [s["name"] for s in listed] == registry.names()
    for info in listed:
        s = registry.get(info["name"])
        assert info["description"] == s.description
        assert info["needs"]["summary"] == s.needs.describe()
        assert info["needs"]["heads"] == s.needs.heads and info["needs"]["license"] == s.needs.license
        assert set(info["options"]) == s.takes & {"explain", "heads"}
        assert info["heads"] == ([HEADS] if s.needs.heads else None) and info["available"]
    # no heads under another prefix: the heads strategies are listed as unavailable
    status, bare = get(server.url, "/_scholar/strategies")
    assert {s["name"] for s in bare if not s["available"]} == {"multihead", "multihead-hybrid"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            {"strategy": "multisection", "explain": True},
            "'explain' applies only to the strategies bm25, dense",
        ),
        ({"strategy": "hybrid", "heads": HEADS}, "'heads' applies only to the strategies multihead, "),
        ({"strategy": "direct", "heads": HEADS}, "not to 'direct'"),
        ({"strategy": "multihead", "heads": "nope"}, "no heads named 'nope'"),
        ({"strategy": "nope"}, "valid strategies: " + ", ".join(repr(n) for n in sorted(registry.names()))),
        ({"strategy": "multisection", "show_plan": True}, "show_plan: Extra inputs are not permitted"),
    ],
)
def test_options_a_strategy_does_not_take_are_refused(toy_server, body, fragment):
    server, _, _ = toy_server
    status, answer = post(server.url, "/_scholar/search", {"question": QUESTION, "prefix": PREFIX, **body})
    assert status == 400, answer
    assert fragment in answer["error"]["reason"]
