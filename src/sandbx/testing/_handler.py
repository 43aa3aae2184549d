"""The HTTP side of one scripted exchange: read a request, record it, refuse it as the API
would, or write the next script entry as JSON, a chunked event stream, an HTTP error, an
error mid-stream, or a deliberately cut connection.

It follows the script; it never invents a reply of its own beyond 400, 404 and the 500
that says the script is exhausted.
"""

from __future__ import annotations

import http
import json
import socket
import socketserver
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from sandbx._exhaustive import unreachable
from sandbx.testing._exchange import Exchange, RecordedRequest
from sandbx.testing._script import (
    ApiError,
    ConnectionCut,
    ErrorReply,
    Reply,
    ScriptEntry,
    StreamErrorReply,
    api_error,
)
from sandbx.testing._sse import (
    JsonObject,
    encode_event,
    encode_json,
    error_body,
    error_event,
    message_json,
    stream_events,
)
from sandbx.testing._validation import RequestInvalid, check_request

MESSAGES_PATH = "/v1/messages"
# The longest chunk-size or trailer line read; http.server's own limit for a header line.
_LONGEST_LINE = 65537


class MessagesHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "sandbx-scripted-messages"
    sys_version = ""

    def __init__(
        self,
        request: socket.socket,
        client_address: tuple[str, int],
        server: socketserver.BaseServer,
        *,
        exchange: Exchange,
    ) -> None:
        self.exchange = exchange
        super().__init__(request, client_address, server)

    def log_message(self, message_format: str, *args: object) -> None:
        """Quiet: the test reads ``requests``, not a log on stderr."""

    def do_POST(self) -> None:
        self._answer()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # noqa: N815

    def _answer(self) -> None:
        raw_body = self._read_body()
        try:
            body: object = json.loads(raw_body) if raw_body else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = None
        number = self.exchange.record(
            RecordedRequest(
                method=self.command, path=self.path, headers=self._header_dict(), body=body
            )
        )
        request_id = f"req_01scripted{number:06d}"
        if self.command != "POST" or urlsplit(self.path).path != MESSAGES_PATH:
            missing = api_error(404, message=f"Not found: {self.command} {self.path}")
            self._send_error(missing, request_id)
            return
        try:
            request = check_request(body)
        except RequestInvalid as problem:
            self._send_error(api_error(400, message=str(problem)), request_id)
            return
        taken = self.exchange.take_next()
        if taken is None:
            scripted = len(self.exchange.script)
            exhausted = api_error(
                500, message=f"the script is exhausted: all {scripted} entries were consumed"
            )
            self._send_error(exhausted, request_id)
            return
        index, entry = taken
        self._follow(
            entry,
            message_id=f"msg_01scripted{index:06d}",
            model=str(request["model"]),
            stream=request.get("stream") is True,
            request_id=request_id,
        )

    def _follow(
        self, entry: ScriptEntry, *, message_id: str, model: str, stream: bool, request_id: str
    ) -> None:
        match entry:
            case Reply():
                if stream:
                    events = stream_events(entry, message_id=message_id, model=model)
                    self._send_stream(events, request_id)
                else:
                    whole = message_json(entry, message_id=message_id, model=model)
                    self._send_json(200, whole, request_id)
            case ErrorReply():
                self._send_error(entry.error, request_id, retry_after=entry.retry_after)
            case StreamErrorReply():
                if stream:
                    events = stream_events(entry.interrupting, message_id=message_id, model=model)
                    self._send_stream(
                        _before_message_stop(events, entry.after_events),
                        request_id,
                        ending=entry.error,
                    )
                else:
                    self._send_error(entry.error, request_id)
            case ConnectionCut():
                if stream:
                    events = stream_events(entry.interrupting, message_id=message_id, model=model)
                    self._send_stream(
                        _before_message_stop(events, entry.after_events), request_id, cut=True
                    )
                else:
                    whole = message_json(entry.interrupting, message_id=message_id, model=model)
                    self._send_json(200, whole, request_id, cut=True)
            case _:
                raise unreachable(entry)

    def _send_error(
        self, error: ApiError, request_id: str, *, retry_after: int | None = None
    ) -> None:
        extra = {} if retry_after is None else {"retry-after": str(retry_after)}
        self._send_json(error.status, error_body(error, request_id=request_id), request_id, extra)

    def _send_json(
        self,
        status: int,
        body: JsonObject,
        request_id: str,
        extra_headers: Mapping[str, str] | None = None,
        *,
        cut: bool = False,
    ) -> None:
        """The whole body; with ``cut``, only its first half before the socket closes."""
        data = encode_json(body)
        self._send_status(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", request_id)
        for name, header in (extra_headers or {}).items():
            self.send_header(name, header)
        self.end_headers()
        if cut:
            self.wfile.write(data[: len(data) // 2])
            self._cut_connection()
            return
        self.wfile.write(data)

    def _send_stream(
        self,
        events: list[JsonObject],
        request_id: str,
        *,
        ending: ApiError | None = None,
        cut: bool = False,
    ) -> None:
        self._send_status(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", request_id)
        self.send_header("transfer-encoding", "chunked")
        if ending is not None:
            self.send_header("connection", "close")
        self.end_headers()
        # One chunk per event, each sent at once, so the client reads them as they come.
        for event in events:
            self._write_chunk(encode_event(event))
        if cut:
            self._cut_connection()
            return
        if ending is not None:
            self._write_chunk(encode_event(error_event(ending)))
        self.wfile.write(b"0\r\n\r\n")

    def _send_status(self, status: int) -> None:
        try:
            reason = http.HTTPStatus(status).phrase
        except ValueError:
            reason = "Overloaded" if status == 529 else "Error"
        self.send_response(status, reason)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _cut_connection(self) -> None:
        """Close without finishing the body, as a dropped connection would."""
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._read_chunked_body()
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
            self.close_connection = True  # the rest of the stream cannot be framed
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked_body(self) -> bytes:
        pieces: list[bytes] = []
        while True:
            size_line = self.rfile.readline(_LONGEST_LINE).split(b";")[0].strip()
            try:
                size = int(size_line or b"0", 16)
            except ValueError:
                self.close_connection = True
                return b"".join(pieces)
            if size == 0:
                while self.rfile.readline(_LONGEST_LINE) not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields, which nothing here reads
                return b"".join(pieces)
            pieces.append(self.rfile.read(size))
            self.rfile.readline(_LONGEST_LINE)

    def _header_dict(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, header in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {header}" if key in headers else header
        return headers


def _before_message_stop(events: list[JsonObject], count: int) -> list[JsonObject]:
    """The first ``count`` events, never reaching ``message_stop``: an interrupted stream."""
    return events[: min(count, len(events) - 1)]
