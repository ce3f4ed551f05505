"""ONNX Runtime inference for sentence-transformers models, without torch at query time.

A sentence-transformers model of the common shape - a BERT-like ``Transformer`` module, then
``Pooling`` (mean or CLS), then optionally ``Normalize`` - is exported once to ONNX with
``torch.onnx.export`` (offline, from the local model directory) into a cache directory, and
optionally int8-quantized with ``onnxruntime.quantization.quantize_dynamic``. Encoding then needs
only ``tokenizers`` + ``onnxruntime`` + numpy: a process that embeds one question never imports
torch (about 5 s of CPU on a small machine).

Why not ``SentenceTransformer(path, backend="onnx")``: its export goes through
``optimum-onnx``, whose only release pins ``transformers<4.58`` while sentence-transformers 6
needs ``transformers>=5``; and loading it still imports torch, which is the query-time cost
this backend removes. Tokenization (``tokenizer.json``), truncation (``max_seq_length``),
pooling and normalization follow the model's own sentence-transformers configuration files;
fp32 vectors equal the torch backend's to ~1e-6 (tests/indexer/test_onnx_backend.py, bench/README.md).

The export is written atomically: into a temporary directory beside the final one, renamed
into place when complete, so a killed export leaves no half model and a second process
reuses the finished one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from scholar_es.errors import ConfigError

BACKENDS = ("auto", "torch", "onnx", "onnx-int8")
#: bump when the exported files change shape, so old caches are not reused
EXPORT_VERSION = 2
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def onnx_available() -> bool:
    """onnxruntime and tokenizers importable (checked without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "tokenizers"))


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise ConfigError(f"unknown --backend {backend!r}; use one of {', '.join(BACKENDS)}")
    return backend


