"""``GET /_cluster/health[/{index}]`` (RestClusterHealthAction, TransportClusterHealthAction).

The embedded engine is one node holding one copy of each shard: its health is known at once and
never changes while a request waits. So a wait already met (``wait_for_status`` at or below the
current status, ``wait_for_active_shards`` at most the active shards, ``wait_for_nodes`` that one
node meets, ``wait_for_no_relocating_shards`` / ``wait_for_no_initializing_shards``: there are
none) answers at once with ``timed_out: false``; one that is not waits ``timeout`` (default 30s)
and answers ``timed_out: true`` with HTTP 408, as ``ClusterHealthResponse#status`` does.
A named index that is missing makes the health ``red`` and the wait unmet (a 408 after
``timeout``), as ``TransportClusterHealthAction#prepareResponse`` answers it.
``level``: ``cluster`` only (``indices`` and ``shards`` are refused by name).
"""

from __future__ import annotations

import re
import time

from scholar_es.engine.errors import EsError, illegal_argument, unsupported
from scholar_es.engine.index.versioning import validation_error
from scholar_es.engine.rest import indices_options, spec
from scholar_es.engine.rest.cat import shard_stats
from scholar_es.engine.search.contexts import parse_time
from scholar_es.engine.validate import check_time_value

PARAMS = (
    "wait_for_status",
    "timeout",
    "master_timeout",
    "level",
    "local",
    "wait_for_no_relocating_shards",
    "wait_for_no_initializing_shards",
    "wait_for_active_shards",
    "wait_for_nodes",
    "expand_wildcards",
)
_STATUS = ("green", "yellow", "red")  # ClusterHealthStatus, best first
_LEVELS = ("cluster", "indices", "shards")  # ClusterStatsLevel
_NODES = re.compile(r"(>=|<=|>|<|ge\(|le\(|gt\(|lt\()?\s*(-?\d+)\)?")


def _nodes_met(spec_: str) -> bool:
    """``wait_for_nodes`` (TransportClusterHealthAction#prepareResponse) against one node."""
    if spec_ == "":
        return True
    m = _NODES.fullmatch(spec_.strip())
    if m is None:  # Integer.parseInt
        raise illegal_argument(f'For input string: "{spec_}"')
    op, n = m[1] or "", int(m[2])
    if op in (">=", "ge("):
        return n <= 1
    if op in ("<=", "le("):
        return n >= 1
    if op in (">", "gt("):
        return n < 1
    if op in ("<", "lt("):
        return n > 1
    return n == 1


def _active_met(value: str, stats: dict) -> bool:
    """``wait_for_active_shards`` (ActiveShardCount.parseString): ``all`` or a count."""
    if value == "all":
        return stats["unassigned_shards"] == 0
    try:
        n = int(value)
    except ValueError:
        raise illegal_argument(f"cannot parse ActiveShardCount[{value}]") from None
    if n < 0:
        raise illegal_argument(f"cannot parse ActiveShardCount[{value}]")
    return stats["active_shards"] >= n


def health(engine, params: dict, index: str | None = None) -> tuple[int, dict]:
    timeout_ms = 30_000
    for name in ("timeout", "master_timeout"):
        if name in params:
            check_time_value(name, str(params[name]))
    if "timeout" in params and str(params["timeout"]).strip() != "-1":
        timeout_ms = parse_time(params["timeout"], "timeout")
    if "local" in params:
        spec.parse_bool("local", params["local"])
    level = str(params.get("level", "cluster"))
    if level.lower() not in _LEVELS:
        raise validation_error(
            [f"level parameter must be one of [cluster] or [indices] or [shards] but was [{level}]"]
        )
    if level.lower() != "cluster":
        raise unsupported(f"level [{level}]", "the embedded engine reports cluster-level health")
    wanted = params.get("wait_for_status")
    if wanted is not None and str(wanted).lower() not in _STATUS:
        # ClusterHealthStatus.valueOf (Enum#valueOf)
        raise illegal_argument(
            f"No enum constant org.elasticsearch.cluster.health.ClusterHealthStatus.{str(wanted).upper()}"
        )
    for name in ("wait_for_no_relocating_shards", "wait_for_no_initializing_shards"):
        if name in params:
            spec.parse_bool(name, params[name])  # none relocate or initialize: met
    met = [True]
    try:
        stats = shard_stats(engine, indices_options.resolve(engine, index or "_all", params))
    except EsError as e:
        if e.type != "index_not_found_exception":
            raise
        # TransportClusterHealthAction#prepareResponse: a missing index is RED, a wait never met
        stats = {**shard_stats(engine, []), "status": "red"}
        met.append(False)
    if wanted is not None:
        met.append(_STATUS.index(stats["status"]) <= _STATUS.index(str(wanted).lower()))
    if "wait_for_active_shards" in params:
        met.append(_active_met(str(params["wait_for_active_shards"]), stats))
    if "wait_for_nodes" in params:
        met.append(_nodes_met(str(params["wait_for_nodes"])))
    timed_out = not all(met)
    if timed_out:  # the engine's health cannot change while this request waits
        time.sleep(timeout_ms / 1000)
    body = {
        "cluster_name": "embedded",
        "status": stats.pop("status"),
        "timed_out": timed_out,
        "number_of_nodes": 1,
        "number_of_data_nodes": 1,
        **stats,
    }
    return (408 if timed_out else 200), body
