"""Map a paper's section heading to a :data:`~indexer.models.SectionType`.

The keyword rules live in ``sections.json`` beside this module (users extend them there, or
pass their own file to :func:`load_rules`). A rule is a section type and a list of regular
expressions; rules are tried in file order and the first rule with a pattern that matches
(``re.search``) the cleaned heading wins, so put the more specific rules first. Patterns see
the heading lower-cased, with leading numbering ("3.2", "IV.", "A.1") removed, "&" spelt
"and", runs of whitespace collapsed and trailing punctuation dropped. Rules of type "other"
mark headings that are other on purpose (acknowledgments, appendices); a heading no rule
matches is "other" too for :func:`normalize_heading`.

Heading paths (QASPER's ``Parent ::: Child``) are decided by the deepest part that maps to a
type, so a generic child ("Experiments ::: Overview") defers to its parent, unless the
top-level part is a "container" type (``path_parent_wins`` in the JSON: introduction, related
work, background, conclusion, ...): the subsections of "Related Work" are related work whatever
their names say ("Related Work ::: Neural Models" is not a method), except for a child that is
itself such a container ("Introduction ::: Related Work").

Readers type a paper's sections with :func:`section_types`, which also looks at neighbours: a
heading no rule matches (a topic name such as "Tree Kernels") between two known sections of the
same type takes that type, for the types listed in ``fill_between``.
Measured with ``scripts/measure_sections.py``.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from indexer.models import SECTION_TYPES, SectionType
from scholar_es.errors import ConfigError, choices

DEFAULT_RULES_PATH = Path(__file__).with_name("sections.json")
PATH_SEPARATOR = ":::"

# Leading numbering: "3", "3.2.1", "3)", "IV.", "A.1", "B)", optionally after "Section"/"Chapter".
# A bare letter needs "." or ")" after it so that the article in "A Simple Model" stays.
_NUMBERING = re.compile(
    r"^(?:(?:section|chapter|part)\s+)?"
    r"(?:\d+(?:[.\-]\d+)*[.):]?|[a-z](?:\.\d+)+[.):]?|[a-z][.)]|[ivxlc]+[.):])"
    r"(?=\s|$)\s*"
)
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Rule:
    type: SectionType
    patterns: tuple[re.Pattern[str], ...]


@dataclass(frozen=True)
class HeadingRules:
    """The compiled content of a ``sections.json`` file."""

    rules: tuple[Rule, ...]
    path_parent_wins: frozenset[str]
    fill_between: frozenset[str]
    source: str = ""

    def match(self, cleaned: str) -> SectionType | None:
        """The type of one cleaned heading part (no path separator); None when no rule matches."""
        for rule in self.rules:
            if any(p.search(cleaned) for p in rule.patterns):
                return rule.type
        return None


def clean_heading(heading: str) -> str:
    """Lower-case, strip numbering and punctuation noise: what the rule patterns see."""
    text = _SPACES.sub(" ", heading.replace("&", " and ").lower()).strip()
    text = _NUMBERING.sub("", text, count=1)
    return text.strip(" .:;,-–—*")


def heading_parts(heading: str) -> list[str]:
    """The cleaned parts of a heading path, top level first ("A ::: B" -> ["a", "b"])."""
    return [clean_heading(part) for part in heading.split(PATH_SEPARATOR)]


def normalize_heading(heading: str | None, rules: HeadingRules | None = None) -> SectionType:
    """The section type of ``heading`` (a plain heading or a ``Parent ::: Child`` path)."""
    return match_heading(heading, rules) or "other"


def match_heading(heading: str | None, rules: HeadingRules | None = None) -> SectionType | None:
    """Like :func:`normalize_heading`, but None when no rule matched any part of the heading
    ("other" then means a rule said so: acknowledgments, references, appendices)."""
    if not heading or not heading.strip():
        return None
    rules = rules or load_rules()
    types = [rules.match(part) for part in heading_parts(heading)]
    if types[0] in rules.path_parent_wins:
        # Within a container only another container type is more precise ("Introduction ::: Related Work").
        inner = [t for t in types[1:] if t in rules.path_parent_wins]
        return inner[-1] if inner else types[0]
    # The deepest part that names a type decides; generic children defer to their parent.
    named = [t for t in types if t is not None]
    informative = [t for t in named if t != "other"]
    return informative[-1] if informative else (named[-1] if named else None)


def section_types(
    headings: list[str | None],
    given: list[SectionType | None] | None = None,
    rules: HeadingRules | None = None,
) -> list[SectionType]:
    """The types of a paper's body sections, in order, using their neighbours for unknown headings.

    A heading no rule matches (typically a topic name: "Tree Kernels", "Search Space") takes
    the type of the known sections around it when the nearest known section before it and the
    nearest after it agree and that type is listed in ``fill_between`` (method, experiments,
    ...): a topic between "3 Model" and "3.2 Training" is part of the method. Otherwise, and for
    headings a rule maps to "other" on purpose, the type is "other". ``given`` types (None where
    not given) replace the heading's own and count as known neighbours.
    """
    rules = rules or load_rules()
    given = given or [None] * len(headings)
    matched = [g or match_heading(h, rules) for h, g in zip(headings, given, strict=True)]
    known = [(i, t) for i, t in enumerate(matched) if t is not None and t != "other"]
    result: list[SectionType] = []
    for i, section_type in enumerate(matched):
        if section_type is None:
            before = next((t for j, t in reversed(known) if j < i), None)
            after = next((t for j, t in known if j > i), None)
            section_type = before if before == after and before in rules.fill_between else "other"
        result.append(section_type)
    return result


@functools.lru_cache(maxsize=8)
def load_rules(path: str | Path | None = None) -> HeadingRules:
    """Load and compile a rules file (the packaged ``sections.json`` by default), once per path."""
    source = Path(path) if path is not None else DEFAULT_RULES_PATH
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"cannot read section rules file {str(source)!r}: {exc.strerror}; "
            "pass the path of an existing JSON file"
        ) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"section rules file {str(source)!r} is not valid JSON ({exc}); "
            f"fix it, using {str(DEFAULT_RULES_PATH)!r} as a model"
        ) from exc
    return _compile(data, str(source))


def _compile(data: object, source: str) -> HeadingRules:
    where = f"section rules file {source!r}"
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise ConfigError(
            f"{where}: expected an object with a 'rules' list, got "
            f"{type(data).__name__}; see {str(DEFAULT_RULES_PATH)!r} for the layout"
        )
    rules = []
    for i, raw in enumerate(data["rules"]):
        if not isinstance(raw, dict) or not isinstance(raw.get("patterns"), list):
            raise ConfigError(
                f'{where}: rule {i} is {raw!r}; each rule must be {{"type": ..., "patterns": [regex, ...]}}'
            )
        section_type = _check_type(raw.get("type"), f"{where}: rule {i}")
        patterns = []
        for pattern in raw["patterns"]:
            try:
                patterns.append(re.compile(pattern))
            except (re.error, TypeError) as exc:
                raise ConfigError(
                    f"{where}: rule {i} ({section_type}) has an invalid pattern "
                    f"{pattern!r} ({exc}); write a Python regular expression"
                ) from exc
        rules.append(Rule(section_type, tuple(patterns)))
    return HeadingRules(
        tuple(rules),
        _type_set(data, "path_parent_wins", where),
        _type_set(data, "fill_between", where),
        source,
    )


def _type_set(data: dict, key: str, where: str) -> frozenset[str]:
    values = data.get(key, [])
    if not isinstance(values, list):
        raise ConfigError(f"{where}: {key!r} is {values!r}; expected a list of section types")
    return frozenset(_check_type(t, f"{where}: {key}") for t in values)


def _check_type(value: object, where: str) -> SectionType:
    if value not in SECTION_TYPES:
        raise ConfigError(f"{where} has section type {value!r}; use one of {choices(SECTION_TYPES)}")
    return value  # type: ignore[return-value]
