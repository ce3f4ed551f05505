"""Multi-head query projection: the pure math (numpy in, numpy out; no I/O).

Definitions from issue 7 ("Multi-head query projection"), one function each:

* ``sim_k = q · centroid_k``                        -- :func:`centroid_similarities`
* ``w = softmax(sim / τ)``, τ = 0.1 by default      -- :func:`routing_weights`
* ``projected = normalize(w @ answer_embeddings)``  -- :func:`project`
* confidence fallback: when ``max_k sim_k`` is below a threshold, use the direct vector, or the
  blend ``normalize(α·q + (1−α)·projected)`` (α = 1 is the direct vector) -- :func:`blend`,
  :func:`route`
* the single-head baseline: one matrix ``W`` fitted by ridge-regularized least squares from
  question embeddings to answer embeddings -- :func:`fit_linear_projection`,
  :func:`apply_linear_projection`

Every function accepts one query (shape ``(d,)``) or a batch (shape ``(n, d)``) and returns the
same rank. Vectors are float32 in, float64 inside (for stable sums), float32 out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scholar_es.errors import ConfigError

DEFAULT_TAU = 0.1
#: threshold = -inf: the fallback never fires (plain multi-head routing)
NO_THRESHOLD = float("-inf")
_EPS = 1e-12


def normalize(v: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (an all-zero row stays zero)."""
    v = np.asarray(v, dtype=np.float64)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(norms, _EPS)


def check_tau(tau: float) -> float:
    if not isinstance(tau, (int, float)) or isinstance(tau, bool) or not np.isfinite(tau) or tau <= 0:
        raise ConfigError(
            f"the routing temperature tau must be a positive number, got {tau!r}; use e.g. {DEFAULT_TAU}"
        )
    return float(tau)


def check_alpha(alpha: float) -> float:
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not 0.0 <= alpha <= 1.0:
        raise ConfigError(
            f"the fallback blend alpha must be a number from 0 to 1, got {alpha!r}; "
            "1 falls back to the direct vector, 0.5 blends it half and half with the projection"
        )
    return float(alpha)


def _check_dims(q: np.ndarray, table: np.ndarray, what: str) -> None:
    if table.ndim != 2 or table.shape[0] == 0:
        raise ConfigError(
            f"the {what} must be a non-empty (heads x dims) matrix, got shape {table.shape}; "
            "train heads first"
        )
    if q.shape[-1] != table.shape[1]:
        raise ConfigError(
            f"the query vector has {q.shape[-1]} dimensions but the {what} have "
            f"{table.shape[1]}; embed the query with the heads' model"
        )


