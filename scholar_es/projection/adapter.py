"""A query-side adapter: one shared linear map trained with in-batch negatives (issue 28).

``q' = normalize(q + q W)``: a residual linear map of the question's vector, ``W`` (d x d) zero
at the start (the adapter then changes nothing), or the product of two rank-``r`` factors
``W = U V`` with ``V`` zero at the start (LoRA's initialisation). Only the query side moves; the
chunks keep the vectors they were indexed with, so nothing is re-indexed.

Training (:func:`fit_adapter`) minimizes the multiple-negatives ranking loss of
sentence-transformers (``MultipleNegativesRankingLoss``, as GPL uses it): for a batch of pairs
``(q_i, t_i)``, the cross entropy of ``softmax_j(scale · cos(q'_i, t_j))`` against ``j = i`` --
every other target of the batch is a negative. A target that is the same chunk as the positive
(two pairs of one chunk in a batch) is masked out, not counted as a negative. A held-out slice of
the PAIRS (never judgments) stops the training early: the epoch with the lowest held-out loss
is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from indexer.embedder import model_key
from scholar_es.errors import ConfigError, ModelMismatchError
from scholar_es.projection.routing import normalize

DEFAULT_SCALE = 20.0
DEFAULT_BATCH = 128
DEFAULT_EPOCHS = 10
DEFAULT_LR = 1e-3
DEFAULT_HOLDOUT = 0.1
DEFAULT_PATIENCE = 2
DEFAULT_WEIGHT_DECAY = 0.0


@dataclass(frozen=True, eq=False)
class Adapter:
    """``q' = normalize(q + q W)`` for query vectors of ``model`` (``dims`` wide)."""

    weight: np.ndarray  # (d, d) float32
    model: str
    dims: int
    #: how it was trained: prefix, pairs per kind, rank, scale, epochs, losses, seconds, ...
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if np.shape(self.weight) != (self.dims, self.dims):
            raise ConfigError(
                f"the adapter's weight has shape {np.shape(self.weight)}, expected ({self.dims}, {self.dims})"
            )
        if not np.all(np.isfinite(self.weight)):
            raise ConfigError("the adapter's weight holds NaN or infinity; train it again")

    @classmethod
    def identity(cls, model: str, dims: int) -> Adapter:
        """The adapter that changes nothing (W = 0)."""
        return cls(np.zeros((dims, dims), dtype=np.float32), model, dims)

    def with_info(self, **info) -> Adapter:
        return replace(self, info={**self.info, **info})

    def check_query(self, *, model: str | None = None, dims: int | None = None) -> None:
        """ModelMismatchError for a question embedded with another model or of another width."""
        fix = (
            f"embed the question with {self.model!r}, or train the adapter again for this index "
            "(scholar-es heads train --self-supervised --prefix PREFIX)"
        )
        if model is not None and model_key(model) != model_key(self.model):
            raise ModelMismatchError(
                f"the adapter was trained for model {self.model!r}, but the question is embedded with "
                f"{model!r}; {fix}"
            )
        if dims is not None and int(dims) != self.dims:
            raise ModelMismatchError(
                f"the query vector has {dims} dimensions but the adapter maps {self.dims}-dim vectors "
                f"of {self.model!r}; {fix}"
            )

    def apply(self, q: np.ndarray, *, model: str | None = None) -> np.ndarray:
        """``normalize(q + q W)`` for one vector (d,) or a batch (n, d); float32 out. W = 0 (the
        identity) gives ``q`` back unchanged, bit for bit."""
        q = np.asarray(q, dtype=np.float32)
        self.check_query(model=model, dims=int(q.shape[-1]))
        if not self.weight.any():
            return q.copy()
        q64 = q.astype(np.float64)
        return normalize(q64 + q64 @ self.weight.astype(np.float64)).astype(np.float32)


