"""Generate ``scholar_es/engine/rest/spec_params.json``: every REST API's URL parameters, from
Elasticsearch's own REST API specification (the ``rest-api-spec`` JSON files).

Usage::

    python scripts/gen_rest_params.py SPEC_DIR COMMON_JSON --source "TEXT" [--out PATH]

* ``SPEC_DIR``: a directory of ``<api>.json`` files -- ``rest-api-spec/src/main/resources/
  rest-api-spec/api/`` of an elastic/elasticsearch checkout, or ``specification/_json_spec/`` of
  elastic/elasticsearch-specification (a copy of the former, per release branch);
* ``COMMON_JSON``: the ``_common.json`` of the parameters every API accepts (``pretty``,
  ``human``, ``error_trace``, ``filter_path``, ``source``, ``source_content_type``), which
  elastic/elasticsearch keeps in that same directory;
* ``--source``: where the files came from (repository, branch, commit), recorded in the table.

The table keeps, per API: its paths with their methods and its URL parameters with their
type (and options, for an enum). The engine's dispatcher (``engine/rest/spec.py``) reads it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "scholar_es" / "engine" / "rest" / "spec_params.json"


def _param(spec: dict) -> dict:
    out = {"type": spec.get("type", "string")}
    if spec.get("options"):
        out["options"] = list(spec["options"])
    return out


def build(spec_dir: Path, common: Path, source: str) -> dict:
    apis: dict[str, dict] = {}
    for path in sorted(spec_dir.glob("*.json")):
        if path.name.startswith("_"):
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        ((name, spec),) = doc.items()
        apis[name] = {
            "paths": [{"path": p["path"], "methods": p["methods"]} for p in spec["url"]["paths"]],
            "params": {k: _param(v) for k, v in sorted((spec.get("params") or {}).items())},
        }
    common_params = json.loads(common.read_text(encoding="utf-8"))["params"]
    return {
        "source": source,
        "generated_by": "scripts/gen_rest_params.py",
        "common": {k: _param(v) for k, v in sorted(common_params.items())},
        "apis": apis,
    }


def dumps(table: dict) -> str:
    """One API a line (a regenerated table diffs by API)."""
    one = lambda v: json.dumps(v, separators=(",", ":"))  # noqa: E731
    head = ",\n".join(f"{json.dumps(k)}: {one(v)}" for k, v in table.items() if k != "apis")
    apis = ",\n".join(f" {json.dumps(k)}: {one(v)}" for k, v in table["apis"].items())
    return "{\n" + head + ',\n"apis": {\n' + apis + "\n}}\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec_dir", type=Path)
    ap.add_argument("common", type=Path)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    table = build(args.spec_dir, args.common, args.source)
    args.out.write_text(dumps(table), encoding="utf-8")
    print(f"{len(table['apis'])} APIs -> {args.out}")


if __name__ == "__main__":
    main()
