"""A trained set of heads: one per answer, its question centroid and its answer embedding.

:class:`Heads` is what :mod:`projection.train` builds, :mod:`projection.store` writes to and reads
from the engine, and :mod:`projection.search` routes queries with. It knows the embedding model
and dimension it was trained with and refuses query vectors of another
(:class:`~scholar_es.errors.ModelMismatchError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from indexer.embedder import model_key
from scholar_es.errors import ConfigError, ModelMismatchError
from scholar_es.projection.routing import DEFAULT_TAU, NO_THRESHOLD, Routing, check_alpha, check_tau, route

DEFAULT_NAME = "default"
#: The confidence-fallback threshold on the best centroid similarity stored with newly trained
#: heads; tuned on SciFact's training folds (docs/multihead.md). Override per deployment.
DEFAULT_THRESHOLD = 0.85
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")


def check_name(name: str) -> str:
    """Heads names become part of an index name: lowercase letters, digits, '-' and '_'."""
    if not isinstance(name, str) or not _NAME.match(name) or re.search(r"-v\d+$", name):
        raise ConfigError(
            f"invalid heads name {name!r}: use 1-64 lowercase letters, digits, '-' or '_', starting "
            "with a letter or digit and not ending in -v<number>, which names index versions "
            "(e.g. 'scifact-train')"
        )
    return name


@dataclass(frozen=True, eq=False)
class Heads:
    """K heads over d dimensions; row k of ``centroids``/``answers`` belongs to ``answer_ids[k]``."""

    answer_ids: tuple[str, ...]
    centroids: np.ndarray  # (K, d) float32, rows normalized: the mean question embedding per answer
    answers: np.ndarray  # (K, d) float32, rows normalized: the answer's embedding
    n_questions: np.ndarray  # (K,) int: training questions behind each head
    model: str
    dims: int
    tau: float = DEFAULT_TAU
    #: fallback when the best centroid similarity is below this (-inf: never)
    threshold: float = NO_THRESHOLD
    #: fallback vector: normalize(alpha*q + (1-alpha)*projected); 1 = the direct vector
    alpha: float = 1.0
    name: str = DEFAULT_NAME
    #: where the heads came from: dataset, format, split, prefix, pair counts, ...
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        k = len(self.answer_ids)
        for what, arr in (("centroids", self.centroids), ("answers", self.answers)):
            if np.shape(arr) != (k, self.dims):
                raise ConfigError(
                    f"heads {self.name!r}: {what} have shape {np.shape(arr)}, expected ({k}, {self.dims})"
                )
        if k == 0:
            raise ConfigError(
                f"heads {self.name!r} are empty: no (question, answer) pair could be used; check the "
                "dataset's qrels and that its corpus is indexed"
            )
        check_tau(self.tau)
        check_alpha(self.alpha)

    def __len__(self) -> int:
        return len(self.answer_ids)

    def with_params(
        self, *, tau: float | None = None, threshold: float | None = None, alpha: float | None = None
    ) -> Heads:
        """A copy with other routing parameters (None keeps the stored one)."""
        return replace(
            self,
            tau=self.tau if tau is None else tau,
            threshold=self.threshold if threshold is None else threshold,
            alpha=self.alpha if alpha is None else alpha,
        )

    def check_query(self, *, model: str | None = None, dims: int | None = None) -> None:
        """Raise ModelMismatchError for a query embedded with another model or of another dimension."""
        fix = (
            f"embed the question with {self.model!r} (--model {self.model}), or train heads with your model "
            f"(scholar-es heads train ... --name NAME)"
        )
        if model is not None and model_key(model) != model_key(self.model):
            raise ModelMismatchError(
                f"heads {self.name!r} were trained with model {self.model!r} ({self.dims} dims), "
                f"but the question is embedded with {model!r}; {fix}"
            )
        if dims is not None and int(dims) != self.dims:
            raise ModelMismatchError(
                f"the query vector has {dims} dimensions but heads {self.name!r} hold "
                f"{self.dims}-dim vectors of model {self.model!r}; {fix}"
            )

    def route(self, q: np.ndarray, *, model: str | None = None) -> Routing:
        """The search vector for query vector ``q`` (checked against the heads' model and dims)."""
        q = np.asarray(q, dtype=np.float32)
        self.check_query(model=model, dims=int(q.shape[-1]))
        return route(
            q, self.centroids, self.answers, tau=self.tau, threshold=self.threshold, alpha=self.alpha
        )
