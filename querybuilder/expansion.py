"""Acronym and synonym expansion: "LLM" also searches "large language model", and back.

The groups live in ``synonyms.json`` beside this module (see its ``description``); users add
groups there or in their own file passed to :func:`load_synonyms`. :func:`expand` is pure:
it returns the spellings to add for a question, in file order, at most ``limit`` of them (each
becomes one lower-weight ``should`` clause of the text query, see :mod:`querybuilder.dsl`, so
the limit also bounds the number of Lucene clauses a question can create).
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from querybuilder.intent import words
from scholar_es.datafiles import read_json
from scholar_es.errors import ConfigError, choices

DEFAULT_SYNONYMS_PATH = Path(__file__).with_name("synonyms.json")
MAX_EXPANSIONS = 4


class Synonyms(BaseModel):
    """Compiled groups: each spelling as its display text and its words."""

    model_config = ConfigDict(frozen=True)
    groups: tuple[tuple[tuple[str, tuple[str, ...]], ...], ...]


def _parse(data: object, where: str, base: Synonyms | None) -> Synonyms:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: a synonyms file must hold a JSON object, got {type(data).__name__}")
    for key in data:
        if key not in ("description", "groups"):
            raise ConfigError(
                f"{where}: unknown key {key!r}; valid keys: {choices(['description', 'groups'])}"
            )
    groups = list(base.groups) if base else []
    raw = data.get("groups", [])
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: 'groups' must be a list of lists of spellings, got {raw!r}")
    for i, group in enumerate(raw):
        if (
            not isinstance(group, list)
            or len(group) < 2
            or not all(isinstance(s, str) and words(s) for s in group)
        ):
            raise ConfigError(
                f"{where}: groups[{i}] must list at least two spellings with letters or digits, got {group!r}"
            )
        groups.append(tuple((s.strip(), tuple(words(s))) for s in group))
    return Synonyms(groups=tuple(groups))


def _read(path: Path) -> object:
    return read_json(path, "synonyms")


@functools.lru_cache(maxsize=1)
def default_synonyms() -> Synonyms:
    return _parse(_read(DEFAULT_SYNONYMS_PATH), str(DEFAULT_SYNONYMS_PATH), None)


def load_synonyms(path: str | Path | None = None) -> Synonyms:
    """The built-in groups plus a user file's groups (``None``: built-in only)."""
    if path is None:
        return default_synonyms()
    return _parse(_read(Path(path)), str(path), default_synonyms())


def _occurs(spelling: tuple[str, ...], qwords: list[str], qset: frozenset[str]) -> bool:
    n = len(spelling)
    if n == 1:
        return spelling[0] in qset or spelling[0] + "s" in qset
    if spelling[0] not in qset:
        return False
    for i in range(len(qwords) - n + 1):
        window = qwords[i : i + n]
        if window[:-1] == list(spelling[:-1]) and window[-1] in (spelling[-1], spelling[-1] + "s"):
            return True
    return False


def expand(question: str, synonyms: Synonyms | None = None, limit: int = MAX_EXPANSIONS) -> tuple[str, ...]:
    """Spellings to add for ``question``: the other members of every group it mentions."""
    synonyms = synonyms or default_synonyms()
    qwords = words(question)
    qset = frozenset(qwords)
    out: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for group in synonyms.groups:
        present = [ws for _, ws in group if _occurs(ws, qwords, qset)]
        if not present:
            continue
        for text, ws in group:
            if ws in seen or any(ws == p for p in present):
                continue
            seen.add(ws)
            out.append(text)
            if len(out) >= limit:
                return tuple(out)
    return tuple(out)
