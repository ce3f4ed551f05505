"""Index management: what ``scholar-es indices`` lists and what ``scholar-es delete`` removes.

Only indices scholar-es created are listed or deleted: those whose mapping ``_meta.schema``
starts with ``scholar-es/`` (``mappings/*.json``, the heads store). Everything else on a cluster
is left alone, and naming it is a clear error.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from indexer import layout
from scholar_es.errors import ConfigError

#: Elasticsearch's BM25 defaults (index-modules-similarity): what an index without settings uses
BM25_DEFAULTS = {"k1": 1.2, "b": 0.75}


@dataclass(frozen=True)
class IndexRow:
    index: str
    #: the alias the version belongs to (``chunks`` for ``chunks-v3``); the index name when unversioned
    alias: str
    #: current (the alias serves it), previous (kept for rollback), building (a half-built leftover
    #: of a killed run, deleted by the next run), or unpublished
    role: str
    docs: int
    schema: str
    model: str | None
    dims: int | None
    chunking: str | None
    #: the default similarity: ``{"type": "BM25", "k1": ..., "b": ...}``
    bm25: dict
    build_state: str | None

    def to_dict(self) -> dict:
        return asdict(self)


def _bm25(settings: dict) -> dict:
    sim = (settings.get("index", settings).get("similarity") or {}).get("default") or {}
    out = {"type": sim.get("type", "BM25")}
    for key, default in BM25_DEFAULTS.items():
        out[key] = float(sim.get(key, default))
    return out


def _alias_of(index: str) -> str:
    m = layout.VERSION_RE.match(index)
    return m["alias"] if m else index


def list_indices(es) -> list[IndexRow]:
    """Every scholar-es index on the target, grouped by alias, newest version first."""
    body = es.indices.get(index="*", allow_no_indices=True).body
    rows = []
    for name, info in body.items():
        meta = (info.get("mappings") or {}).get("_meta") or {}
        schema = str(meta.get("schema", ""))
        if not schema.startswith(layout.SCHEMA_PREFIX):
            continue
        alias = _alias_of(name)
        names = set(info.get("aliases") or {})
        if alias in names:
            role = "current"
        elif layout.previous_alias(alias) in names:
            role = "previous"
        elif meta.get("build_state") == layout.BUILDING:
            role = "building"
        else:
            role = "unpublished"
        rows.append(
            IndexRow(
                index=name,
                alias=alias,
                role=role,
                docs=int(es.count(index=name).body["count"]),
                schema=schema,
                model=meta.get("embedding_model") or meta.get("model"),
                dims=meta.get("dims"),
                chunking=meta.get("chunking"),
                bm25=_bm25(info.get("settings") or {}),
                build_state=meta.get("build_state"),
            )
        )

    def order(row: IndexRow):
        m = layout.VERSION_RE.match(row.index)
        return (row.alias, -(int(m["n"]) if m else 0))

    return sorted(rows, key=order)


def format_table(rows: list[IndexRow]) -> str:
    if not rows:
        return "no scholar-es index here; build one with `scholar-es index FILE`"
    header = ("alias", "index", "role", "docs", "model", "dims", "chunking", "similarity")
    lines = [header]
    for r in rows:
        sim = f"{r.bm25['type']} k1={r.bm25['k1']:g} b={r.bm25['b']:g}"
        lines.append(
            (
                r.alias,
                r.index,
                r.role,
                str(r.docs),
                r.model or "-",
                str(r.dims or "-"),
                r.chunking or "-",
                sim,
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _under_prefix(alias: str, prefix: str) -> bool:
    rest = alias[len(prefix) :] if alias.startswith(prefix) else None
    return rest is not None and (rest in layout.INDEX_KINDS or rest.startswith("heads-"))


def resolve_delete(es, names: list[str]) -> list[str]:
    """The indices ``names`` stand for. A name is an alias (``chunks``: every version of it), a
    prefix (``scifact-``: its papers and chunks aliases, heads included), or one version
    (``chunks-v1``; not the one an alias serves). Anything else is refused, naming it."""
    rows = list_indices(es)
    by_index = {r.index: r for r in rows}
    chosen: list[str] = []
    for name in names:
        if not name:
            raise ConfigError("an empty name would match everything; name an alias, a prefix or an index")
        if name in by_index:
            row = by_index[name]
            if row.role == "current" and row.alias != row.index:
                raise ConfigError(
                    f"{name!r} is the version alias {row.alias!r} serves now; delete the alias "
                    f"({row.alias!r}: every version) or rebuild first"
                )
            found = [name]
        else:
            found = [r.index for r in rows if r.alias == name]
            if not found:
                found = [r.index for r in rows if _under_prefix(r.alias, name)]
        if not found:
            if es.indices.exists(index=name):
                raise ConfigError(
                    f"{name!r} is not a scholar-es index (its mapping has no scholar-es _meta.schema); "
                    "scholar-es deletes only what it created. Use the Elasticsearch API if you mean it"
                )
            raise ConfigError(
                f"no scholar-es index matches {name!r}; `scholar-es indices` lists them (give an alias "
                "like 'chunks', a prefix like 'scifact-', or a version like 'chunks-v1')"
            )
        chosen.extend(i for i in found if i not in chosen)
    return chosen


def delete_indices(es, indices: list[str]) -> None:
    """Delete ``indices`` (their aliases go with them)."""
    for index in indices:
        es.indices.delete(index=index)
