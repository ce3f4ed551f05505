"""``scholar-es heads train --self-supervised``: pairs from the index, the adapter, stored (issue 28).

:func:`train_self_supervised` reads every chunk of ``<prefix>chunks``
(:func:`~scholar_es.projection.selfsup.read_chunks`), builds the pairs
(:func:`~scholar_es.projection.selfsup.build_pairs`), embeds the queries with the index's model as
the query builder embeds a question (the cleaned text) and the targets as the indexer embedded
them (the vectors the index holds, through the embedding cache), trains the adapter
(:func:`~scholar_es.projection.adapter.fit_adapter`; the held-out pairs are whole papers) and
stores it as ``<prefix>adapter`` (:func:`~scholar_es.projection.adapter_store.save_adapter`).
No judgment, question or test file is read. Nothing changes at index time: the chunks keep their
vectors, only questions are mapped.
"""

from __future__ import annotations

import datetime as _dt
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scholar_es.errors import ConfigError
from scholar_es.projection import adapter as ad
from scholar_es.projection.selfsup import (
    DEFAULT_KINDS,
    DEFAULT_MAX_PAIRS,
    build_pairs,
    count_kinds,
    read_chunks,
)

EMBED_BATCH = 256
#: fewer pairs than this train nothing (two of them are held out at least)
MIN_PAIRS = 4


@dataclass
class SelfSupSummary:
    index: str
    prefix: str
    chunks: int
    pairs: dict[str, int]
    report: ad.FitReport
    embed_seconds: float
    seconds: float
    encoded: int  # texts the model encoded (the rest came from the embedding cache)
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        r = self.report
        kept = (
            f"epoch {r.best_epoch} of {r.epochs_run} kept"
            if r.best_epoch
            else "no epoch beat the question's own vector: the stored adapter is the identity"
        )
        pairs = ", ".join(f"{n} {k}" for k, n in self.pairs.items())
        return (
            f"adapter for {self.prefix}chunks: {sum(self.pairs.values())} pairs ({pairs}) from "
            f"{self.chunks} chunks; held-out in-batch loss {r.heldout_loss_before:.4f} -> "
            f"{r.heldout_loss_after:.4f} on {r.heldout_pairs} pairs ({kept}); embedding "
            f"{self.embed_seconds:.1f} s ({self.encoded} texts encoded), training {r.seconds:.1f} s, "
            f"total {self.seconds:.1f} s -> {self.index}"
        )


def _encode(embedder, texts: Sequence[str], desc: str, progress: bool) -> np.ndarray:
    from tqdm import tqdm

    unique = list(dict.fromkeys(texts))
    rows: dict[str, np.ndarray] = {}
    with tqdm(
        total=len(unique), desc=desc, unit=" texts", file=sys.stderr, disable=None if progress else True
    ) as bar:
        for start in range(0, len(unique), EMBED_BATCH):
            part = unique[start : start + EMBED_BATCH]
            rows.update(zip(part, embedder.encode(part), strict=True))
            bar.update(len(part))
    return np.vstack([rows[t] for t in texts]).astype(np.float32)


