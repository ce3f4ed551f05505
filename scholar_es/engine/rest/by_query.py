"""``_delete_by_query``, ``_update_by_query`` and ``_reindex`` (within one engine), as
Elasticsearch's ``AbstractAsyncBulkByScrollAction`` runs them.

The documents are the ones the query matched when the request started: one snapshot is taken
(their ids, sequence numbers and sources), then they are written in batches of ``scroll_size``
(``source.size`` for reindex), each write conditional on the sequence number seen
(``if_seq_no``) for delete/update by query, so a document changed meanwhile is a version
conflict, never overwritten. A conflict is counted (``version_conflicts``); with
``conflicts=abort`` (the default) the batch it was in is finished and the request stops, answering
with the highest failure status (409) and the ``failures``; with ``proceed`` it goes on.
``max_docs`` stops the request once that many documents were processed successfully.

The answer is ``BulkByScrollResponse``'s: ``took``, ``timed_out``, ``total``, ``updated``
(not for delete by query), ``created`` (reindex only), ``deleted``, ``batches``,
``version_conflicts``, ``noops``, ``retries``, ``throttled_millis``, ``requests_per_second``,
``throttled_until_millis``, ``failures``. ``requests_per_second`` throttles as Elasticsearch
does: the next batch waits until ``batch size / requests_per_second`` seconds have passed since
the previous one started.

Refused by name: ``slices`` above 1 (one shard: ``auto`` is 1), ``wait_for_completion=false`` (no
task API), ``source.remote``, routing, pipelines and the search options that would change
which documents are visited other than ``query``.
"""

from __future__ import annotations

import copy
import json
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scholar_es.engine.errors import EsError, illegal_argument, parsing_error, unsupported
from scholar_es.engine.index import versioning
from scholar_es.engine.index.versioning import Condition
from scholar_es.engine.rest.params import param_int
from scholar_es.engine.rest.update import check_write_waits, source_spec, unknown_field
from scholar_es.engine.rest.url_query import Q_PARAMS, url_query
from scholar_es.engine.script.update_script import UpdateScript, compile_update_script, run_script
from scholar_es.engine.search.execute import SearchRun
from scholar_es.engine.search.hits import filter_source
from scholar_es.engine.validate import check_search_body, json_token

MAX_DOCS_ALL = -1
DEFAULT_SCROLL_SIZE = 1000
_RPS_ERROR = "[requests_per_second] must be a float greater than 0. Use -1 to disable throttling."

#: URL parameters each API reads (the routes declare them; the rest of each spec's parameters are
#: refused by name at dispatch, engine/rest/spec.py)
PARAMS = {
    "delete_by_query": ("conflicts", "max_docs", "size", "refresh", "scroll_size", "requests_per_second",
                        "slices", "wait_for_completion", "timeout", "scroll", "wait_for_active_shards",
                        "q", *Q_PARAMS),
    "update_by_query": ("conflicts", "max_docs", "size", "refresh", "scroll_size", "requests_per_second",
                        "slices", "wait_for_completion", "timeout", "scroll", "wait_for_active_shards",
                        "version", "q", *Q_PARAMS),
    "reindex": ("max_docs", "refresh", "requests_per_second", "slices", "wait_for_completion", "timeout",
                "scroll", "wait_for_active_shards", "require_alias"),
}  # fmt: skip
#: read although the 8.15 REST spec no longer lists it: ``size``, the pre-7.3 name of ``max_docs``
#: that ``AbstractBulkByQueryRestHandler`` still accepts (and refuses beside a different max_docs)
EXTRA = ("size",)


@dataclass
class Job:
    """One bulk-by-scroll request, parsed."""

    kind: str  # delete_by_query | update_by_query | reindex
    indices: list[str] = field(default_factory=list)
    query: dict = field(default_factory=lambda: {"match_all": {}})
    max_docs: int = MAX_DOCS_ALL
    abort: bool = True
    batch: int = DEFAULT_SCROLL_SIZE
    refresh: bool = False
    rps: float = math.inf
    script: UpdateScript | None = None
    versions: bool = False  # ctx._version is the document's (update_by_query ?version=true)
    source_filter: Any = None  # reindex: source._source
    dest: str = ""
    dest_op: str = "index"
    dest_version_type: str = "internal"


# --- parsing ---------------------------------------------------------------------------


