"""Load: 8 concurrent clients through the search API and through the Elasticsearch API of one
``scholar-es serve`` process; no errors, every answer identical to the in-process one.

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

from querybuilder.dsl import build_search
from querybuilder.plan import make_plan
from querybuilder.run import embed_question, search

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
