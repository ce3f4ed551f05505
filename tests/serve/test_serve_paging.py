"""Paging (``from``) and the year sort (``sort``) of the search API, over real HTTP against
``scholar-es serve`` on the embedded engine: pages are consecutive slices of one ranking, the year
sort is Elasticsearch's sort on ``year`` in the request sent, and what is not done is refused by
name (the year sort outside the query builder's strategies, paging for multisection)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

pytestmark = pytest.mark.slow

QUESTION = "How is information carried between windows of a long document?"
PAGING = ["bm25", "dense", "hybrid", "sections", "expanded", "rrf", "linear", "rrf-client"]


def post(url: str, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def _papers(url: str, **body) -> list[str]:
    status, answer = post(url, "/_scholar/search", {"question": QUESTION, "papers": True, **body})
    assert status == 200, answer
    return [p["paper_id"] for p in answer["papers"]]


@pytest.mark.parametrize("strategy", PAGING)
def test_pages_are_consecutive_slices_of_one_ranking(served_demo, strategy):
    whole = _papers(served_demo.url, strategy=strategy, size=6)
    assert len(whole) == 6
    pages = [_papers(served_demo.url, strategy=strategy, size=2, **{"from": n}) for n in (0, 2, 4)]
    assert [p for page in pages for p in page] == whole
    assert _papers(served_demo.url, strategy=strategy, size=2, **{"from": 6}) == []


@pytest.mark.parametrize("strategy", ["bm25", "dense", "sections"])
def test_sort_by_year_is_an_elasticsearch_sort_newest_first(served_demo, strategy):
    status, q = post(
        served_demo.url, "/_scholar/query", {"question": QUESTION, "strategy": strategy, "sort": "year"}
    )
    assert status == 200
    assert q["request"]["sort"] == [{"year": {"order": "desc", "missing": "_last"}}, "_score"]
    assert q["request"]["track_scores"] is True and "rescore" not in q["request"]
    status, answer = post(
        served_demo.url,
        "/_scholar/search",
        {"question": QUESTION, "strategy": strategy, "sort": "year", "size": 6, "papers": True},
    )
    years = [p["year"] for p in answer["papers"]]
    assert len(years) == 6 and years == sorted(years, reverse=True)
    assert [p["chunks"][0]["year"] for p in answer["papers"]] == years
    relevance = _papers(served_demo.url, strategy=strategy, size=6)
    assert relevance[0] == "demo-001" and answer["papers"][0]["paper_id"] != "demo-001"  # a 2023 paper
    # paging the year order: the next page continues it
    first = _papers(served_demo.url, strategy=strategy, size=3, sort="year")
    second = _papers(served_demo.url, strategy=strategy, size=3, sort="year", **{"from": 3})
    assert first + second == [p["paper_id"] for p in answer["papers"]]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"strategy": "rrf", "sort": "year"}, "sort 'year' applies only to the strategies bm25, dense"),
        ({"strategy": "rrf-client", "sort": "year"}, "not to 'rrf-client'"),
        ({"strategy": "bm25", "sort": "date"}, "relevance"),
        ({"strategy": "sections", "sort": "year", "explain": True}, "with sort 'year' the year ranks them"),
        ({"strategy": "bm25", "from": -1}, "greater than or equal to 0"),
        ({"strategy": "bm25", "size": 10, "from": 9995}, "Result window is too large, from + size must be"),
    ],
)
def test_what_is_not_done_is_refused_by_name(served_demo, body, message):
    status, answer = post(served_demo.url, "/_scholar/search", {"question": QUESTION, **body})
    assert status == 400, answer
    assert message in json.dumps(answer)


def test_multisection_refuses_paging(served_demo):
    status, answer = post(
        served_demo.url, "/_scholar/search", {"question": QUESTION, "strategy": "multisection", "from": 2}
    )
    assert status == 400 and "every strategy but 'multisection'" in json.dumps(answer)
