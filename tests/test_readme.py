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


COMMANDS = ["index", "search", "query", "console", "eval", "tune", "indices", "delete", "serve"]


def _sh_commands() -> list[tuple[str, str]]:
    """Every ``scholar-es <command> ...`` of the README's sh blocks (synopses included), comments cut."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        text = "\n".join(re.sub(r"\s#\s.*$", "", line) for line in block.splitlines())
        for part in text.split("scholar-es ")[1:]:
            words = part.split()
            if words and words[0] in COMMANDS:
                out.append((words[0], part))
    return out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_documented_option_exists(command):
    help_text = CliRunner().invoke(main, [command, "--help"]).output
    uses = [text for name, text in _sh_commands() if name == command]
    assert uses, f"README shows no `scholar-es {command}`"
    for text in uses:
        for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", text):
            assert option in help_text, f"README documents {option} for {command}, --help does not"


@pytest.mark.slow
def test_getting_started_commands_run_in_order(tmp_path, monkeypatch):
    """The Getting started block as a new user copies it, after `make demo` built the demo index."""
    import shlex
    import shutil

    section = README.split("## Getting started", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCHOLAR_ES_URL", raising=False)
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "demo_papers.jsonl", tmp_path / "scripts")
    demo = CliRunner().invoke(
        main, ["index", "scripts/demo_papers.jsonl", "--es", ".scholar-es-demo", "--quiet"]
    )
    assert demo.exit_code == 0, demo.output  # what `make demo` runs
    outputs = []
    for line in block.strip().splitlines():
        if line.startswith("source "):
            continue
        args = shlex.split(line)
        assert args[0] == "scholar-es", line
        result = CliRunner().invoke(main, args[1:])
        assert result.exit_code == 0, (line, result.output)
        outputs.append(result.output)
    assert "demo-001" in outputs[0]  # the window-memory paper answers the first question
    assert "current" in outputs[1] and "chunks-v1" in outputs[1]
    # only the two papers of "Demo Conference on Information Retrieval", whatever the case typed
    assert set(re.findall(r"demo-\d+", outputs[3])) == {"demo-003", "demo-006"}
    assert (tmp_path / ".scholar-es").is_dir() and "chunks-v1" in outputs[4]
