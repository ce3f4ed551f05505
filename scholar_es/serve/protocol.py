"""uvicorn's httptools protocol with Elasticsearch's bounds on a request's head.

uvicorn buffers a request's line and headers without limit (a 50 MB header is read whole), and
before any application code, the API key check included, runs. Elasticsearch's HTTP layer
(Netty's ``HttpObjectDecoder``, configured by ``http.max_initial_line_length`` 4kb and
``http.max_header_size`` 16kb) refuses such a request while it reads it, and
``RestController.dispatchBadRequest`` answers the decoder's exception as a 400:

* a request line over 4096 bytes: ``too_long_http_line_exception``, "An HTTP line is larger
  than 4096 bytes." (Netty ``HttpObjectDecoder.LineParser``);
* header lines over ``max_header_size`` bytes in all (the lines without their CRLF, summed over
  the request's headers, as Netty's ``HeaderParser`` counts them): ``too_long_http_header_exception``,
  "HTTP header is larger than 16384 bytes." (``HttpObjectDecoder.HeaderParser``).

The answer closes the connection (the parser cannot resume mid-head). httptools hands a header
to the protocol only once it is complete, so the bytes read while a head is incomplete are
counted too: a head still incomplete after ``2 * max_header_size`` + 4096 bytes (the most the
two limits allow, CRLFs included) is refused at once, whatever its lines, so no single header
is ever buffered past that.

The limit comes from ``$SCHOLAR_ES_SERVE_MAX_HEADER_SIZE`` (``scholar-es serve
--max-header-size`` sets it; worker processes inherit it), read once per connection.
"""

from __future__ import annotations

import os

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from scholar_es.serve.errors import PRODUCT_HEADER, error_body

MAX_HEADER_ENV = "SCHOLAR_ES_SERVE_MAX_HEADER_SIZE"
DEFAULT_MAX_HEADER_SIZE = 16 * 1024  # Elasticsearch's http.max_header_size default (16kb)
MAX_INITIAL_LINE_LENGTH = 4 * 1024  # Elasticsearch's http.max_initial_line_length default (4kb)


def max_header_size() -> int:
    return int(os.environ.get(MAX_HEADER_ENV) or DEFAULT_MAX_HEADER_SIZE)


class HeadTooLong(Exception):
    def __init__(self, type_: str, reason: str) -> None:
        super().__init__(reason)
        self.type, self.reason = type_, reason


def line_too_long() -> HeadTooLong:
    return HeadTooLong(
        "too_long_http_line_exception", f"An HTTP line is larger than {MAX_INITIAL_LINE_LENGTH} bytes."
    )


def header_too_long(limit: int) -> HeadTooLong:
    return HeadTooLong("too_long_http_header_exception", f"HTTP header is larger than {limit} bytes.")


def bad_request(exc: HeadTooLong) -> bytes:
    """The whole 400 answer, as bytes (written before any ASGI cycle exists)."""
    import json

    body = json.dumps(error_body(400, exc.type, exc.reason)).encode("utf-8")
    return b"".join(
        [
            b"HTTP/1.1 400 Bad Request\r\n",
            f"{PRODUCT_HEADER[0]}: {PRODUCT_HEADER[1]}\r\n".encode("ascii"),
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
            body,
        ]
    )


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` refusing a request line or headers over Elasticsearch's limits."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.max_header_size = max_header_size()
        self._raw_limit = 2 * self.max_header_size + MAX_INITIAL_LINE_LENGTH
        self._in_head = True  # between a message's start (or the connection's) and its headers' end
        self._head_raw = 0  # bytes fed while the head was incomplete
        self._line = 0
        self._headers = 0
        self._refused: HeadTooLong | None = None

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            self._head_raw += len(data)
        super().data_received(data)  # a callback's HeadTooLong comes back as send_400_response
        if self._in_head and self._head_raw > self._raw_limit and not self.transport.is_closing():
            # a head still incomplete after more bytes than both limits allow
            self._refused = header_too_long(self.max_header_size)
            self.send_400_response(self._refused.reason)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to a request httptools refused; ours when a limit refused it."""
        refused, self._refused = self._refused, None
        if refused is None:
            return super().send_400_response(msg)
        self.logger.warning("refused a request: %s", refused.reason)
        self.transport.write(bad_request(refused))
        self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head, self._line, self._headers = True, 0, 0

    def on_url(self, url: bytes) -> None:
        self._line += len(url)
        # the line is METHOD SP URL SP HTTP/x.y (the CRLF not counted, as Netty counts it)
        if self._line + len(self.parser.get_method()) + 10 > MAX_INITIAL_LINE_LENGTH:
            self._refused = line_too_long()
            raise self._refused
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers += len(name) + 2 + len(value)  # "name: value"
        if self._headers > self.max_header_size:
            self._refused = header_too_long(self.max_header_size)
            raise self._refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head, self._head_raw = False, 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_raw = True, 0
