"""Load: 8 concurrent clients through the search API and through the Elasticsearch API of one
``scholar-es serve`` process; no errors, every answer identical to the in-process one. The
server takes no lock of its own around the engine: writers and searchers at once, too.

The issue's 8 x 200 searches per API runs in bench/serve_latency.py; here 8 x 25, to keep the
suite fast on two cores.
"""

from __future__ import annotations

import http.client
import json
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import pytest
from elasticsearch import Elasticsearch

from querybuilder.run import embed_question
from querybuilder.strategies import build_search, make_plan, search

pytestmark = pytest.mark.slow

CLIENTS = 8
PER_CLIENT = 25
QUESTIONS = [
    "How is information carried between windows of a long document?",
    "reciprocal rank fusion of rankings",
    "What datasets are used for evaluation?",
    "Which section multipliers help retrieval?",
]
STRATEGIES = ["bm25", "hybrid", "sections"]


def _requests():
    return [(q, s) for q in QUESTIONS for s in STRATEGIES]


def test_search_api_under_8_concurrent_clients(served_demo):
    expected = {
        (q, s): [
            (h.chunk_id, h.score)
            for h in search(served_demo.es, q, strategy=s, embedder=served_demo.embedder, size=5).hits
        ]
        for q, s in _requests()
    }
    parts = urlsplit(served_demo.url)

    def client(n: int) -> list[tuple[int, tuple[str, str], list]]:
        conn = http.client.HTTPConnection(
            parts.hostname, parts.port, timeout=120
        )  # one keep-alive connection
        out = []
        for i in range(PER_CLIENT):
            q, s = _requests()[(n + i) % len(_requests())]
            conn.request(
                "POST",
                "/_scholar/search",
                json.dumps({"question": q, "strategy": s, "size": 5}),
                {"Content-Type": "application/json"},
            )
            resp = conn.getresponse()
            body = json.loads(resp.read())
            out.append((resp.status, (q, s), [(h["chunk_id"], h["score"]) for h in body.get("hits", [])]))
        conn.close()
        return out

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for batch in pool.map(client, range(CLIENTS)) for a in batch]
    assert len(answers) == CLIENTS * PER_CLIENT
    assert all(status == 200 for status, _, _ in answers)
    for _, key, hits in answers:
        assert hits == expected[key], key


def test_es_api_under_8_concurrent_clients(served_demo):
    bodies = []
    for q, s in _requests():
        plan = make_plan(q, strategy=s, size=5)
        vector = embed_question(served_demo.es, plan, served_demo.embedder) if s != "bm25" else None
        bodies.append(build_search(plan, vector).to_dict())
    expected = []
    for body in bodies:
        resp = served_demo.es.search(index="chunks", body=body).body
        expected.append(resp["hits"])
    es = Elasticsearch(served_demo.url, request_timeout=120)  # one client shared by the threads

    def client(n: int) -> list[tuple[int, dict]]:
        out = []
        for i in range(PER_CLIENT):
            k = (n + i) % len(bodies)
            out.append((k, es.search(index="chunks", body=bodies[k]).body["hits"]))
        return out

    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = [a for batch in pool.map(client, range(CLIENTS)) for a in batch]
    es.close()
    assert len(answers) == CLIENTS * PER_CLIENT
    for k, hits in answers:
        assert hits == expected[k]


def test_writers_and_searchers_at_once(served_demo):
    """No server-wide lock: 4 clients index into one index through the ES API while 4 search
    ``chunks`` through the search API. Every search answer is the in-process one, every
    document is stored once, and a search of the written index sees only whole bulks."""
    q, s = QUESTIONS[0], "hybrid"
    expected = [
        (h.chunk_id, h.score)
        for h in search(served_demo.es, q, strategy=s, embedder=served_demo.embedder, size=5).hits
    ]
    es = Elasticsearch(served_demo.url, request_timeout=120)
    bulks, per_bulk = 10, 20

    def writer(n: int) -> list[int]:
        counts = []
        for b in range(bulks):
            ops = []
            for i in range(per_bulk):
                ops += [
                    {"index": {"_index": "load-notes", "_id": f"{n}-{b}-{i}"}},
                    {"w": n, "text": f"n {i}"},
                ]
            assert es.bulk(operations=ops).body["errors"] is False
            counts.append(es.count(index="load-notes").body["count"])
        return counts

    def searcher(n: int) -> list[list]:
        parts = urlsplit(served_demo.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        out = []
        for _ in range(PER_CLIENT):
            conn.request(
                "POST",
                "/_scholar/search",
                json.dumps({"question": q, "strategy": s, "size": 5}),
                {"Content-Type": "application/json"},
            )
            body = json.loads(conn.getresponse().read())
            out.append([(h["chunk_id"], h["score"]) for h in body["hits"]])
        conn.close()
        return out

    with ThreadPoolExecutor(8) as pool:
        writes = [pool.submit(writer, n) for n in range(4)]
        reads = [pool.submit(searcher, n) for n in range(4)]
        counts = [c for f in writes for c in f.result()]
        answers = [a for f in reads for a in f.result()]
    assert all(a == expected for a in answers)
    assert all(c % per_bulk == 0 for c in counts), "a count saw part of a bulk"
    assert es.count(index="load-notes").body["count"] == 4 * bulks * per_bulk
    es.close()
