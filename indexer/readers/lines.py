"""Stream the JSON records of a JSON-lines file, one line at a time, reporting bad lines.

The file is read in binary and each line decoded on its own, so one line of bad bytes costs
that line only (a text-mode reader would fail the whole file), and U+2028 inside a JSON string
cannot split a record (``str.splitlines`` would).
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scholar_es.errors import InputError

#: (1-based line number, the record) or the error that replaces a bad line.
Item = tuple[int, dict[str, Any]] | InputError

_SNIPPET = 60


def iter_records(path: Path, source: str) -> Iterator[Item]:
    """Yield every non-blank line of ``path`` as a JSON object, or an InputError located at it."""
    has_content = False
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if line_no == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]  # Windows editors add a BOM; it is not content
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                has_content = True
                yield InputError(
                    f"line is not valid UTF-8 (byte {raw[exc.start]:#04x} at byte {exc.start + 1}); "
                    "re-encode the file as UTF-8",
                    source=source,
                    line=line_no,
                )
                continue
            if not text.strip():
                continue  # blank lines (a trailing newline, spacing) carry no record
            has_content = True
            yield _parse_line(text, source, line_no)
    if not has_content:
        yield InputError(
            "file is empty (no records); pass a JSON-lines file with one record per line", source=source
        )


def _parse_line(text: str, source: str, line_no: int) -> Item:
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        return InputError(
            f"malformed JSON ({exc.msg} at column {exc.colno}) in {_snippet(text)}; "
            "write one complete JSON object per line",
            source=source,
            line=line_no,
        )
    if not isinstance(record, dict):
        return InputError(
            f"expected a JSON object, got a JSON {type(record).__name__}: {_snippet(text)}; "
            "write one JSON object per line",
            source=source,
            line=line_no,
        )
    return line_no, record


def _snippet(text: str) -> str:
    text = text.strip()
    return repr(text if len(text) <= _SNIPPET else text[:_SNIPPET] + "...")
