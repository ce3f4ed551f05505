"""QASPER papers: ``{"paper_id", "title", "abstract", "sections": [{"section_name", "paragraphs"}]}``.

Sections and paragraphs keep their original indices, empty ones included, so paragraph ids
(``<paper_id>#<section_idx>.<para_idx>``) are exactly those of QASPER's evidence annotations and
of ``chunks_*.jsonl``. The heading is ``section_name`` as given, ``Parent ::: Child`` paths
included (null -> ""); its type comes from :func:`indexer.sections.section_types`. ``source``
(the split, in ``papers_*.jsonl``) is not indexed.
"""

from __future__ import annotations

from typing import Any

from indexer.models import Paper
from indexer.readers.base import RecordFormat, make_sections
from indexer.readers.fields import ListOf, PaperId, RawRecord, Text, parse


class QasperSection(RawRecord):
    section_name: Text = ""
    paragraphs: ListOf[Text] = []


class QasperRecord(RawRecord):
    paper_id: PaperId
    title: Text = ""
    abstract: Text = ""
    sections: ListOf[QasperSection] = []
    NOT_INDEXED = frozenset({"source"})  # the split a paper came from, in papers_*.jsonl


def to_paper(record: dict[str, Any]) -> Paper:
    raw = parse(QasperRecord, record)
    sections = make_sections(raw.paper_id, [(s.section_name, s.paragraphs, None) for s in raw.sections])
    return Paper(id=raw.paper_id, title=raw.title, abstract=raw.abstract, sections=sections)


FORMAT = RecordFormat(
    name="qasper",
    description="QASPER papers_*.jsonl: {paper_id, title, abstract, sections: [{section_name, paragraphs}]}",
    id_fields=("paper_id",),
    to_paper=to_paper,
    schema=QasperRecord,
)
