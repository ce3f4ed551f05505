"""The tuned profiles shipped in the package load by name (issue 11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from querybuilder.profiles import Profile, load_profile, profile_names
from scholar_es.cli import main
from scholar_es.errors import ConfigError

SHIPPED = Path(__file__).resolve().parents[2] / "scholar_es" / "evaluation" / "profiles"


@pytest.mark.parametrize(
    ("name", "file"),
    [
        ("tuned-qasper-train", "tuned-qasper-train.json"),
        ("tuned-qasper", "tuned-qasper-train.json"),
        ("tuned-scifact", "tuned-scifact-train.json"),
    ],
)
def test_shipped_profiles_load_by_full_or_short_name(name, file):
    expected = Profile.from_dict(json.loads((SHIPPED / file).read_text()))
    assert load_profile(name) == expected
    assert load_profile(name).name == file[: -len(".json")]


def test_ambiguous_and_unknown_names_list_what_exists():
    with pytest.raises(
        ConfigError, match="'tuned' is ambiguous: it could be 'tuned-qasper-train', 'tuned-scifact-train'"
    ):
        load_profile("tuned")
    with pytest.raises(ConfigError, match="names: 'default', 'tuned-qasper'.*'tuned-scifact-train'"):
        load_profile("tuned-pubmedqa")
    assert profile_names()[:3] == ["default", "tuned-qasper-train", "tuned-scifact-train"]
    assert load_profile("default").name == "default"


def test_cli_takes_a_shipped_name(tmp_path):
    ok = CliRunner().invoke(
        main, ["query", "how do they parse", "--strategy", "bm25", "--profile", "tuned-qasper"]
    )
    assert ok.exit_code == 0, ok.output
    bad = CliRunner().invoke(main, ["query", "q", "--strategy", "bm25", "--profile", "tuned"])
    assert bad.exit_code == 2 and "ambiguous" in bad.output
    assert "tuned-qasper" in CliRunner().invoke(main, ["search", "--help"]).output
