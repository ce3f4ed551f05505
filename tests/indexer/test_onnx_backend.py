"""The onnx/onnx-int8 embedding backends: same vectors as torch, one atomic cached export, and
commands that embed a question (or none) without importing torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from indexer.embedder import Embedder, EmbeddingCache, resolve_model
from indexer.onnx_backend import export_dir, onnx_available
from scholar_es.errors import ConfigError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not onnx_available(), reason="onnxruntime is not installed"),
]

TEXTS = [
    "Graph neural networks for citation recommendation",
    "Active learning for named entity recognition\nWe label less data.",
    "SMILES strings need their own tokenizer.",
    "Vitamin D deficiency is associated with an increased risk of " * 40,  # past 256 tokens: truncated
    "short",
    "",
]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A cache directory holding the fp32 and int8 exports of the default model."""
    root = tmp_path_factory.mktemp("cache")
    for backend in ("onnx", "onnx-int8"):
        assert Embedder(backend=backend, cache_dir=root, use_cache=False).dims == 384
    return root


def test_fp32_onnx_vectors_equal_torch_and_int8_stay_close(cache):
    torch_vecs = Embedder(backend="torch", use_cache=False).encode(TEXTS)
    onnx_vecs = Embedder(backend="onnx", cache_dir=cache, use_cache=False, batch_size=4).encode(TEXTS)
    int8_vecs = Embedder(backend="onnx-int8", cache_dir=cache, use_cache=False).encode(TEXTS)
    assert onnx_vecs.shape == torch_vecs.shape == (len(TEXTS), 384)
    assert float(np.abs(onnx_vecs - torch_vecs).max()) < 1e-5
    np.testing.assert_allclose(np.linalg.norm(int8_vecs, axis=1), 1.0, atol=1e-5)
    assert float((int8_vecs * torch_vecs).sum(axis=1).min()) > 0.95
    assert float(np.abs(int8_vecs - torch_vecs).max()) > 1e-4  # quantized: really other vectors


def test_int8_vectors_are_cached_apart_fp32_onnx_shares_torch(cache, tmp_path):
    keys = {b: Embedder(backend=b, cache_dir=tmp_path).vector_key for b in ("torch", "onnx", "onnx-int8")}
    assert keys["torch"] == keys["onnx"] != keys["onnx-int8"]
    int8 = Embedder(backend="onnx-int8", cache_dir=cache)
    fp32 = Embedder(backend="onnx", cache_dir=cache)
    a, b = int8.encode(TEXTS[:2]), fp32.encode(TEXTS[:2])
    assert not np.array_equal(a, b)  # the fp32 embedder did not get the int8 rows from the cache
    stored = EmbeddingCache(cache / "embeddings.sqlite3").get_many(
        [EmbeddingCache.key(int8.vector_key, TEXTS[0])]
    )
    np.testing.assert_array_equal(next(iter(stored.values())), a[0])


def test_backend_choices_and_errors(tmp_path, monkeypatch):
    assert Embedder(backend="auto", cache_dir=tmp_path).backend == "onnx"
    monkeypatch.setenv("SCHOLAR_ES_BACKEND", "onnx-int8")
    assert Embedder(cache_dir=tmp_path).backend == "onnx-int8"
    assert Embedder(backend="torch", cache_dir=tmp_path).backend == "torch"  # the argument wins
    monkeypatch.setenv("SCHOLAR_ES_BACKEND", "gpu")
    with pytest.raises(ConfigError, match=r"\$SCHOLAR_ES_BACKEND is 'gpu'"):
        Embedder(cache_dir=tmp_path)
    monkeypatch.delenv("SCHOLAR_ES_BACKEND")
    with pytest.raises(ConfigError, match="unknown --backend 'gpu'"):
        Embedder(backend="gpu", cache_dir=tmp_path)
    # a model that is not a local sentence-transformers directory: auto falls back, onnx refuses
    assert Embedder("some-org/other-model", backend="auto", cache_dir=tmp_path).backend == "torch"
    with pytest.raises(ConfigError, match="--backend onnx runs local sentence-transformers models"):
        Embedder("some-org/other-model", backend="onnx", cache_dir=tmp_path)


