"""The README's Python snippets run as written; its commands name real options."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from scholar_es.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands():
    first_block = re.search(r"```sh\n(.*?)```", README, re.S).group(1)
    assert [line.split("#")[0].strip() for line in first_block.strip().splitlines()] == [
        "make demo",
        "make test",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("snippet", re.findall(r"```python\n(.*?)```", README, re.S))
def test_python_snippets_run(snippet, monkeypatch):
    monkeypatch.chdir(ROOT)
    exec(compile(snippet, "README.md", "exec"), {})  # noqa: S102 - our own documentation


@pytest.mark.parametrize("command", ["index", "search", "query", "console", "eval", "tune", "serve"])
def test_documented_options_exist(command):
    help_text = CliRunner().invoke(main, [command, "--help"]).output
    documented = re.search(rf"scholar-es {command}\s+(.*?)```", README, re.S)
    if documented is None:
        documented = re.search(rf"scholar-es {command}\b(.*?)\n\n", README, re.S)
    for option in re.findall(r"--[a-z][a-z-]*", documented.group(1).split("scholar-es ", 1)[0]):
        assert option in help_text, f"README documents {option} for {command}, --help does not"
