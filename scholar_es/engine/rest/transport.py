"""An ``elastic_transport`` node that answers in process instead of over HTTP.

With it the official ``elasticsearch.Elasticsearch`` client -- every API method,
``elasticsearch.helpers``, ``elasticsearch.dsl`` and its error classes -- runs against the
embedded engine unchanged: the client serializes the request, this node hands it to
:func:`engine.rest.handler.handle` (with its ``Accept`` header), and the client parses the answer
as it would a cluster's: JSON (indented with ``?pretty``), or ``text/plain`` for a ``_cat`` table.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from elastic_transport import ApiResponseMeta, BaseNode, HttpHeaders, NodeConfig
from elastic_transport._node._base import NodeApiResponse

from scholar_es.engine import xcontent
from scholar_es.engine.errors import EsError, internal_error
from scholar_es.engine.index.indices import open_engine
from scholar_es.engine.rest.handler import handle
from scholar_es.engine.rest.shaping import TextBody

EMBEDDED_HOST = "embedded.invalid"  # a reserved name: never resolvable, never contacted


def _decode_body(body: bytes | None, content_type: str):
    if not body:
        return None
    text = body.decode("utf-8")
    if "ndjson" in content_type or "x-ndjson" in content_type:
        checked = not xcontent.number_risk(body)  # one scan of the body, not one per line
        return [xcontent.loads(line, checked) for line in text.splitlines() if line.strip()]
    return xcontent.loads(text)


class EmbeddedNode(BaseNode):
    """Routes requests to the engine stored in ``config._extras['engine_path']``."""

    _CLIENT_META = ("em", "embedded")

    def __init__(self, config: NodeConfig) -> None:
        super().__init__(config)
        self._engine = open_engine(Path(config._extras["engine_path"]))

    def perform_request(self, method, target, body=None, headers=None, request_timeout=None):
        start = time.perf_counter()
        parts = urlsplit(target)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        content_type = (headers or {}).get("content-type", "") if headers else ""
        accept = (headers or {}).get("accept") if headers else None
        out: object
        try:
            payload = _decode_body(body, content_type)
        except EsError as e:
            status, out = e.status, e.to_body()
        except UnicodeDecodeError as e:
            status, out = (
                400,
                {
                    "error": {
                        "root_cause": [{"type": "x_content_parse_exception", "reason": str(e)}],
                        "type": "x_content_parse_exception",
                        "reason": str(e),
                    },
                    "status": 400,
                },
            )
        else:
            status, out = handle(self._engine, method, parts.path, params, payload, accept=accept)
        media = "application/json"
        try:
            if isinstance(out, TextBody):  # a _cat table: text/plain, as written
                data, media = (b"" if method == "HEAD" else out.encode("utf-8")), out.content_type
            else:
                pretty = params.get("pretty") in ("", "true")  # checked by the dispatcher
                data = b"" if out is None or method == "HEAD" else xcontent.answer_bytes(out, pretty)
        except (ValueError, TypeError, RecursionError) as exc:  # an answer we cannot write: our bug
            status, out = 500, internal_error(method, parts.path, exc).to_body()
            data = json.dumps(out).encode("utf-8")
        meta = ApiResponseMeta(
            status=status,
            http_version="1.1",
            headers=HttpHeaders({"content-type": media, "x-elastic-product": "Elasticsearch"}),
            duration=time.perf_counter() - start,
            node=self.config,
        )
        return NodeApiResponse(meta, data)

    def close(self) -> None:
        self._engine.close()


def embedded_client(path: str | Path, **kwargs):
    """An ``elasticsearch.Elasticsearch`` client backed by the engine in ``path``; its JSON
    serializer is :class:`engine.rest.client_json.EngineJsonSerializer` unless ``kwargs`` name one."""
    from elasticsearch import Elasticsearch

    from scholar_es.engine.rest.client_json import EngineJsonSerializer

    config = NodeConfig("http", EMBEDDED_HOST, 9200, _extras={"engine_path": str(Path(path).expanduser())})
    if "serializer" not in kwargs and "serializers" not in kwargs:
        kwargs["serializer"] = EngineJsonSerializer()
    return Elasticsearch(hosts=[config], node_class=EmbeddedNode, **kwargs)
