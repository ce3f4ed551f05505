"""Loading judged datasets: counts, skipped queries and located errors."""

import json
from pathlib import Path

import pytest

from scholar_es.errors import ConfigError, InputError
from scholar_es.evaluation.datasets import load_dataset, read_qrels


def _jsonl(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def make_beir(root: Path, qrels: str | None = None, queries: list | None = None) -> Path:
    _jsonl(
        root / "corpus.jsonl",
        [{"_id": "d1", "title": "A", "text": "alpha"}, {"_id": "d2", "title": "B", "text": "beta"}],
    )
    _jsonl(
        root / "queries.jsonl",
        queries
        if queries is not None
        else [
            {"_id": "q1", "text": "alpha?"},
            {"_id": "q2", "text": "beta?"},
            {"_id": "q3", "text": "gamma?"},
        ],
    )
    (root / "qrels").mkdir(exist_ok=True)
    (root / "qrels" / "train.tsv").write_text(
        qrels if qrels is not None else "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq2\td9\t1\n"
    )
    return root


def make_qasper(root: Path, split: str = "dev") -> Path:
    _jsonl(
        root / f"papers_{split}.jsonl",
        [
            {
                "paper_id": "P1",
                "title": "T1",
                "abstract": "Abstract one.",
                "sections": [{"section_name": "Intro", "paragraphs": ["first para", "", "third para"]}],
            },
            {
                "paper_id": "P2",
                "title": "T2",
                "abstract": "Abstract two.",
                "sections": [{"section_name": "Method", "paragraphs": ["how it works"]}],
            },
        ],
    )
    _jsonl(
        root / f"questions_{split}.jsonl",
        [
            {"question_id": "a", "question": "what is first?", "paper_id": "P1"},
            {"question_id": "b", "question": "how does it work?", "paper_id": "P2"},
            {"question_id": "c", "question": "unanswerable?", "paper_id": "P2"},
        ],
    )
    (root / f"qrels_{split}.tsv").write_text(
        "query-id\tcorpus-id\tscore\na\tP1#0.0\t1\na\tP1#0.2\t1\nb\tP2#0.0\t1\nb\tP2#abs\t0\n"
    )
    return root


def test_beir_counts_skips_and_unretrievable(tmp_path):
    ds = load_dataset(make_beir(tmp_path / "mini"))
    assert (ds.format, ds.split, ds.level) == ("beir", "train", "paper")
    assert [q.id for q in ds.queries] == ["q1", "q2"]
    assert ds.unjudged == ["q3"]  # skipped and counted, not a zero in the mean
    assert ds.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1, "d9": 1}}
    assert ds.unretrievable == 1 and ds.corpus_size == 2
    assert ds.default_prefix == "mini-"
    text = "\n".join(ds.summary_lines())
    assert "2 judged queries evaluated" in text
    assert "1 queries skipped: no relevant judgment" in text
    assert "1 judgments name a paper missing from the corpus" in text


def test_qasper_levels_paper_ids_and_zero_scores(tmp_path):
    ds = load_dataset(make_qasper(tmp_path / "qasper"), "qasper", "dev")
    assert ds.level == "paragraph" and ds.default_prefix == "qasper-dev-"
    assert [(q.id, q.paper_id) for q in ds.queries] == [("a", "P1"), ("b", "P2")]
    assert ds.qrels["b"] == {"P2#0.0": 1}  # the score-0 judgment is dropped
    assert ds.unjudged == ["c"]
    assert ds.corpus_size == 5 and ds.unretrievable == 0  # 2 abstracts + 3 non-empty paragraphs
    assert ds.corpus == tmp_path / "qasper" / "papers_dev.jsonl"


