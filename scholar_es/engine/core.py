"""The embedded engine: indices, aliases and documents in one directory.

:class:`Engine` owns the store and one :class:`IndexHandle` per index. Handles keep the
searchable :class:`~engine.segment.Segment` in memory, bring it up to date with what other
processes wrote (SQLite's ``data_version``), and save it as a cache on refresh and exit.
"""

from __future__ import annotations

import atexit
import contextlib
import fnmatch
import json
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from scholar_es.engine import similarity as sim
from scholar_es.engine.errors import EsError, illegal_argument, index_not_found
from scholar_es.engine.mapping import Mapping, keyword_normalizer
from scholar_es.engine.segment import Segment, parse_document
from scholar_es.engine.store import Store, pack_vectors, unpack_vectors

MAX_ID_BYTES = 512  # IndexRequest: "id is too long, must be no longer than 512 bytes"
_INDEX_SETTINGS = {
    "number_of_shards",
    "number_of_replicas",
    "refresh_interval",
    "analysis",
    "max_result_window",
    "similarity",
    "codec",
    "mapping",
}


def _flat_index_settings(settings: dict) -> dict:
    """Accept both ``{"index": {...}}`` and flat ``{"number_of_shards": 1}`` forms."""
    out = dict(settings.get("index", {})) if isinstance(settings.get("index"), dict) else {}
    for k, v in settings.items():
        if k == "index":
            continue
        out[k.removeprefix("index.")] = v
    for k in out:
        if k.split(".")[0] not in _INDEX_SETTINGS:
            raise illegal_argument(
                f"unknown setting [index.{k}] please check that any required plugins are installed, "
                "or check the breaking changes documentation for removed settings"
            )
    return out


def bm25_similarities(settings: dict, mapping: Mapping) -> sim.FieldSimilarities:
    """The BM25 parameters of the index's text/keyword fields (index.similarity + each field's
    ``similarity``); raises for an unknown or unsupported similarity."""
    mapped = {
        name: fs.similarity
        for name, fs in mapping.fields.items()
        if fs.type in ("text", "keyword") and fs.similarity is not None
    }
    return sim.field_similarities(settings.get("similarity"), mapped)


