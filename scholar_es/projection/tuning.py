"""Choosing the confidence fallback's threshold and α on training questions (issue 7).

The inputs are per-question numbers from a cross-validation INSIDE the training data: each
question's best centroid similarity (heads built without it), its reciprocal rank with the
projected vector, and with each candidate fallback vector (α = 1: the direct vector). For a
threshold t, a question uses the projection when its best similarity is >= t and the fallback
otherwise; :func:`choose_fallback` returns the (t, α) with the best mean reciprocal rank.

"Questions unlike any training question are never hurt" is a constraint, not an average: with
``novel`` (the questions whose answers none of the heads knew) and ``max_novel_loss`` (default
0), only choices whose mean reciprocal rank on those questions is at most ``max_novel_loss``
below the direct vector's are allowed. t = +inf with α = 1 (always direct) always qualifies.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scholar_es.errors import ConfigError
from scholar_es.projection.routing import NO_THRESHOLD


@dataclass(frozen=True)
class FallbackChoice:
    threshold: float
    alpha: float
    mrr: float  # mean reciprocal rank of all tuning questions with this choice
    novel_loss: float  # direct MRR - this choice's MRR on the novel questions (nan: none given)
    projected_share: float  # share of the tuning questions that keep the projection


def choose_fallback(
    max_sims: np.ndarray,
    rr_projected: np.ndarray,
    rr_fallback: dict[float, np.ndarray],
    novel: np.ndarray | None = None,
    max_novel_loss: float | None = 0.0,
) -> FallbackChoice:
    """The best (threshold, α) -- see the module doc. ``rr_fallback`` maps α to the reciprocal
    ranks with ``normalize(α·q + (1−α)·projected)``; it must hold α = 1 (the direct vector)
    when a novel constraint is given. ``max_novel_loss=None``: no constraint."""
    sims = np.asarray(max_sims, dtype=np.float64)
    proj = np.asarray(rr_projected, dtype=np.float64)
    if (
        sims.ndim != 1
        or sims.shape != proj.shape
        or any(np.shape(v) != sims.shape for v in rr_fallback.values())
    ):
        raise ConfigError(
            "max_sims, rr_projected and every rr_fallback entry need one value per tuning question"
        )
    if sims.size == 0:
        raise ConfigError("no tuning questions: the fallback threshold cannot be chosen; pass --threshold")
    constrained = novel is not None and max_novel_loss is not None
    if constrained and 1.0 not in rr_fallback:
        raise ConfigError(
            "the novel-question constraint compares with the direct vector: rr_fallback needs alpha 1.0"
        )
    mask = np.asarray(novel, dtype=bool) if novel is not None else np.zeros(sims.shape, dtype=bool)
    direct_novel = float(rr_fallback[1.0][mask].mean()) if mask.any() and 1.0 in rr_fallback else float("nan")
    grid = [NO_THRESHOLD, *np.unique(sims), np.inf]
    best: FallbackChoice | None = None
    for alpha, fb in sorted(rr_fallback.items(), reverse=True):  # alpha 1 first: ties keep the direct vector
        fb = np.asarray(fb, dtype=np.float64)
        for t in grid:
            use_fb = sims < t
            rr = np.where(use_fb, fb, proj)
            loss = direct_novel - float(rr[mask].mean()) if mask.any() else float("nan")
            # constrained implies max_novel_loss is not None; said again so the type narrows
            if constrained and max_novel_loss is not None and mask.any() and loss > max_novel_loss + 1e-12:
                continue
            score = float(rr.mean())
            if best is None or score > best.mrr + 1e-12:
                best = FallbackChoice(float(t), float(alpha), score, loss, float(1 - use_fb.mean()))
    assert best is not None  # t = +inf, alpha = 1 always qualifies
    return best
