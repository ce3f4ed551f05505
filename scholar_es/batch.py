"""Batch search: many questions, the model loaded once, a TREC run file out.

Questions come one a line (plain text; the query id is the line number) or as BEIR
``queries.jsonl`` (``{"_id": ..., "text": ...}`` a line; chosen when the first non-blank line is a
JSON object). A bad line (malformed JSON, no id or text, a duplicate id) is reported as
``file:line: reason``, counted and skipped; every other question is still searched.

The run file has one line a retrieved document, in trec_eval's format::

    <query id> Q0 <doc id> <rank> <score> <run tag>

with chunk ids as doc ids, or paper ids with ``papers`` (the paper view: one line a paper). It is
written to a temporary file and renamed when complete, so an interrupted run leaves no half file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from scholar_es.errors import ConfigError, InputError


@dataclass
class BatchSummary:
    queries: int
    rejected: int
    lines: int
    seconds: float

    def line(self) -> str:
        return (
            f"searched {self.queries} questions ({self.rejected} lines rejected), wrote {self.lines} run "
            f"lines in {self.seconds:.1f} s ({self.queries / max(self.seconds, 1e-9):.1f} questions/s)"
        )


def read_queries(path: str | Path, on_error: Callable[[InputError], None]) -> list[tuple[str, str]]:
    """(query id, question) pairs from a plain-text or BEIR ``queries.jsonl`` file."""
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise ConfigError(f"{p}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except OSError as e:
        raise ConfigError(f"cannot read {p}: {e.strerror or e}") from None
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    beir = first.startswith("{")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text:
            continue
        if not beir:
            out.append((str(number), text))
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as e:
            on_error(InputError(f"malformed JSON ({e.msg} at column {e.colno})", source=str(p), line=number))
            continue
        if not isinstance(record, dict):
            on_error(InputError("expected a JSON object", source=str(p), line=number))
            continue
        qid, question = record.get("_id"), record.get("text")
        if qid is None or str(qid).strip() == "":
            on_error(InputError("missing query id", source=str(p), line=number, field="_id"))
        elif not isinstance(question, str) or not question.strip():
            on_error(InputError("missing or empty question text", source=str(p), line=number, field="text"))
        elif str(qid) in seen:
            on_error(InputError(f"duplicate query id {qid!r}", source=str(p), line=number, field="_id"))
        else:
            seen.add(str(qid))
            out.append((str(qid), question.strip()))
    return out


def run_lines(qid: str, result, *, papers: bool, tag: str) -> list[str]:
    """The run-file lines of one search result."""
    if papers:
        ranked = [(p.paper_id, p.score) for p in result.papers]
    else:
        ranked = [(h.chunk_id, h.score) for h in result.hits]
    return [f"{qid} Q0 {doc} {rank} {score:.6f} {tag}" for rank, (doc, score) in enumerate(ranked, start=1)]


def write_atomically(path: str | Path, lines: Iterable[str]) -> None:
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
