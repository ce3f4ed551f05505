import json
import os
from pathlib import Path

import pytest

from indexer.chunker import chunk_paper
from indexer.models import Paper
from indexer.readers import FORMATS, detect_format, read_papers
from scholar_es.errors import ConfigError, InputError

DATA = Path(os.environ.get("SCHOLAR_ES_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))


def _data(*parts: str) -> Path:
    path = DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"shared data not found at {path}; set SCHOLAR_ES_DATA to the data folder to run this test"
        )
    return path


def _split(items):
    papers = [i for i in items if isinstance(i, Paper)]
    errors = [i for i in items if isinstance(i, InputError)]
    assert len(papers) + len(errors) == len(items)
    return papers, errors


def _write(path: Path, lines: list) -> Path:
    """Write lines (dicts as JSON, str as text, bytes as is) joined by newlines."""
    raw = [
        json.dumps(x).encode() if isinstance(x, dict) else x if isinstance(x, bytes) else x.encode()
        for x in lines
    ]
    path.write_bytes(b"\n".join(raw) + b"\n")
    return path


# -- real data ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("split, n_papers", [("validation", 281), ("train", 888)])
def test_qasper_paragraph_chunks_reproduce_the_reference_chunk_ids(split, n_papers):
    papers_file = _data("qasper", f"papers_{split}.jsonl")
    reference = [json.loads(line) for line in _data("qasper", f"chunks_{split}.jsonl").open(encoding="utf-8")]
    papers, errors = _split(list(read_papers(papers_file)))  # auto-detected as QASPER
    assert errors == [] and len(papers) == n_papers
    chunks = [c for p in papers for c in chunk_paper(p)]
    assert {c.id for c in chunks} == {r["_id"] for r in reference}
    assert len(chunks) == len(reference)
    by_id = {c.id: c for c in chunks}
    for row in reference[:3000]:
        chunk = by_id[row["_id"]]
        assert (chunk.text, chunk.section_heading) == (row["text"], row["section"])  # "Abstract" for #abs


@pytest.mark.slow
def test_pubmedqa_sections_become_typed_one_paragraph_sections():
    papers, errors = _split(list(read_papers(_data("pubmedqa", "papers.jsonl"))))
    assert errors == [] and len(papers) == 1000
    first = papers[0]
    assert first.id == "21645374" and first.year == 2011 and first.abstract == ""
    assert [(s.heading, s.type) for s in first.sections] == [
        ("BACKGROUND", "background"),
        ("RESULTS", "results"),
        ("CONCLUSIONS", "conclusion"),
    ]
    assert [c.id for c in chunk_paper(first)] == ["21645374#0.0", "21645374#1.0", "21645374#2.0"]
    assert sum(p.year is None for p in papers) == 58


@pytest.mark.slow
def test_beir_directory_is_detected_from_its_corpus_file():
    papers, errors = _split(list(read_papers(_data("scifact"))))
    assert errors == [] and len(papers) == 5183
    assert papers[0].abstract and papers[0].sections == []
    assert [c.id for c in chunk_paper(papers[0])] == [f"{papers[0].id}#abs"]


# -- bad input ------------------------------------------------------------------------------------


def test_bad_records_yield_one_located_error_each_and_reading_goes_on(tmp_path):
    good = {
        "id": "p1",
        "title": "A",
        "abstract": "x",
        "year": 2020,
        "sections": [{"heading": "1 Intro", "paragraphs": ["a", "b"]}],
    }
    lines = [
        good,  # 1
        '{"id": "p2", "title": "B"',  # 2 malformed JSON
        "",  # 3 blank: skipped silently
        {"title": "no id", "abstract": "x"},  # 4 missing id
        {"id": "p3", "title": "", "sections": [{"heading": "H", "paragraphs": ["", " "]}]},  # 5 no text
        {"id": "p4", "title": "C", "year": "abc"},  # 6 wrong type
        {"id": "p5", "title": "D", "sections": "x"},  # 7 wrong type
        {"id": "p6", "title": 5},  # 8 wrong type
        b'{"id": "p7", "title": "caf\xe9"}',  # 9 invalid UTF-8 (latin-1 byte)
        {"id": "p1", "title": "again"},  # 10 duplicate id
        "[1, 2]",  # 11 not an object
        "   ",  # 12 blank: skipped silently
        {"id": "p8", "title": "E", "sections": [{"heading": "Setup", "text": "one\n\ntwo"}]},  # 13
        {"id": "p9", "title": "F", "sections": [{"heading": "H", "paragraphs": ["ok", 3]}]},  # 14
    ]
    path = _write(tmp_path / "mixed.jsonl", lines)
    papers, errors = _split(list(read_papers(path, "jsonl")))
    assert [p.id for p in papers] == ["p1", "p8"]
    assert [[p.text for p in s.paragraphs] for s in papers[1].sections] == [["one", "two"]]
    located = {(e.line, e.field) for e in errors}
    assert located == {
        (2, None),
        (4, "id"),
        (5, None),
        (6, "year"),
        (7, "sections"),
        (8, "title"),
        (9, None),
        (10, "id"),
        (11, None),
        (14, "sections[0].paragraphs[1]"),
    }
    for error in errors:
        message = str(error)
        assert message.startswith(f"{path}:{error.line}: ")
        assert error.source == str(path)
        if error.field:
            assert f"field {error.field!r}" in message
    reasons = {e.line: e.reason for e in errors}
    assert "malformed JSON" in reasons[2]
    assert "'id' is missing" in reasons[4]
    assert "no text" in reasons[5] and "'p3'" in reasons[5]
    assert "'abc'" in reasons[6]
    assert "expected a list, got 'x'" in reasons[7]
    assert "expected a string, got 5" in reasons[8]
    assert "not valid UTF-8" in reasons[9] and "0xe9" in reasons[9]
    assert "duplicate id 'p1', first seen at line 1" in reasons[10]
    assert "expected a JSON object" in reasons[11]


@pytest.mark.parametrize("content", [b"", b"\n\n  \n"])
def test_empty_file_gives_one_error_for_the_file(tmp_path, content):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(content)
    items = list(read_papers(path))
    assert len(items) == 1 and isinstance(items[0], InputError)
    assert items[0].line is None and items[0].source == str(path) and "empty" in str(items[0])


def test_reading_streams(tmp_path):
    path = _write(tmp_path / "s.jsonl", [{"id": "a", "title": "A"}, "{broken"])
    items = read_papers(path)
    assert next(items).id == "a"  # the first paper comes before the rest of the file is parsed
    assert isinstance(next(items), InputError)


def test_bom_crlf_and_numeric_ids_are_accepted(tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": 17, "title": "A", "year": "2019"}\r\n{"id": "b", "title": "B"}\r\n')
    papers, errors = _split(list(read_papers(path)))
    assert errors == [] and [(p.id, p.year) for p in papers] == [("17", 2019), ("b", None)]


# -- formats and detection -------------------------------------------------------------------------

QASPER = {
    "paper_id": "q1",
    "title": "T",
    "abstract": "A",
    "source": "x",
    "sections": [
        {"section_name": "Intro", "paragraphs": ["p0", "p1"]},
        {"section_name": None, "paragraphs": []},
        {"section_name": "Model ::: Encoder", "paragraphs": ["e"]},
    ],
}
PUBMED = {
    "paper_id": 123,
    "year": "2011",
    "meshes": ["X"],
    "sections": [{"section_name": "OBJECTIVE", "text": "o"}, {"section_name": "METHODS", "text": "m"}],
}
BEIR = {"_id": "d1", "title": "T", "text": "body", "metadata": {}}
S2ORC = {
    "paper_id": "s1",
    "title": "T",
    "abstract": [{"text": "a1"}, {"text": "a2"}],
    "body_text": [
        {"section": "Intro", "text": "i0"},
        {"section": "Intro", "text": "i1"},
        {"section": "Method", "text": "m0"},
        {"section": "Intro", "text": "i2"},
    ],
}


@pytest.mark.parametrize(
    "record, fmt",
    [
        (QASPER, "qasper"),
        (PUBMED, "pubmedqa"),
        (BEIR, "beir"),
        (S2ORC, "jsonl"),
        ({"id": "x", "title": "t"}, "jsonl"),
    ],
)
def test_detect_format_from_keys(record, fmt):
    assert detect_format(record) == fmt


def test_qasper_keeps_original_indices_and_heading_paths(tmp_path):
    [paper] = read_papers(_write(tmp_path / "q.jsonl", [QASPER]))
    assert [s.heading for s in paper.sections] == ["Intro", "", "Model ::: Encoder"]
    assert [s.type for s in paper.sections] == ["introduction", "other", "method"]
    assert [c.id for c in chunk_paper(paper)] == ["q1#abs", "q1#0.0", "q1#0.1", "q1#2.0"]


def test_pubmedqa_record(tmp_path):
    [paper] = read_papers(_write(tmp_path / "p.jsonl", [PUBMED]))
    assert (paper.id, paper.year, paper.abstract) == ("123", 2011, "")
    assert [(s.type, [p.id for p in s.paragraphs]) for s in paper.sections] == [
        ("introduction", ["123#0.0"]),
        ("method", ["123#1.0"]),
    ]


def test_beir_file_named_corpus_jsonl_and_bad_beir_record(tmp_path):
    path = _write(tmp_path / "corpus.jsonl", [BEIR, {"title": "no id", "text": "t"}])
    papers, errors = _split(list(read_papers(path)))
    assert [(p.id, p.title, p.abstract, p.sections) for p in papers] == [("d1", "T", "body", [])]
    assert [(e.line, e.field) for e in errors] == [(2, "_id")]


def test_s2orc_body_text_groups_consecutive_paragraphs(tmp_path):
    [paper] = read_papers(_write(tmp_path / "s.jsonl", [S2ORC]))
    assert paper.abstract == "a1\n\na2"
    assert [(s.heading, [p.id for p in s.paragraphs]) for s in paper.sections] == [
        ("Intro", ["s1#0.0", "s1#0.1"]),
        ("Method", ["s1#1.0"]),
        ("Intro", ["s1#2.0"]),
    ]


def test_explicit_section_type_overrides_the_heading(tmp_path):
    record = {
        "id": "x",
        "sections": [
            {"heading": "Zoo", "type": "experiments", "paragraphs": ["z"]},
            {"heading": "Zoo", "type": "nonsense", "paragraphs": ["z"]},
        ],
    }
    record_ok = {"id": "y", "sections": record["sections"][:1]}
    papers, errors = _split(list(read_papers(_write(tmp_path / "t.jsonl", [record_ok, record]))))
    assert papers[0].sections[0].type == "experiments"
    assert errors[0].field == "sections[1].type" and "'method'" in errors[0].reason


def test_detection_looks_past_undecidable_records(tmp_path):
    undecided = {"paper_id": "u", "title": "T", "abstract": "A", "sections": []}
    path = _write(tmp_path / "papers.jsonl", ["{bad", undecided, QASPER])
    papers, errors = _split(list(read_papers(path)))
    assert [p.id for p in papers] == ["u", "q1"] and papers[1].sections[0].type == "introduction"
    assert [e.line for e in errors] == [1]


def test_forced_format_reports_records_of_another_shape(tmp_path):
    path = _write(tmp_path / "q.jsonl", [QASPER])
    [error] = read_papers(path, "beir")
    assert error.field == "_id" and error.line == 1


# -- keys a format does not read: reported once per file -------------------------------------------


def _read_with_warnings(path, fmt="auto"):
    warnings: list[str] = []
    items = list(read_papers(path, fmt, on_warning=warnings.append))
    return items, warnings


@pytest.mark.parametrize("record", [QASPER, PUBMED, BEIR, S2ORC, {"id": "x", "title": "t"}])
def test_a_record_each_format_reads_whole_gives_no_warning(tmp_path, record):
    items, warnings = _read_with_warnings(_write(tmp_path / "r.jsonl", [record]))
    assert len(_split(items)[0]) == 1 and warnings == []


def test_qasper_file_read_as_jsonl_names_the_lost_headings_and_the_format_to_use(tmp_path):
    second = {**QASPER, "paper_id": "q2"}
    path = _write(tmp_path / "q.jsonl", [QASPER, second])
    items, [warning] = _read_with_warnings(path, "jsonl")
    assert len(_split(items)[0]) == 2  # read all the same, as before
    assert warning.startswith(f"{path}: 2 records hold keys the jsonl format does not read")
    assert "sections[].section_name (2)" in warning and "source (2)" in warning
    assert warning.endswith("use --format qasper")
    _, again = _read_with_warnings(path, "qasper")
    assert again == []


@pytest.mark.parametrize(
    "fmt, record, key",
    [
        ("jsonl", {"id": "x", "title": "t", "doi": "10.1/x"}, "doi"),
        (
            "jsonl",
            {"id": "x", "sections": [{"heading": "H", "paragraphs": ["p"], "label": "l"}]},
            "sections[].label",
        ),
        (
            "jsonl",
            {"paper_id": "x", "body_text": [{"section": "S", "text": "t", "cite_spans": []}]},
            "body_text[].cite_spans",
        ),
        ("qasper", {**QASPER, "figures_and_tables": []}, "figures_and_tables"),
        (
            "qasper",
            {**QASPER, "sections": [{"section_name": "I", "paragraphs": ["p"], "id": 3}]},
            "sections[].id",
        ),
        ("pubmedqa", {**PUBMED, "labels": ["a"]}, "labels"),
        (
            "pubmedqa",
            {**PUBMED, "sections": [{"section_name": "M", "text": "t", "label": "x"}]},
            "sections[].label",
        ),
        ("beir", {**BEIR, "url": "u"}, "url"),
    ],
)
def test_each_reader_reports_its_unread_keys_once_per_file(tmp_path, fmt, record, key):
    path = _write(tmp_path / "r.jsonl", [record, "{bad", {**record, FORMATS[fmt].id_fields[0]: "other"}])
    items, [warning] = _read_with_warnings(path, fmt)
    papers, errors = _split(items)
    assert len(papers) == 2 and len(errors) == 1
    assert f"2 records hold keys the {fmt} format does not read" in warning and f"{key} (2)" in warning
    assert warning.endswith("see `scholar-es index --help` for the formats and their keys")


def test_unread_keys_go_to_the_log_without_a_callback(tmp_path, caplog):
    path = _write(tmp_path / "q.jsonl", [QASPER])
    with caplog.at_level("WARNING", logger="indexer.readers"):
        list(read_papers(path, "jsonl"))
    assert [r.levelname for r in caplog.records] == ["WARNING"]
    assert "use --format qasper" in caplog.records[0].getMessage()


# -- bad options -------------------------------------------------------------------------------------


def test_unknown_format_lists_the_registry(tmp_path):
    path = _write(tmp_path / "x.jsonl", [BEIR])
    with pytest.raises(ConfigError) as info:
        read_papers(path, "csv")  # raised at the call, before any iteration
    assert "'csv'" in str(info.value) and all(repr(name) in str(info.value) for name in FORMATS)


def test_missing_path_and_plain_directory_raise_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        read_papers(tmp_path / "absent.jsonl")
    with pytest.raises(ConfigError, match="is a directory"):
        read_papers(tmp_path)
