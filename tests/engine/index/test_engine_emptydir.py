"""An existing empty directory is a new, empty engine (console, index, client); a path that does
not exist is still refused by the commands that only read."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from scholar_es.cli import main
from scholar_es.client import connect
from scholar_es.errors import ConfigError


def test_client_accepts_an_existing_empty_directory(tmp_path):
    es = connect(str(tmp_path), must_exist=True)
    es.indices.create(index="my-index", mappings={"properties": {"title": {"type": "text"}}})
    assert es.indices.exists(index="my-index")
    es.close()


def test_client_refuses_a_missing_path_and_a_foreign_directory(tmp_path):
    with pytest.raises(ConfigError, match="no embedded engine at .*index papers there first"):
        connect(str(tmp_path / "nope"), must_exist=True)
    (tmp_path / "notes.txt").write_text("not an engine")
    with pytest.raises(ConfigError, match="no embedded engine at"):
        connect(str(tmp_path), must_exist=True)


def test_console_starts_a_fresh_engine_in_an_empty_directory(tmp_path):
    script = (
        'PUT my-index\n{"mappings": {"properties": {"title": {"type": "text"}}}}\n\nGET my-index/_count\n'
    )
    result = CliRunner().invoke(main, ["console", "--es", str(tmp_path)], input=script)
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in result.output.splitlines()]
    assert lines[0] == {"acknowledged": True, "shards_acknowledged": True, "index": "my-index"}
    assert lines[1]["count"] == 0


def test_console_refuses_a_missing_directory_with_todays_message(tmp_path):
    missing = tmp_path / "typo"
    result = CliRunner().invoke(main, ["console", "--es", str(missing)], input="GET _cat/indices\n")
    assert result.exit_code != 0
    assert "no embedded engine at" in result.output and "index papers there first" in result.output
    assert not missing.exists()


def test_index_into_an_empty_directory(tmp_path):
    src = tmp_path / "papers.jsonl"
    src.write_text(json.dumps({"id": "p1", "title": "Graph networks", "abstract": "We propagate."}) + "\n")
    target = tmp_path / "engine"
    target.mkdir()
    result = CliRunner().invoke(main, ["index", str(src), "--es", str(target), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    es = connect(str(target), must_exist=True)
    assert es.count(index="papers")["count"] == 1
    es.close()


def test_console_session_on_a_fresh_directory(tmp_path):
    """`scholar-es console --es "$(mktemp -d)"`: create an index by hand, bulk-load it, then search
    with fields, aggregations and highlighting; every answer has Elasticsearch's shape."""
    import subprocess
    import sys
    from pathlib import Path

    script = """PUT my-index
{"mappings": {"properties": {"title": {"type": "text"}, "section_type": {"type": "keyword"}, "year": {"type": "integer"}}}}

POST my-index/_bulk?refresh=true
{"index": {"_id": "1"}}
{"title": "Sparse attention for long documents", "section_type": "method", "year": 2021}
{"index": {"_id": "2"}}
{"title": "Attention is all you need", "section_type": "abstract", "year": 2017}
{"index": {"_id": "3"}}
{"title": "Graph networks", "section_type": "method", "year": 2019}

GET my-index/_search
{"size": 0, "aggs": {"by_section": {"terms": {"field": "section_type"}}}}

GET my-index/_search
{"query": {"match": {"title": "attention"}}, "fields": ["title", "year"], "_source": false,
 "highlight": {"fields": {"title": {}}}}
"""
    exe = Path(sys.executable).with_name("scholar-es")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "scholar_es.cli"]
    proc = subprocess.run(
        [*cmd, "console", "--es", str(tmp_path)], input=script, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    created, bulk, aggs, search = (json.loads(x) for x in proc.stdout.splitlines())
    assert created == {"acknowledged": True, "shards_acknowledged": True, "index": "my-index"}
    assert bulk["errors"] is False and len(bulk["items"]) == 3
    assert aggs["hits"] == {"total": {"value": 3, "relation": "eq"}, "max_score": None, "hits": []}
    assert aggs["aggregations"] == {
        "by_section": {
            "doc_count_error_upper_bound": 0,
            "sum_other_doc_count": 0,
            "buckets": [{"key": "method", "doc_count": 2}, {"key": "abstract", "doc_count": 1}],
        }
    }
    hits = search["hits"]["hits"]
    assert {h["_id"] for h in hits} == {"1", "2"}
    by_id = {h["_id"]: h for h in hits}
    assert by_id["1"]["fields"] == {"title": ["Sparse attention for long documents"], "year": [2021]}
    assert by_id["1"]["highlight"] == {"title": ["Sparse <em>attention</em> for long documents"]}
    assert by_id["2"]["highlight"] == {"title": ["<em>Attention</em> is all you need"]}
    assert all("_source" not in h for h in hits)
