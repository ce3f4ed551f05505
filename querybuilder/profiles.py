"""Named ranking profiles: every tunable number of the query builder in one JSON-savable object.

A profile holds the field boosts of each search type, the section multipliers of each intent
rule (:data:`querybuilder.intent.RULES`), the field boosts of a search inside one paper,
whether question words leave the text query, the hybrid weights, the BM25 saturation pivot, the
multi_match tie breaker, expansion, kNN sizes and the per-paper cap. ``--profile FILE`` loads
one (:func:`load_profile`); :meth:`Profile.save` writes one. Missing keys take the values of
the built-in ``default`` profile (so a file may hold only what it changes, nested dicts
included: ``{"section_multipliers": {"how": {"method": 1.2}}}`` replaces only the ``how`` rule).

The section multipliers come from a study on real queries that found 1.08-1.10 lifted P@3 and
MRR but pushed a few relevant chunks out of the top 10: measure both when tuning.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from indexer.models import SECTION_TYPES
from querybuilder.intent import RULES
from scholar_es.errors import ConfigError, choices

#: Search types: which fields the text query weighs most.
SEARCH_TYPES = ("keyword", "section", "survey", "balanced")
#: "auto": chosen from the question (see querybuilder.plan.choose_search_type).
SEARCH_TYPE_CHOICES = ("auto", *SEARCH_TYPES)
#: Text fields of the chunks index a field boost may name.
TEXT_FIELDS = ("title", "abstract", "chunk_text", "section_heading")

DEFAULT_FIELD_BOOSTS: dict[str, dict[str, float]] = {
    "keyword": {"title": 3.0, "abstract": 2.0, "chunk_text": 1.0},
    "section": {"chunk_text": 2.0, "abstract": 1.5, "title": 1.0},
    "survey": {"title": 4.0, "abstract": 2.5, "chunk_text": 1.0},
    "balanced": {"title": 2.0, "abstract": 2.0, "chunk_text": 1.5},
}
#: Field boosts of a search inside one paper (a single ``paper_ids`` filter), summed over the
#: fields (multi_match most_fields): every chunk of a paper has the same title and abstract, so
#: those fields rank nothing there; a paragraph under a heading that matches gains on top of its
#: own text. Chosen on QASPER train, scope paper (docs/evaluation.md).
DEFAULT_PAPER_SCOPE_BOOSTS: dict[str, float] = {"chunk_text": 1.0, "section_heading": 1.0}
#: Section multipliers of a corpus-wide search (``sections``): the hand-set lifts at half their
#: first strength (1.08 -> 1.04), chosen on QASPER train, scope corpus, over the full strength,
#: none and learned lifts (scripts/tune_joint.py; docs/evaluation.md, "Issue 28")
DEFAULT_SECTION_MULTIPLIERS: dict[str, dict[str, float]] = {
    "what_method": {"method": 1.04},
    "how": {"method": 1.05, "experiments": 1.025},
    "evaluation": {"results": 1.05, "experiments": 1.04},
    "which_overview": {"abstract": 1.04, "introduction": 1.025, "related_work": 1.015},
    "default": {"introduction": 1.04, "related_work": 1.04, "abstract": 1.025},
}

#: Section multipliers of a search inside one paper (``sections``): learned from the judgments of
#: all 2,098 QASPER train questions (``scholar-es tune --scope paper``: lift of each section type per
#: intent rule, shrunk toward 1, tempered ``lift ** 0.25``; scholar_es/evaluation/profiles/
#: tuned-qasper-train.json). Cross-validated on QASPER train they beat the hand-set ones (MRR@10
#: 0.4548 vs 0.4247, docs/evaluation.md), so they are the default for that scope.
DEFAULT_PAPER_SCOPE_SECTION_MULTIPLIERS: dict[str, dict[str, float]] = {
    "what_method": {
        "abstract": 0.8849,
        "background": 0.9618,
        "conclusion": 0.8951,
        "discussion": 0.9035,
        "experiments": 1.053,
        "introduction": 0.9941,
        "limitations": 0.9923,
        "method": 1.0126,
        "other": 1.0036,
        "related_work": 1.0536,
        "results": 0.9744,
    },
    "how": {
        "abstract": 0.8497,
        "background": 0.9482,
        "conclusion": 0.8789,
        "discussion": 0.9119,
        "experiments": 1.0143,
        "introduction": 1.0561,
        "limitations": 0.9962,
        "method": 1.0441,
        "other": 1.0266,
        "related_work": 0.8766,
        "results": 0.9226,
    },
    "evaluation": {
        "abstract": 0.7021,
        "background": 0.8371,
        "conclusion": 0.8173,
        "discussion": 0.8159,
        "experiments": 1.2796,
        "introduction": 0.9053,
        "limitations": 1.0182,
        "method": 0.8598,
        "other": 0.8579,
        "related_work": 0.7245,
        "results": 1.1531,
    },
    "which_overview": {
        "abstract": 0.9952,
        "background": 0.9845,
        "conclusion": 0.9875,
        "experiments": 1.0068,
        "introduction": 0.9716,
        "method": 1.0705,
        "other": 0.9697,
        "related_work": 0.9921,
        "results": 1.0053,
    },
    "default": {
        "abstract": 0.7625,
        "background": 0.9322,
        "conclusion": 0.9865,
        "discussion": 1.0158,
        "experiments": 1.0809,
        "introduction": 1.0947,
        "limitations": 1.0562,
        "method": 1.0296,
        "other": 0.9037,
        "related_work": 0.8664,
        "results": 0.9717,
    },
}


def _checked_boosts(where: str, boosts: dict[str, float]) -> dict[str, float]:
    """One field -> boost dict of a profile, checked: known text fields, boosts above 0."""
    if not boosts:
        raise ConfigError(f"profile {where} is empty; give at least one of {choices(TEXT_FIELDS)}")
    for field, boost in boosts.items():
        if field not in TEXT_FIELDS:
            raise ConfigError(
                f"profile {where}: unknown field {field!r}; valid fields: {choices(TEXT_FIELDS)}"
            )
        if not boost > 0:
            raise ConfigError(
                f"profile {where}[{field!r}] = {boost!r}; boosts must be greater than 0 (leave the "
                "field out instead)"
            )
    return dict(boosts)


def _checked_multipliers(
    where: str, v: dict[str, dict[str, float]], defaults: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    """Rule -> section type -> multiplier, checked; rules left out keep ``defaults``."""
    out = {k: dict(m) for k, m in defaults.items()}
    for rule, mults in v.items():
        if rule not in RULES:
            raise ConfigError(f"profile {where}: unknown intent rule {rule!r}; valid rules: {choices(RULES)}")
        for section, m in mults.items():
            if section not in SECTION_TYPES:
                raise ConfigError(
                    f"profile {where}[{rule!r}]: unknown section type {section!r}; "
                    f"valid section types: {choices(SECTION_TYPES)}"
                )
            if not m > 0:
                raise ConfigError(
                    f"profile {where}[{rule!r}][{section!r}] = {m!r}; multipliers must be greater than 0"
                )
        out[rule] = dict(mults)
    return out


class Profile(BaseModel):
    """All ranking parameters. Frozen: derive variants with :meth:`with_changes`."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)

    name: str = Field(default="default", min_length=1)
    description: str = ""
    search_type: str = "auto"
    field_boosts: dict[str, dict[str, float]] = Field(default_factory=lambda: DEFAULT_FIELD_BOOSTS)
    #: field boosts of a search inside one paper (they replace field_boosts there; summed)
    paper_scope_boosts: dict[str, float] = Field(default_factory=lambda: DEFAULT_PAPER_SCOPE_BOOSTS)
    section_multipliers: dict[str, dict[str, float]] = Field(
        default_factory=lambda: DEFAULT_SECTION_MULTIPLIERS
    )
    #: the section multipliers of a search inside one paper (they replace section_multipliers there)
    paper_scope_section_multipliers: dict[str, dict[str, float]] = Field(
        default_factory=lambda: DEFAULT_PAPER_SCOPE_SECTION_MULTIPLIERS
    )
    #: hybrid: final = bm25_weight * saturation(bm25, saturation_k) + knn_weight * knn_score;
    #: 0.8, 100 (and text_candidates 100) chosen jointly on SciFact train and QASPER train, scope
    #: corpus (scripts/tune_joint.py; docs/evaluation.md, "Issue 28")
    bm25_weight: float = Field(default=0.8, ge=0)
    knn_weight: float = Field(default=1.0, ge=0)
    #: BM25 score at which the saturated text part reaches half of bm25_weight
    saturation_k: float = Field(default=100.0, gt=0)
    #: bm25_weight and saturation_k of a search inside one paper (they replace those two there):
    #: chosen on QASPER train, scope paper (docs/evaluation.md, "Tuning")
    paper_scope_bm25_weight: float = Field(default=1.0, ge=0)
    paper_scope_saturation_k: float = Field(default=20.0, gt=0)
    tie_breaker: float = Field(default=0.3, ge=0, le=1)
    #: leave the question words (querybuilder/intents.json) out of the text query
    drop_question_words: bool = True
    #: expand acronyms/synonyms in every text strategy (the ``expanded`` strategy always does)
    expansion: bool = False
    expansion_weight: float = Field(default=0.4, ge=0)
    #: hybrid: at least how many top hits of the first pass are rescored with BOTH signals (BM25
    #: and vector similarity); 0 = no rescore (each hit keeps the signals that found it). The
    #: window is at least knn_k + text_candidates and the hits asked for (querybuilder.dsl.rescore_window)
    rescore_window: int = Field(default=100, ge=0, le=10_000)
    #: hybrid with the rescore: how many of the text query's best hits join the kNN top k in the
    #: rescore window (the first pass ranks the kNN hits first, then the text-only hits by BM25)
    text_candidates: int = Field(default=100, ge=0, le=10_000)
    #: corpus-wide hybrid: the window is first ordered by a recall formula (these weights in place of
    #: bm25_weight/saturation_k: more weight on the words), and its top ``top_window`` (at least the
    #: hits asked for) are then scored and ordered by the main formula; 0 = one rescore by the main
    #: formula over the whole window. Chosen on SciFact + QASPER train (docs/evaluation.md, "Issue 28")
    recall_bm25_weight: float = Field(default=1.5, ge=0)
    recall_saturation_k: float = Field(default=100.0, gt=0)
    top_window: int = Field(default=100, ge=0, le=10_000)
    knn_k: int = Field(default=50, ge=1, le=10_000)
    num_candidates: int = Field(default=100, ge=1, le=10_000)
    #: most chunks per paper in the results; 0 = no cap
    per_paper_cap: int = Field(default=5, ge=0)
    rank_constant: int = Field(default=60, ge=1)
    rank_window_size: int = Field(default=100, ge=1, le=10_000)

    @field_validator("search_type")
    @classmethod
    def _search_type(cls, v: str) -> str:
        if v not in SEARCH_TYPE_CHOICES:
            raise ConfigError(
                f"profile search_type {v!r} is not valid; valid search types: {choices(SEARCH_TYPE_CHOICES)}"
            )
        return v

    @field_validator("field_boosts")
    @classmethod
    def _field_boosts(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        out = {k: dict(b) for k, b in DEFAULT_FIELD_BOOSTS.items()}
        for search_type, boosts in v.items():
            if search_type not in SEARCH_TYPES:
                raise ConfigError(
                    f"profile field_boosts: unknown search type {search_type!r}; valid search "
                    f"types: {choices(SEARCH_TYPES)}"
                )
            out[search_type] = _checked_boosts(f"field_boosts[{search_type!r}]", boosts)
        return out

    @field_validator("paper_scope_boosts")
    @classmethod
    def _paper_scope_boosts(cls, v: dict[str, float]) -> dict[str, float]:
        return _checked_boosts("paper_scope_boosts", v)

    @field_validator("section_multipliers")
    @classmethod
    def _multipliers(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return _checked_multipliers("section_multipliers", v, DEFAULT_SECTION_MULTIPLIERS)

    @field_validator("paper_scope_section_multipliers")
    @classmethod
    def _paper_multipliers(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        return _checked_multipliers(
            "paper_scope_section_multipliers", v, DEFAULT_PAPER_SCOPE_SECTION_MULTIPLIERS
        )

    @field_validator("num_candidates")
    @classmethod
    def _candidates(cls, v: int, info) -> int:
        k = info.data.get("knn_k")
        if k is not None and v < k:
            raise ConfigError(
                f"profile num_candidates {v} is less than knn_k {k}; Elasticsearch requires "
                "num_candidates >= k"
            )
        return v

    # --- (de)serialization ----------------------------------------------------------------
    @classmethod
    def from_dict(cls, data: Any, source: str = "profile") -> Profile:
        """A profile from a dict (a JSON file's content); errors become :class:`ConfigError`."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: a profile must be a JSON object, got {type(data).__name__}")
        fields = set(cls.model_fields)
        for key in data:
            if key not in fields:
                raise ConfigError(f"{source}: unknown profile key {key!r}; valid keys: {choices(fields)}")
        try:
            return cls(**data)
        except ValidationError as e:
            err = e.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise ConfigError(f"{source}: {where} = {err.get('input')!r}: {err['msg']}") from None
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    def to_dict(self) -> dict:
        return self.model_dump()

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n"

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    def with_changes(self, **changes: Any) -> Profile:
        """A new validated profile with ``changes`` applied (the original is unchanged)."""
        return Profile.from_dict({**self.to_dict(), **changes}, source=f"profile {self.name!r}")


DEFAULT_PROFILE = Profile()
#: Built-in profiles by name.
PROFILES: dict[str, Profile] = {"default": DEFAULT_PROFILE}


#: The package that ships the tuned profiles (``<name>.json``), loaded by name.
SHIPPED_PACKAGE = "scholar_es.evaluation.profiles"


def shipped_profiles() -> dict[str, Any]:
    """Profile name -> its JSON resource, for the tuned profiles shipped in the package."""
    from importlib import resources

    root = resources.files(SHIPPED_PACKAGE)
    return {f.name[: -len(".json")]: f for f in root.iterdir() if f.name.endswith(".json")}


def profile_names() -> list[str]:
    """Every name ``--profile`` takes besides a file: built-in, shipped, and unambiguous short forms."""
    shipped = sorted(shipped_profiles())
    short = sorted({a for n in shipped for a in _short_forms(n) if _resolve_shipped(a, shipped) == n})
    return [*PROFILES, *shipped, *(a for a in short if a not in PROFILES)]


def _short_forms(name: str) -> list[str]:
    parts = name.split("-")
    return ["-".join(parts[:i]) for i in range(1, len(parts))]


def _resolve_shipped(name: str, shipped: list[str]) -> str | list[str] | None:
    """The shipped profile ``name`` stands for (itself, or the one name it is a dash-prefix of);
    the candidates when it is a prefix of several; None when it matches none."""
    if name in shipped:
        return name
    found = [n for n in shipped if n.startswith(f"{name}-")]
    return found[0] if len(found) == 1 else (found or None)


def load_profile(path_or_name: str | Path | None) -> Profile:
    """A profile by name or file. Names: the built-in ``default`` (also for ``None``), the tuned
    profiles shipped in :data:`SHIPPED_PACKAGE` (``tuned-qasper-train``), or a short form of
    one when it is unambiguous (``tuned-qasper``). Anything else is read as a profile JSON file."""
    if path_or_name is None:
        return DEFAULT_PROFILE
    if isinstance(path_or_name, str) and path_or_name in PROFILES:
        return PROFILES[path_or_name]
    if isinstance(path_or_name, str) and not path_or_name.endswith(".json"):
        shipped = shipped_profiles()
        match = _resolve_shipped(path_or_name, sorted(shipped))
        if isinstance(match, list):
            raise ConfigError(
                f"profile {path_or_name!r} is ambiguous: it could be {choices(match)}; give the full name"
            )
        if match is not None:
            return Profile.from_dict(
                json.loads(shipped[match].read_text(encoding="utf-8")), source=f"profile {match!r}"
            )
    path = Path(path_or_name)
    if not path.is_file():
        raise ConfigError(
            f"profile {str(path_or_name)!r} is neither a file nor a profile name; names: "
            f"{choices(profile_names())}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read profile {str(path)!r}: {e}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    return Profile.from_dict(data, source=str(path))