def train_self_supervised(
    es,
    prefix: str,
    *,
    kinds: Sequence[str] = DEFAULT_KINDS,
    max_pairs: int = DEFAULT_MAX_PAIRS,
    seed: int = 0,
    remove_query: bool = False,
    sentences_per_chunk: int = 1,
    rank: int | None = None,
    scale: float = ad.DEFAULT_SCALE,
    epochs: int = ad.DEFAULT_EPOCHS,
    lr: float = ad.DEFAULT_LR,
    weight_decay: float = ad.DEFAULT_WEIGHT_DECAY,
    batch_size: int = ad.DEFAULT_BATCH,
    holdout: float = ad.DEFAULT_HOLDOUT,
    patience: int = ad.DEFAULT_PATIENCE,
    hard_batches: bool = False,
    embedder=None,
    progress: bool = True,
    save: bool = True,
) -> tuple[ad.Adapter, SelfSupSummary]:
    """Train the adapter of ``<prefix>chunks`` from its own text (module doc) and, with ``save``,
    store it as ``<prefix>adapter``. Returns the adapter and what was done."""
    from tqdm import tqdm

    from querybuilder.run import check_model, index_meta
    from scholar_es.projection.adapter_store import save_adapter
    from scholar_es.projection.train import question_text

    t0 = time.perf_counter()
    meta = index_meta(es, f"{prefix}chunks")
    if embedder is None:
        from indexer.embedder import DEFAULT_MODEL, Embedder

        embedder = Embedder(meta.get("embedding_model") or DEFAULT_MODEL)
    check_model(meta, model=embedder.name)
    with tqdm(
        desc="reading chunks", unit=" chunks", file=sys.stderr, disable=None if progress else True
    ) as bar:

        def seen(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        chunks = read_chunks(es, prefix, on_progress=seen)
    pairs = build_pairs(
        chunks,
        kinds=kinds,
        max_pairs=max_pairs,
        seed=seed,
        remove_query=remove_query,
        sentences_per_chunk=sentences_per_chunk,
    )
    if len(pairs) < MIN_PAIRS:
        raise ConfigError(
            f"{prefix}chunks gives only {len(pairs)} training pairs (kinds {', '.join(kinds)}) from "
            f"{len(chunks)} chunks; the adapter needs a corpus with titles, abstracts of several "
            f"sentences or named sections (at least {MIN_PAIRS} pairs)"
        )
    t_embed = time.perf_counter()
    encoded_before = getattr(embedder, "encoded", 0)
    Q = _encode(embedder, [question_text(p.query) for p in pairs], "embedding queries", progress)
    T = _encode(embedder, [p.target_text for p in pairs], "embedding targets", progress)
    check_model(meta, dims=int(Q.shape[1]))
    embed_seconds = time.perf_counter() - t_embed
    with tqdm(
        total=epochs, desc="training", unit=" epochs", file=sys.stderr, disable=None if progress else True
    ) as bar:

        def epoch_done(epoch: int, train_loss: float, held_loss: float) -> None:
            bar.set_postfix(train=f"{train_loss:.4f}", held_out=f"{held_loss:.4f}")
            bar.update(1)

        adapter, report = ad.fit_adapter(
            Q,
            T,
            [p.chunk_id for p in pairs],
            model=embedder.name,
            groups=[p.paper_id for p in pairs],
            rank=rank,
            scale=scale,
            epochs=epochs,
            lr=lr,
            weight_decay=weight_decay,
            batch_size=batch_size,
            holdout=holdout,
            patience=patience,
            seed=seed,
            hard_batches=hard_batches,
            on_epoch=epoch_done,
        )
    counts = count_kinds(pairs)
    adapter = adapter.with_info(
        prefix=prefix,
        chunks=len(chunks),
        pairs=counts,
        seed=seed,
        max_pairs=max_pairs,
        remove_query=remove_query,
        sentences_per_chunk=sentences_per_chunk,
        rank=rank,
        scale=scale,
        lr=lr,
        weight_decay=weight_decay,
        batch_size=batch_size,
        hard_batches=hard_batches,
        heldout_pairs=report.heldout_pairs,
        heldout_loss_before=round(report.heldout_loss_before, 6),
        heldout_loss_after=round(report.heldout_loss_after, 6),
        best_epoch=report.best_epoch,
        epochs_run=report.epochs_run,
        training_seconds=round(report.seconds, 1),
        trained_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )
    index = save_adapter(es, adapter, prefix) if save else ""
    return adapter, SelfSupSummary(
        index=index,
        prefix=prefix,
        chunks=len(chunks),
        pairs=counts,
        report=report,
        embed_seconds=embed_seconds,
        seconds=time.perf_counter() - t0,
        encoded=getattr(embedder, "encoded", 0) - encoded_before,
    )