def test_unknown_query_id_in_qrels_is_located_and_counted(tmp_path):
    root = make_beir(tmp_path / "b", qrels="q1\td1\t1\nq7\td1\t1\nq2\td2\t1\nq8\td2\t2\n")
    ds = load_dataset(root)
    assert [e.line for e in ds.unknown_query_lines] == [2, 4]
    assert all(isinstance(e, InputError) for e in ds.unknown_query_lines)
    assert (
        str(ds.unknown_query_lines[0])
        == f"{root / 'qrels' / 'train.tsv'}:2: query id 'q7' is not in the query file"
    )
    assert "2 qrels lines name a query id missing from the query file" in "\n".join(ds.summary_lines())
    with pytest.raises(InputError, match=r"train.tsv:2: query id 'q7'"):
        load_dataset(root, strict=True)


def test_missing_files_name_the_file(tmp_path):
    root = make_beir(tmp_path / "b")
    (root / "queries.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"queries file '.*queries.jsonl' does not exist"):
        load_dataset(root)
    with pytest.raises(ConfigError, match="not a directory"):
        load_dataset(tmp_path / "nowhere")
    q = make_qasper(tmp_path / "q", "dev")
    with pytest.raises(ConfigError, match=r"papers_test.jsonl' does not exist; splits found: 'dev'"):
        load_dataset(q, "qasper", "test")
    (q / "qrels_train.tsv").write_text("")
    with pytest.raises(ConfigError, match="has splits 'dev', 'train'; pick one with --split"):
        load_dataset(q)
    with pytest.raises(ConfigError, match="unknown dataset format"):
        load_dataset(q, "trec", "dev")


def test_malformed_lines_are_located(tmp_path):
    with pytest.raises(InputError, match=r"train.tsv:3: relevance score 'high' is not a number"):
        load_dataset(make_beir(tmp_path / "a", qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\thigh\n"))
    with pytest.raises(InputError, match=r"train.tsv:1: expected 3 tab-separated columns"):
        load_dataset(make_beir(tmp_path / "b", qrels="q1\td1\n"))
    with pytest.raises(InputError, match=r"queries.jsonl:2: .*duplicate query id 'q1', first seen at line 1"):
        load_dataset(
            make_beir(tmp_path / "c", queries=[{"_id": "q1", "text": "x"}, {"_id": "q1", "text": "y"}])
        )
    with pytest.raises(InputError, match=r"queries.jsonl:1: field 'text': query 'q1' has no text"):
        load_dataset(make_beir(tmp_path / "d", queries=[{"_id": "q1", "text": " "}]))
    with pytest.raises(InputError, match=r"queries.jsonl:2: malformed JSON"):
        load_dataset(make_beir(tmp_path / "e", queries=[{"_id": "q1", "text": "x"}, "{oops"]))


def test_qrels_formats(tmp_path):
    f = tmp_path / "q.tsv"
    f.write_text("q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\n")  # TREC, no header
    assert read_qrels(f) == ({"q1": {"d1": 1}, "q2": {"d3": 2}}, [])
    f.write_text("q1\td1\t1\n\nq1\td1\t2\n")  # a repeated judgment keeps the higher grade
    assert read_qrels(f)[0] == {"q1": {"d1": 2}}


def test_limit_keeps_the_first_judged_queries(tmp_path):
    ds = load_dataset(make_beir(tmp_path / "b"))
    one = ds.limited(1)
    assert [q.id for q in one.queries] == ["q1"] and set(one.qrels) == {"q1"}
    assert one.limited_out == 1 and one.queries_in_file == 3
    assert ds.limited(None) is ds
    with pytest.raises(ConfigError, match="--limit must be a positive integer"):
        ds.limited(0)


def test_first_papers_keeps_their_questions_and_gets_its_own_prefix(tmp_path):
    ds = load_dataset(make_qasper(tmp_path / "qasper"), "qasper", "dev")
    part = ds.first_papers(1, tmp_path / "work")
    assert [q.id for q in part.queries] == ["a"] and set(part.qrels) == {"a"}
    assert part.default_prefix == "qasper-dev-first1-"
    assert [json.loads(line)["paper_id"] for line in part.corpus.read_text().splitlines()] == ["P1"]
    with pytest.raises(ConfigError, match="--papers applies to qasper"):
        load_dataset(make_beir(tmp_path / "b")).first_papers(1, tmp_path / "work")
