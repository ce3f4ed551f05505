"""Search with heads: ``direct``, ``multihead`` and ``multihead-hybrid`` (issue 7, Search).

* ``direct`` -- the query builder's ``dense`` query (kNN) with the question's own vector.
* ``multihead`` -- the same kNN query with the projected vector (:meth:`Heads.route`).
* ``multihead-hybrid`` -- the query builder's default ``hybrid`` query (saturated BM25 + kNN)
  with the projected vector.

The three are registered in the strategy registry (``querybuilder.registry``) as
:class:`HeadsStrategy` objects, so ``scholar-es search``, ``query``, ``eval`` and
``querybuilder.strategies.search`` run them (``--heads NAME``; default ``default``).
The DSL is the query builder's (the ``build`` of the base strategy); only the vector
changes, so filters, sizes, the per-paper cap and the profile apply as for ``dense``/``hybrid``.
Before any search the question's model is checked against the index (``_meta``) and against
the heads: a mismatch raises :class:`~scholar_es.errors.ModelMismatchError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from querybuilder.registry import EvalContext, Needs, Prepared, register
from querybuilder.request import SearchRequest
from querybuilder.results import page_of
from querybuilder.strategies import PlanStrategy, build_body, build_search, plan_strategy
from scholar_es.errors import ConfigError, choices
from scholar_es.projection.heads import DEFAULT_NAME, Heads
from scholar_es.projection.routing import Routing

if TYPE_CHECKING:
    from querybuilder.plan import QueryPlan
    from querybuilder.results import SearchResult


@dataclass(frozen=True, kw_only=True)
class BaseVectorStrategy(PlanStrategy):
    """The request of a query-builder strategy (``base``: ``dense`` or ``hybrid``) with a question
    vector this strategy makes itself in ``prepare`` (its state has ``plan`` and ``vector``): the
    heads' projection here, the self-supervised adapter (:mod:`scholar_es.projection.adapted`)."""

    base: str  # the query-builder strategy whose DSL it sends
    templates: bool = False  # the vector is made per question: nothing to store
    year_sort: bool = False  # the year sort is refused by name (paging works: results.page_of)

    def _base(self) -> PlanStrategy:
        return plan_strategy(self.base)

    def build(self, plan, vector):
        return self._base().build(plan, vector)

    def make_plan(self, request: SearchRequest):
        return self._base().make_plan(request)

    def bodies(self, prepared: Prepared) -> dict | list[dict]:
        return build_body(prepared.state.plan, prepared.state.vector)


@dataclass(frozen=True, kw_only=True)
class HeadsStrategy(BaseVectorStrategy):
    """The query builder's ``dense`` or ``hybrid`` request with the question's vector, projected
    through trained heads (``projects``) or as it is (``direct``)."""

    projects: bool

    def prepare(self, es, request: SearchRequest) -> Prepared:
        if es is None:
            raise ConfigError(
                f"strategy {self.name!r} embeds with the index's model and reads its heads from the "
                "engine or cluster: give the target (scholar-es query --es TARGET)"
            )
        return Prepared(self, request, build_request(es, request, strategy=self.name))

    def execute(self, es, prepared: Prepared) -> ProjectedSearch:
        req = prepared.state
        return ProjectedSearch(
            page_of(
                execute(es, req.plan, req.vector, self.name, explain=prepared.request.explain),
                prepared.request.from_,
            ),
            req.routing,
            req.heads,
        )

    def result(self, native, request):
        return native.result

    def routing(self, native: ProjectedSearch) -> dict | None:
        r = native.routing
        if r is None:
            return None
        return {
            "heads": native.heads,
            "max_similarity": round(float(r.max_similarity), 6),
            "fallback": bool(r.fallback),
            "top_heads": [[int(row), round(float(w), 6)] for row, w in r.top_heads],
        }

    def render(self, native, request) -> str:
        text = super().render(native, request)
        routing = self.routing(native)
        if routing is None:
            return text
        how = "below the threshold: the fallback vector" if routing["fallback"] else "projected"
        return (
            f"# heads {routing['heads']}: best centroid similarity {routing['max_similarity']:.3f}, {how}\n"
            + text
        )

    def as_dict(self, native, request) -> dict:
        return {**super().as_dict(native, request), "routing": self.routing(native)}

    def eval_searcher(self, ctx: EvalContext):
        vectors = ctx.vectors
        if self.projects:
            heads = resolve_heads(ctx.es, ctx.heads, ctx.prefix)
            vectors = project_vectors(
                heads, vectors, model=getattr(ctx.embedder, "name", None), strategy=self.name
            )
        return self._base().vector_searcher(ctx, vectors)


