"""Issue 27: ``/_scholar/health`` tells the truth (real ``scholar-es serve`` processes against a
refused URL, an empty and a missing directory, and the demo index); one filter model and ``from``
paging for the command line, the Python API and the search API; 405, bad JSON and the OpenAPI
security schemes of the search API."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from serving import serving
from test_serve_api import post, raw

from querybuilder.strategies import search
from scholar_es.cli import main as cli

pytestmark = pytest.mark.slow

QUESTION = "How is information carried between windows of a long document?"


def _health(url: str) -> tuple[int, dict]:
    status, _, body = raw(url, "GET", "/_scholar/health")
    return status, body


# --- health --------------------------------------------------------------------------------------


def test_health_is_green_on_the_demo_index(served_demo):
    status, body = _health(served_demo.url)
    assert status == 200
    assert body["status"] == "green" and body["reasons"] == [] and body["index"] == "chunks"
    # another prefix names an index that does not exist: not green, and why
    status, _, other = raw(served_demo.url, "GET", "/_scholar/health?prefix=nope-")
    assert status == 503 and other["status"] == "yellow"
    assert "'nope-chunks' not found" in other["reasons"][0]


def test_health_is_red_when_the_cluster_refuses_the_connection():
    with serving("http://127.0.0.1:1") as server:
        status, body = _health(server.url)
    assert status == 503 and body["status"] == "red" and body["engine"] == "cluster"
    assert any("cannot reach the target" in r for r in body["reasons"]), body


def test_health_is_yellow_for_an_empty_engine(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with serving(empty) as server:
        status, body = _health(server.url)
    assert status == 503 and body["status"] == "yellow"
    assert "index 'chunks' not found" in body["reasons"][0] and "scholar-es index" in body["reasons"][0]


def test_serve_refuses_a_missing_directory_unless_create(tmp_path):
    missing = tmp_path / "typo"
    done = subprocess.run(
        [sys.executable, "-m", "scholar_es.cli", "serve", "--es", str(missing), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: no directory {str(missing)!r} to serve: pass --es with the engine's directory, or "
        "--create for a new, empty engine"
    ]
    assert not missing.exists()
    with serving(missing) as server:  # serving() passes --create for a directory that does not exist
        status, body = _health(server.url)
    assert missing.is_dir() and status == 503 and body["status"] == "yellow"


# --- the search API: 405, bad JSON, OpenAPI security -------------------------------------------------


def test_get_on_search_is_405_with_allow(served_demo):
    status, headers, body = raw(served_demo.url, "GET", "/_scholar/search")
    assert status == 405 and headers["allow"] == "POST"
    assert body["error"]["type"] == "method_not_allowed"
    assert raw(served_demo.url, "GET", "/_scholar/nowhere")[0] == 404


def test_bad_json_names_position_and_problem(served_demo):
    body = '{"question": "x",\n "size": 3 "papers": true}'
    status, _, answer = raw(
        served_demo.url, "POST", "/_scholar/search", body, {"Content-Type": "application/json"}
    )
    assert status == 400
    assert answer["error"]["reason"] == (
        "the request body is not valid JSON: Expecting ',' delimiter at character 29 (line 2, column 12)"
    )


def test_openapi_declares_the_api_key_schemes(served_demo, tmp_path):
    schema = raw(served_demo.url, "GET", "/_scholar/openapi.json")[2]
    assert set(schema["components"]["securitySchemes"]) == {"ApiKey", "Basic"}
    assert "security" not in schema  # no key set: nothing required
    key = "k-123"
    with serving(tmp_path / "engine", env={"SCHOLAR_ES_SERVE_API_KEY": key}) as server:
        status, _, keyed = raw(
            server.url, "GET", "/_scholar/openapi.json", headers={"Authorization": f"ApiKey {key}"}
        )
    assert status == 200 and keyed["security"] == [{"ApiKey": []}, {"Basic": []}]
    assert keyed["components"]["securitySchemes"]["Basic"] == {
        "type": "http",
        "scheme": "basic",
        "description": "HTTP Basic with the key as the password (any user name), as a browser sends it.",
    }


# --- one filter model ------------------------------------------------------------------------------


def _ids(result) -> list[str]:
    return [h["chunk_id"] if isinstance(h, dict) else h.chunk_id for h in result]


def test_filters_have_the_same_names_in_cli_python_and_api(served_demo):
    filters = {"year_from": 2023, "year_to": 2024}
    api = post(served_demo.url, "/_scholar/search", {"question": QUESTION, "size": 5, "filters": filters})
    assert api[0] == 200
    py = search(served_demo.es, QUESTION, size=5, filters=filters, embedder=served_demo.embedder)
    cli_run = CliRunner().invoke(
        cli,
        ["search", QUESTION, "--es", str(served_demo.path), "--size", "5"]
        + ["--year-from", "2023", "--year-to", "2024", "--json"],
    )
    assert cli_run.exit_code == 0, cli_run.output
    from_cli = json.loads(cli_run.stdout)["hits"]
    assert _ids(api[2]["hits"]) == _ids(py.hits) == _ids(from_cli)
    assert {h["year"] for h in api[2]["hits"]} <= {2023, 2024} and len(api[2]["hits"]) == 5
    # the old names of the API still read the same
    old = post(
        served_demo.url,
        "/_scholar/search",
        {"question": QUESTION, "size": 5, "filters": {"year_min": 2023, "year_max": 2024}},
    )
    assert _ids(old[2]["hits"]) == _ids(api[2]["hits"])


def test_an_unknown_filter_lists_the_valid_ones(served_demo):
    status, _, body = post(
        served_demo.url, "/_scholar/search", {"question": QUESTION, "filters": {"yearfrom": 2020}}
    )
    assert status == 400
    assert body["error"]["reason"] == (
        "unknown filter 'yearfrom'; valid filters: 'paper_ids', 'section_types', 'venues', 'year_from', "
        "'year_to' (year_min/year_max are read as year_from/year_to)"
    )
    status, _, body = post(
        served_demo.url,
        "/_scholar/search",
        {"question": QUESTION, "filters": {"year_from": 2020, "year_min": 2021}},
    )
    assert status == 400 and "'year_from' and 'year_min' name one filter" in body["error"]["reason"]


# --- from ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["hybrid", "bm25", "rrf-client", "direct"])
def test_from_pages_the_ranking_in_api_python_and_cli(served_demo, strategy):
    whole = post(
        served_demo.url, "/_scholar/search", {"question": QUESTION, "strategy": strategy, "size": 6}
    )[2]
    page = post(
        served_demo.url,
        "/_scholar/search",
        {"question": QUESTION, "strategy": strategy, "size": 3, "from": 2},
    )
    assert page[0] == 200
    assert _ids(page[2]["hits"]) == _ids(whole["hits"])[2:5]
    py = search(served_demo.es, QUESTION, strategy=strategy, size=3, from_=2, embedder=served_demo.embedder)
    assert _ids(py.hits) == _ids(whole["hits"])[2:5]
    cli_run = CliRunner().invoke(
        cli,
        ["search", QUESTION, "--es", str(served_demo.path), "--strategy", strategy]
        + ["--size", "3", "--from", "2", "--json"],
    )
    assert cli_run.exit_code == 0, cli_run.output
    assert _ids(json.loads(cli_run.stdout)["hits"]) == _ids(whole["hits"])[2:5]


def test_from_pages_papers(served_demo):
    body = {"question": QUESTION, "papers": True}
    whole = post(served_demo.url, "/_scholar/search", {**body, "size": 4})[2]
    page = post(served_demo.url, "/_scholar/search", {**body, "size": 2, "from": 2})[2]
    assert [p["paper_id"] for p in page["papers"]] == [p["paper_id"] for p in whole["papers"]][2:4]


def test_from_is_bounded_and_refused_where_it_does_not_apply(served_demo):
    status, _, body = post(
        served_demo.url, "/_scholar/search", {"question": QUESTION, "size": 10, "from": 9995}
    )
    assert status == 400 and body["error"]["reason"].startswith(
        "Result window is too large, from + size must be less than or equal to: [10000] but was [10005]."
    )
    status, _, body = post(served_demo.url, "/_scholar/search", {"question": QUESTION, "from": -1})
    assert status == 400 and body["error"]["reason"].startswith("from:")
    status, _, body = post(
        served_demo.url, "/_scholar/search", {"question": QUESTION, "strategy": "multisection", "from": 2}
    )
    assert status == 400
    assert "applies to every strategy but 'multisection'" in body["error"]["reason"]
    run = CliRunner().invoke(cli, ["query", QUESTION, "--from", "2"])
    assert run.exit_code == 2 and "--from pages the hits of `scholar-es search`" in run.stderr
