#!/usr/bin/env bash
# Wheel smoke test (CI runs it from `make test`): build the wheel, install it (not editable) into a
# fresh virtual environment, and use it from a directory that has its own `engine/` and
# `evaluation/` packages, as a user's project might. Checks that the wheel installs exactly the
# import names scholar_es, indexer and querybuilder, that `scholar-es --version` answers, and that
# the demo papers index and search through the CLI and the Python API.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "wheel smoke: building the wheel"
"$python" -m pip wheel -q --no-deps -w "$work/dist" "$repo" >/dev/null
wheel="$(ls "$work"/dist/scholar_es-*.whl)"

names="$("$python" - "$wheel" <<'PY'
import sys, zipfile
tops = {n.split("/")[0] for n in zipfile.ZipFile(sys.argv[1]).namelist()}
print(" ".join(sorted(t for t in tops if not t.endswith(".dist-info"))))
PY
)"
if [ "$names" != "indexer querybuilder scholar_es" ]; then
  echo "wheel smoke: FAILED: the wheel installs [$names], expected [indexer querybuilder scholar_es]" >&2
  exit 1
fi

echo "wheel smoke: installing it into a fresh venv"
"$python" -m venv "$work/venv"
# CPU torch first (plain `torch` would pull a CUDA build); pip's cache makes this a copy.
"$work/venv/bin/pip" install -q torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
"$work/venv/bin/pip" install -q "$wheel" 2>&1 | grep -v '^WARNING: Location' || true
"$work/venv/bin/pip" show -q scholar-es >/dev/null

# A user's project with packages that share names with the old top-level folders.
proj="$work/project"
mkdir -p "$proj/engine" "$proj/evaluation" "$proj/mappings" "$proj/projection" "$proj/multisection"
for d in engine evaluation mappings projection multisection; do
  echo "raise ImportError('the user project\'s own $d package was imported by scholar-es')" >"$proj/$d/__init__.py"
done
cp "$repo/scripts/demo_papers.jsonl" "$proj/"
cd "$proj"
bin="$work/venv/bin"
"$bin/scholar-es" --version
"$bin/scholar-es" index demo_papers.jsonl --es ./idx --quiet
"$bin/scholar-es" search "How is the retriever trained?" --es ./idx --size 3 | head -20
"$bin/python" - <<'PY'
import scholar_es
from importlib.metadata import files

es = scholar_es.connect("./idx")
result = scholar_es.search(es, "How is the retriever trained?", size=3)
assert result.hits, "no hits through the Python API"
ms = scholar_es.multisection_search(es, "retrieval training and evaluation", papers=3)
assert ms.papers, "no papers through multisection_search"
tops = {f.parts[0] for f in files("scholar-es") if not f.parts[0].endswith(".dist-info") and f.parts[0] != ".."}
tops = {t for t in tops if not t.endswith(".pth")}
assert tops == {"scholar_es", "indexer", "querybuilder"}, tops
from importlib.resources import files as package_files

ui = package_files("scholar_es.serve") / "ui"
assert all((ui / n).is_file() for n in ("index.html", "app.js", "style.css")), "serve's page is not in the wheel"
from scholar_es.serve import create_app  # noqa: F401 - fastapi and uvicorn came with the wheel
print(f"wheel smoke: python API ok: {len(result.hits)} hits, {len(ms.papers)} papers; installed {sorted(tops)}")
PY
echo "wheel smoke: passed"
