"""``IndicesOptions.fromRequest``: the ``expand_wildcards``, ``allow_no_indices`` and
``ignore_unavailable`` URL parameters, over the engine's indices (all open, none hidden).

* ``expand_wildcards``: a comma list of ``open``, ``closed``, ``hidden``, ``none``, ``all``
  (another value: ``No valid expand wildcard value [x]``). A wildcard expression expands to the
  indices it matches when the list has ``open`` or ``all``; with only ``closed``, ``hidden`` or
  ``none`` it expands to nothing (the engine has no closed or hidden index).
* ``allow_no_indices=false``: a wildcard expression that expands to nothing is a 404
  ``index_not_found_exception`` naming it (the default, true: nothing).
* ``ignore_unavailable=true``: a missing concrete index is left out instead of a 404.
"""

from __future__ import annotations

from scholar_es.engine.errors import illegal_argument, index_not_found, unsupported
from scholar_es.engine.index.versioning import validation_error
from scholar_es.engine.rest.spec import parse_bool

PARAMS = ("expand_wildcards", "allow_no_indices", "ignore_unavailable")
_STATES = ("open", "closed", "hidden", "none", "all")


def resolve(engine, expr: str, params: dict, allow_aliases: bool = True) -> list[str]:
    """The concrete indices of ``expr`` as the request's indices options resolve them."""
    if not any(p in params for p in PARAMS):
        return engine.resolve(expr, allow_aliases=allow_aliases)
    states = {"open"}
    if "expand_wildcards" in params:
        states = {s.strip() for s in str(params["expand_wildcards"]).split(",") if s.strip()}
        for s in states:
            if s not in _STATES:
                raise illegal_argument(f"No valid expand wildcard value [{s}]")
    expand = bool(states & {"open", "all"})
    allow_none = (
        parse_bool("allow_no_indices", params["allow_no_indices"]) if "allow_no_indices" in params else True
    )
    ignore = (
        parse_bool("ignore_unavailable", params["ignore_unavailable"])
        if "ignore_unavailable" in params
        else False
    )
    out: list[str] = []
    for part in (p.strip() for p in str(expr).split(",") if p.strip()):
        wildcard = part in ("_all", "*") or any(c in part for c in "*?")
        if wildcard:
            found = engine.resolve(part, allow_aliases=allow_aliases, must_exist=False) if expand else []
            if not found and not allow_none:
                raise index_not_found(part)
        else:
            found = engine.resolve(part, allow_aliases=allow_aliases, must_exist=not ignore)
        out.extend(found)
    return list(dict.fromkeys(out))


def search_names(engine, index: str | None, body: dict, params: dict) -> list[str] | None:
    """The indices a ``_search`` covers as its indices options resolve ``index`` (None: no option
    given, the search resolves its index as usual). A point in time takes none
    (``SearchRequest#validate``: "[indicesOptions] cannot be used with point in time")."""
    if not any(p in params for p in PARAMS):
        return None
    if "pit" in body:
        if _non_default(params):
            raise validation_error(["[indicesOptions] cannot be used with point in time"])
        return None
    return resolve(engine, index or "_all", params)


def _non_default(params: dict) -> bool:
    """Whether the options differ from a search's default (``ignore_unavailable=false``,
    ``allow_no_indices=true``, ``expand_wildcards=open``)."""
    resolve_states = {s.strip() for s in str(params.get("expand_wildcards", "open")).split(",")}
    return (
        ("ignore_unavailable" in params and parse_bool("ignore_unavailable", params["ignore_unavailable"]))
        or ("allow_no_indices" in params and not parse_bool("allow_no_indices", params["allow_no_indices"]))
        or resolve_states != {"open"}
    )


def scroll_target(names: list[str]) -> str:
    """The index a scroll opens over ``names`` (a scroll over none is refused by name: the
    engine keeps no empty scroll context)."""
    if not names:
        raise unsupported("scroll over no indices", "the indices options resolve to no index")
    return ",".join(names)


def from_header(header: dict) -> dict:
    """The indices options of an ``_msearch`` header line (``IndicesOptions.fromMap``: JSON
    booleans or their strings, ``expand_wildcards`` a string or a list), as URL parameters."""
    out = {}
    for name in PARAMS:
        if name in header:
            v = header[name]
            out[name] = str(v).lower() if isinstance(v, bool) else ",".join(v) if isinstance(v, list) else v
    return out