#: the heads strategies, registered in ``querybuilder.registry``
HEADS_STRATEGIES: dict[str, HeadsStrategy] = {
    s.name: register(s)
    for s in (
        HeadsStrategy(
            name="direct",
            description="the dense (kNN) query with the question's own vector (the heads' baseline)",
            needs=Needs(vector=True),
            base="dense",
            projects=False,
            uses_text=False,
        ),
        HeadsStrategy(
            name="multihead",
            description="the dense (kNN) query with the question's vector routed through trained heads",
            needs=Needs(vector=True, heads=True),
            takes=frozenset({"explain", "heads"}),
            base="dense",
            projects=True,
            uses_text=False,
        ),
        HeadsStrategy(
            name="multihead-hybrid",
            description="the hybrid query with the question's vector routed through trained heads",
            needs=Needs(vector=True, heads=True),
            takes=frozenset({"explain", "heads"}),
            base="hybrid",
            projects=True,
        ),
    )
}
#: strategy -> (query-builder strategy whose DSL it uses, whether it projects the vector)
STRATEGIES: dict[str, tuple[str, bool]] = {n: (s.base, s.projects) for n, s in HEADS_STRATEGIES.items()}


def check_strategy(strategy: str) -> tuple[str, bool]:
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown heads strategy {strategy!r}; valid: {choices(STRATEGIES)}")
    return STRATEGIES[strategy]


def base_strategy(strategy: str) -> str:
    """The query-builder strategy whose DSL ``strategy`` sends: ``dense`` or ``hybrid``."""
    return check_strategy(strategy)[0]


def project_vectors(
    heads: Heads, vectors: dict[str, np.ndarray], *, model: str | None = None, strategy: str = "multihead"
) -> dict[str, np.ndarray]:
    """``{cleaned question: vector}`` -> the vectors ``strategy`` searches with (projected with
    the heads' τ, threshold and α; ``direct`` leaves them as they are). For ``eval``: pass the
    result to the query builder with :func:`base_strategy`'s DSL. ``model``: the embedder's name,
    checked against the heads'."""
    _, projects = check_strategy(strategy)
    if not projects or not vectors:
        return dict(vectors)
    heads.check_query(model=model)
    keys = list(vectors)
    Q = np.vstack([np.asarray(vectors[k], dtype=np.float32) for k in keys])
    heads.check_query(dims=int(Q.shape[1]))
    from scholar_es.projection.routing import route_many

    V, _ = route_many(
        Q, heads.centroids, heads.answers, tau=heads.tau, threshold=heads.threshold, alpha=heads.alpha
    )
    return dict(zip(keys, V, strict=True))


@dataclass
class ProjectedSearch:
    """The query builder's :class:`~querybuilder.results.SearchResult` plus how the vector was routed."""

    result: SearchResult  # strategy = the heads strategy's name
    routing: Routing | None  # None for ``direct``
    heads: str | None

    def ranked_ids(self, level: str = "chunk") -> list[str]:
        return ranked_ids(self.result, level)


def ranked_ids(result, level: str = "chunk") -> list[str]:
    """Ranked ``chunk_id``s, or ``paper_id``s (first occurrence; ``level="paper"``) of a result."""
    if level not in ("chunk", "paper"):
        raise ConfigError(f"level must be 'chunk' or 'paper', got {level!r}")
    if level == "chunk":
        return [h.chunk_id for h in result.hits]
    return list(dict.fromkeys(h.paper_id for h in result.hits))


T = TypeVar("T")


class AliasCache(Generic[T]):
    """What was loaded from an alias, kept per client and alias while the alias points to the same
    index(es): a long-running service pays one ``_alias`` request per search, and a retrain (a new
    index version) is picked up. Threads share it: evict and insert one at a time."""

    def __init__(self, size: int = 16) -> None:
        self._items: dict[tuple[int, str], tuple[object, tuple[str, ...], T]] = {}
        self._size = size
        self._lock = threading.Lock()

    def get(self, es, alias: str, load: Callable[[], T]) -> T:
        from indexer.layout import physical_indices

        indices = tuple(physical_indices(es, alias))
        cached = self._items.get((id(es), alias))
        if indices and cached is not None and cached[0] is es and cached[1] == indices:
            return cached[2]
        loaded = load()
        if indices:
            with self._lock:
                if len(self._items) >= self._size:
                    self._items.pop(next(iter(self._items)))
                self._items[(id(es), alias)] = (es, indices, loaded)
        return loaded


_HEADS: AliasCache[Heads] = AliasCache()


