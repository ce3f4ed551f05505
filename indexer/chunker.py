"""Cut a Paper into the Chunks that are indexed.

Modes (:data:`CHUNKING_MODES`):

* ``paragraph``: one chunk per non-empty paragraph; the chunk id is the paragraph id
  (``<paper_id>#<section_idx>.<para_idx>``, ``<paper_id>#abs``), so QASPER-style qrels apply as is.
* ``window``: windows of ``window_words`` words, consecutive windows sharing ``overlap_words``
  words, never crossing a section boundary (the abstract is a section of its own). The id is
  ``<paper_id>#<section_idx>.w<k>`` (``<paper_id>#abs.w<k>`` for the abstract), ``k`` the 0-based
  window number within the section: stable as long as the section's text is, and the section
  index stays readable in the id. ``paragraph_ids`` lists every paragraph a window overlaps.
  Words are whitespace-separated tokens; a window's text joins them with a space, and with a
  blank line where a paragraph ends. The last window of a section ends at the section's last
  word and may be shorter; no window lies wholly inside the one before it.

In both modes the abstract, when non-empty, comes first (position 0) with heading "Abstract" and
type "abstract"; positions then follow reading order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from indexer.models import ABSTRACT_HEADING, Chunk, Paper, SectionType
from scholar_es.errors import ConfigError, choices

#: The registry of chunking modes, with what each does.
CHUNKING_MODES: dict[str, str] = {
    "paragraph": "one chunk per non-empty paragraph, id = paragraph id",
    "window": "overlapping word windows within each section, id = <paper_id>#<section_idx>.w<k>",
}
ABSTRACT_KEY = "abs"


@dataclass(frozen=True)
class _Block:
    """A section's worth of text to chunk: the abstract or one body section."""

    key: str  # "abs" or the section index, as it appears in ids
    heading: str
    type: SectionType
    paragraphs: list[tuple[str, str]]  # (paragraph id, text), non-empty only


def chunk_paper(
    paper: Paper, mode: str = "paragraph", window_words: int = 150, overlap_words: int = 30
) -> list[Chunk]:
    """The chunks of ``paper`` in reading order (see the module docstring for the modes).

    ``window_words`` and ``overlap_words`` are used, and checked, in window mode only.
    """
    if mode not in CHUNKING_MODES:
        raise ConfigError(f"unknown chunking mode {mode!r}; use one of {choices(CHUNKING_MODES)}")
    if mode == "window":
        check_window(window_words, overlap_words)
    pieces: list[tuple[_Block, str, str, list[str]]] = []  # (block, chunk id, text, paragraph ids)
    for block in _blocks(paper):
        if mode == "paragraph":
            pieces.extend((block, pid, text, [pid]) for pid, text in block.paragraphs)
        else:
            pieces.extend(
                (block, f"{paper.id}#{block.key}.w{k}", text, pids)
                for k, (text, pids) in enumerate(_windows(block, window_words, overlap_words))
            )
    return [
        Chunk(
            id=chunk_id,
            paper_id=paper.id,
            section_heading=block.heading,
            section_type=block.type,
            text=text,
            paragraph_ids=pids,
            position=position,
        )
        for position, (block, chunk_id, text, pids) in enumerate(pieces)
    ]


def check_window(window_words: int, overlap_words: int) -> None:
    """Raise ConfigError unless 0 <= overlap_words < window_words (both integers)."""
    for name, value in (("window_words", window_words), ("overlap_words", overlap_words)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{name} must be an integer, got {value!r}; pass a whole number of words")
    if window_words < 1:
        raise ConfigError(f"window_words must be positive, got {window_words}; use e.g. 150")
    if not 0 <= overlap_words < window_words:
        raise ConfigError(
            f"overlap_words must be at least 0 and less than window_words ({window_words}), "
            f"got {overlap_words}; use e.g. {window_words // 5}"
        )


def _blocks(paper: Paper) -> Iterator[_Block]:
    if paper.abstract.strip():
        yield _Block(
            ABSTRACT_KEY, ABSTRACT_HEADING, "abstract", [(paper.abstract_paragraph_id(), paper.abstract)]
        )
    for idx, section in enumerate(paper.sections):
        paragraphs = [(p.id, p.text) for p in section.paragraphs if p.text.strip()]
        if paragraphs:
            yield _Block(str(idx), section.heading, section.type, paragraphs)


def _windows(block: _Block, size: int, overlap: int) -> Iterator[tuple[str, list[str]]]:
    words: list[str] = []
    owner: list[int] = []  # index into block.paragraphs of each word
    for i, (_, text) in enumerate(block.paragraphs):
        split = text.split()
        words.extend(split)
        owner.extend([i] * len(split))
    step = size - overlap
    start = 0
    while True:
        end = min(start + size, len(words))
        parts = [words[start]]
        for w in range(start + 1, end):
            parts.append("\n\n" if owner[w] != owner[w - 1] else " ")
            parts.append(words[w])
        # dict.fromkeys: the distinct paragraphs in order of first appearance.
        pids = [block.paragraphs[i][0] for i in dict.fromkeys(owner[start:end])]
        yield "".join(parts), pids
        if end == len(words):
            return
        start += step
