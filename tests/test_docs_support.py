"""README and docs/es-semantics.md §15 list what the engine supports and refuses: kept true here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scholar_es.engine.search import execute as search
from scholar_es.engine.search import fusion, highlight
from scholar_es.engine.search.aggregations import parser as aggregations

ROOT = Path(__file__).resolve().parents[1]
SEMANTICS = (ROOT / "docs" / "es-semantics.md").read_text()
README = (ROOT / "README.md").read_text()
SECTION = SEMANTICS[SEMANTICS.index("## 15. Search API surface") :]


def _listed(label: str) -> set[str]:
    """Backticked names of the bullet that starts with ``label`` (up to the first sentence end)."""
    m = re.search(rf"^\* {re.escape(label)}:(.*?)(?:\.\s|\.$|\n\* )", SECTION, re.S | re.M)
    assert m, f"§15 has no bullet '{label}'"
    return set(re.findall(r"`([^`]+)`", m.group(1)))


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("Search body keys, supported", set(search.SEARCH_KEYS)),
        ("Search body keys, refused", set(search._UNSUPPORTED_KEYS)),
        ("Aggregations, supported", set(aggregations.SUPPORTED)),
        ("Aggregations, refused by name", set(aggregations.KNOWN_UNSUPPORTED)),
        ("Highlight options, supported", set(highlight._SUPPORTED_OPTIONS)),
        ("Highlight options, refused", set(highlight._REFUSED_OPTIONS)),
    ],
)
def test_semantics_lists_match_the_code(label, expected):
    got = _listed(label)
    # option values named alongside (`unified`, `sentence`, the `plain`/`fvh` types) are not options
    extras = {"unified", "sentence", "plain", "fvh", "styled"}
    assert got - extras == expected, got - extras ^ expected


def test_retrievers_and_normalizers_listed():
    line = re.search(r"^\* Retrievers:(.*)$", SECTION, re.M).group(1) + re.search(
        r"Linear normalizers:(.*)$", SECTION, re.M
    ).group(1)
    assert set(re.findall(r"`([^`]+)`", line)) == set(search.RETRIEVERS) | set(fusion.NORMALIZERS)


def test_readme_lists_the_supported_aggregations_and_options():
    for name in (*aggregations.SUPPORTED, "fields", "docvalue_fields", "rest_total_hits_as_int", "l2_norm"):
        assert f"`{name}`" in README, name
    assert "§15" in README


def test_readme_lists_no_supported_construct_as_refused():
    """Issue 27: the README listed `rescore` as refused while the default hybrid query is built on it."""
    refused = re.search(
        r"^\* Anything outside the subset \((.*?)\) is answered with a\s+400", README, re.S | re.M
    )
    assert refused, "README has no list of refused constructs"
    named = set(re.findall(r"`([^`]+)`", refused.group(1)))
    assert named and not named & (set(search.SEARCH_KEYS) | set(aggregations.SUPPORTED)), named
    assert "rescore" in search.SEARCH_KEYS and "rescore" not in search._UNSUPPORTED_KEYS
    assert "the `rescore` phase (query rescorer" in README  # listed with what the engine implements
    assert "(`rescore`)" in README  # and as what the default hybrid's second pass is
