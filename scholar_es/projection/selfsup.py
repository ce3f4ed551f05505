"""Training pairs from an indexed corpus alone, for the self-supervised adapter (issue 28).

No judgment and no question enters: the pairs come from the structure of the papers in
``<prefix>chunks``, as SPECTER, GPL and the inverse cloze task (Lee et al., 2019, "Latent
Retrieval for Weakly Supervised Open Domain Question Answering") take them:

* ``title``    -- a paper's title -> its abstract chunk;
* ``sentence`` -- one sentence of a chunk -> that chunk (the inverse cloze task);
* ``heading``  -- a section heading -> one paragraph of that section, for headings that name
  something (a heading that at most :data:`MAX_HEADING_PAPERS` papers of the corpus share;
  "Introduction" or "Results" name nothing).

The target of a pair is the chunk's vector in the index, i.e. the vector of the text the indexer
embedded (:func:`indexer.pipeline.chunk_embedding_text`; re-embedded through the
embedding cache, which holds it, because the index leaves vectors out of ``_source``). With
``remove_query`` the query's text is cut out of the target's text first (the inverse cloze task's
"removal"; the title for ``title``, the heading for ``heading``); that target is then embedded
anew, which costs one encode per pair.

Sampling is deterministic: the chunks are read in ``chunk_id`` order and every random choice
comes from one ``numpy`` generator seeded with ``seed``. :func:`build_pairs` is pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from indexer.pipeline import chunk_embedding_text
from scholar_es.errors import ConfigError, choices

#: the kinds of pairs, in the order they are drawn
KINDS: tuple[str, ...] = ("title", "sentence", "heading")
DEFAULT_KINDS: tuple[str, ...] = ("title", "sentence", "heading")
DEFAULT_MAX_PAIRS = 20000
#: a heading shared by more papers than this names nothing ("Introduction") and makes no pair
MAX_HEADING_PAPERS = 2
#: a sentence makes a query when it has this many words or more (and at most MAX_SENTENCE_WORDS)
MIN_SENTENCE_WORDS = 6
MAX_SENTENCE_WORDS = 60
#: a title or heading makes a query when it has this many words or more
MIN_LABEL_WORDS = 2
PAGE = 1000

# a sentence ends at . ! or ? followed by whitespace and an upper-case letter, a digit or a bracket;
# not after the abbreviations below or a single capital (an initial)
_BOUNDARY = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[\"'])")
_ABBREVIATIONS = re.compile(
    r"(?:\b(?:e\.g|i\.e|et al|etc|vs|cf|Fig|Figs|Eq|Eqs|Tab|Sec|No|Dr|Mr|Ms|approx|resp)\.|\b[A-Z]\.)$"
)


@dataclass(frozen=True)
class IndexedChunk:
    """The fields of a chunk document that pairs are made from."""

    chunk_id: str
    paper_id: str
    title: str
    heading: str
    section_type: str
    text: str
    position: int

    @classmethod
    def of(cls, src: dict) -> IndexedChunk:
        return cls(
            chunk_id=str(src.get("chunk_id") or ""),
            paper_id=str(src.get("paper_id") or ""),
            title=str(src.get("title") or ""),
            heading=str(src.get("section_heading") or ""),
            section_type=str(src.get("section_type") or "other"),
            text=str(src.get("chunk_text") or ""),
            position=int(src.get("position") or 0),
        )

    def embedding_text(self, text: str | None = None, *, label: bool = True) -> str:
        """What the indexer embedded for this chunk (``text``: another body; ``label`` False:
        without the title or heading the indexer puts before it)."""
        body = self.text if text is None else text
        if not label:
            return body
        return chunk_embedding_text(self.section_type, self.heading, self.title, body)


@dataclass(frozen=True)
class SelfSupPair:
    """One training pair: the query text and its target chunk (and the text whose vector is the
    target: the chunk's own embedding text, or that text with the query removed)."""

    kind: str
    query: str
    chunk_id: str
    paper_id: str
    target_text: str
    #: True when ``target_text`` is the chunk's own embedding text (its vector is the index's)
    indexed_target: bool


# --- reading the index ---------------------------------------------------------------------------
def read_chunks(
    es, prefix: str = "", on_progress: Callable[[int, int], None] | None = None
) -> list[IndexedChunk]:
    """Every chunk of ``<prefix>chunks``, in ``chunk_id`` order (``search_after`` pages of
    :data:`PAGE`; the vectors stay in the index)."""
    from elasticsearch import NotFoundError

    index = f"{prefix}chunks"
    fields = ["chunk_id", "paper_id", "title", "section_heading", "section_type", "chunk_text", "position"]
    out: list[IndexedChunk] = []
    after: list | None = None
    total = 0
    while True:
        extra = {"search_after": after} if after is not None else {}
        try:
            resp = es.search(
                index=index,
                query={"match_all": {}},
                sort=[{"chunk_id": "asc"}],
                size=PAGE,
                source=fields,
                track_total_hits=after is None,  # counted once, on the first page
                **extra,
            ).body
        except NotFoundError:
            raise ConfigError(
                f"index {index!r} not found: the self-supervised pairs come from an indexed corpus; "
                f"index it first (scholar-es index ... --prefix {prefix!r}) or pass the --prefix it "
                "was indexed under"
            ) from None
        if after is None:
            total = int(resp["hits"]["total"]["value"])
        hits = resp["hits"]["hits"]
        out.extend(IndexedChunk.of(h["_source"]) for h in hits)
        if on_progress:
            on_progress(len(out), total)
        if len(hits) < PAGE:
            return out
        after = hits[-1]["sort"]


# --- pure pair building --------------------------------------------------------------------------
def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``: cut after ``.``, ``!`` or ``?`` followed by whitespace and a
    capital, digit, bracket or quote, except after common abbreviations (e.g., et al., Fig.)
    and initials."""
    parts: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        head = text[start : m.start()]
        if _ABBREVIATIONS.search(head):
            continue
        parts.append(head.strip())
        start = m.end()
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _words(text: str) -> int:
    return len(text.split())


def _is_sentence_query(sentence: str) -> bool:
    return MIN_SENTENCE_WORDS <= _words(sentence) <= MAX_SENTENCE_WORDS


def check_kinds(kinds: Sequence[str]) -> tuple[str, ...]:
    given = tuple(dict.fromkeys(k.strip() for k in kinds if k.strip()))
    unknown = [k for k in given if k not in KINDS]
    if unknown or not given:
        raise ConfigError(
            f"unknown pair kinds {unknown or list(kinds)!r}; use a comma-separated subset of {choices(KINDS)}"
        )
    return given


def _title_pairs(chunks: Sequence[IndexedChunk], remove_query: bool) -> list[SelfSupPair]:
    out = []
    for c in chunks:
        if c.section_type != "abstract" or _words(c.title) < MIN_LABEL_WORDS or not c.text.strip():
            continue
        target = c.embedding_text(label=not remove_query)
        out.append(SelfSupPair("title", c.title.strip(), c.chunk_id, c.paper_id, target, not remove_query))
    return out


def _sentence_pairs(
    chunks: Sequence[IndexedChunk], rng: np.random.Generator, remove_query: bool, per_chunk: int
) -> list[SelfSupPair]:
    out = []
    for c in chunks:
        sentences = split_sentences(c.text)
        if len(sentences) < 2:  # the chunk would be its own query
            continue
        usable = [i for i, s in enumerate(sentences) if _is_sentence_query(s)]
        if not usable:
            continue
        picked = sorted(rng.choice(len(usable), size=min(per_chunk, len(usable)), replace=False))
        for j in picked:
            i = usable[int(j)]
            if remove_query:
                rest = " ".join(s for k, s in enumerate(sentences) if k != i)
                out.append(
                    SelfSupPair(
                        "sentence", sentences[i], c.chunk_id, c.paper_id, c.embedding_text(rest), False
                    )
                )
            else:
                out.append(
                    SelfSupPair("sentence", sentences[i], c.chunk_id, c.paper_id, c.embedding_text(), True)
                )
    return out


def _heading_key(heading: str) -> str:
    return " ".join(heading.lower().split())


def _heading_pairs(
    chunks: Sequence[IndexedChunk], rng: np.random.Generator, remove_query: bool
) -> list[SelfSupPair]:
    papers_of: dict[str, set[str]] = {}
    sections: dict[tuple[str, str], list[IndexedChunk]] = {}
    for c in chunks:
        if c.section_type == "abstract" or _words(c.heading) < MIN_LABEL_WORDS or not c.text.strip():
            continue
        key = _heading_key(c.heading)
        papers_of.setdefault(key, set()).add(c.paper_id)
        sections.setdefault((c.paper_id, key), []).append(c)
    out = []
    for (_, key), members in sections.items():
        if len(papers_of[key]) > MAX_HEADING_PAPERS:
            continue
        c = members[int(rng.integers(len(members)))]
        target = c.embedding_text(label=not remove_query)
        out.append(
            SelfSupPair("heading", c.heading.strip(), c.chunk_id, c.paper_id, target, not remove_query)
        )
    return out


def build_pairs(
    chunks: Sequence[IndexedChunk],
    *,
    kinds: Sequence[str] = DEFAULT_KINDS,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    seed: int = 0,
    remove_query: bool = False,
    sentences_per_chunk: int = 1,
) -> list[SelfSupPair]:
    """The pairs of ``kinds`` (module doc) over ``chunks``, shuffled with ``seed`` and cut to
    ``max_pairs`` (each kind keeps its share of the pairs found); deterministic for a seed."""
    kinds = check_kinds(kinds)
    if max_pairs < 1:
        raise ConfigError(f"--max-pairs must be at least 1, got {max_pairs}")
    if sentences_per_chunk < 1:
        raise ConfigError(f"--sentences-per-chunk must be at least 1, got {sentences_per_chunk}")
    rng = np.random.default_rng(seed)
    found: list[SelfSupPair] = []
    for kind in KINDS:  # a fixed order, so the generator's draws do not depend on how kinds are listed
        if kind not in kinds:
            continue
        if kind == "title":
            found.extend(_title_pairs(chunks, remove_query))
        elif kind == "sentence":
            found.extend(_sentence_pairs(chunks, rng, remove_query, sentences_per_chunk))
        else:
            found.extend(_heading_pairs(chunks, rng, remove_query))
    order = rng.permutation(len(found))
    return [found[int(i)] for i in order[:max_pairs]]


def count_kinds(pairs: Sequence[SelfSupPair]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for p in pairs:
        counts[p.kind] += 1
    return {k: v for k, v in counts.items() if v}
