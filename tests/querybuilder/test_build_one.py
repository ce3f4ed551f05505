"""``querybuilder.strategies.build_one``: the one search of a single-search strategy, a clear error otherwise."""

import pytest
from elasticsearch.dsl import Search

from querybuilder.strategies import BUILDER_STRATEGIES as STRATEGIES
from querybuilder.strategies import build_body, build_one, make_plan
from scholar_es.errors import ConfigError

Q = "dense retrieval for question answering"
VEC = [0.5, -0.25, 0.125, 1.0]


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "rrf-client"])
def test_build_one_is_build_search_for_single_search_strategies(strategy):
    plan = make_plan(Q, strategy=strategy)
    search = build_one(plan, VEC)
    assert isinstance(search, Search)
    assert search.to_dict() == build_body(plan, VEC)


def test_build_one_refuses_the_two_search_strategy():
    with pytest.raises(ConfigError, match="'rrf-client' sends two searches"):
        build_one(make_plan(Q, strategy="rrf-client"), VEC)