def resolve_heads(es, heads: Heads | str | None, prefix: str = "") -> Heads:
    """``heads`` itself, or the stored heads of that name (default ``"default"``). Loaded heads are
    kept per client and alias while the alias points to the same index, so a long-running service
    pays one ``_alias`` request per search, and a retrain (a new index version) is picked up."""
    if isinstance(heads, Heads):
        return heads
    from scholar_es.projection.store import heads_alias, load_heads

    name = heads or DEFAULT_NAME
    return _HEADS.get(es, heads_alias(name, prefix), lambda: load_heads(es, name, prefix))


def execute(es, plan, vector: np.ndarray, strategy_name: str, explain: bool = False):
    """Run the query builder's request for ``plan`` (its strategy's) with the routed ``vector``."""
    return plan_strategy(plan.strategy).run(es, plan, vector, explain=explain, strategy_name=strategy_name)


@dataclass
class ProjectedRequest:
    """What ``strategy`` would send: the query builder's plan, the vector and how it was routed."""

    plan: QueryPlan  # strategy = the base strategy, dense or hybrid
    vector: np.ndarray
    routing: Routing | None
    heads: str | None

    def search(self):
        """The ``elasticsearch.dsl.Search`` (render it with ``querybuilder.render``)."""
        return build_search(self.plan, self.vector)


def build_request(
    es,
    question: str | SearchRequest,
    *,
    strategy: str = "multihead",
    tau: float | None = None,
    threshold: float | None = None,
    alpha: float | None = None,
    **options: Any,
) -> ProjectedRequest:
    """Plan, embed (checked against the index and the heads) and route ``question`` (a
    :class:`~querybuilder.request.SearchRequest`, or the text with ``options``, its fields);
    nothing is searched. ``tau``/``threshold``/``alpha`` override the stored routing parameters."""
    from querybuilder.run import embed_question, index_meta

    request = SearchRequest.of(question, **options)
    base, projects = check_strategy(strategy)
    plan = plan_strategy(base).make_plan(request)
    embedder = request.embedder
    if embedder is None:
        from indexer.embedder import DEFAULT_MODEL, Embedder

        embedder = Embedder(index_meta(es, plan.index).get("embedding_model") or DEFAULT_MODEL)
    h = None
    if projects:  # refuse a model the heads were not trained with before embedding anything
        h = resolve_heads(es, request.heads, request.prefix).with_params(
            tau=tau, threshold=threshold, alpha=alpha
        )
        h.check_query(model=embedder.name)
    q = embed_question(es, plan, embedder)  # checked against the index's model and dims
    if h is None:
        return ProjectedRequest(plan, q, None, None)
    routing = h.route(q, model=embedder.name)
    return ProjectedRequest(plan, routing.vector, routing, h.name)


def search(
    es,
    question: str | SearchRequest,
    *,
    strategy: str = "multihead",
    tau: float | None = None,
    threshold: float | None = None,
    alpha: float | None = None,
    **options: Any,
) -> ProjectedSearch:
    """Rank ``question`` on ``<prefix>chunks`` with ``strategy`` (see module doc); ``options``: the
    fields of :class:`~querybuilder.request.SearchRequest`.

    ``heads``: a :class:`Heads` or the name of stored heads (default ``"default"``; ignored by
    ``direct``). ``tau``/``threshold``/``alpha`` override the stored routing parameters.
    ``explain``: each hit's score parts, as ``scholar-es search --explain``.
    """
    request = SearchRequest.of(question, **options)
    req = build_request(es, request, strategy=strategy, tau=tau, threshold=threshold, alpha=alpha)
    return ProjectedSearch(
        execute(es, req.plan, req.vector, strategy, explain=request.explain), req.routing, req.heads
    )


def knn_ids(
    es,
    vector: np.ndarray,
    *,
    index: str = "chunks",
    k: int = 10,
    num_candidates: int | None = None,
    id_field: str = "paper_id",
) -> list[str]:
    """The raw engine/cluster kNN ranking (top ``k`` values of ``id_field``) for one vector: the
    ``knn`` query exactly as ``multihead`` sends it, without collapse; for measurements."""
    from querybuilder.dsl import as_query_vector

    body = {
        "query": {
            "knn": {
                "field": "vector",
                "query_vector": as_query_vector(vector),
                "k": k,
                "num_candidates": max(num_candidates or k, k),
            }
        },
        "size": k,
        "_source": [id_field],
    }
    resp = es.search(index=index, body=body).body
    return [str(h["_source"].get(id_field, h["_id"])) for h in resp["hits"]["hits"]]
