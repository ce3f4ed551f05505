"""``_cat/indices``, ``_cat/aliases``, ``_cat/count`` and ``_cat/health``: Elasticsearch's text
tables (``RestTable``, ``AbstractCatAction``, ``RestIndicesAction``, ``RestAliasAction``,
``RestCountAction``, ``RestHealthAction``; their ``cat.*/10_basic.yml`` tests are ported).

* The answer is ``text/plain``: one line per row, the cells separated by one space and padded to
  the column's widest value (right-aligned where Elasticsearch aligns right, the last cell
  unpadded), ``?v`` adds the header line. ``?format=json`` (or an ``Accept: application/json``
  without ``format``) gives a JSON array of objects whose values are the cells' strings.
* ``?h=``: comma-separated column names or aliases (``*`` wildcards), shown under the name asked
  for; a name that is neither is left out, as Elasticsearch leaves it out. ``?help``: the columns
  with their aliases and descriptions. ``?s=``: sort by columns (``:asc``/``:desc``), an unknown
  one is Elasticsearch's 500 ``unsupported_operation_exception`` ``Unable to sort by unknown sort
  key `x```. ``?ts=false`` (``_cat/health``) drops ``epoch`` and ``timestamp``.
* ``_cat/indices`` has the columns the engine knows: ``health``, ``status``, ``index``, ``uuid``,
  ``pri``, ``rep``, ``docs.count``, ``creation.date``, ``creation.date.string`` and, empty (the
  engine keeps no per-index store statistics; Elasticsearch leaves a cell empty when it has no
  stats), the default columns ``docs.deleted``, ``store.size``, ``pri.store.size`` and
  ``dataset.size``. Elasticsearch's ~100 statistics columns are refused by name in ``h``, as are
  ``h`` wildcards and ``help`` there (they would list columns the engine does not have). An index's
  health is ``green`` without replicas and ``yellow`` with (a one-node cluster leaves replicas
  unassigned); ``?health=`` filters on it.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from scholar_es.engine.errors import EsError, illegal_argument
from scholar_es.engine.rest import spec
from scholar_es.engine.rest.shaping import TextBody

#: the parameters every table implements (``RestTable``, ``AbstractCatAction``)
PARAMS = ("format", "h", "help", "s", "v")
#: ``_cat/indices``: ``bytes`` and ``time`` are the units of cells the engine leaves empty
INDICES_PARAMS = (*PARAMS, "bytes", "time", "health", "pri")


@dataclass(frozen=True)
class Column:
    name: str
    aliases: tuple[str, ...] = ()
    desc: str = "not available"
    right: bool = False
    default: bool = True
    sibling: str | None = None


def _cols(*specs: tuple) -> tuple[Column, ...]:
    return tuple(Column(*s) for s in specs)


_TIME = _cols(
    ("epoch", ("t", "time"), "seconds since 1970-01-01 00:00:00"),
    ("timestamp", ("ts", "hms", "hhmmss"), "time in HH:MM:SS"),
)

INDICES = _cols(
    ("health", ("h",), "current health status"),
    ("status", ("s",), "open/close status"),
    ("index", ("i", "idx"), "index name"),
    ("uuid", ("id", "uuid"), "index uuid"),
    ("pri", ("p", "shards.primary", "shardsPrimary"), "number of primary shards", True),
    ("rep", ("r", "shards.replica", "shardsReplica"), "number of replica shards", True),
    ("docs.count", ("dc", "docsCount"), "available docs", True),
    ("docs.deleted", ("dd", "docsDeleted"), "deleted docs", True),
    ("creation.date", ("cd",), "index creation date (millisecond value)", False, False),
    ("creation.date.string", ("cds",), "index creation date (as string)", False, False),
    ("store.size", ("ss", "storeSize"), "store size of primaries & replicas", True, True, "pri"),
    ("pri.store.size", (), "store size of primaries", True),
    ("dataset.size", (), "total size of dataset", True),
)
ALIASES = _cols(
    ("alias", ("a",), "alias name"),
    ("index", ("i", "idx"), "index alias points to"),
    ("filter", ("f", "fi"), "filter"),
    ("routing.index", ("ri", "routingIndex"), "index routing"),
    ("routing.search", ("rs", "routingSearch"), "search routing"),
    ("is_write_index", ("w", "isWriteIndex"), "write index"),
)
COUNT = _TIME + _cols(("count", ("dc", "docs.count", "docsCount"), "the document count"))
HEALTH = _TIME + _cols(
    ("cluster", ("cl",), "cluster name"),
    ("status", ("st",), "health status"),
    ("node.total", ("nt", "nodeTotal"), "total number of nodes", True),
    ("node.data", ("nd", "nodeData"), "number of nodes that can store data", True),
    ("shards", ("t", "sh", "shards.total", "shardsTotal"), "total number of shards", True),
    ("pri", ("p", "shards.primary", "shardsPrimary"), "number of primary shards", True),
    ("relo", ("r", "shards.relocating", "shardsRelocating"), "number of relocating nodes", True),
    ("init", ("i", "shards.initializing", "shardsInitializing"), "number of initializing nodes", True),
    ("unassign", ("u", "shards.unassigned", "shardsUnassigned"), "number of unassigned shards", True),
    ("pending_tasks", ("pt", "pendingTasks"), "number of pending tasks", True),
    ("max_task_wait_time", ("mtwt", "maxTaskWaitTime"), "wait time of longest task pending", True),
    ("active_shards_percent", ("asp", "activeShardsPercent"), "active number of shards in percent", True),
)


def _time_cells() -> list:
    now = time.time()
    return [int(now), datetime.fromtimestamp(now, tz=UTC).strftime("%H:%M:%S")]


def _glob(pattern: str, name: str) -> bool:
    return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), name) is not None


def _display(cols: tuple[Column, ...], params: dict, strict: bool) -> list[tuple[Column, str]]:
    """``RestTable.buildDisplayHeaders``: (column, the name it is shown under)."""
    ts = spec.parse_bool("ts", params["ts"]) if "ts" in params else True
    if "h" not in params:
        return [(c, c.name) for c in cols if c.default and (ts or c not in _TIME)]
    by_name = {c.name: c for c in cols}
    wanted: list[str] = []
    for h in (s.strip() for s in str(params["h"]).split(",")):
        if not h:
            continue
        if "*" in h:
            if strict:
                raise illegal_argument(
                    f"[h={h}]: column wildcards are not supported by the embedded engine's _cat/indices "
                    "(it has only some of Elasticsearch's columns)"
                )
            matched = [c.name for c in cols if _glob(h, c.name) or any(_glob(h, a) for a in c.aliases)]
        else:
            matched = [h]
        wanted.extend(m for m in matched if m not in wanted)
    out = []
    for w in wanted:
        col = by_name.get(w)
        shown = w
        if col is None:
            col = next((c for c in cols if w in c.aliases), None)
        if col is None:
            if strict:
                raise illegal_argument(
                    f"[h]: the column [{w}] is not one the embedded engine's _cat/indices has"
                )
            continue  # Elasticsearch leaves an unknown column out
        if col in _TIME and not ts:
            continue
        out.append((col, shown))
        if col.sibling and "pri" in params and spec.parse_bool("pri", params["pri"]):
            sib = by_name.get(f"{col.sibling}.{col.name}")
            if sib is not None:
                out.append((sib, f"{col.sibling}.{shown}"))
    return out


def _cell(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _sort_key_cmp(a, b) -> int:
    """``TableIndexComparator.compareCell``."""
    if a is None and b is None:
        return 0
    if a is None:
        return -1
    if b is None:
        return 1
    if type(a) is type(b):
        return (a > b) - (a < b)
    sa, sb = str(a), str(b)
    return (sa > sb) - (sa < sb)


def _order(cols: tuple[Column, ...], rows: list[dict], params: dict) -> list[dict]:
    if "s" not in params:
        return rows
    keys = []
    for part in (p.strip() for p in str(params["s"]).split(",")):
        if not part:
            continue
        reverse = part.endswith(":desc")
        name = part[: -len(":desc")] if reverse else part.removesuffix(":asc")
        col = next((c for c in cols if c.name == name or name in c.aliases), None)
        if col is None:
            raise EsError(
                500, "unsupported_operation_exception", f"Unable to sort by unknown sort key `{name}`"
            )
        keys.append((col.name, reverse))

    def cmp(r1: dict, r2: dict) -> int:
        for name, reverse in keys:
            c = _sort_key_cmp(r1.get(name), r2.get(name))
            if c:
                return -c if reverse else c
        return 0

    return sorted(rows, key=functools.cmp_to_key(cmp))


def _wants_json(params: dict, accept: str | None) -> bool:
    """``RestTable.getResponseContentType``: ``format`` first, else the ``Accept`` header."""
    if "format" in params:
        return str(params["format"]).lower() == "json"
    if accept:
        first = accept.split(";")[0].strip().lower()
        return first in ("application/json", "application/vnd.elasticsearch+json")
    return False


def _help(cols: tuple[Column, ...]) -> TextBody:
    """``AbstractCatAction``'s help: name | aliases | description, each left-aligned and padded."""
    lines = [(c.name, ",".join(c.aliases), c.desc) for c in cols]
    w = [max(len(line[i]) for line in lines) for i in range(3)]
    return TextBody("".join(f"{a.ljust(w[0])} | {b.ljust(w[1])} | {c.ljust(w[2])}\n" for a, b, c in lines))