def _set_max_docs(job: Job, value: int) -> None:
    """``AbstractBulkByScrollRequest.setMaxDocs`` through ``setMaxDocsValidateIdentical``."""
    if value < 0:
        raise illegal_argument(f"[max_docs] parameter cannot be negative, found [{value}]")
    if job.max_docs != MAX_DOCS_ALL and job.max_docs != value:
        raise illegal_argument(f"[max_docs] set to two different values [{job.max_docs}] and [{value}]")
    job.max_docs = value


def _conflicts(value: Any) -> bool:
    """Whether ``conflicts`` says abort (``AbstractBulkByScrollRequest.setConflicts``)."""
    if value == "abort":
        return True
    if value == "proceed":
        return False
    raise illegal_argument(f'conflicts may only be "proceed" or "abort" but was [{value}]')


def _slices(value: Any) -> int:
    """``AbstractBulkByScrollRequest.parseSlices``: ``auto`` (one shard: 1) or a positive int."""
    if str(value) == "auto":
        return 1
    try:
        n = int(str(value))
    except ValueError:
        n = 0
    if n < 1:
        raise illegal_argument(f'[slices] must be a positive integer or the string "auto", but was [{value}]')
    return n


def _search_part(job: Job, body: dict, where: str) -> None:
    """The search source of the request (``query``; what else a search body may hold is refused
    by name or, if no search key, ``Unknown key``)."""
    for key, value in body.items():
        if key == "query":
            check_search_body({"query": value})
            job.query = value
        elif key == "stored_fields":
            raise illegal_argument("stored_fields is not supported in this context")
        elif key == "from":
            raise illegal_argument("from is not supported in this context")
        elif key in ("sort", "slice", "search_after", "min_score", "post_filter", "knn", "timeout",
                     "terminate_after", "version", "seq_no_primary_term", "runtime_mappings", "pit"):  # fmt: skip
            raise unsupported(f"{where}.{key}" if where else key, "only [query] selects the documents")
        else:
            raise parsing_error(f"Unknown key for a {json_token(value)} in [{key}].")


def _common(job: Job, params: dict) -> tuple[int, bool]:
    """The URL parameters all three read; returns (slices, wait_for_completion)."""
    if "require_alias" in params and str(params["require_alias"]).lower() != "false":
        raise unsupported("require_alias", "the embedded engine writes to the index or alias named")
    if "refresh" in params:
        v = str(params["refresh"])
        if v not in ("", "true", "false"):  # paramAsBoolean
            raise illegal_argument(f"Failed to parse value [{v}] as only [true] or [false] are allowed.")
        job.refresh = v != "false"
    if "requests_per_second" in params:
        try:
            rps = float(str(params["requests_per_second"]))
        except ValueError:
            raise illegal_argument(_RPS_ERROR) from None
        if rps != -1 and not rps > 0:
            raise illegal_argument(_RPS_ERROR)
        job.rps = math.inf if rps == -1 else rps
    check_write_waits(params, ("timeout", "scroll"))
    slices = _slices(params["slices"]) if "slices" in params else 1
    wait = str(params.get("wait_for_completion", "true")).lower() != "false"
    return slices, wait


def _finish_validation(job: Job, slices: int, wait: bool, problems: list[str]) -> None:
    if job.max_docs != MAX_DOCS_ALL and job.max_docs < slices:
        problems.append("[max_docs] should be >= [slices]")
    if problems:
        raise versioning.validation_error(problems)
    if slices > 1:
        raise unsupported("slices", "the embedded engine has one shard: use slices=1 or auto")
    if not wait:
        raise unsupported(
            "wait_for_completion=false", "the embedded engine has no task API; wait for the answer"
        )


def _remote_indices(indices: list[str]) -> list[str]:
    return [i for i in indices if ":" in i]


