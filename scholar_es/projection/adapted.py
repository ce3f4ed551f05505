"""Search with the self-supervised adapter: ``adapted-dense`` and ``adapted-hybrid`` (issue 28).

* ``adapted-dense``  -- the query builder's ``dense`` query (kNN) with ``normalize(q + q W)``;
* ``adapted-hybrid`` -- the query builder's default ``hybrid`` query with that vector.

``W`` is the adapter stored as ``<prefix>adapter`` (:mod:`scholar_es.projection.adapter_store`;
trained with ``scholar-es heads train --self-supervised``). The DSL is the base strategy's; only
the vector changes, so filters, sizes, the per-paper cap and profiles apply as for
``dense``/``hybrid``. Opt-in: an index without an adapter answers these strategies with a
ConfigError naming the command that trains it, and ``dense``/``hybrid`` never read the adapter.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from querybuilder.registry import EvalContext, Needs, Prepared, register
from querybuilder.request import SearchRequest
from querybuilder.results import SearchResult, page_of
from scholar_es.errors import ConfigError
from scholar_es.projection.adapter import Adapter
from scholar_es.projection.search import AliasCache, BaseVectorStrategy


@dataclass
class AdaptedRequest:
    plan: object  # the base strategy's QueryPlan
    vector: np.ndarray  # the adapted vector
    adapter: str  # the alias it came from


@dataclass(frozen=True, kw_only=True)
class AdaptedStrategy(BaseVectorStrategy):
    """The ``dense`` or ``hybrid`` request with the question's vector through the index's adapter."""

    def prepare(self, es, request: SearchRequest) -> Prepared:
        if es is None:
            raise ConfigError(
                f"strategy {self.name!r} reads the index's adapter from the engine or cluster: give "
                "the target (scholar-es query --es TARGET)"
            )
        from querybuilder.run import embed_question, index_meta
        from scholar_es.projection.adapter_store import adapter_alias

        plan = self.make_plan(request)
        adapter = resolve_adapter(es, request.prefix)  # missing adapter: fail before embedding
        embedder = request.embedder
        model = embedder.name if embedder is not None else index_meta(es, plan.index).get("embedding_model")
        adapter.check_query(model=model)
        q = embed_question(es, plan, embedder)  # the index's model (checked)
        vector = adapter.apply(q, model=model)
        return Prepared(self, request, AdaptedRequest(plan, vector, adapter_alias(request.prefix)))

    def execute(self, es, prepared: Prepared) -> SearchResult:
        req = prepared.state
        result = self._base().run(
            es, req.plan, req.vector, explain=prepared.request.explain, strategy_name=self.name
        )
        return page_of(result, prepared.request.from_)

    def eval_searcher(self, ctx: EvalContext):
        adapter = resolve_adapter(ctx.es, ctx.prefix)
        return self._base().vector_searcher(
            ctx, adapt_vectors(adapter, ctx.vectors, model=getattr(ctx.embedder, "name", None))
        )


def adapt_vectors(
    adapter: Adapter, vectors: dict[str, np.ndarray], *, model: str | None = None
) -> dict[str, np.ndarray]:
    """``{question: vector}`` -> the same questions with their adapted vectors (one matrix product)."""
    if not vectors:
        return {}
    adapter.check_query(model=model)
    keys = list(vectors)
    adapted = adapter.apply(np.vstack([np.asarray(vectors[k], dtype=np.float32) for k in keys]))
    return dict(zip(keys, adapted, strict=True))


_ADAPTERS: AliasCache[Adapter] = AliasCache()


def resolve_adapter(es, prefix: str = "") -> Adapter:
    """The adapter of ``prefix``, kept per client and alias while the alias points to the same index
    (:class:`~scholar_es.projection.search.AliasCache`)."""
    from scholar_es.projection.adapter_store import adapter_alias, load_adapter

    return _ADAPTERS.get(es, adapter_alias(prefix), lambda: load_adapter(es, prefix))


#: the adapter strategies, registered in ``querybuilder.registry``
ADAPTED_STRATEGIES: dict[str, AdaptedStrategy] = {
    s.name: register(s)
    for s in (
        AdaptedStrategy(
            name="adapted-dense",
            description="the dense (kNN) query with the question's vector through the index's "
            "self-supervised adapter",
            needs=Needs(vector=True, adapter=True),
            base="dense",
            uses_text=False,
        ),
        AdaptedStrategy(
            name="adapted-hybrid",
            description="the hybrid query with the question's vector through the index's "
            "self-supervised adapter",
            needs=Needs(vector=True, adapter=True),
            base="hybrid",
        ),
    )
}