class IndexHandle:
    def __init__(self, engine: Engine, name: str, meta: dict) -> None:
        self.engine, self.store, self.name = engine, engine.store, name
        self.uuid = meta["uuid"]
        self.created = meta["created"]
        self.settings = meta["settings"]
        self.analysis = self.settings.get("analysis")
        self.mapping = Mapping(meta["mappings"], check_limits=False)  # stored: reopen as it is
        #: per-field BM25 parameters; follow put_mapping (dynamic fields name no similarity)
        self.similarities = bm25_similarities(self.settings, self.mapping)
        self._segment: Segment | None = None
        self._saved = True
        self._lock = threading.RLock()

    @property
    def cache_dir(self) -> Path:
        return self.engine.root / "segments" / self.uuid

    # --- the searchable segment -------------------------------------------------------
    def segment(self) -> Segment:
        with self._lock:
            self.engine.changed_elsewhere()  # polls; each handle compares its own generation
            if self._segment is None:
                self._generation = self.engine.generation
                seg = Segment.load(self.cache_dir, self.mapping) or Segment(self.mapping)
                self._segment = self._catch_up(seg)
            elif self._generation != self.engine.generation:
                self._generation = self.engine.generation
                self._segment = self._catch_up(self._segment)
            self._segment.ensure_built()
            return self._segment

    def _catch_up(self, seg: Segment) -> Segment:
        """Apply deletes and new documents that the store has and the segment lacks.

        Returns the segment to use: a fresh one when another process committed rows older
        than ours (a race), since the segment must keep seq order for tie-breaking.
        """
        seg.ensure_built()
        live = self.store.live_seqs(self.name)
        dead = seg.seqs[~np.isin(seg.seqs, live)]
        missing = live[~np.isin(live, seg.seqs)]
        last = int(seg.seqs.max()) if len(seg.seqs) else 0
        if len(missing) and int(missing.min()) < last:
            seg, dead, last = Segment(self.mapping), seg.seqs[:0], 0
        for s in dead:
            seg.delete(int(s))
        for seq, doc_id, source, vectors in self.store.docs_after(self.name, last):
            seg.add(
                parse_document(
                    self.mapping, self.analysis, seq, doc_id, json.loads(source), unpack_vectors(vectors)
                )
            )
            self._saved = False
        if len(dead):
            self._saved = False
        return seg

    def save(self) -> None:
        with self._lock:
            if self._segment is not None and (not self._saved or self._segment.dirty):
                self._segment.save(self.cache_dir)
                self._saved = True

    # --- writes ---------------------------------------------------------------------------
    def write(self, ops: list[tuple]) -> list[dict]:
        """Apply ("index", id, source_dict, op_type) / ("delete", id) ops; one result per op.

        Documents are parsed against the mapping first; a document the mapping rejects
        gets its error item and the others are still written (bulk semantics).
        """
        seg = self.segment()
        results: list[dict | None] = [None] * len(ops)
        writes: list[tuple[int, tuple]] = []  # (op position, store op)
        parsed = []
        mapping_before = json.dumps(self.mapping.to_body(), sort_keys=True)
        exists_in_batch: dict[str, bool] = {}  # ids written/deleted by earlier ops of this request
        for i, op in enumerate(ops):
            if op[0] == "delete":
                writes.append((i, ("delete", op[1])))
                exists_in_batch[op[1]] = False
                continue
            _, doc_id, source, op_type = op
            if len(doc_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
                results[i] = _item_error(
                    illegal_argument(
                        f"id [{doc_id[:40]}...] is too long, must be no longer than {MAX_ID_BYTES} bytes but was: "
                        f"{len(doc_id.encode('utf-8', 'surrogatepass'))}"
                    )
                )
                continue
            if op_type == "create" and exists_in_batch.get(
                doc_id, self.store.get(self.name, doc_id) is not None
            ):
                results[i] = _item_error(
                    EsError(
                        409,
                        "version_conflict_engine_exception",
                        f"[{doc_id}]: version conflict, document already exists (current version [1])",
                        index=self.name,
                        shard="0",
                    )
                )
                continue
            try:
                pdoc = parse_document(self.mapping, self.analysis, 0, doc_id, source)
            except EsError as e:
                results[i] = _item_error(e)
                continue
            stored = self._stored_source(source)
            writes.append(
                (i, ("index", doc_id, json.dumps(stored, ensure_ascii=False), pack_vectors(pdoc.vectors)))
            )
            parsed.append((i, pdoc))
            exists_in_batch[doc_id] = True
        mapping_after = json.dumps(self.mapping.to_body(), sort_keys=True)
        if mapping_after != mapping_before:  # dynamic fields or vector dims were added
            self.store.update_mappings(self.name, self.mapping.to_body())
        outcome = self.store.write(self.name, [w for _, w in writes]) if writes else []
        pdocs = dict(parsed)
        batch: dict[str, int] = {}  # id -> seq written earlier in this same batch
        for (i, w), (seq, version) in zip(writes, outcome, strict=True):
            doc_id = w[1]
            previous = batch.pop(doc_id, None)
            if previous is None:
                previous = seg.built_seq_of(doc_id)
            if previous is not None:
                seg.delete(previous)
            if w[0] == "delete":
                results[i] = {
                    "_index": self.name,
                    "_id": doc_id,
                    "_version": version,
                    "result": "deleted" if version else "not_found",
                    "status": 200 if version else 404,
                }
            else:
                pdoc = pdocs[i]
                assert seq is not None  # an index op always gets a new seq (Store.write)
                pdoc.seq = seq
                seg.add(pdoc)
                batch[doc_id] = seq
                results[i] = {
                    "_index": self.name,
                    "_id": doc_id,
                    "_version": version,
                    "result": "updated" if version > 1 else "created",
                    "status": 200 if version > 1 else 201,
                }
            done = results[i]
            assert done is not None  # both branches above set it
            done.update(
                {
                    "_shards": {"total": 1, "successful": 1, "failed": 0},
                    "_seq_no": int(seq or 0),
                    "_primary_term": 1,
                }
            )
        if writes:
            self._saved = False
        for op, res in zip(ops, results, strict=True):
            if res is not None:
                res.setdefault("_index", self.name)
                res.setdefault("_id", op[1])
        return results  # type: ignore[return-value]

    def _stored_source(self, source: dict) -> dict:
        if not self.mapping.source_excludes:
            return source
        from scholar_es.engine.hits import filter_source

        return filter_source(source, {"excludes": self.mapping.source_excludes}) or {}

    def get(self, doc_id: str) -> dict | None:
        row = self.store.get(self.name, doc_id)
        if row is None:
            return None
        seq, source, version = row
        return {
            "_index": self.name,
            "_id": doc_id,
            "_version": version,
            "_seq_no": seq,
            "_primary_term": 1,
            "found": True,
            "_source": json.loads(source),
        }

    def count(self) -> int:
        return len(self.segment().seqs)

    def put_mapping(self, body: dict) -> None:
        merged = self.mapping.to_body()
        new_props = body.get("properties", {})
        for name, spec in new_props.items():
            existing = merged["properties"].get(name)
            if existing is not None and existing.get("type") != spec.get("type", "object"):
                raise illegal_argument(
                    f"mapper [{name}] cannot be changed from type [{existing.get('type')}] to "
                    f"[{spec.get('type')}]"
                )
            merged["properties"][name] = spec
        if "_meta" in body:
            merged["_meta"] = body["_meta"]
        mapping = Mapping(merged)
        similarities = bm25_similarities(self.settings, mapping)  # fails before anything changes
        for fs in mapping.fields.values():
            keyword_normalizer(fs, self.analysis)
        self.store.update_mappings(self.name, mapping.to_body())
        self.mapping, self.similarities = mapping, similarities
        if self._segment is not None:
            self._segment.mapping = mapping

    def describe(self) -> dict:
        return {
            "aliases": {a: {} for a, i, _ in self.store.aliases() if i == self.name},
            "mappings": self.mapping.to_body(),
            "settings": {
                "index": {
                    **{k: v for k, v in self.settings.items()},
                    "number_of_shards": str(self.settings.get("number_of_shards", 1)),
                    "number_of_replicas": str(self.settings.get("number_of_replicas", 1)),
                    "uuid": self.uuid,
                    "provided_name": self.name,
                    "creation_date": str(self.created),
                }
            },
        }


def _item_error(e: EsError) -> dict:
    return {"status": e.status, "error": e.cause()}


class Engine:
    """All indices of one directory. Use :func:`open_engine` to share one per directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.store = Store(root)
        self._handles: dict[str, IndexHandle] = {}
        self._version = self.store.data_version()
        self.generation = 0
        self._lock = threading.RLock()

    def changed_elsewhere(self) -> bool:
        v = self.store.data_version()
        if v != self._version:
            self._version = v
            self.generation += 1  # handles catch up when their generation is behind
            return True
        return False

    def close(self) -> None:
        for h in self._handles.values():
            h.save()

    # --- indices --------------------------------------------------------------------------
    def index_names(self) -> list[str]:
        return sorted(self.store.indices())

    def handle(self, name: str) -> IndexHandle:
        with self._lock:
            metas = self.store.indices() if (name not in self._handles or self.changed_elsewhere()) else None
            if metas is not None:
                if name not in metas:
                    self._handles.pop(name, None)
                    raise index_not_found(name)
                h = self._handles.get(name)
                if h is None or h.uuid != metas[name]["uuid"]:
                    self._handles[name] = IndexHandle(self, name, metas[name])
            return self._handles[name]

    def create_index(self, name: str, body: dict) -> dict:
        _validate_index_name(name)
        if name in self.store.indices() or any(a == name for a, _, _ in self.store.aliases()):
            raise EsError(
                400,
                "resource_already_exists_exception",
                f"index [{name}/{uuid.uuid4().hex[:22]}] already exists",
                index=name,
            )
        body = body or {}
        unknown = set(body) - {"settings", "mappings", "aliases"}
        if unknown:
            raise EsError(400, "parse_exception", f"unknown key [{next(iter(unknown))}] for create index")
        settings = _flat_index_settings(body.get("settings") or {})
        if settings.get("analysis"):
            from scholar_es.engine.analysis import get_analyzer

            for an in settings["analysis"].get("analyzer") or {}:
                get_analyzer(an, settings["analysis"])  # fail now, not at the first document
        mapping = Mapping(body.get("mappings") or {})
        bm25_similarities(settings, mapping)  # an unknown or unsupported similarity fails now
        for fs in mapping.fields.values():
            if fs.type == "text":
                from scholar_es.engine.analysis import get_analyzer

                get_analyzer(fs.analyzer, settings.get("analysis"))
                get_analyzer(fs.query_analyzer, settings.get("analysis"))
            keyword_normalizer(fs, settings.get("analysis"))  # an unknown normalizer fails now
        self.store.create_index(name, settings, mapping.to_body(), uuid.uuid4().hex, int(time.time() * 1000))
        aliases = body.get("aliases") or {}
        if aliases:
            self.store.apply_alias_actions(
                [(a, name, (v or {}).get("is_write_index")) for a, v in aliases.items()], [], []
            )
        return {"acknowledged": True, "shards_acknowledged": True, "index": name}

    def delete_index(self, expr: str) -> None:
        names = self.resolve(expr, allow_aliases=False)
        for name in names:
            h = self._handles.pop(name, None)
            self.store.delete_index(name)
            if h is not None:
                _remove_tree(h.cache_dir)

    def resolve(self, expr: str, allow_aliases: bool = True, must_exist: bool = True) -> list[str]:
        """Concrete index names for a comma list of names, aliases and wildcards."""
        indices = self.store.indices()
        aliases = self.store.aliases()
        out: list[str] = []
        for part in [p.strip() for p in str(expr).split(",") if p.strip()]:
            if part in ("_all", "*"):
                out.extend(sorted(indices))
                continue
            if any(c in part for c in "*?"):
                out.extend(sorted(n for n in indices if fnmatch.fnmatchcase(n, part)))
                if allow_aliases:
                    out.extend(i for a, i, _ in aliases if fnmatch.fnmatchcase(a, part))
                continue
            if part in indices:
                out.append(part)
                continue
            targets = [i for a, i, _ in aliases if a == part]
            if targets and allow_aliases:
                out.extend(targets)
                continue
            if must_exist:
                raise index_not_found(part)
        return list(dict.fromkeys(out))

    def write_index(self, name: str, create: bool = True) -> str:
        """The index a write to ``name`` goes to (through a single or write alias)."""
        indices = self.store.indices()
        if name in indices:
            return name
        targets = [(i, w) for a, i, w in self.store.aliases() if a == name]
        if targets:
            if len(targets) == 1:
                return targets[0][0]
            writes = [i for i, w in targets if w]
            if len(writes) == 1:
                return writes[0]
            raise illegal_argument(
                f"no write index is defined for alias [{name}]. The write index may be explicitly "
                "disabled using is_write_index=false or the alias points to multiple indices "
                "without one being designated as a write index"
            )
        if not create:
            raise index_not_found(name)
        self.create_index(name, {})  # auto-create, as action.auto_create_index allows by default
        return name

    def update_aliases(self, actions: list) -> None:
        adds, removes, remove_indices = [], [], []
        indices = self.store.indices()
        for action in actions or []:
            if not isinstance(action, dict) or len(action) != 1:
                raise illegal_argument("[aliases] each action must be an object with one key")
            kind, spec = next(iter(action.items()))
            if kind not in ("add", "remove", "remove_index"):
                raise illegal_argument(f"[aliases] unknown action [{kind}]")
            idx = _as_names(spec.get("index") or spec.get("indices"))
            als = _as_names(spec.get("alias") or spec.get("aliases"))
            concrete = [n for pat in idx for n in (self.resolve(pat, allow_aliases=False))]
            if kind == "remove_index":
                remove_indices.extend(concrete)
                continue
            if not als:
                raise illegal_argument("[alias] is missing")
            for index in concrete:
                if index not in indices:
                    raise index_not_found(index)
                for alias in als:
                    if alias in indices:
                        raise illegal_argument(
                            f"an index or data stream exists with the same name as the alias [{alias}]"
                        )
                    if kind == "add":
                        adds.append((alias, index, spec.get("is_write_index")))
                    else:
                        if not any(a == alias and i == index for a, i, _ in self.store.aliases()):
                            raise EsError(
                                404,
                                "aliases_not_found_exception",
                                f"aliases [{alias}] missing",
                                **{"resource.type": "aliases", "resource.id": alias},
                            )
                        removes.append((alias, index))
        self.store.apply_alias_actions(adds, removes, remove_indices)
        for name in remove_indices:
            h = self._handles.pop(name, None)
            if h is not None:
                _remove_tree(h.cache_dir)


def _as_names(v) -> list[str]:
    if v is None:
        return []
    return [v] if isinstance(v, str) else list(v)


def _validate_index_name(name: str) -> None:
    bad = set('\\/*?"<>| ,#:')
    if (
        not name
        or name != name.lower()
        or name[0] in "-_+"
        or any(c in bad for c in name)
        or name in (".", "..")
    ):
        raise EsError(
            400,
            "invalid_index_name_exception",
            f"Invalid index name [{name}], must be lowercase, must not start with '_', '-' or '+', and must "
            "not contain \\, /, *, ?, \", <, >, |, ' ', ',', #, :",
            index=name,
        )


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def open_engine(path: str | Path) -> Engine:
    """The process-wide engine for a directory (created on first use)."""
    root = Path(path).expanduser().resolve()
    with _ENGINES_LOCK:
        eng = _ENGINES.get(str(root))
        if eng is None:
            eng = Engine(root)
            _ENGINES[str(root)] = eng
        return eng


@atexit.register
def _save_all() -> None:
    for eng in list(_ENGINES.values()):
        # exiting: the store is already durable, a failed cache write only costs a rebuild
        with contextlib.suppress(Exception):
            eng.close()


__all__ = ["Engine", "IndexHandle", "open_engine"]
