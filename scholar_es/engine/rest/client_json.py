"""The JSON serializer of the client that talks to the embedded engine (:func:`engine.rest.transport.embedded_client`).

It is ``elasticsearch.serializer.OrjsonSerializer`` (orjson: several times faster than the
standard library's ``json``, most of all on vectors and on every action line
``helpers.streaming_bulk`` serializes) with two guards, so that what the engine receives and what
the caller gets back are what the default ``JsonSerializer`` gives:

* orjson writes ``NaN``/``Infinity`` as ``null`` (a document's bad value would be silently dropped
  instead of refused) and refuses integers beyond 64 bits, lone surrogates and non-string keys,
  all of which ``json`` writes: a body whose orjson text holds ``null`` anywhere (a real ``null``,
  a NaN, or the word inside a string), or that orjson refuses, is written by ``json`` instead;
* ``OPT_SERIALIZE_NUMPY`` is left off: numpy values go through the client's ``default`` hook
  (``tolist()``/``float()``), as with ``json`` -- with the option, orjson writes a float32 by
  its own shortest text (``0.1``) where ``json`` writes the float64 it widens to
  (``0.10000000149011612``), a different value for a ``double`` field;
* answers are read by orjson unless they may hold an integer beyond 64 bits (orjson reads it as
  a float), which ``json`` reads exactly.
"""

from __future__ import annotations

from typing import Any

import orjson
from elasticsearch.serializer import JsonSerializer, OrjsonSerializer

from scholar_es.engine.xcontent import number_risk, orjson_exact


class EngineJsonSerializer(OrjsonSerializer):
    """``OrjsonSerializer`` that falls back to ``JsonSerializer`` where the two would differ."""

    _plain = JsonSerializer()

    def json_dumps(self, data: Any) -> bytes:
        out = orjson_exact(data, self.default)
        return self._plain.json_dumps(data) if out is None else out

    def json_loads(self, data: bytes) -> Any:
        if not number_risk(data):
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass  # json's own error (or its answer: lone surrogates, NaN)
        return self._plain.json_loads(data)


__all__ = ["EngineJsonSerializer"]