# --- the loss, in numpy (for reports and tests) ----------------------------------------------------
def in_batch_loss(
    Q: np.ndarray,
    T: np.ndarray,
    target_ids: Sequence[str],
    *,
    scale: float = DEFAULT_SCALE,
    batch_size: int = DEFAULT_BATCH,
) -> float:
    """The mean multiple-negatives ranking loss over consecutive batches of ``batch_size`` pairs
    (rows of ``Q`` and ``T``; same-target columns masked), as :func:`fit_adapter` minimizes it."""
    Q = normalize(np.asarray(Q, dtype=np.float64))
    T = normalize(np.asarray(T, dtype=np.float64))
    ids = np.asarray(list(target_ids))
    total, n = 0.0, len(Q)
    for start in range(0, n, batch_size):
        q, t, b = (
            Q[start : start + batch_size],
            T[start : start + batch_size],
            ids[start : start + batch_size],
        )
        logits = scale * (q @ t.T)
        same = (b[:, None] == b[None, :]) & ~np.eye(len(b), dtype=bool)
        logits[same] = -np.inf
        m = logits.max(axis=1, keepdims=True)
        lse = m[:, 0] + np.log(np.exp(logits - m).sum(axis=1))
        total += float((lse - np.diag(logits)).sum())
    return total / max(n, 1)


