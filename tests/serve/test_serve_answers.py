"""The search API answers with the result that ranked (issue 27): ``explain`` leaves the papers
as they are, a search inside one paper returns ``size`` hits, and a long question's result
carries ``notes`` saying how it was shortened. Against a real ``scholar-es serve``
(tests/serving.py, the ``served_demo`` fixture of tests/conftest.py)."""

from __future__ import annotations

import http.client
import json
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.slow
QUESTION = "memory and attention over long documents"


def post(url: str, body: dict) -> tuple[int, dict]:
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    conn.request("POST", "/_scholar/search", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    conn.close()
    return resp.status, answer


def test_explain_leaves_the_papers_as_they_are(served_demo):
    ask = {"question": QUESTION, "papers": True, "size": 5}
    status, plain = post(served_demo.url, ask)
    assert status == 200 and len(plain["papers"]) == 5
    status, explained = post(served_demo.url, {**ask, "explain": True})
    assert status == 200
    view = [
        (p["paper_id"], p["score"], [(c["chunk_id"], c["score"]) for c in p["chunks"]])
        for p in plain["papers"]
    ]
    assert [
        (p["paper_id"], p["score"], [(c["chunk_id"], c["score"]) for c in p["chunks"]])
        for p in explained["papers"]
    ] == view
    # the paper's score is its head chunk's, among the scores of its chunks
    assert all(p["score"] in [c["score"] for c in p["chunks"]] for p in plain["papers"])


def test_inside_one_paper_size_hits_and_long_question_notes(served_demo):
    status, one = post(
        served_demo.url, {"question": QUESTION, "size": 8, "filters": {"paper_ids": ["demo-001"]}}
    )
    assert status == 200 and len(one["hits"]) == 8 and one["notes"] == []
    status, long = post(served_demo.url, {"question": " ".join([QUESTION] * 200), "size": 3})
    assert status == 200 and long["hits"]
    assert any("text query keeps" in n for n in long["notes"]), long["notes"]
    assert any("embedding model" in n for n in long["notes"]), long["notes"]
