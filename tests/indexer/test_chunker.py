import pytest

from indexer.chunker import CHUNKING_MODES, chunk_paper
from indexer.models import Paper, Paragraph, Section
from scholar_es.errors import ConfigError


def _section(paper_id, s, heading, section_type, lengths):
    """A section whose words are unique tokens "s<section>p<paragraph>w<word>"."""
    paragraphs = [
        Paragraph(id=f"{paper_id}#{s}.{p}", text=" ".join(f"s{s}p{p}w{w}" for w in range(n)))
        for p, n in enumerate(lengths)
    ]
    return Section(heading=heading, type=section_type, paragraphs=paragraphs)


def _paper(abstract_words=40):
    sections = [
        _section("P", 0, "1 Introduction", "introduction", [30, 0, 25]),  # an empty paragraph inside
        _section("P", 1, "2 Model", "method", [200, 7, 90]),
        _section("P", 2, "Empty", "other", [0]),  # no text at all
        _section("P", 3, "3 Results", "results", [5]),  # shorter than a window
        _section("P", 4, "4 Conclusion", "conclusion", [150]),  # exactly one window
    ]
    abstract = " ".join(f"abs{w}" for w in range(abstract_words))
    return Paper(id="P", title="T", abstract=abstract, sections=sections)


def test_paragraph_mode_one_chunk_per_non_empty_paragraph():
    chunks = chunk_paper(_paper())
    assert [c.id for c in chunks] == ["P#abs", "P#0.0", "P#0.2", "P#1.0", "P#1.1", "P#1.2", "P#3.0", "P#4.0"]
    assert [c.position for c in chunks] == list(range(len(chunks)))
    first = chunks[0]
    assert (first.section_heading, first.section_type, first.paragraph_ids) == (
        "Abstract",
        "abstract",
        ["P#abs"],
    )
    model = chunks[3]
    assert (model.section_heading, model.section_type, model.paper_id) == ("2 Model", "method", "P")
    assert model.text.startswith("s1p0w0 ") and model.paragraph_ids == ["P#1.0"]


def test_without_abstract_the_first_body_chunk_is_position_0():
    paper = _paper().model_copy(update={"abstract": "  "})
    for mode in CHUNKING_MODES:
        chunks = chunk_paper(paper, mode)
        assert chunks[0].position == 0 and chunks[0].section_type == "introduction"


@pytest.mark.parametrize("window, overlap", [(150, 30), (50, 10), (20, 0), (7, 6), (1, 0)])
def test_windows_stay_in_sections_cover_every_word_and_overlap(window, overlap):
    paper = _paper()
    chunks = chunk_paper(paper, "window", window_words=window, overlap_words=overlap)
    assert [c.position for c in chunks] == list(range(len(chunks)))
    by_section: dict[str, list] = {}
    for chunk in chunks:
        key, k = chunk.id.removeprefix("P#").split(".w")
        by_section.setdefault(key, []).append(chunk)
        assert int(k) == len(by_section[key]) - 1  # w0, w1, ... in order
    assert list(by_section) == ["abs", "0", "1", "3", "4"]
    for key, windows in by_section.items():
        prefix = "abs" if key == "abs" else f"s{key}p"
        words = [w.split() for w in (c.text for c in windows)]
        assert all(t.startswith(prefix) for ws in words for t in ws), "a window crossed a section boundary"
        if key == "abs":
            expected = paper.abstract.split()
        else:
            section = paper.sections[int(key)]
            expected = " ".join(p.text for p in section.paragraphs).split()
        assert sorted(set(t for ws in words for t in ws)) == sorted(expected), "words lost or invented"
        assert all(len(ws) <= window for ws in words)
        assert all(len(ws) == window for ws in words[:-1])
        assert words[-1][-1] == expected[-1]
        for a, b in zip(words, words[1:], strict=False):
            assert a[len(a) - overlap :] == b[:overlap] if overlap else a[-1] != b[0]
            assert b[-1] not in a, "a window lies wholly inside the previous one"
        for chunk, ws in zip(windows, words, strict=True):
            assert chunk.section_type == ("abstract" if key == "abs" else paper.sections[int(key)].type)
            touched = {t.split("w")[0] for t in ws}
            expected_ids = (
                ["P#abs"]
                if key == "abs"
                else [
                    f"P#{key}.{t[len(prefix) :]}"
                    for t in sorted(touched, key=lambda t: int(t[len(prefix) :]))
                ]
            )
            assert chunk.paragraph_ids == expected_ids


def test_window_text_marks_paragraph_breaks():
    paper = Paper(id="X", sections=[_section("X", 0, "Method", "method", [3, 2])])
    [chunk] = chunk_paper(paper, "window", window_words=10, overlap_words=2)
    assert chunk.text == "s0p0w0 s0p0w1 s0p0w2\n\ns0p1w0 s0p1w1"
    assert chunk.id == "X#0.w0" and chunk.paragraph_ids == ["X#0.0", "X#0.1"]


def test_window_ids_are_deterministic():
    assert [c.id for c in chunk_paper(_paper(), "window")] == [c.id for c in chunk_paper(_paper(), "window")]
    ids = [c.id for c in chunk_paper(_paper(), "window", window_words=150, overlap_words=30)]
    assert ids == ["P#abs.w0", "P#0.w0", "P#1.w0", "P#1.w1", "P#1.w2", "P#3.w0", "P#4.w0"]


@pytest.mark.parametrize(
    "window, overlap, fragment",
    [
        (100, 100, "overlap_words must be at least 0 and less than window_words (100), got 100"),
        (100, 150, "got 150"),
        (0, 0, "window_words must be positive, got 0"),
        (-5, 0, "got -5"),
        (100, -1, "got -1"),
        (100.0, 10, "window_words must be an integer, got 100.0"),
        (True, 0, "window_words must be an integer, got True"),
    ],
)
def test_bad_window_parameters_raise_config_error(window, overlap, fragment):
    with pytest.raises(ConfigError) as info:
        chunk_paper(_paper(), "window", window_words=window, overlap_words=overlap)
    assert fragment in str(info.value)


def test_unknown_mode_lists_the_registry():
    with pytest.raises(ConfigError) as info:
        chunk_paper(_paper(), "sentences")
    message = str(info.value)
    assert "'sentences'" in message and all(repr(m) in message for m in CHUNKING_MODES)


def test_paper_without_text_gives_no_chunks():
    assert chunk_paper(Paper(id="E", title="only a title")) == []
    assert chunk_paper(Paper(id="E"), "window") == []