def parse_by_query(kind: str, index: str, params: dict, body: Any, stored=None) -> Job:
    """``_delete_by_query`` / ``_update_by_query``: ``RestDeleteByQueryAction``/``RestUpdateByQueryAction``."""
    job = Job(kind=kind, indices=index.split(","))
    slices, wait = _common(job, params)
    if body is not None and not isinstance(body, dict):
        raise parsing_error("request body must be a JSON object")
    body = dict(body or {})
    if "conflicts" in body:
        job.abort = _conflicts(body.pop("conflicts"))
    if "max_docs" in body:
        _set_max_docs(job, param_int("max_docs", body.pop("max_docs")))
    if kind == "update_by_query" and "script" in body:
        script = body.pop("script")
        job.script = compile_update_script(script, stored)
    _search_part(job, body, "")
    # RestSearchAction#parseSearchRequest: the ``q`` query replaces the body's
    q = url_query(params, f"/{index}/_{kind}")
    if q is not None:
        job.query = q
    if "size" in params:
        _set_max_docs(job, param_int("size", params["size"]))
    if "max_docs" in params:
        _set_max_docs(job, param_int("max_docs", params["max_docs"]))
    if "conflicts" in params:
        job.abort = _conflicts(params["conflicts"])
    if "scroll_size" in params:
        job.batch = param_int("scroll_size", params["scroll_size"])
    if kind == "update_by_query" and "version" in params:
        job.versions = str(params["version"]).lower() in ("", "true")
    problems: list[str] = []
    if kind == "delete_by_query" and "query" not in body and q is None:
        problems.append("query is missing")
    remote = _remote_indices(job.indices)
    if remote:
        problems.append(
            "Cross-cluster calls are not supported in this context but remote indices were requested: "
            f"[{', '.join(remote)}]"
        )
    _finish_validation(job, slices, wait, problems)
    return job


_SOURCE_KEYS = ("index", "query", "size", "_source", "remote", "slice", "sort", "stored_fields", "from")
_DEST_KEYS = ("index", "version_type", "op_type", "pipeline", "routing")
_REINDEX_KEYS = ("source", "dest", "script", "conflicts", "max_docs", "size")


def parse_reindex(params: dict, body: Any, stored=None) -> Job:
    """``_reindex``: ``RestReindexAction`` / ``ReindexRequest.fromXContent`` and ``validate``."""
    job = Job(kind="reindex")
    slices, wait = _common(job, params)
    if not isinstance(body, dict):
        raise EsError(400, "parse_exception", "request body is required")
    for key in body:
        if key not in _REINDEX_KEYS:
            raise unknown_field("reindex", key, _REINDEX_KEYS)
    source = body.get("source", {})
    dest = body.get("dest", {})
    if not isinstance(source, dict) or not isinstance(dest, dict):
        raise parsing_error("[source] and [dest] must be objects")
    if "remote" in source:
        raise unsupported(
            "source.remote", "the embedded engine reindexes within itself; copy with helpers.reindex"
        )
    indices = source.get("index", [])
    job.indices = [indices] if isinstance(indices, str) else [str(i) for i in indices]
    job.indices = [n for i in job.indices for n in i.split(",")]
    search = {}
    for key, value in source.items():
        if key == "index":
            continue
        if key == "size":
            try:
                job.batch = int(str(value))
            except ValueError:
                raise EsError(400, "number_format_exception", f'For input string: "{value}"') from None
        elif key == "_source":
            if value is False:
                raise illegal_argument("_source:false is not supported in this context")
            job.source_filter = source_spec(value)
        else:
            search[key] = value
    _search_part(job, search, "source")
    for key in dest:
        if key not in _DEST_KEYS:
            raise unknown_field("dest", key, _DEST_KEYS)
    if dest.get("pipeline") is not None:
        raise unsupported("dest.pipeline", "the embedded engine has no ingest pipelines")
    if dest.get("routing") not in (None, "keep", "discard"):
        raise unsupported(
            f"dest.routing [{dest['routing']}]", "the embedded engine has one shard and no routing"
        )
    job.dest = str(dest.get("index") or "")
    op_type = str(dest.get("op_type", "index")).lower()
    if op_type not in ("index", "create"):
        raise illegal_argument(f"opType must be 'create' or 'index', found: [{dest['op_type']}]")
    job.dest_op = op_type
    vt = str(dest.get("version_type", "internal"))
    if vt not in versioning.VERSION_TYPES:
        raise illegal_argument(f"No version type match [{vt}]")
    job.dest_version_type = vt
    if "conflicts" in body:
        job.abort = _conflicts(body["conflicts"])
    if "script" in body:
        job.script = compile_update_script(body["script"], stored)
    for key in ("size", "max_docs"):  # in the order ReindexRequest's parser meets them
        if key in body:
            _set_max_docs(job, param_int(key, body[key]))
    if "max_docs" in params:
        _set_max_docs(job, param_int("max_docs", params["max_docs"]))
    problems: list[str] = []
    if not job.indices:
        problems.append("use _all if you really want to copy from all existing indexes")
    if not job.dest:
        problems.append("index must be specified")
    _finish_validation(job, slices, wait, problems)
    return job


