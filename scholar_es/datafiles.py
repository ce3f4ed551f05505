"""Reading the JSON data files users may extend (intents, synonyms, prompts, profiles)."""

from __future__ import annotations

import json
from pathlib import Path

from scholar_es.errors import ConfigError


def read_json(path: str | Path, what: str) -> object:
    """The parsed file; a missing file or bad JSON is a ConfigError naming the file and place."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
