"""``profile: true``: the query tree with timings, in Elasticsearch's shape; and the Lucene
``toString`` of a query tree (``_validate/query?explain``, profile descriptions).

Elasticsearch times each Lucene query's weight and scorer calls (create_weight, build_scorer,
next_doc, advance, score, ...). The embedded engine scores a whole clause at once, so the timings
here are *approximate*: each node's wall time for its whole run (its children's included, as a
Lucene parent's time includes the scorers it drives) is reported as ``time_in_nanos`` and under
``breakdown.score``, with ``score_count`` and ``next_doc_count`` the documents it matched; every
other breakdown entry is 0. ``rewrite_time`` is the parse time; the collector is the top-hits
collection after scoring. Aggregation and fetch phases are not profiled (``aggregations`` is
empty, no ``fetch`` section).
"""

from __future__ import annotations

import time

import numpy as np

from scholar_es.engine.query.nodes import (
    BoolNode,
    BoostNode,
    ConstantScoreNode,
    ConstNode,
    DisMaxNode,
    MatchNoneNode,
    Node,
    TermNode,
)
from scholar_es.engine.query.phrase import PhraseNode

BREAKDOWN_KEYS = (
    "set_min_competitive_score",
    "match",
    "next_doc",
    "score",
    "build_scorer",
    "create_weight",
    "advance",
    "shallow_advance",
    "compute_max_score",
    "count_weight",
)
_TYPES = {
    TermNode: "TermQuery",
    BoolNode: "BooleanQuery",
    DisMaxNode: "DisjunctionMaxQuery",
    BoostNode: "BoostQuery",
    ConstantScoreNode: "ConstantScoreQuery",
    MatchNoneNode: "MatchNoDocsQuery",
    PhraseNode: "PhraseQuery",
}


class NoLuceneString(Exception):
    """The node has no exact Lucene ``toString`` here."""


def children(node: Node) -> list[Node]:
    out: list[Node] = []
    for value in vars(node).values():
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, Node))
    return out


def query_type(node: Node) -> str:
    if isinstance(node, ConstNode):
        return "MatchAllDocsQuery" if node.matches_all else "ConstantScoreQuery"
    return _TYPES.get(type(node), type(node).__name__)


def _boosted(text: str, boost: float) -> str:
    return text if boost == 1.0 else f"({text})^{float(boost)!r}"


def lucene_string(node: Node, nested: bool = False) -> str:
    """Query#toString of the node (NoLuceneString where the engine's node has none exactly)."""
    if isinstance(node, TermNode):
        return _boosted(f"{node.field}:{node.term}", node.boost)
    if isinstance(node, PhraseNode):
        return _boosted(node.describe(), node.boost)
    if isinstance(node, ConstNode) and (node.matches_all or getattr(node, "lucene", False)):
        return _boosted("*:*" if node.matches_all else node.name, node.boost)
    if isinstance(node, BoostNode):
        return f"({lucene_string(node.inner)})^{float(node.boost)!r}"
    if isinstance(node, ConstantScoreNode):
        return _boosted(f"ConstantScore({lucene_string(node.inner)})", node.boost)
    if isinstance(node, DisMaxNode):
        inner = " | ".join(lucene_string(q) for q in node.queries)
        return _boosted(f"({inner})" + (f"~{float(node.tie)!r}" if node.tie else ""), node.boost)
    if isinstance(node, BoolNode):
        parts = [
            prefix + lucene_string(q, nested=True)
            for prefix, qs in (("+", node.must), ("", node.should), ("#", node.filter), ("-", node.must_not))
            for q in qs
        ]
        text = " ".join(parts)
        implicit = 1 if node.should and not node.must and not node.filter else 0
        if node.msm > implicit:
            text = f"({text})~{node.msm}"
        elif nested:
            text = f"({text})"
        return _boosted(text, node.boost)
    raise NoLuceneString(type(node).__name__)


def instrument(root: Node) -> None:
    """Time every node's ``run`` (an instance attribute over the class's method)."""
    for node in [root, *_descendants(root)]:
        if "run" in vars(node):
            continue
        inner = node.run

        def timed(ctx, _inner=inner, _node=node):
            start = time.perf_counter_ns()
            out = _inner(ctx)
            _node._profile_ns = getattr(_node, "_profile_ns", 0) + time.perf_counter_ns() - start
            _node._profile_hits = int(np.count_nonzero(out[0]))
            return out

        node.run = timed  # type: ignore[method-assign]


def _descendants(node: Node) -> list[Node]:
    out = []
    for c in children(node):
        out.append(c)
        out.extend(_descendants(c))
    return out


def _describe(node: Node) -> str:
    try:
        return lucene_string(node)
    except NoLuceneString:
        return node.describe()


def _tree(node: Node) -> dict:
    ns = int(getattr(node, "_profile_ns", 0))
    hits = int(getattr(node, "_profile_hits", 0))
    breakdown: dict[str, int] = {}
    for key in BREAKDOWN_KEYS:
        breakdown[key] = ns if key == "score" else 0
        breakdown[key + "_count"] = hits if key in ("score", "next_doc") else 0
    out = {
        "type": query_type(node),
        "description": _describe(node),
        "time_in_nanos": ns,
        "breakdown": breakdown,
    }
    kids = children(node)
    if kids:
        out["children"] = [_tree(c) for c in kids]
    return out


def result(index: str, nodes: list[Node], rewrite_ns: int, collect_ns: int) -> dict:
    """The ``profile`` section of a response."""
    return {
        "shards": [
            {
                "id": f"[embedded][{index}][0]",
                "node_id": "embedded",
                "shard_id": 0,
                "index": index,
                "cluster": "(local)",
                "searches": [
                    {
                        "query": [_tree(n) for n in nodes],
                        "rewrite_time": rewrite_ns,
                        "collector": [
                            {
                                "name": "QueryPhaseCollector",
                                "reason": "search_query_phase",
                                "time_in_nanos": collect_ns,
                                "children": [
                                    {
                                        "name": "SimpleTopScoreDocCollector",
                                        "reason": "search_top_hits",
                                        "time_in_nanos": collect_ns,
                                    }
                                ],
                            }
                        ],
                    }
                ],
                "aggregations": [],
            }
        ]
    }
