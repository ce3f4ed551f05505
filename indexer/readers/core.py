"""``read_papers``: stream papers from a file in any registered format, reporting bad records.

Bad records never stop a read: each becomes one InputError (file, 1-based line, field, reason)
in the stream, in file order, and the papers around it are still read. Only a bad *option*
(unknown format, missing path) raises, as ConfigError, when ``read_papers`` is called.

Keys the format does not read are reported once per file, when the file is done: one warning
line naming the file, the keys and how many records hold them, and the ``--format`` the records
look like when :func:`detect_format` gives another one (a QASPER file read as ``jsonl`` loses
its headings). The line goes to ``on_warning``, or to the ``indexer.readers`` logger.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from indexer.models import Paper
from indexer.readers import beir, jsonl, pubmedqa, qasper
from indexer.readers.base import RecordFormat
from indexer.readers.fields import unknown_keys
from indexer.readers.lines import Item, iter_records
from scholar_es.errors import ConfigError, InputError, choices

#: The registry of input formats, by name.
FORMATS: dict[str, RecordFormat] = {
    f.name: f for f in (jsonl.FORMAT, beir.FORMAT, qasper.FORMAT, pubmedqa.FORMAT)
}
AUTO = "auto"
BEIR_CORPUS = "corpus.jsonl"
#: Records looked at to detect a format before falling back to ``jsonl`` (they are buffered).
_DETECT_LIMIT = 1000


_LOG = logging.getLogger("indexer.readers")


def read_papers(
    path: str | Path, fmt: str = AUTO, on_warning: Callable[[str], None] | None = None
) -> Iterator[Paper | InputError]:
    """Stream the papers of ``path``; a bad record yields a located InputError and reading goes on.

    ``fmt`` is a name in :data:`FORMATS` or ``"auto"``: a directory holding ``corpus.jsonl`` or a
    file named ``corpus.jsonl`` is BEIR, any other file is recognised by its first records' keys.
    ``on_warning`` gets the file's one line about keys the format does not read (default: the
    ``indexer.readers`` logger, level WARNING).
    """
    if fmt != AUTO and fmt not in FORMATS:
        raise ConfigError(f"unknown input format {fmt!r}; use {AUTO!r} or one of {choices(FORMATS)}")
    file, fixed = _resolve(Path(path), fmt)
    return _read(file, fixed, on_warning or _LOG.warning)


def detect_format(record: dict[str, Any]) -> str | None:
    """The format a record's keys give away, or None when they fit several."""
    if "_id" in record:
        return beir.FORMAT.name
    if "id" in record or "body_text" in record:
        return jsonl.FORMAT.name
    sections = record.get("sections")
    first = sections[0] if isinstance(sections, list) and sections else None
    if isinstance(first, dict):
        if "heading" in first:
            return jsonl.FORMAT.name
        if "paragraphs" in first:
            return qasper.FORMAT.name
        if "text" in first:
            return pubmedqa.FORMAT.name
    if "meshes" in record:
        return pubmedqa.FORMAT.name
    return None


def _resolve(path: Path, fmt: str) -> tuple[Path, str | None]:
    if path.is_dir():
        corpus = path / BEIR_CORPUS
        if fmt in (AUTO, beir.FORMAT.name) and corpus.is_file():
            return corpus, beir.FORMAT.name
        raise ConfigError(
            f"input path {str(path)!r} is a directory; pass a JSON-lines file "
            f"(or a BEIR directory, which holds {BEIR_CORPUS})"
        )
    if not path.is_file():
        raise ConfigError(f"input file {str(path)!r} does not exist; check the path")
    if fmt == AUTO and path.name == BEIR_CORPUS:
        return path, beir.FORMAT.name
    return path, None if fmt == AUTO else fmt


def unread_keys_warning(
    source: str, fmt: str, keys: Counter[str], records: int, looks_like: str | None
) -> str:
    """The one line about the keys of ``source`` that format ``fmt`` did not read."""
    listed = ", ".join(f"{k} ({n})" for k, n in sorted(keys.items(), key=lambda kv: (-kv[1], kv[0])))
    line = (
        f"{source}: {records} record{'s' if records != 1 else ''} hold keys the {fmt} format does not "
        f"read, so their values were not indexed: {listed} (records per key)"
    )
    if looks_like is not None and looks_like != fmt:
        return f"{line}; the records look like {looks_like} records: use --format {looks_like}"
    return f"{line}; see `scholar-es index --help` for the formats and their keys"


def _read(file: Path, fmt: str | None, on_warning: Callable[[str], None]) -> Iterator[Paper | InputError]:
    source = str(file)
    items: Iterator[Item] = iter_records(file, source)
    if fmt is None:
        items, fmt = _detect(items)
    record_format = FORMATS[fmt]
    unread: Counter[str] = Counter()
    unread_records = 0
    looks_like: str | None = None
    for paper_or_error in _to_papers(items, source, record_format):
        if isinstance(paper_or_error, tuple):  # a record's keys the format does not read
            record, keys = paper_or_error
            unread.update(keys)
            unread_records += 1
            if unread_records == 1:
                looks_like = detect_format(record)
            continue
        yield paper_or_error
    if unread_records:
        on_warning(unread_keys_warning(source, fmt, unread, unread_records, looks_like))


def _to_papers(
    items: Iterator[Item], source: str, record_format: RecordFormat
) -> Iterator[Paper | InputError | tuple[dict[str, Any], set[str]]]:
    first_line: dict[str, int] = {}
    for item in items:
        if isinstance(item, InputError):
            yield item
            continue
        line, record = item
        keys = unknown_keys(record_format.schema, record)
        if keys:
            yield record, keys
        try:
            paper = record_format.to_paper(record)
        except InputError as exc:
            yield InputError(exc.reason, source=source, line=line, field=exc.field)
            continue
        if not paper.has_text():
            yield InputError(
                f"paper {paper.id!r} has no text (title, abstract and every paragraph are "
                "empty or missing); add its text or drop the record",
                source=source,
                line=line,
            )
        elif paper.id in first_line:
            # Reported rather than kept: two papers with one id would overwrite each other's chunks.
            yield InputError(
                f"duplicate id {paper.id!r}, first seen at line {first_line[paper.id]}; "
                "give each paper a unique id",
                source=source,
                line=line,
                field=record_format.id_field(record),
            )
        else:
            first_line[paper.id] = line
            yield paper


def _detect(items: Iterator[Item]) -> tuple[Iterator[Item], str]:
    """Look ahead until a record's keys name the format; the records seen are replayed."""
    seen: list[Item] = []
    fmt = None
    for item in items:
        seen.append(item)
        if not isinstance(item, InputError):
            fmt = detect_format(item[1])
        if fmt is not None or len(seen) >= _DETECT_LIMIT:
            break
    # Undecided (e.g. only empty-section papers with a paper_id): our own format reads those too.
    return itertools.chain(seen, items), fmt or jsonl.FORMAT.name
