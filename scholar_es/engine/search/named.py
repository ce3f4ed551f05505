"""``matched_queries``: the named queries (``_name``) each hit matches.

Elasticsearch's ``MatchedQueriesPhase`` (elastic/elasticsearch
``server/src/main/java/org/elasticsearch/search/fetch/subphase/MatchedQueriesPhase.java``) takes the
named queries of the search's query (a top-level ``knn`` included) and ``post_filter``, builds a
weight for each on its own and lists, per hit, the names whose query matches that document -- on
its own, wherever it sits in the query tree (inside a ``must_not`` too). The names come out in the
iteration order of the Java ``HashMap`` they are kept in (search.vectors/40_knn_search.yml "Knn
search with _name": ``my_knn_query`` before ``my_query``); a hit that matches none has no
``matched_queries``. With several queries of one name, the last one parsed is kept, in the first one's place (a map put).
"""

from __future__ import annotations

import numpy as np

from scholar_es.engine.query.nodes import Ctx, Node


def query_name(params) -> str | None:
    """The ``_name`` of a query's parameters: at the top (``bool``, ``knn``, ``ids``...) or in the
    one field's options (``term``, ``match``, ``range``: ``{"field": {..., "_name": n}}``)."""
    if not isinstance(params, dict):
        return None
    name = params.get("_name")
    if name is None and len(params) == 1:
        (inner,) = params.values()
        if isinstance(inner, dict):
            name = inner.get("_name")
    return str(name) if name is not None else None


def _java_hash(s: str) -> int:
    """``String.hashCode`` (UTF-16 code units), as a 32-bit unsigned value."""
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def java_hashmap_order(names: list[str]) -> list[str]:
    """``names`` (distinct, in insertion order) in ``java.util.HashMap`` iteration order: by bucket
    ``(h ^ h >>> 16) & (capacity - 1)``, capacity 16 doubling past a 0.75 load, then insertion."""
    capacity = 16
    while len(names) > capacity * 0.75:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return [name for _, name in sorted(enumerate(names), key=lambda e: (bucket(e[1]), e[0]))]


class NamedQueries:
    """The named queries of one search, run on their own once, then looked up per hit."""

    def __init__(self, named: list[tuple[str, Node]]) -> None:
        by_name: dict[str, Node] = {}
        for name, node in named:
            by_name[name] = node
        self.order = java_hashmap_order(list(by_name))
        self.nodes = by_name
        self._masks: dict[str, np.ndarray] = {}

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def matched(self, ctx: Ctx, pos: int) -> list[str]:
        out = []
        for name in self.order:
            if name not in self._masks:
                self._masks[name] = self.nodes[name].run(ctx)[0]
            if self._masks[name][pos]:
                out.append(name)
        return out


__all__ = ["NamedQueries", "java_hashmap_order", "query_name"]
