"""``multisection`` in the strategy registry (``querybuilder.registry``).

The flow is :mod:`scholar_es.multisection.flow`'s; this object lets every command run it:
``search`` (papers with their supporting chunks; ``--show-plan`` prints the plan first,
``--crossencoder`` re-scores), ``query`` (the ``_msearch`` of the keyword and section searches:
the re-scoring search that follows depends on the candidates they return, so it cannot be
printed before searching -- ``search --show-plan`` prints it), ``eval`` and
``querybuilder.strategies.search`` (a ``SearchResult``: the best ``size`` chunks, the papers with their
chunks). ``--size`` is the number of papers. ``--explain`` does not apply (the final scores
come from the re-scoring search or the cross-encoder, not from one query to take apart).
"""

from __future__ import annotations

from dataclasses import dataclass

from querybuilder.registry import EvalContext, Needs, Prepared, Strategy, register
from querybuilder.request import SearchRequest
from scholar_es.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class MultisectionStrategy(Strategy):
    def check(self, request: SearchRequest) -> None:
        super().check(request)
        if request.from_:
            raise ConfigError(
                "from (paging) applies to every strategy but 'multisection', whose papers come from one "
                "re-scoring of its sections' candidates; ask for more papers with size instead"
            )

    def prepare(self, es, request: SearchRequest) -> Prepared:
        from scholar_es.multisection.flow import prepare

        return Prepared(self, request, prepare(es, request))

    def bodies(self, prepared: Prepared) -> dict | list[dict]:
        return [s.body() for s in prepared.state.searches]

    def execute(self, es, prepared: Prepared):
        from scholar_es.multisection.flow import execute

        request = prepared.request
        return execute(
            es,
            prepared.state,
            papers=request.size,
            show_plan=request.show_plan,
            crossencoder=request.crossencoder,
        )

    def result(self, native, request: SearchRequest):
        from scholar_es.multisection.flow import to_search_result

        return to_search_result(native, size=request.size)

    def render(self, native, request: SearchRequest) -> str:
        from scholar_es.multisection.flow import render_result

        return render_result(native, show_plan=request.show_plan)

    def as_dict(self, native, request: SearchRequest) -> dict:
        return native.model_dump(mode="json")

    def eval_searcher(self, ctx: EvalContext):
        from scholar_es.multisection.flow import eval_searcher

        return eval_searcher(
            ctx.es, prefix=ctx.prefix, embedder=ctx.embedder, profile=ctx.profile, size=ctx.size
        )


MULTISECTION = register(
    MultisectionStrategy(
        name="multisection",
        description=(
            "the question split into 1-5 focused sections, all searched in one _msearch, merged and "
            "re-scored against the original question; papers with up to 3 supporting chunks"
        ),
        needs=Needs(vector=True),
        takes=frozenset({"show_plan", "crossencoder"}),
    )
)