def parse(engine, kind: str, index: str | None, params: dict, body: Any) -> Job:
    """The job of one request (stored scripts looked up in ``engine``)."""
    if kind == "reindex":
        return parse_reindex(params, body, engine.store.get_script)
    assert index is not None
    return parse_by_query(kind, index, params, body, engine.store.get_script)


# --- running -----------------------------------------------------------------------------


@dataclass
class Counts:
    total: int = 0
    updated: int = 0
    created: int = 0
    deleted: int = 0
    batches: int = 0
    version_conflicts: int = 0
    noops: int = 0
    throttled_ms: int = 0
    failures: list[dict] = field(default_factory=list)

    def processed(self) -> int:
        """``getSuccessfullyProcessed``."""
        return self.updated + self.created + self.deleted


@dataclass
class Hit:
    index: str
    id: str
    seq_no: int
    version: int
    source: dict | None


def snapshot(engine, job: Job) -> list[Hit]:
    """The documents the query matches now, in index order, with their sources (one snapshot
    per index)."""
    hits: list[Hit] = []
    names: list[str] = []
    for expr in job.indices:
        names.extend(n for n in engine.resolve(expr) if n not in names)
    if job.kind == "reindex" and job.dest in names:
        raise versioning.validation_error(
            [f"reindex cannot write into an index its reading from [{job.dest}]"]
        )
    for name in names:
        handle = engine.handle(name)
        run = SearchRun(handle, {"query": job.query, "size": 0})
        with handle.reading() as (seg, reader):
            run.bind(seg, reader)
            mask, _, _ = run.score()
            docs = np.flatnonzero(mask)
            seqs = [int(seg.seqs[d]) for d in docs]
            rows = reader.sources(seqs) if job.kind != "delete_by_query" else {}
            for d, seq in zip(docs, seqs, strict=True):
                row = rows.get(seq)
                hits.append(
                    Hit(
                        name,
                        seg.ids[d],
                        versioning.seq_no(seq),
                        row[2] if row else 0,
                        _loads(row[1]) if row else None,
                    )
                )
    return hits


def _loads(text: str) -> dict:
    return json.loads(text)


def run(engine, job: Job) -> tuple[int, dict]:
    """Run the job: (HTTP status, ``BulkByScrollResponse``)."""
    start = time.perf_counter()
    return apply(engine, job, snapshot(engine, job), start)


def apply(engine, job: Job, hits: list[Hit], start: float) -> tuple[int, dict]:
    """Write the documents of a :func:`snapshot` in batches (the writes conditional on what the
    snapshot saw); (HTTP status, ``BulkByScrollResponse``)."""
    counts = Counts(total=len(hits) if job.max_docs == MAX_DOCS_ALL else min(len(hits), job.max_docs))
    size = job.batch if job.max_docs == MAX_DOCS_ALL else min(job.batch, job.max_docs)
    pos = 0
    last_batch_at = None
    while pos < len(hits):
        if job.max_docs != MAX_DOCS_ALL:
            left = job.max_docs - counts.processed()
            if left <= 0:
                break
        batch = hits[pos : pos + size]
        pos += len(batch)
        if job.max_docs != MAX_DOCS_ALL:
            batch = batch[: job.max_docs - counts.processed()]
        if last_batch_at is not None and math.isfinite(job.rps):
            wait = last_batch_at[1] / job.rps - (time.perf_counter() - last_batch_at[0])
            if wait > 0:
                time.sleep(wait)
                counts.throttled_ms += int(wait * 1000)
        last_batch_at = (time.perf_counter(), len(batch))
        counts.batches += 1
        _apply(engine, job, batch, counts)
        if counts.failures:
            break
    if job.refresh:
        for name in {h.index for h in hits} | ({job.dest} if job.kind == "reindex" else set()):
            if name in engine.store.indices():
                engine.handle(name).save()
    status = max([200] + [f["status"] for f in counts.failures])
    return status, _response(job, counts, start)


