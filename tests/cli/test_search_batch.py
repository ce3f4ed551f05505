"""``scholar-es search --queries FILE --run-out RUN``: many questions, the model loaded once, a TREC
run file whose lines are exactly what ``querybuilder.strategies.search`` ranks for each question."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from querybuilder.strategies import search
from scholar_es.cli import main

pytestmark = pytest.mark.slow

QUESTIONS = ["How is information carried between windows of a long document?", "reciprocal rank fusion"]


def _expected(served_demo, qid: str, question: str, *, papers: bool = False) -> list[str]:
    result = search(served_demo.es, question, embedder=served_demo.embedder, size=3, papers=papers)
    ranked = (
        [(p.paper_id, p.score) for p in result.papers]
        if papers
        else [(h.chunk_id, h.score) for h in result.hits]
    )
    return [f"{qid} Q0 {doc} {rank} {score:.6f} hybrid" for rank, (doc, score) in enumerate(ranked, 1)]


def test_plain_text_questions_to_a_run_file(served_demo, tmp_path):
    queries = tmp_path / "questions.txt"
    queries.write_text(f"{QUESTIONS[0]}\n\n{QUESTIONS[1]}\n")
    run = tmp_path / "run.txt"
    args = [
        "search",
        "--queries",
        str(queries),
        "--run-out",
        str(run),
        "--es",
        str(served_demo.path),
        "--size",
        "3",
    ]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = run.read_text().splitlines()
    # ids are line numbers: the blank line 2 is no question
    assert lines == _expected(served_demo, "1", QUESTIONS[0]) + _expected(served_demo, "3", QUESTIONS[1])
    assert "searched 2 questions (0 lines rejected)" in result.output


def test_beir_queries_bad_lines_reported_counted_and_skipped(served_demo, tmp_path):
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        "\n".join(
            [
                json.dumps({"_id": "q1", "text": QUESTIONS[0]}),
                '{"_id": "q2", "text": ',
                json.dumps({"_id": "q3", "text": ""}),
                json.dumps({"_id": "q1", "text": "again"}),
                json.dumps({"_id": "q4", "text": QUESTIONS[1]}),
            ]
        )
        + "\n"
    )
    run = tmp_path / "run.txt"
    args = ["search", "--queries", str(queries), "--run-out", str(run), "--es", str(served_demo.path)]
    result = CliRunner().invoke(main, [*args, "--size", "3", "--papers"])
    assert result.exit_code == 1
    assert f"{queries}:2: malformed JSON" in result.output
    assert f"{queries}:3: field 'text': missing or empty question text" in result.output
    assert f"{queries}:4: field '_id': duplicate query id 'q1'" in result.output
    assert "searched 2 questions (3 lines rejected)" in result.output
    expected = _expected(served_demo, "q1", QUESTIONS[0], papers=True) + _expected(
        served_demo, "q4", QUESTIONS[1], papers=True
    )
    assert run.read_text().splitlines() == expected


def test_question_and_queries_together_are_refused(served_demo, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text("x\n")
    result = CliRunner().invoke(
        main, ["search", "why", "--queries", str(queries), "--es", str(served_demo.path)]
    )
    assert result.exit_code == 2 and "either QUESTION or --queries FILE" in result.output
    result = CliRunner().invoke(main, ["search", "--es", str(served_demo.path)])
    assert result.exit_code == 2 and "missing QUESTION" in result.output
