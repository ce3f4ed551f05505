"""``GET /_scholar/health``: whether this server can answer a search now, and why not.

A load balancer routes traffic by it, so green means every part a search needs is there:

* the target answers (the embedded engine, or the cluster at ``--es``; a refused connection,
  a timeout or an error answer is ``red``);
* the chunk index (``<prefix>chunks``) exists and its mapping's ``_meta`` is the one
  ``scholar-es index`` records (``schema: scholar-es/chunks``, ``build_state: complete``, an
  ``embedding_model`` the server's model matches); a missing index (an empty engine, e.g. a
  mistyped ``--es`` folder) or another ``_meta`` is ``yellow``;
* the embedding model is loaded (``yellow`` while it loads, ``red`` when it failed).

Anything but green is answered with HTTP 503 and the reasons, one sentence each.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from indexer.embedder import model_key
from indexer.layout import COMPLETE, SCHEMA_PREFIX
from scholar_es.serve.state import ServerState

Status = Literal["green", "yellow", "red"]
#: seconds the health check waits for the cluster (a load balancer's probe is short)
PROBE_TIMEOUT = 5.0


class Health(BaseModel):
    status: Status
    reasons: list[str]  # why it is not green, one sentence each ([] when green)
    engine: Literal["embedded", "cluster"]
    target: str
    index: str  # the chunk index checked (<prefix>chunks)
    model: str
    model_loaded: bool
    model_error: str | None = None
    version: str


def _index_problem(state: ServerState, index: str) -> tuple[Status, str] | None:
    """(status, reason) when the target or the chunk index is not ready, else None."""
    from elastic_transport import ApiError, TransportError
    from elasticsearch import NotFoundError

    es = state.es.options(request_timeout=PROBE_TIMEOUT, max_retries=0)
    try:
        body = es.indices.get_mapping(index=index).body
    except NotFoundError:
        return "yellow", (
            f"index {index!r} not found at the target: build it with `scholar-es index` (or check --es "
            "and the prefix)"
        )
    except ApiError as e:
        return "red", f"the target answered {e.meta.status} to a mapping request: {e.message}"
    except TransportError as e:
        return "red", f"cannot reach the target ({type(e).__name__}: {e.message})"
    if not body:
        return "yellow", f"index {index!r} not found at the target: build it with `scholar-es index`"
    for name, entry in body.items():
        meta = (entry.get("mappings") or {}).get("_meta") or {}
        if meta.get("schema") != f"{SCHEMA_PREFIX}chunks":
            return "yellow", (
                f"index {name!r} was not created by scholar-es (its _meta.schema is {meta.get('schema')!r}, "
                f"expected '{SCHEMA_PREFIX}chunks')"
            )
        if meta.get("build_state", COMPLETE) != COMPLETE:
            return (
                "yellow",
                f"index {name!r} is still being built (_meta.build_state {meta['build_state']!r})",
            )
        held = meta.get("embedding_model")
        if held is not None and model_key(held) != model_key(state.embedder.name):
            return "yellow", (
                f"index {name!r} holds vectors of model {held!r}, but the server embeds with "
                f"{state.embedder.name!r}; start it with --model {held}"
            )
    return None


def health(state: ServerState, version: str, prefix: str = "") -> Health:
    """The server's health for searches on ``<prefix>chunks``: the worst of its parts."""
    from scholar_es.client import display_target

    index = f"{prefix}chunks"
    found: list[tuple[Status, str]] = []
    problem = _index_problem(state, index)
    if problem:
        found.append(problem)
    ready = state.model_ready.is_set()
    if state.model_error:
        found.append(("red", f"the embedding model failed to load: {state.model_error}"))
    elif not ready:
        found.append(("yellow", "the embedding model is loading"))
    status: Status = "red" if any(s == "red" for s, _ in found) else ("yellow" if found else "green")
    return Health(
        status=status,
        reasons=[r for _, r in found],
        engine="embedded" if state.embedded else "cluster",
        target=display_target(state.target),
        index=index,
        model=state.embedder.name,
        model_loaded=ready and not state.model_error,
        model_error=state.model_error,
        version=version,
    )