def _apply(engine, job: Job, batch: list[Hit], counts: Counts) -> None:
    """One batch: its writes, grouped per target index, as one bulk request each."""
    groups: dict[str, list[tuple]] = {}
    noop_ids = 0
    for hit in batch:
        planned = _plan(job, hit)
        if planned is None:
            noop_ids += 1
            continue
        target, op = planned
        groups.setdefault(target, []).append(op)
    counts.noops += noop_ids
    for target, ops in groups.items():
        name = engine.write_index(target)
        for op, item in zip(ops, engine.handle(name).write(ops), strict=True):
            _count(job, op, item, counts)


def _count(job: Job, op: tuple, item: dict, counts: Counts) -> None:
    if "error" in item:
        if item["status"] == 409:
            counts.version_conflicts += 1
            if not job.abort:
                return
        counts.failures.append(
            {"index": item["_index"], "id": item["_id"], "cause": item["error"], "status": item["status"]}
        )
        return
    if op[0] == "delete":
        if item["result"] == "deleted":
            counts.deleted += 1
        else:  # reindex's delete of a dest document that is not there: nothing processed
            counts.noops += 1
    elif job.kind == "reindex" and item["result"] == "created":
        counts.created += 1
    else:
        counts.updated += 1


def _plan(job: Job, hit: Hit) -> tuple[str, tuple] | None:
    """(target index, write op) for one document, or None: the script said noop."""
    seen = Condition(if_seq_no=hit.seq_no, if_primary_term=versioning.PRIMARY_TERM)
    if job.kind == "delete_by_query":
        return hit.index, ("delete", hit.id, seen)
    if hit.source is None:  # a document stored without _source
        raise illegal_argument(f"[{hit.index}][_doc][{hit.id}] didn't store _source")
    source = hit.source
    if job.kind == "update_by_query":
        if job.script is None:
            return hit.index, ("index", hit.id, source, seen)
        ctx = run_script(
            job.script,
            "update_by_query",
            {
                "_index": hit.index,
                "_id": hit.id,
                "_version": hit.version if job.versions else -1,
                "_routing": None,
                "op": "index",
                "_source": source,
            },  # fmt: skip
        )
        if ctx["op"] == "noop":
            return None
        if ctx["op"] == "delete":
            return hit.index, ("delete", hit.id, seen)
        return hit.index, ("index", hit.id, ctx["_source"], seen)
    return _plan_reindex(job, hit, source)


def _plan_reindex(job: Job, hit: Hit, source: dict) -> tuple[str, tuple] | None:
    if job.source_filter is not None:
        source = filter_source(source, job.source_filter) or {}
    external = job.dest_version_type != "internal"
    values: dict[str, Any] = {
        "_index": hit.index, "_id": hit.id, "_version": hit.version if external else -1,
        "_routing": None, "op": "index", "_source": copy.deepcopy(source),
    }  # fmt: skip
    target = job.dest
    if job.script is not None:
        values = run_script(job.script, "reindex", values)
        if values["op"] == "noop":
            return None
        if values["_routing"] is not None:
            raise unsupported("ctx._routing", "the embedded engine has one shard and no routing")
        if values["_index"] != hit.index:  # ReindexRequest: the script changed the destination
            target = values["_index"]
    doc_id = values["_id"] if values["_id"] is not None else uuid.uuid4().hex[:20]
    version = values["_version"]
    if version is None:  # the script asked for no versioning
        cond = versioning.ANY
    elif external:
        cond = Condition(version=int(version), version_type=versioning.VERSION_TYPES[job.dest_version_type])
    else:
        cond = versioning.ANY
    if job.dest_op == "create":
        cond = versioning.CREATE
    if values["op"] == "delete":
        return target, ("delete", str(doc_id), versioning.ANY)
    return target, ("index", str(doc_id), values["_source"], cond)


def _response(job: Job, c: Counts, start: float) -> dict:
    out: dict[str, Any] = {
        "took": int((time.perf_counter() - start) * 1000),
        "timed_out": False,
        "total": c.total,
    }
    if job.kind != "delete_by_query":
        out["updated"] = c.updated
    if job.kind == "reindex":
        out["created"] = c.created
    out.update(
        {
            "deleted": c.deleted,
            "batches": c.batches,
            "version_conflicts": c.version_conflicts,
            "noops": c.noops,
            "retries": {"bulk": 0, "search": 0},
            "throttled_millis": c.throttled_ms,
            "requests_per_second": -1.0 if math.isinf(job.rps) else job.rps,
            "throttled_until_millis": 0,
            "failures": c.failures,
        }
    )
    return out
