"""scholar-es JSON-lines input (format ``jsonl``): one paper per line, UTF-8.

Structured papers::

    {"id": "2004.12345",                       # required, unique in the file; a string (an integer is accepted)
     "title": "...", "abstract": "...",        # optional strings
     "authors": ["Ada Lovelace", ...],         # optional list of strings
     "year": 2020,                             # optional integer ("2020" is accepted)
     "venue": "ACL",                           # optional string
     "sections": [                             # optional body sections, in reading order, abstract excluded
        {"heading": "1 Introduction", "paragraphs": ["...", "..."]},
        {"heading": "2 Method", "text": "...\\n\\n..."},   # text is split into paragraphs at blank lines
        {"heading": "Setup", "type": "experiments", "paragraphs": [...]}  # optional type overrides the heading rules
     ]}

S2ORC-like full text is also accepted (instead of ``sections``, never with it)::

    {"paper_id": "...", "title": "...", "abstract": "..." | [{"text": "..."}, ...],
     "body_text": [{"section": "Introduction", "text": "..."}, ...]}

where consecutive ``body_text`` paragraphs with the same ``section`` form one section.

Rules: null counts as absent; keys not listed here are not read and are reported once per file
(with the ``--format`` the records look like, when they look like another one); a record needs an id and some text (a
title, an abstract or a paragraph). Paragraph ids are ``<id>#<section_idx>.<para_idx>``
(0-based, empty paragraphs keep their index but are not indexed) and ``<id>#abs``. A section's
``type`` is one of the section types (see ``indexer.models.SECTION_TYPES``); without it the type
comes from the heading (``indexer/sections.json``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, model_validator

from indexer.models import Paper, SectionType
from indexer.readers.base import RecordFormat, make_sections
from indexer.readers.fields import ListOf, PaperId, RawRecord, Text, Year, parse
from scholar_es.errors import InputError

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


class OursSection(RawRecord):
    heading: Text = ""
    type: SectionType | None = None
    paragraphs: ListOf[Text] | None = None
    text: Text | None = None

    @model_validator(mode="after")
    def _one_body(self) -> OursSection:
        if self.paragraphs is not None and self.text is not None:
            raise ValueError("a section has both 'paragraphs' and 'text'; keep one of them")
        return self

    def texts(self) -> list[str]:
        if self.text is not None:
            return [p.strip() for p in _PARAGRAPH_BREAK.split(self.text) if p.strip()]
        return self.paragraphs or []


class BodyParagraph(RawRecord):
    section: Text = ""
    text: Text = ""


def _abstract(value: Any) -> Any:
    # S2ORC writes the abstract as a list of paragraph objects; join them into one text.
    if not isinstance(value, list):
        return value
    texts = []
    for i, item in enumerate(value):
        text = item.get("text") if isinstance(item, dict) else item
        if not isinstance(text, str):
            raise ValueError(
                f'abstract paragraph {i} is {item!r}; expected a string or {{"text": "..."}} (S2ORC style)'
            )
        if text.strip():
            texts.append(text)
    return "\n\n".join(texts)


class OursRecord(RawRecord):
    id: PaperId | None = None
    paper_id: PaperId | None = None
    title: Text = ""
    abstract: Annotated[Text, BeforeValidator(_abstract)] = ""
    authors: ListOf[Text] = []
    year: Year = None
    venue: Text | None = None
    sections: ListOf[OursSection] | None = None
    body_text: ListOf[BodyParagraph] | None = None


def to_paper(record: dict[str, Any]) -> Paper:
    raw = parse(OursRecord, record)
    paper_id = raw.id or raw.paper_id
    if paper_id is None:
        raise InputError(
            "required field 'id' is missing (S2ORC-style records may use 'paper_id'); "
            "give every record a unique, non-empty id",
            field="id",
        )
    if raw.sections is not None and raw.body_text is not None:
        raise InputError(
            "the record has both 'sections' and 'body_text'; keep one of them", field="body_text"
        )
    parts: list[tuple[str, list[str], SectionType | None]]
    if raw.body_text is not None:
        parts = [(heading, texts, None) for heading, texts in _group_body_text(raw.body_text)]
    else:
        parts = [(s.heading, s.texts(), s.type) for s in raw.sections or []]
    sections = make_sections(paper_id, parts)
    return Paper(
        id=paper_id,
        title=raw.title,
        abstract=raw.abstract,
        authors=raw.authors,
        year=raw.year,
        venue=raw.venue or None,
        sections=sections,
    )


def _group_body_text(paragraphs: list[BodyParagraph]) -> list[tuple[str, list[str]]]:
    groups: list[tuple[str, list[str]]] = []
    for paragraph in paragraphs:
        if groups and groups[-1][0] == paragraph.section:
            groups[-1][1].append(paragraph.text)
        else:
            groups.append((paragraph.section, [paragraph.text]))
    return groups


FORMAT = RecordFormat(
    name="jsonl",
    description="scholar-es JSON lines: {id, title, abstract, authors, year, venue, "
    "sections: [{heading, paragraphs | text}]} or S2ORC-like body_text",
    id_fields=("id", "paper_id"),
    to_paper=to_paper,
    schema=OursRecord,
)