def table(cols: tuple[Column, ...], rows: list[dict], params: dict, accept: str | None, strict: bool = False):
    """Rows (column name -> value) as the ``_cat`` parameters ask for them."""
    if "help" in params and spec.parse_bool("help", params["help"]):
        if strict:
            raise illegal_argument(
                "[help] is not supported by the embedded engine's _cat/indices (it has only some of "
                "Elasticsearch's columns)"
            )
        return _help(cols)
    shown = _display(cols, params, strict)
    rows = _order(cols, rows, params)
    if _wants_json(params, accept):
        return [{name: _cell(r.get(c.name)) for c, name in shown} for r in rows]
    verbose = "v" in params and spec.parse_bool("v", params["v"])
    cells = [[_cell(r.get(c.name)) for c, _ in shown] for r in rows]
    widths = [max([len(name)] if verbose else [0]) for _, name in shown]
    for row in cells:
        widths = [max(w, len(v or "")) for w, v in zip(widths, row, strict=True)]
    last = len(shown) - 1

    def line(values: list, right: list[bool]) -> str:
        out = []
        for i, (v, w, r) in enumerate(zip(values, widths, right, strict=True)):
            v = v or ""
            out.append(v.rjust(w) if r and len(v) < w else (v if i == last else v.ljust(w)))
        return " ".join(out) + "\n"

    text = ""
    if verbose:
        text += line([name for _, name in shown], [c.right for c, _ in shown])
    text += "".join(line(row, [c.right for c, _ in shown]) for row in cells)
    return TextBody(text)