def centroid_similarities(q: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """``sim_k = q · centroid_k`` (issue 7, Search) -- cosine when both are normalized."""
    q = np.asarray(q, dtype=np.float64)
    c = np.asarray(centroids, dtype=np.float64)
    _check_dims(q, c, "centroids")
    return q @ c.T


def routing_weights(sims: np.ndarray, tau: float = DEFAULT_TAU) -> np.ndarray:
    """``w = softmax(sim / τ)`` (issue 7, Search), over the last axis.

    Numerically stable: the largest ``sim / τ`` is subtracted before ``exp``, so tiny τ (0.001)
    or large similarities never overflow; the weights sum to 1.
    """
    tau = check_tau(tau)
    z = np.asarray(sims, dtype=np.float64) / tau
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def project(
    q: np.ndarray, centroids: np.ndarray, answers: np.ndarray, tau: float = DEFAULT_TAU
) -> np.ndarray:
    """``projected = normalize(w @ answer_embeddings)`` with ``w`` from :func:`routing_weights`."""
    answers = np.asarray(answers, dtype=np.float64)
    if answers.shape != np.shape(centroids):
        raise ConfigError(
            f"centroids {np.shape(centroids)} and answer embeddings {answers.shape} must have the "
            "same shape (one row per head)"
        )
    w = routing_weights(centroid_similarities(q, centroids), tau)
    return normalize(w @ answers).astype(np.float32)


def blend(q: np.ndarray, projected: np.ndarray, alpha: float) -> np.ndarray:
    """``normalize(α·q + (1−α)·projected)`` (issue 7, Confidence fallback); α = 1 gives ``q``."""
    alpha = check_alpha(alpha)
    return normalize(
        alpha * np.asarray(q, np.float64) + (1 - alpha) * np.asarray(projected, np.float64)
    ).astype(np.float32)


@dataclass(frozen=True)
class Routing:
    """What :func:`route` did for one query, for display and debugging."""

    vector: np.ndarray  # the vector to search with (normalized, float32)
    max_similarity: float  # best centroid similarity
    fallback: bool  # True when max_similarity < threshold (the direct vector or the blend was used)
    top_heads: list[tuple[int, float]]  # (head row, weight), heaviest first, at most 5


def route(
    q: np.ndarray,
    centroids: np.ndarray,
    answers: np.ndarray,
    *,
    tau: float = DEFAULT_TAU,
    threshold: float = NO_THRESHOLD,
    alpha: float = 1.0,
) -> Routing:
    """The search vector for ONE query: the projection, or -- when the best centroid similarity is
    below ``threshold`` -- ``blend(q, projected, alpha)`` (``alpha`` = 1: the direct vector)."""
    q = np.asarray(q, dtype=np.float32)
    if q.ndim != 1:
        raise ConfigError(f"route() takes one query vector, got shape {q.shape}; use route_many for a batch")
    sims = centroid_similarities(q, centroids)
    w = routing_weights(sims, tau)
    projected = normalize(w @ np.asarray(answers, np.float64)).astype(np.float32)
    best = float(sims.max())
    fallback = best < threshold
    vector = blend(q, projected, alpha) if fallback else projected
    order = np.argsort(-w, kind="stable")[:5]
    return Routing(
        vector=vector,
        max_similarity=best,
        fallback=bool(fallback),
        top_heads=[(int(i), float(w[i])) for i in order],
    )


def route_many(
    Q: np.ndarray,
    centroids: np.ndarray,
    answers: np.ndarray,
    *,
    tau: float = DEFAULT_TAU,
    threshold: float = NO_THRESHOLD,
    alpha: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`route` for a batch: (vectors (n, d), max similarities (n,))."""
    Q = np.atleast_2d(np.asarray(Q, dtype=np.float32))
    sims = centroid_similarities(Q, centroids)
    projected = normalize(routing_weights(sims, tau) @ np.asarray(answers, np.float64))
    best = sims.max(axis=1)
    out = np.where((best < threshold)[:, None], blend(Q, projected, alpha), projected)
    return out.astype(np.float32), best


def fit_linear_projection(
    questions: np.ndarray, answers: np.ndarray, ridge: float = 1.0, anchor: str = "identity"
) -> np.ndarray:
    """The single-head baseline (issue 7, "A global linear projection"): ``W`` (d x d) minimizing

        ||Q W − A||² + ridge · ||W − W0||²,   W = (QᵀQ + ridge·I)⁻¹ (QᵀA + ridge·W0)

    over the (question, answer) rows. ``anchor`` = "identity" (W0 = I: with few pairs the map
    stays close to "search with the question itself"; ridge → ∞ is the direct vector) or "zero"
    (W0 = 0, plain ridge regression). Ridge must be positive when there are fewer pairs than
    dimensions (QᵀQ is then singular).
    """
    if anchor not in ("identity", "zero"):
        raise ConfigError(f"unknown anchor {anchor!r} for the linear projection; use 'identity' or 'zero'")
    Q = np.asarray(questions, dtype=np.float64)
    A = np.asarray(answers, dtype=np.float64)
    if Q.ndim != 2 or Q.shape != A.shape or Q.shape[0] == 0:
        raise ConfigError(
            f"questions {Q.shape} and answers {A.shape} must be equal-shaped non-empty (pairs x dims) "
            "matrices"
        )
    if not np.isfinite(ridge) or ridge < 0:
        raise ConfigError(f"ridge must be a non-negative number, got {ridge!r}; use e.g. 1.0")
    d = Q.shape[1]
    w0 = np.eye(d) if anchor == "identity" else np.zeros((d, d))
    gram = Q.T @ Q + ridge * np.eye(d)
    return np.linalg.lstsq(gram, Q.T @ A + ridge * w0, rcond=None)[0].astype(np.float32)


def apply_linear_projection(q: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``normalize(q W)`` for one query or a batch."""
    q = np.asarray(q, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    if W.ndim != 2 or q.shape[-1] != W.shape[0]:
        raise ConfigError(
            f"the query vector has {q.shape[-1]} dimensions but the projection matrix is {W.shape}"
        )
    return normalize(q @ W).astype(np.float32)