def test_second_use_reuses_the_export_and_a_killed_export_leaves_nothing_half_written(cache, tmp_path):
    model_dir = Path(resolve_model("all-MiniLM-L6-v2"))
    done = export_dir(model_dir, cache, quantized=False)
    before = (done / "model.onnx").stat().st_mtime_ns
    Embedder(backend="onnx", cache_dir=cache, use_cache=False).encode(["again"])
    assert (done / "model.onnx").stat().st_mtime_ns == before

    # kill -9 an export midway (after torch loaded, while it writes): no final directory appears
    # half-filled; the next process exports afresh and gets the same vectors
    code = (
        "from indexer.embedder import Embedder; import sys;"
        f"Embedder(backend='onnx', cache_dir=__import__('pathlib').Path({str(tmp_path)!r}), use_cache=False).dims"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    final = export_dir(model_dir, tmp_path, quantized=False)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(p.name.startswith(".fp32-") for p in final.parent.glob(".*")):
            time.sleep(0.3)  # the export is writing its temporary directory
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    if final.exists():  # the export beat the kill: it must be whole
        assert {"model.onnx", "config.json", "tokenizer.json"} <= {p.name for p in final.iterdir()}
    vecs = Embedder(backend="onnx", cache_dir=tmp_path, use_cache=False).encode(TEXTS[:3])
    ref = Embedder(backend="onnx", cache_dir=cache, use_cache=False).encode(TEXTS[:3])
    np.testing.assert_array_equal(vecs, ref)


def _modules_after(args: list[str], cache: Path, stdin: str = "") -> dict:
    """Run the CLI in a fresh interpreter; report whether torch/sentence_transformers got imported."""
    code = (
        "import json, sys\n"
        "from scholar_es.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as e:\n"
        "    code = e.code\n"
        "print(json.dumps({'code': code, 'torch': 'torch' in sys.modules,"
        " 'st': 'sentence_transformers' in sys.modules}), file=sys.stderr)\n"
    )
    env = {**os.environ, "SCHOLAR_ES_CACHE": str(cache)}
    env.pop("SCHOLAR_ES_BACKEND", None)
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return json.loads(done.stderr.strip().splitlines()[-1]) | {"out": done.stdout, "err": done.stderr}


def test_commands_never_import_torch(cache, tmp_path):
    src = tmp_path / "papers.jsonl"
    src.write_text(
        "\n".join(
            json.dumps({"id": f"p{i}", "title": t, "abstract": f"{t}. Details follow."})
            for i, t in enumerate(["Graph neural networks", "Protein folding", "Vitamin D and bone density"])
        )
    )
    es = str(tmp_path / "engine")
    index = _modules_after(["index", str(src), "--es", es, "--quiet"], cache)
    assert index["code"] == 0 and not index["torch"], index["err"]
    for args, stdin in [
        (["indices", "--es", es], ""),
        (["console", "--es", es], "GET chunks/_count\n"),
        (["query", "a question never asked before", "--strategy", "dense"], ""),
        (["search", "which vitamin helps bones", "--es", es, "--strategy", "dense", "--size", "1"], ""),
    ]:
        got = _modules_after(args, cache, stdin)
        assert got["code"] == 0, got["err"]
        assert not got["torch"] and not got["st"], (args, got["err"])
    assert "Vitamin D" in got["out"]
    # --backend torch does load it (a new question: the cached one needs no model), same answer
    got = _modules_after(
        [
            "search",
            "what vitamin helps bone density",
            "--es",
            es,
            "--strategy",
            "dense",
            "--size",
            "1",
            "--backend",
            "torch",
        ],
        cache,
    )
    assert got["code"] == 0 and got["torch"] and "Vitamin D" in got["out"], got["err"]


def test_an_int8_index_refuses_fp32_vectors(cache, tmp_path):
    src = tmp_path / "papers.jsonl"
    src.write_text(json.dumps({"id": "p1", "title": "Protein folding", "abstract": "Alpha helices."}))
    es = str(tmp_path / "engine")
    first = _modules_after(["index", str(src), "--es", es, "--quiet", "--backend", "onnx-int8"], cache)
    assert first["code"] == 0, first["err"]
    again = _modules_after(["index", str(src), "--es", es, "--quiet", "--backend", "onnx"], cache)
    assert again["code"] != 0
    assert "holds vectors of the 'onnx-int8' embedding backend" in again["err"], again["err"]
    assert "--backend onnx-int8" in again["err"]
