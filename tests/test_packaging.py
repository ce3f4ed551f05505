"""Packaging: three import names, the package list matches the folders, the public API resolves.

The wheel itself is built, installed into a fresh venv and used from a foreign project by
scripts/wheel_smoke.sh (run by `make test`); these tests check the source tree cheaply.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

import scholar_es
from scholar_es.cli import main

REPO = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib")  # Python 3.11+
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def _packages_on_disk() -> set[str]:
    found = set()
    for top in ("indexer", "querybuilder", "scholar_es"):
        for init in (REPO / top).rglob("__init__.py"):
            found.add(".".join(init.parent.relative_to(REPO).parts))
    return found | {"scholar_es.mappings"}  # mappings/ ships as scholar_es.mappings (package-dir)


def test_package_list_matches_the_folders_on_disk():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    assert listed == _packages_on_disk()
    assert {p.split(".")[0] for p in listed} == {"scholar_es", "indexer", "querybuilder"}
    assert PYPROJECT["tool"]["setuptools"]["package-dir"] == {"scholar_es.mappings": "mappings"}


def test_mappings_ship_as_package_data():
    from importlib import resources

    names = {p.name for p in resources.files("scholar_es.mappings").iterdir()}
    assert {"papers.json", "chunks.json"} <= names
    for top in ("indexer", "querybuilder", "scholar_es"):
        assert (REPO / top / "py.typed").is_file()


@pytest.mark.parametrize("name", scholar_es.__all__)
def test_every_public_name_resolves(name):
    assert getattr(scholar_es, name) is not None


def test_all_lists_exactly_the_lazy_exports():
    assert set(scholar_es.__all__) == {"__version__", *scholar_es._EXPORTS}


def test_unknown_public_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        scholar_es.nope  # noqa: B018


def test_version_option_matches_the_metadata():
    out = CliRunner().invoke(main, ["--version"])
    assert out.exit_code == 0
    assert out.output.strip() == f"scholar-es, version {version('scholar-es')}"
    assert scholar_es.__version__ == version("scholar-es")


def test_importing_the_engine_does_not_load_the_whole_api():
    code = (
        "import sys, scholar_es.engine.rest.transport\n"
        "print(sorted(m for m in ('querybuilder.run', 'indexer.pipeline', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_user_package_named_engine_does_not_shadow_ours(tmp_path):
    """A project with its own engine/ and evaluation/ folders (first on sys.path) still connects."""
    for name in ("engine", "evaluation", "mappings"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('user {name} imported')\n")
    code = (
        "import sys; sys.path.insert(0, '.')\n"
        "import scholar_es\n"
        "es = scholar_es.connect('idx')\n"
        "es.indices.create(index='x')\n"
        "print(es.indices.exists(index='x').body)"
    )
    env_path = str(REPO)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": env_path, "PATH": ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
