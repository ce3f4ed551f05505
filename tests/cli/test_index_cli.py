"""``scholar-es index`` end to end on the embedded engine, bad input included."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from scholar_es.cli import main
from scholar_es.engine.rest.transport import embedded_client

pytestmark = pytest.mark.slow

GOOD = [
    {
        "id": "g1",
        "title": "Graph neural networks for citation recommendation",
        "year": 2020,
        "sections": [{"heading": "Method", "paragraphs": ["We propagate citation signals over the graph."]}],
    },
    {
        "id": "g2",
        "title": "Active learning for named entity recognition",
        "abstract": "We label less data.",
        "sections": [
            {"heading": "4 Results", "text": "F1 improves by three points.\n\nLabels drop by half."}
        ],
    },
    {"id": "g3", "title": "Tokenizers for chemistry", "abstract": "SMILES strings need their own tokenizer."},
]


def _write_mixed(path: Path) -> None:
    lines = [
        json.dumps(GOOD[0]).encode(),
        b'{"id": "bad-json", "title": "unterminated',  # 2: malformed JSON
        json.dumps({"title": "no id here", "abstract": "text"}).encode(),  # 3: missing id
        json.dumps(GOOD[1]).encode(),
        json.dumps({"id": "empty"}).encode(),  # 5: no text at all
        json.dumps({"id": "typed", "title": "x", "year": "abc"}).encode(),  # 6: wrong type
        b'{"id": "utf", "title": "caf\xe9 \xff"}',  # 7: invalid UTF-8
        json.dumps(GOOD[2]).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")


def _run(*args: str):
    return CliRunner().invoke(main, ["index", *args, "--quiet"], catch_exceptions=False)


def test_mixed_file_indexes_every_valid_record_and_locates_each_bad_one(tmp_path):
    src = tmp_path / "mixed.jsonl"
    _write_mixed(src)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    target = str(tmp_path / "engine")
    result = _run(str(src), str(empty), "--es", target, "--format", "jsonl")
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("rejected: ")]
    assert len(errors) == 6, result.output
    for line_no, field in ((2, None), (3, "id"), (5, None), (6, "year"), (7, None)):
        assert any(f"mixed.jsonl:{line_no}:" in e and (field is None or repr(field) in e) for e in errors), (
            line_no,
            errors,
        )
    assert any("empty.jsonl" in e and "empty" in e for e in errors)
    assert "indexed 3 papers, 5 chunks; rejected 6 records" in result.output
    es = embedded_client(target)
    ids = sorted(h["_id"] for h in es.search(index="chunks", size=50)["hits"]["hits"])
    assert ids == ["g1#0.0", "g2#0.0", "g2#0.1", "g2#abs", "g3#abs"]

    again = _run(str(src), "--es", target, "--format", "jsonl")  # a rerun updates, never duplicates
    assert again.exit_code == 1
    assert es.count(index="chunks")["count"] == 5
    assert es.count(index="papers")["count"] == 3


def test_clean_run_exits_zero_and_rebuild_swaps_the_alias(tmp_path):
    src = tmp_path / "good.jsonl"
    src.write_text("\n".join(json.dumps(p) for p in GOOD) + "\n")
    target = str(tmp_path / "engine")
    first = _run(str(src), "--es", target)
    assert first.exit_code == 0, first.output
    assert "chunks -> chunks-v1" in first.output
    second = _run(str(src), "--es", target, "--rebuild")
    assert second.exit_code == 0
    assert "chunks -> chunks-v2" in second.output
    es = embedded_client(target)
    assert list(es.indices.get_alias(name="chunks").body) == ["chunks-v2"]
    assert es.indices.exists(index="chunks-v1")  # the previous version is kept, to roll back to
    assert es.count(index="chunks")["count"] == 5
    third = _run(str(src), "--es", target, "--rebuild")
    assert "chunks -> chunks-v3" in third.output
    assert not es.indices.exists(index="chunks-v1") and es.indices.exists(index="chunks-v2")


def test_rebuild_from_empty_input_keeps_the_good_index(tmp_path):
    src = tmp_path / "good.jsonl"
    src.write_text("\n".join(json.dumps(p) for p in GOOD) + "\n")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    target = str(tmp_path / "engine")
    assert _run(str(src), "--es", target).exit_code == 0
    bad = _run(str(empty), "--es", target, "--rebuild")
    assert bad.exit_code == 2 and "no paper was indexed" in bad.output
    es = embedded_client(target)
    assert list(es.indices.get_alias(name="chunks").body) == ["chunks-v1"]
    assert es.count(index="chunks")["count"] == 5
    assert not es.indices.exists(index="chunks-v2")  # the failed version is discarded


def test_reindex_drops_chunks_a_paper_no_longer_has_and_refuses_other_chunking(tmp_path):
    target = str(tmp_path / "engine")
    src = tmp_path / "p.jsonl"
    src.write_text(json.dumps(GOOD[1]) + "\n")  # abstract + 2 paragraphs
    assert _run(str(src), "--es", target).exit_code == 0
    shorter = {**GOOD[1], "sections": [{"heading": "4 Results", "text": "F1 improves by three points."}]}
    src.write_text(json.dumps(shorter) + "\n")
    assert _run(str(src), "--es", target).exit_code == 0
    es = embedded_client(target)
    ids = sorted(h["_id"] for h in es.search(index="chunks", size=10)["hits"]["hits"])
    assert ids == ["g2#0.0", "g2#abs"]
    other = _run(str(src), "--es", target, "--chunking", "window")
    assert other.exit_code == 2 and "'paragraph' chunks" in other.output and "--rebuild" in other.output


def test_same_id_in_two_files_is_indexed_once_and_reported(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(GOOD[0]) + "\n")
    b.write_text(json.dumps({**GOOD[0], "title": "another paper reusing the id"}) + "\n")
    result = _run(str(a), str(b), "--es", str(tmp_path / "engine"))
    assert result.exit_code == 1
    assert "duplicate id 'g1', first seen in" in result.output and "a.jsonl" in result.output
    assert "indexed 1 papers" in result.output


def test_unknown_format_is_a_clear_error(tmp_path):
    src = tmp_path / "good.jsonl"
    src.write_text(json.dumps(GOOD[0]) + "\n")
    result = _run(str(src), "--format", "csv", "--es", str(tmp_path / "e"))
    assert result.exit_code == 2
    assert "unknown --format 'csv'" in result.output and "'qasper'" in result.output


def test_qasper_subset_gets_exactly_the_reference_chunk_ids(tmp_path, shared_data):
    path = shared_data / "qasper" / "papers_validation.jsonl"
    subset = tmp_path / "papers_validation.jsonl"
    with path.open() as f:
        lines = [next(f) for _ in range(3)]
    subset.write_text("".join(lines))
    paper_ids = {json.loads(x)["paper_id"] for x in lines}
    expected = set()
    with (path.parent / "chunks_validation.jsonl").open() as f:
        for line in f:
            row = json.loads(line)
            if row["paper_id"] in paper_ids:
                expected.add(row["_id"])
    result = _run(str(subset), "--es", str(tmp_path / "engine"), "--chunking", "paragraph")
    assert result.exit_code == 0, result.output
    es = embedded_client(tmp_path / "engine")
    got = {h["_id"] for h in es.search(index="chunks", size=1000, _source=False)["hits"]["hits"]}
    assert got == expected


def test_progress_says_the_model_loads_and_has_a_total(tmp_path):
    src = tmp_path / "good.jsonl"
    src.write_text("\n".join(json.dumps(p) for p in GOOD) + "\n" + '{"id": "bad", "title": \n')
    result = CliRunner().invoke(main, ["index", str(src), "--es", str(tmp_path / "engine")])
    assert result.exit_code == 1, result.output
    assert "loading the embedding model all-MiniLM-L6-v2 (up to a minute the first time)" in result.output
    # stderr is not a terminal here (a log): no bar (issue 27); test_index_interrupt.py watches the
    # bar and its total on a terminal
    assert "/4" not in result.output and "\r" not in result.output
    # the final refresh (where the engine builds a large index's kNN graph) says what it does
    assert re.search(r"refreshing \d+ chunks \(the embedded engine builds the kNN graph", result.output)
    quiet = _run(str(src), "--es", str(tmp_path / "engine"))
    assert "loading" not in quiet.output and "/4" not in quiet.output and "refreshing" not in quiet.output


QASPER_SHAPED = {
    "paper_id": "1503.00841",
    "title": "Robustly leveraging prior knowledge in text classification",
    "abstract": "Prior knowledge helps text classification.",
    "source": "validation",
    "sections": [
        {"section_name": "Introduction", "paragraphs": ["Labeled features guide the classifier."]},
        {"section_name": "Method ::: Regularization", "paragraphs": ["Three regularization terms."]},
        {"section_name": "Experiments", "paragraphs": ["We test on six data sets."]},
    ],
}


def test_a_qasper_file_read_as_jsonl_is_reported_with_the_format_to_use(tmp_path):
    src = tmp_path / "papers.jsonl"
    src.write_text(json.dumps(QASPER_SHAPED) + "\n" + json.dumps({**QASPER_SHAPED, "paper_id": "2"}) + "\n")
    target = str(tmp_path / "engine")
    result = _run(str(src), "--es", target, "--format", "jsonl")
    assert result.exit_code == 0, result.output
    [warning] = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert warning.startswith(f"warning: {src}: 2 records hold keys the jsonl format does not read")
    assert "sections[].section_name (2)" in warning and "source (2)" in warning
    assert warning.endswith("the records look like qasper records: use --format qasper")

    result = _run(str(src), "--es", target, "--format", "qasper", "--prefix", "q-")
    assert result.exit_code == 0 and "warning: " not in result.output, result.output
    es = embedded_client(target)
    try:
        hits = es.search(index="q-chunks", size=20, _source=["section_type"])["hits"]["hits"]
        types = {h["_source"]["section_type"] for h in hits}
        assert {"introduction", "method", "experiments"} <= types, types
    finally:
        es.close()