# --- training ----------------------------------------------------------------------------------------
def similar_batches(T: np.ndarray, batch_size: int, *, seed: int = 0, iterations: int = 5) -> np.ndarray:
    """An order of the rows of ``T`` in which consecutive runs of ``batch_size`` rows hold alike
    targets: spherical k-means (``len(T) / batch_size`` clusters, seeded from random rows,
    ``iterations`` rounds), clusters in a random order, rows in a random order inside each."""
    rng = np.random.default_rng(seed)
    X = normalize(np.asarray(T, dtype=np.float64))
    k = max(1, len(X) // max(1, batch_size))
    centers = X[rng.choice(len(X), size=k, replace=False)]
    labels = np.zeros(len(X), dtype=np.int64)
    for _ in range(iterations):
        labels = np.argmax(X @ centers.T, axis=1)
        for c in range(k):
            members = X[labels == c]
            if len(members):
                centers[c] = normalize(members.sum(axis=0))
    keys = rng.permutation(k)[labels] * len(X) + rng.permutation(len(X))
    return np.argsort(keys, kind="stable")


@dataclass
class FitReport:
    pairs: int
    train_pairs: int
    heldout_pairs: int
    heldout_loss_before: float  # W = 0: the question's own vector
    heldout_loss_after: float
    best_epoch: int  # 0: no epoch beat W = 0; the adapter is then the identity
    epochs_run: int
    epoch_losses: list[tuple[float, float]]  # (train, held-out) per epoch
    seconds: float


def holdout_split(n: int, holdout: float, seed: int, groups: Sequence[str] | None = None):
    """(train rows, held-out rows): a ``holdout`` share, by ``groups`` (e.g. papers) when given
    so that no group is on both sides; deterministic for ``seed``."""
    if not 0.0 < holdout < 1.0:
        raise ConfigError(f"the held-out share must be between 0 and 1, got {holdout}; use e.g. 0.1")
    rng = np.random.default_rng(seed + 1)
    if groups is None:
        order = rng.permutation(n)
        k = max(1, int(round(n * holdout)))
        return np.sort(order[k:]), np.sort(order[:k])
    names = sorted(set(groups))
    picked = rng.permutation(len(names))[: max(1, int(round(len(names) * holdout)))]
    held_names = {names[int(i)] for i in picked}
    held = np.array([i for i, g in enumerate(groups) if g in held_names], dtype=np.int64)
    train = np.array([i for i, g in enumerate(groups) if g not in held_names], dtype=np.int64)
    return train, held


def fit_adapter(
    Q: np.ndarray,
    T: np.ndarray,
    target_ids: Sequence[str],
    *,
    model: str,
    groups: Sequence[str] | None = None,
    rank: int | None = None,
    scale: float = DEFAULT_SCALE,
    batch_size: int = DEFAULT_BATCH,
    epochs: int = DEFAULT_EPOCHS,
    lr: float = DEFAULT_LR,
    weight_decay: float = DEFAULT_WEIGHT_DECAY,
    holdout: float = DEFAULT_HOLDOUT,
    patience: int = DEFAULT_PATIENCE,
    seed: int = 0,
    hard_batches: bool = False,
    on_epoch: Callable[[int, float, float], None] | None = None,
) -> tuple[Adapter, FitReport]:
    """Train ``W`` on the pairs (row i of ``Q``: a query vector, of ``T``: its target's vector;
    ``target_ids[i]``: the target chunk, for masking) with the in-batch loss (module doc); AdamW,
    ``epochs`` passes at most, stopping after ``patience`` epochs without a better held-out loss.
    ``rank`` None: a full d x d map, else ``W = U V`` of rank ``rank``. ``groups``: what the held-out
    split keeps together (the papers). ``hard_batches``: each training batch holds pairs whose
    targets are alike (:func:`similar_batches`), so the in-batch negatives are hard ones; the
    held-out loss keeps random batches. CPU, deterministic for ``seed``."""
    import torch

    Q = np.asarray(Q, dtype=np.float32)
    T = np.asarray(T, dtype=np.float32)
    n, d = Q.shape if Q.ndim == 2 else (0, 0)
    if n < 4 or T.shape != Q.shape or len(target_ids) != n:
        raise ConfigError(
            f"need at least 4 (query, target) pairs with one target per query, got queries {Q.shape}, "
            f"targets {T.shape}, {len(target_ids)} target ids"
        )
    for what, value in (("scale", scale), ("lr", lr), ("batch size", batch_size), ("epochs", epochs)):
        if not value > 0:
            raise ConfigError(f"the adapter's {what} must be positive, got {value!r}")
    if rank is not None and not 1 <= rank <= d:
        raise ConfigError(f"--rank must be from 1 to the model's {d} dimensions, got {rank}")
    t0 = time.perf_counter()
    train, held = holdout_split(n, holdout, seed, groups)
    if len(train) < 2 or len(held) < 2:
        raise ConfigError(
            f"{n} pairs are too few to hold {holdout:.0%} out for early stopping; index more text or "
            "lower the held-out share"
        )
    ids = np.asarray(list(target_ids))
    codes = np.unique(ids, return_inverse=True)[1]
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    Qt, Tt = torch.from_numpy(Q), torch.nn.functional.normalize(torch.from_numpy(T), dim=1)
    Ct = torch.from_numpy(codes.astype(np.int64))
    if rank is None:
        params = [torch.zeros(d, d, requires_grad=True)]
    else:
        params = [
            (torch.randn(d, rank, generator=gen) / np.sqrt(d)).requires_grad_(),
            torch.zeros(rank, d, requires_grad=True),
        ]

    def weight() -> torch.Tensor:
        return params[0] if rank is None else params[0] @ params[1]

    def batch_loss(rows: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        q = Qt[rows]
        q = torch.nn.functional.normalize(q + q @ w, dim=1)
        logits = scale * (q @ Tt[rows].T)
        c = Ct[rows]
        same = (c[:, None] == c[None, :]) & ~torch.eye(len(rows), dtype=torch.bool)
        logits = logits.masked_fill(same, float("-inf"))
        return torch.nn.functional.cross_entropy(logits, torch.arange(len(rows)), reduction="sum")

    held_t = torch.from_numpy(held)

    def heldout_loss() -> float:
        with torch.no_grad():
            w = weight()
            total = sum(
                float(batch_loss(held_t[s : s + batch_size], w)) for s in range(0, len(held), batch_size)
            )
        return total / len(held)

    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    before = heldout_loss()
    best, best_epoch, best_w = before, 0, np.zeros((d, d), dtype=np.float32)
    history: list[tuple[float, float]] = []
    train_t = torch.from_numpy(train)
    stale = 0
    epoch = 0
    for epoch in range(1, epochs + 1):
        if hard_batches:
            perm = torch.from_numpy(train[similar_batches(T[train], batch_size, seed=seed + epoch)])
        else:
            perm = train_t[torch.randperm(len(train), generator=gen)]
        run = 0.0
        for s in range(0, len(perm), batch_size):
            rows = perm[s : s + batch_size]
            if len(rows) < 2:
                continue
            loss = batch_loss(rows, weight()) / len(rows)
            opt.zero_grad()
            loss.backward()
            opt.step()
            run += float(loss.detach()) * len(rows)
        h = heldout_loss()
        history.append((run / len(train), h))
        if on_epoch:
            on_epoch(epoch, run / len(train), h)
        if h < best - 1e-6:
            best, best_epoch, stale = h, epoch, 0
            with torch.no_grad():
                best_w = weight().numpy().astype(np.float32).copy()
        else:
            stale += 1
            if stale >= patience:
                break
    report = FitReport(
        pairs=n,
        train_pairs=len(train),
        heldout_pairs=len(held),
        heldout_loss_before=before,
        heldout_loss_after=best,
        best_epoch=best_epoch,
        epochs_run=epoch,
        epoch_losses=history,
        seconds=time.perf_counter() - t0,
    )
    return Adapter(best_w, model, d), report
