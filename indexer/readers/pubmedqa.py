"""PubMedQA abstracts: ``{"paper_id", "year", "meshes", "sections": [{"section_name", "text"}]}``.

The sections are the labelled parts of a structured abstract (BACKGROUND, METHODS, RESULTS,
CONCLUSIONS, ...). Each becomes a body Section with one paragraph, ``<paper_id>#<i>.0``, typed
from its label (METHODS -> method, CONCLUSIONS -> conclusion), and ``Paper.abstract`` stays
empty: indexing the joined text as an abstract chunk as well would put every sentence in the
index twice, and one chunk per label is what makes "search the conclusions only" possible.
``year`` may be a string ("2011") or null; ``meshes`` and ``split`` are not indexed.
"""

from __future__ import annotations

from typing import Any

from indexer.models import Paper
from indexer.readers.base import RecordFormat, make_sections
from indexer.readers.fields import ListOf, PaperId, RawRecord, Text, Year, parse


class PubmedSection(RawRecord):
    section_name: Text = ""
    text: Text = ""


class PubmedRecord(RawRecord):
    paper_id: PaperId
    title: Text = ""
    year: Year = None
    sections: ListOf[PubmedSection] = []
    NOT_INDEXED = frozenset({"meshes", "split"})  # split: the data set part a record came from


def to_paper(record: dict[str, Any]) -> Paper:
    raw = parse(PubmedRecord, record)
    sections = make_sections(raw.paper_id, [(s.section_name, [s.text], None) for s in raw.sections])
    return Paper(id=raw.paper_id, title=raw.title, year=raw.year, sections=sections)


FORMAT = RecordFormat(
    name="pubmedqa",
    description="PubMedQA papers.jsonl: {paper_id, year, meshes, sections: [{section_name, text}]}",
    id_fields=("paper_id",),
    to_paper=to_paper,
    schema=PubmedRecord,
)