def model_config(model_dir: Path) -> dict[str, Any] | None:
    """max_seq_length, pooling and normalize of a local sentence-transformers model directory,
    or None when its modules are not Transformer -> Pooling(mean|cls) [-> Normalize]."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        types = [m["type"].rsplit(".", 1)[-1] for m in modules]
        if types not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]):
            return None
        if modules[0].get("path", "") != "" or not (model_dir / "tokenizer.json").is_file():
            return None
        pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
        modes = [k for k, v in pooling.items() if k.startswith("pooling_mode_") and v]
        if modes not in (["pooling_mode_mean_tokens"], ["pooling_mode_cls_token"]):
            return None
        st = json.loads((model_dir / "sentence_bert_config.json").read_text())
        max_len = int(st.get("max_seq_length") or 512)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    return {
        "max_seq_length": max_len,
        "pooling": "mean" if modes == ["pooling_mode_mean_tokens"] else "cls",
        "normalize": types[-1] == "Normalize",
    }


def export_dir(model_dir: Path, cache_root: Path, quantized: bool) -> Path:
    """Where the export of ``model_dir`` lives: named by the model's folder and a digest of its
    config and weight files (name, size, mtime), so a changed model gets a fresh export."""
    h = hashlib.sha256(f"{EXPORT_VERSION}\x00{model_dir.resolve()}".encode())
    for f in sorted(model_dir.iterdir()):
        if f.is_file():
            st = f.stat()
            h.update(f"{f.name}\x00{st.st_size}\x00{st.st_mtime_ns}\x00".encode())
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_dir.name)[:60]
    variant = "int8" if quantized else "fp32"
    return cache_root / "onnx" / f"{safe}-{h.hexdigest()[:16]}" / variant


def _export_fp32(model_dir: Path, out: Path) -> None:
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no weights-loading bar in the middle of our own progress

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    model.eval()
    names = [n for n in _INPUTS if n != "token_type_ids" or model.config.type_vocab_size > 0]

    class _Hidden(torch.nn.Module):  # keyword inputs: transformers 5's forward() is keyword-first
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *tensors):
            return self.inner(**dict(zip(names, tensors, strict=True))).last_hidden_state

    sample = torch.ones(2, 8, dtype=torch.long)
    args = tuple(sample if n != "token_type_ids" else torch.zeros_like(sample) for n in names)
    axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "last_hidden_state"]}
    import warnings

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about constant branches (no mask -> causal)
        torch.onnx.export(
            _Hidden(model),
            args,
            str(out / "model.onnx"),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def ensure_export(model_dir: Path, cache_root: Path, quantized: bool) -> Path:
    """The exported model directory for ``model_dir``, exporting it first when not cached."""
    final = export_dir(model_dir, cache_root, quantized)
    if (final / "model.onnx").is_file():
        return final
    config = model_config(model_dir)
    if config is None:
        raise ConfigError(
            f"the ONNX backend supports sentence-transformers models made of Transformer -> Pooling "
            f"(mean or cls) [-> Normalize] with a tokenizer.json; {str(model_dir)!r} is not one. "
            "Use --backend torch"
        )
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        if quantized:
            import logging

            from onnxruntime.quantization import QuantType, quantize_dynamic

            fp32 = ensure_export(model_dir, cache_root, quantized=False)
            # the MatMul weights only, per output channel: quantizing the embedding table (Gather) too,
            # quantize_dynamic's default, drops the worst cosine to torch's vectors from 0.989 to 0.895
            # on SciFact texts for no speed (bench/README.md)
            logging.disable(logging.WARNING)  # its root-logger advice to pre-process, at every export
            try:
                quantize_dynamic(
                    fp32 / "model.onnx",
                    tmp / "model.onnx",
                    weight_type=QuantType.QInt8,
                    per_channel=True,
                    op_types_to_quantize=["MatMul"],
                )
            finally:
                logging.disable(logging.NOTSET)
        else:
            _export_fp32(model_dir, tmp)
        shutil.copyfile(model_dir / "tokenizer.json", tmp / "tokenizer.json")
        special = model_dir / "special_tokens_map.json"
        pad = "[PAD]"
        if special.is_file():
            tok = json.loads(special.read_text()).get("pad_token", pad)
            pad = tok.get("content", pad) if isinstance(tok, dict) else str(tok)
        config = {**config, "pad_token": pad, "source": str(model_dir), "quantized": quantized}
        (tmp / "config.json").write_text(json.dumps(config, indent=2))
        try:
            os.rename(tmp, final)  # atomic; fails when another process finished first
        except OSError:
            if not (final / "model.onnx").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


class OnnxEncoder:
    """Encodes texts with an exported model: tokenizers -> onnxruntime -> pooling -> L2 norm."""

    def __init__(self, export: Path) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.config = json.loads((export / "config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(export / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=int(self.config["max_seq_length"]))
        pad = self.config.get("pad_token", "[PAD]")
        self.tokenizer.enable_padding(pad_id=self.tokenizer.token_to_id(pad) or 0, pad_token=pad)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self.session = ort.InferenceSession(
            str(export / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = [i.name for i in self.session.get_inputs()]
        out = self.session.get_outputs()[0].shape
        self.dims = int(out[-1]) if isinstance(out[-1], int) else None

    def encode(self, texts: Sequence[str], batch_size: int = 8) -> np.ndarray:
        # longest first, as sentence-transformers does: batches of similar length pad less
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dims or 0), dtype=np.float32) if self.dims else None
        rows: dict[int, np.ndarray] = {}
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: feed[k] for k in self.inputs})[0]
            if self.config["pooling"] == "cls":
                vecs = hidden[:, 0]
            else:
                m = mask[..., None].astype(np.float32)
                vecs = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            if self.config["normalize"]:
                vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
            for i, v in zip(idx, vecs, strict=True):
                rows[i] = v
        if out is None:
            return np.vstack([rows[i] for i in range(len(texts))]).astype(np.float32)
        for i, v in rows.items():
            out[i] = v
        return out
