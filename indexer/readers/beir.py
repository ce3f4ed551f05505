"""BEIR corpora: ``corpus.jsonl`` lines ``{"_id", "title", "text", "metadata"}``.

A BEIR document is an abstract-sized passage, so ``text`` becomes the paper's abstract and the
paper has no body sections: it indexes as one chunk, ``<_id>#abs``. ``metadata`` is ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from indexer.models import Paper
from indexer.readers.base import RecordFormat
from indexer.readers.fields import PaperId, RawRecord, Text, parse


class BeirRecord(RawRecord):
    # pydantic fields cannot start with "_"; the alias reads "_id" and names it in errors.
    doc_id: PaperId = Field(alias="_id")
    title: Text = ""
    text: Text = ""
    NOT_INDEXED = frozenset({"metadata"})


def to_paper(record: dict[str, Any]) -> Paper:
    raw = parse(BeirRecord, record)
    return Paper(id=raw.doc_id, title=raw.title, abstract=raw.text)


FORMAT = RecordFormat(
    name="beir",
    description="BEIR corpus.jsonl: {_id, title, text, metadata}",
    id_fields=("_id",),
    to_paper=to_paper,
    schema=BeirRecord,
)
