"""What a reader format provides to the registry in :mod:`indexer.readers.core`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from indexer.models import Paper, Paragraph, Section, SectionType, paragraph_id
from indexer.readers.fields import RawRecord
from indexer.sections import section_types


@dataclass(frozen=True)
class RecordFormat:
    name: str
    description: str
    #: The record keys that may hold the paper id, in order of preference (for error messages).
    id_fields: tuple[str, ...]
    #: Raw JSON record -> Paper; raises InputError (with ``field`` set) for a bad record.
    to_paper: Callable[[dict[str, Any]], Paper]
    #: The schema ``to_paper`` reads: the keys outside it are reported (``fields.unknown_keys``).
    schema: type[RawRecord]

    def id_field(self, record: dict[str, Any]) -> str:
        return next((k for k in self.id_fields if k in record), self.id_fields[0])


def make_sections(paper_id: str, parts: list[tuple[str, list[str], SectionType | None]]) -> list[Section]:
    """Sections from (heading, paragraph texts, explicit type or None), in reading order.

    Paragraphs keep their indices (and so their ids), empty ones included. Types not given are
    decided from the headings, neighbours included (:func:`indexer.sections.section_types`).
    """
    types = section_types([heading for heading, _, _ in parts], [given for _, _, given in parts])
    return [
        Section(
            heading=heading,
            type=types[s],
            paragraphs=[
                Paragraph(id=paragraph_id(paper_id, s, i), text=text) for i, text in enumerate(texts)
            ],
        )
        for s, (heading, texts, _) in enumerate(parts)
    ]