# --- the four tables ----------------------------------------------------------------


def index_health(settings: dict) -> str:
    """A one-node cluster: an index with replicas has them unassigned (yellow)."""
    return "green" if int(settings.get("number_of_replicas", 1)) == 0 else "yellow"


def indices_rows(engine, names: list[str], health: str | None = None) -> list[dict]:
    """One row per index; ``health``: only the indices of that health (``?health=``)."""
    if health is not None and str(health).lower() not in ("green", "yellow", "red"):
        raise illegal_argument(f"unknown cluster health status [{health}]")  # ClusterHealthStatus.fromString
    rows = []
    for n in names:
        h = engine.handle(n)
        s = h.describe()["settings"]["index"]
        created = int(s["creation_date"])
        rows.append(
            {
                "health": index_health(s),
                "status": "open",
                "index": n,
                "uuid": s["uuid"],
                "pri": int(s["number_of_shards"]),
                "rep": int(s["number_of_replicas"]),
                "docs.count": h.count(),
                "creation.date": created,
                "creation.date.string": _strict_date_time(created),
            }
        )
    return [r for r in rows if health is None or r["health"] == str(health).lower()]


def _strict_date_time(millis: int) -> str:
    """``strict_date_time``: ``yyyy-MM-dd'T'HH:mm:ss.SSSZ`` in UTC."""
    dt = datetime.fromtimestamp(millis / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S") + f".{millis % 1000:03d}Z"


def aliases_rows(engine, names: str | None) -> list[dict]:
    wanted = None if names is None else [n for n in names.split(",") if n]
    rows = []
    for alias, idx, is_write in engine.store.aliases():
        if wanted is not None and not any(_glob(w, alias) for w in wanted):
            continue
        rows.append(
            {
                "alias": alias,
                "index": idx,
                "filter": "-",
                "routing.index": "-",
                "routing.search": "-",
                "is_write_index": "-" if is_write is None else ("true" if is_write else "false"),
            }
        )
    return rows


def shard_stats(engine, names: list[str]) -> dict:
    """The shard counts of ``names`` on the one node (``ClusterHealthResponse``'s fields)."""
    settings = [engine.handle(n).describe()["settings"]["index"] for n in names]
    active = sum(int(s["number_of_shards"]) for s in settings)
    unassigned = sum(int(s["number_of_replicas"]) * int(s["number_of_shards"]) for s in settings)
    total = active + unassigned
    return {
        "status": "yellow" if any(index_health(s) == "yellow" for s in settings) else "green",
        "active_primary_shards": active,
        "active_shards": active,
        "relocating_shards": 0,
        "initializing_shards": 0,
        "unassigned_shards": unassigned,
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": 100.0 if total == 0 else 100.0 * active / total,
    }


def health_row(engine) -> dict:
    st = shard_stats(engine, engine.index_names())
    return {
        "epoch": None,
        "cluster": "embedded",
        "status": st["status"],
        "node.total": 1,
        "node.data": 1,
        "shards": st["active_shards"],
        "pri": st["active_primary_shards"],
        "relo": 0,
        "init": 0,
        "unassign": st["unassigned_shards"],
        "pending_tasks": 0,
        "max_task_wait_time": "-",
        "active_shards_percent": f"{st['active_shards_percent_as_number']:.1f}%",
    }


def with_time(row: dict) -> dict:
    epoch, stamp = _time_cells()
    return {**row, "epoch": epoch, "timestamp": stamp}
