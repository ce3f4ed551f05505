from typing import get_args

import pytest
from pydantic import ValidationError

from indexer.models import SECTION_TYPES, Chunk, Paper, Paragraph, Section, SectionType, paragraph_id


def test_section_types_registry_follows_the_literal():
    assert get_args(SectionType) == SECTION_TYPES
    assert SECTION_TYPES[0] == "abstract" and SECTION_TYPES[-1] == "other"
    assert len(SECTION_TYPES) == 11


def test_ids_follow_the_qasper_convention():
    paper = Paper(id="1503.00841", abstract="a")
    assert paper.abstract_paragraph_id() == "1503.00841#abs"
    assert paragraph_id("1503.00841", 3, 0) == "1503.00841#3.0"


def test_models_are_frozen():
    paper = Paper(id="p", title="t")
    with pytest.raises(ValidationError):
        paper.title = "changed"
    chunk = Chunk(
        id="p#abs",
        paper_id="p",
        section_heading="Abstract",
        section_type="abstract",
        text="x",
        paragraph_ids=["p#abs"],
        position=0,
    )
    with pytest.raises(ValidationError):
        chunk.position = 3


def test_defaults_are_not_shared_between_instances():
    a, b = Paper(id="a"), Paper(id="b")
    assert a.authors == [] and a.sections == [] and a.year is None and a.venue is None
    assert a.authors is not b.authors


@pytest.mark.parametrize(
    "build",
    [
        lambda: Section(heading="x", type="methods", paragraphs=[]),  # not a section type
        lambda: Paper(id=""),  # empty id
        lambda: Paper(id="p", year="abc"),  # not a year
        lambda: Paper(id="p", titel="typo"),  # unknown field
        lambda: Paragraph(id="", text="x"),
        lambda: Chunk(
            id="c",
            paper_id="p",
            section_heading="h",
            section_type="other",
            text="x",
            paragraph_ids=[],
            position=-1,
        ),  # negative position
    ],
)
def test_invalid_values_are_rejected(build):
    with pytest.raises(ValidationError):
        build()


def test_has_text_looks_at_title_abstract_and_paragraphs():
    empty = Section(heading="Intro", type="introduction", paragraphs=[Paragraph(id="p#0.0", text="  ")])
    assert not Paper(id="p", sections=[empty]).has_text()
    assert Paper(id="p", title="T").has_text()
    assert Paper(id="p", abstract="A").has_text()
    full = Section(heading="Intro", type="introduction", paragraphs=[Paragraph(id="p#0.0", text="x")])
    assert Paper(id="p", sections=[full]).has_text()
