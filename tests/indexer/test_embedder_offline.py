"""Only the packaged default model loads offline; the process's hub settings stay as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CODE = """
import os
from indexer.embedder import Embedder, resolve_model
e = Embedder(use_cache=False)
assert e.encode(["a sentence"]).shape == (1, 384)
print("offline-env", os.environ.get("HF_HUB_OFFLINE"))
print("other", resolve_model("org/another-model"))
"""


def test_default_model_loads_without_setting_hf_hub_offline():
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    out = subprocess.run(
        [sys.executable, "-c", CODE],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    # HF_HUB_OFFLINE would make every later model name (and child process) fail to download
    assert "offline-env None" in out.stdout
    assert "other org/another-model" in out.stdout  # other names go to sentence-transformers unchanged
