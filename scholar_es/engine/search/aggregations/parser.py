"""Aggregations, computed the way Elasticsearch computes them on a single shard: the ``aggs`` body
parsed into a tree of :class:`~scholar_es.engine.search.aggregations.tree.Agg`.

Supported: ``terms`` (keyword, numeric, date and boolean fields), ``value_count``, ``cardinality``
(exact), ``min``/``max``/``avg``/``sum``/``stats``, ``histogram``, ``range``, ``filter``/``filters``,
``top_hits``; bucket aggregations take sub-aggregations. Every other aggregation type is refused
by name (a 400), never approximated.

The parse checks what Elasticsearch's parser checks (names, one type per aggregation, known types,
no sub-aggregations under a metric) and binds each aggregation to the function that computes it;
``tree.run_aggs`` runs the tree. The package's modules, by concern:

* ``parser`` (this module): the supported and refused types, the parse.
* ``tree``: the parsed ``Agg``, the ``AggContext`` it runs against, running a level of the tree
  and a bucket's sub-aggregations, the parameter readers.
* ``values``: a field's doc values for a set of docs, keys and values as Elasticsearch writes them.
* ``terms``: the ``terms`` aggregation.
* ``buckets``: ``histogram``, ``range``, ``filter``, ``filters``; grouping docs by value, bucket order.
* ``metrics``: ``value_count``, ``cardinality``, ``min``/``max``/``avg``/``sum``/``stats``, ``top_hits``.
"""

from __future__ import annotations

import re
from typing import Any

from scholar_es.engine.errors import EsError, parsing_error, unsupported
from scholar_es.engine.search.aggregations import buckets, metrics
from scholar_es.engine.search.aggregations.terms import terms
from scholar_es.engine.search.aggregations.tree import Agg, Runner

_RUNNERS: dict[str, Runner] = {"terms": terms, **buckets.RUNNERS, **metrics.RUNNERS}
BUCKET_TYPES: tuple[str, ...] = ("terms", *buckets.RUNNERS)
METRIC_TYPES: tuple[str, ...] = metrics.METRIC_TYPES
SUPPORTED: tuple[str, ...] = BUCKET_TYPES + METRIC_TYPES
# Aggregation types Elasticsearch has that the engine refuses by name (a clear 400, not a guess).
KNOWN_UNSUPPORTED = (
    "adjacency_matrix",
    "auto_date_histogram",
    "avg_bucket",
    "boxplot",
    "bucket_script",
    "bucket_selector",
    "bucket_sort",
    "composite",
    "cumulative_sum",
    "date_histogram",
    "date_range",
    "derivative",
    "diversified_sampler",
    "extended_stats",
    "geo_bounds",
    "geo_centroid",
    "geohash_grid",
    "geotile_grid",
    "global",
    "ip_range",
    "matrix_stats",
    "max_bucket",
    "median_absolute_deviation",
    "min_bucket",
    "missing",
    "moving_fn",
    "multi_terms",
    "nested",
    "percentile_ranks",
    "percentiles",
    "random_sampler",
    "rare_terms",
    "reverse_nested",
    "sampler",
    "scripted_metric",
    "serial_diff",
    "significant_terms",
    "significant_text",
    "stats_bucket",
    "string_stats",
    "sum_bucket",
    "t_test",
    "top_metrics",
    "variable_width_histogram",
    "weighted_avg",
)
_NAME_RX = re.compile(r"[\[\]>]")


def parse_aggs(spec: Any) -> dict[str, Agg]:
    """``aggs`` body -> parsed tree; errors are Elasticsearch's parse errors."""
    if not isinstance(spec, dict):
        raise parsing_error(f"Expected [START_OBJECT] for [aggregations] but found [{type(spec).__name__}]")
    out: dict[str, Agg] = {}
    for name, body in spec.items():
        if _NAME_RX.search(name):
            raise parsing_error(
                f"Invalid aggregation name [{name}]. Aggregation names can contain any character except "
                "'[', ']', and '>'"
            )
        if not isinstance(body, dict):
            raise parsing_error(
                f"Aggregation definition for [{name}] starts with a [{body}], expected a [START_OBJECT]."
            )
        kind = None
        subs: dict[str, Agg] = {}
        meta = None
        for key, value in body.items():
            if key in ("aggs", "aggregations"):
                if subs:
                    raise parsing_error(f"Found two sub aggregation definitions under [{name}]")
                subs = parse_aggs(value)
            elif key == "meta":
                meta = value
            elif kind is not None:
                raise parsing_error(
                    f"Found two aggregation type definitions in [{name}]: [{kind[0]}] and [{key}]"
                )
            else:
                kind = (key, value)
        if kind is None:
            raise parsing_error(f"Missing definition for aggregation [{name}]")
        typ, params = kind
        if typ not in SUPPORTED:
            if typ in KNOWN_UNSUPPORTED:
                raise unsupported(f"aggregation type {typ}", f"supported types: {', '.join(SUPPORTED)}")
            raise parsing_error(f"Unknown aggregation type [{typ}]")
        if subs and typ in METRIC_TYPES:
            raise EsError(
                400,
                "aggregation_initialization_exception",
                f"Aggregator [{name}] of type [{typ}] cannot accept sub-aggregations",
            )
        if typ != "filter" and not isinstance(params, dict):
            raise parsing_error(f"[{typ}] aggregation [{name}] expects an object")
        out[name] = Agg(name, typ, params, subs, meta, _RUNNERS[typ])
    return out
