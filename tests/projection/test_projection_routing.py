"""Routing math of multi-head query projection (issue 7): softmax weights, projection, fallback,
the global linear projection. Pure numpy, no engine."""

from __future__ import annotations

import numpy as np
import pytest

from scholar_es.errors import ConfigError
from scholar_es.projection.routing import (
    apply_linear_projection,
    blend,
    centroid_similarities,
    fit_linear_projection,
    normalize,
    project,
    route,
    route_many,
    routing_weights,
)


def test_issue_example_weights_at_tau_0_1():
    w = routing_weights(np.array([0.85, 0.70, 0.60]), tau=0.1)
    assert np.round(w, 3).tolist() == [0.766, 0.171, 0.063]
    assert w.sum() == pytest.approx(1.0)


def test_table_in_circulation_is_not_the_softmax():
    # [0.82, 0.15, 0.03] circulates for this example; no temperature gives it (the ratio of the
    # last two weights is fixed by the first two, and 0.15/0.03 does not match 0.82/0.15).
    w = routing_weights(np.array([0.85, 0.70, 0.60]), tau=0.1)
    assert not np.allclose(w, [0.82, 0.15, 0.03], atol=0.005)
    for tau in np.geomspace(0.01, 10, 400):
        assert not np.allclose(
            routing_weights(np.array([0.85, 0.70, 0.60]), tau), [0.82, 0.15, 0.03], atol=0.005
        )


def test_temperature_sharpens_and_flattens():
    sims = np.array([0.85, 0.70, 0.60])
    assert routing_weights(sims, 0.01)[0] > 0.999  # sharp: the best head takes it all
    assert np.ptp(routing_weights(sims, 1.0)) < 0.1  # diffuse: close to uniform


def test_softmax_is_numerically_stable():
    w = routing_weights(np.array([1000.0, 999.0, -1000.0]), tau=0.001)
    assert np.all(np.isfinite(w)) and w[0] == pytest.approx(1.0)
    batch = routing_weights(np.array([[0.85, 0.70, 0.60], [0.1, 0.1, 0.1]]), 0.1)
    assert np.allclose(batch.sum(axis=1), 1.0) and np.allclose(batch[1], 1 / 3)


@pytest.mark.parametrize("tau", [0, -0.1, float("nan"), float("inf"), "0.1", True])
def test_bad_tau_is_refused(tau):
    with pytest.raises(ConfigError, match="temperature tau must be a positive number"):
        routing_weights(np.array([0.5, 0.4]), tau)


def test_similarities_and_projection():
    centroids = normalize(np.array([[1.0, 0, 0], [0, 1.0, 0]]))
    answers = normalize(np.array([[0, 0, 1.0], [1.0, 1.0, 0]]))
    q = normalize(np.array([0.9, 0.1, 0]))
    sims = centroid_similarities(q, centroids)
    assert sims == pytest.approx([0.9938837, 0.1104315], rel=1e-6)
    p = project(q, centroids, answers, tau=0.1)
    w = routing_weights(sims, 0.1)
    assert p.dtype == np.float32 and np.linalg.norm(p) == pytest.approx(1.0, abs=1e-6)
    assert p == pytest.approx(normalize(w @ answers), abs=1e-6)


def test_dimension_mismatch_is_a_clear_error():
    with pytest.raises(ConfigError, match="query vector has 2 dimensions but the centroids have 3"):
        centroid_similarities(np.ones(2), np.eye(3))
    with pytest.raises(ConfigError, match="train heads first"):
        centroid_similarities(np.ones(3), np.zeros((0, 3)))


def test_fallback_uses_direct_vector_or_blend():
    centroids, answers = np.eye(4)[:2], np.eye(4)[2:]
    far = normalize(np.array([0.1, 0.0, 0.0, 1.0]))  # max sim ~0.0995
    near = normalize(np.array([1.0, 0.05, 0.0, 0.0]))
    r = route(far, centroids, answers, tau=0.1, threshold=0.5)
    assert r.fallback and r.vector == pytest.approx(far, abs=1e-6)
    r = route(far, centroids, answers, tau=0.1, threshold=0.5, alpha=0.5)
    proj = project(far, centroids, answers, 0.1)
    assert r.fallback and r.vector == pytest.approx(normalize(0.5 * far + 0.5 * proj), abs=1e-6)
    r = route(near, centroids, answers, tau=0.1, threshold=0.5)
    assert not r.fallback and r.vector == pytest.approx(project(near, centroids, answers, 0.1), abs=1e-6)
    assert r.top_heads[0][0] == 0 and r.max_similarity == pytest.approx(near[0])
    assert blend(far, proj, 1.0) == pytest.approx(far, abs=1e-6)
    with pytest.raises(ConfigError, match="alpha must be a number from 0 to 1"):
        blend(far, proj, 1.5)


def test_route_many_matches_route():
    rng = np.random.default_rng(0)
    centroids, answers = normalize(rng.normal(size=(7, 5))), normalize(rng.normal(size=(7, 5)))
    Q = normalize(rng.normal(size=(20, 5))).astype(np.float32)
    vecs, best = route_many(Q, centroids, answers, tau=0.1, threshold=0.6, alpha=0.3)
    for q, v, b in zip(Q, vecs, best, strict=True):
        r = route(q, centroids, answers, tau=0.1, threshold=0.6, alpha=0.3)
        assert v == pytest.approx(r.vector, abs=1e-6) and b == pytest.approx(r.max_similarity)
    assert 0 < (best < 0.6).sum() < len(Q)  # both branches exercised


def test_linear_projection_recovers_a_map_and_anchors_on_identity():
    rng = np.random.default_rng(1)
    M = rng.normal(size=(6, 6))
    Q = rng.normal(size=(200, 6))
    fitted = fit_linear_projection(Q, Q @ M, ridge=1e-9, anchor="zero")
    assert np.allclose(fitted, M, atol=1e-4)
    # few pairs, strong ridge toward identity: the projection stays the direct vector
    fitted = fit_linear_projection(Q[:3], Q[:3] @ M, ridge=1e9)
    assert np.allclose(fitted, np.eye(6), atol=1e-5)
    q = normalize(rng.normal(size=6))
    assert np.allclose(apply_linear_projection(q, fitted), q, atol=1e-5)
    with pytest.raises(ConfigError, match="unknown anchor"):
        fit_linear_projection(Q, Q, anchor="mean")
