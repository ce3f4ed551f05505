"""What one server process holds: the client, the engine, the embedder, and the locks around them.

Engine access is serialized with one lock (``ServerState.engine_lock``) taken around every engine
request, both by the ES REST routes and by the search API's client (:class:`LockedEmbeddedNode`):
the embedded engine is not yet safe for concurrent requests from several threads. Once it is,
the lock can go (``engine_lock`` becomes a ``contextlib.nullcontext``) without other changes.
The embedder has its own lock (its SQLite cache shares one connection), so a question is embedded
while another one is searched.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from elastic_transport import NodeConfig

from scholar_es.client import connect, is_url
from scholar_es.engine.core import Engine, open_engine
from scholar_es.engine.node import EMBEDDED_HOST, EmbeddedNode

DEFAULT_MAX_BODY = 100 * 1024 * 1024  # Elasticsearch's http.max_content_length default (100mb)
API_KEY_ENV = "SCHOLAR_ES_SERVE_API_KEY"


class LockedEmbeddedNode(EmbeddedNode):
    """The in-process transport node, with every request taken under the server's engine lock."""

    def __init__(self, config: NodeConfig) -> None:
        super().__init__(config)
        self._lock = config._extras["engine_lock"]

    def perform_request(self, *args, **kwargs):
        with self._lock:
            return super().perform_request(*args, **kwargs)


class LockedEmbedder:
    """An embedder whose ``encode`` runs one call at a time (model and cache shared by threads)."""

    def __init__(self, embedder) -> None:
        self._inner = embedder
        self._lock = threading.Lock()
        self.name = embedder.name

    def encode(self, texts):
        with self._lock:
            return self._inner.encode(texts)

    @property
    def dims(self) -> int:
        with self._lock:
            return self._inner.dims


@dataclass
class ServerState:
    target: str
    es: object  # elasticsearch.Elasticsearch
    engine: Engine | None  # None against a real cluster: the cluster serves the REST API
    embedder: LockedEmbedder
    engine_lock: threading.Lock = field(default_factory=threading.Lock)
    api_key: str | None = None
    max_body: int = DEFAULT_MAX_BODY
    model_ready: threading.Event = field(default_factory=threading.Event)
    model_error: str | None = None
    profile: object = None  # querybuilder.profiles.Profile the searches use unless a request names one

    @property
    def embedded(self) -> bool:
        return self.engine is not None


def open_state(
    target: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    profile: str | None = None,
) -> ServerState:
    """Connect to TARGET (a directory: the embedded engine, opened once; a URL: a cluster client)."""
    from elasticsearch import Elasticsearch

    from indexer.embedder import DEFAULT_MODEL, Embedder
    from querybuilder.profiles import load_profile

    embedder = LockedEmbedder(Embedder(model or DEFAULT_MODEL))
    lock = threading.Lock()
    if is_url(target):
        state = ServerState(target, connect(target), None, embedder, lock, api_key, max_body)
        state.profile = load_profile(profile)
        return state
    connect(target)  # the same checks and messages as every other command (a file, a bad scheme)
    path = Path(target).expanduser()
    engine = open_engine(path)
    config = NodeConfig("http", EMBEDDED_HOST, 9200, _extras={"engine_path": str(path), "engine_lock": lock})
    es = Elasticsearch(hosts=[config], node_class=LockedEmbeddedNode)
    state = ServerState(target, es, engine, embedder, lock, api_key, max_body)
    state.profile = load_profile(profile)
    return state


def warm_model(state: ServerState) -> None:
    """Load the model (in a background thread at startup) so the first question does not wait long."""
    try:
        state.embedder.encode(["warm up"])
    except Exception as e:  # noqa: BLE001 - reported by /_scholar/health and every search
        state.model_error = f"{type(e).__name__}: {e}"
    finally:
        state.model_ready.set()
