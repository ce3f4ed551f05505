"""The indexer's data model: papers as read from input files, and the chunks written to the index.

Paragraph ids follow QASPER's convention so that evaluation data (qrels, evidence ids) line up
with what is indexed: ``<paper_id>#<section_idx>.<para_idx>`` for body paragraphs (0-based
indices into ``Paper.sections`` and ``Section.paragraphs``) and ``<paper_id>#abs`` for the
abstract.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

SectionType = Literal[
    "abstract",
    "introduction",
    "related_work",
    "background",
    "method",
    "experiments",
    "results",
    "discussion",
    "conclusion",
    "limitations",
    "other",
]
#: The registry of section types, in the order of :data:`SectionType`.
SECTION_TYPES: tuple[str, ...] = get_args(SectionType)

ABSTRACT_HEADING = "Abstract"


class _Frozen(BaseModel):
    # Frozen: a chunk or paper is a value; extra="forbid" catches misspelt field names early.
    model_config = ConfigDict(frozen=True, extra="forbid")


class Paragraph(_Frozen):
    id: str = Field(min_length=1)
    text: str


class Section(_Frozen):
    heading: str
    type: SectionType
    #: Kept at their original indices, empty ones included, so paragraph ids stay stable.
    paragraphs: list[Paragraph] = []


class Paper(_Frozen):
    id: str = Field(min_length=1)
    title: str = ""
    abstract: str = ""
    authors: list[str] = []
    year: int | None = None
    venue: str | None = None
    #: Body sections, NOT including the abstract.
    sections: list[Section] = []

    def abstract_paragraph_id(self) -> str:
        return abstract_paragraph_id(self.id)

    def has_text(self) -> bool:
        """True when there is anything to index: a title, an abstract or a non-empty paragraph."""
        return bool(
            self.title.strip()
            or self.abstract.strip()
            or any(p.text.strip() for s in self.sections for p in s.paragraphs)
        )


class Chunk(_Frozen):
    id: str = Field(min_length=1)
    paper_id: str = Field(min_length=1)
    section_heading: str
    section_type: SectionType
    text: str
    #: Every paragraph the chunk's text comes from (one in paragraph mode).
    paragraph_ids: list[str]
    #: 0-based order of the chunk within its paper (the abstract, when present, is 0).
    position: int = Field(ge=0)
    vector: list[float] | None = None


def abstract_paragraph_id(paper_id: str) -> str:
    return f"{paper_id}#abs"


def paragraph_id(paper_id: str, section_idx: int, para_idx: int) -> str:
    return f"{paper_id}#{section_idx}.{para_idx}"
