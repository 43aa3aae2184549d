"""``ScriptedMessagesServer``: the Anthropic Messages API on loopback, answering from a script.

It owns the listening side: binding 127.0.0.1 on a port of its own, a thread per
connection, and a clean stop that leaves no thread or socket behind. It never listens
beyond loopback and never reaches a real model.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import TCPServer
from types import TracebackType
from typing import Self

from sandbx.testing._exchange import Exchange, RecordedRequest
from sandbx.testing._handler import MessagesHandler
from sandbx.testing._script import ScriptEntry, with_tool_use_ids
from sandbx.testing._script_json import parse_entry

LOOPBACK = "127.0.0.1"


class ScriptedMessagesServer:
    """Serves ``POST /v1/messages`` on 127.0.0.1, one script entry per valid request.

    Use it as a context manager; ``url`` is what a client puts in ``ANTHROPIC_BASE_URL``.
    ``on_request`` sees each request as it is recorded, in arrival order.
    """

    def __init__(
        self,
        script: Iterable[ScriptEntry | Mapping[str, object]],
        *,
        port: int = 0,
        on_request: Callable[[RecordedRequest], None] | None = None,
    ) -> None:
        entries = (
            parse_entry(entry, index) if isinstance(entry, Mapping) else entry
            for index, entry in enumerate(script)
        )
        self._exchange = Exchange(with_tool_use_ids(entries), on_request)
        self._requested_port = port
        self._bound_port: int | None = None
        self._server: _LoopbackServer | None = None
        self._serving: threading.Thread | None = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("the scripted server is already serving")
        handler = functools.partial(MessagesHandler, exchange=self._exchange)
        self._server = _LoopbackServer(self._requested_port, handler)
        self._bound_port = self._server.server_address[1]
        # A short poll keeps close() quick: shutdown() waits for the loop to notice.
        self._serving = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"scripted-messages:{self.port}",
        )
        self._serving.start()

    def close(self) -> None:
        """Stop accepting, cut any connection still open, and wait for every handler."""
        server, serving = self._server, self._serving
        if server is None or serving is None:
            return
        self._server = self._serving = None
        server.shutdown()
        server.cut_open_connections()
        server.server_close()
        serving.join()

    @property
    def port(self) -> int:
        """The port it listens on, or listened on once closed."""
        if self._bound_port is None:
            raise RuntimeError("the scripted server has not started")
        return self._bound_port

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def script(self) -> tuple[ScriptEntry, ...]:
        """The script as served, every tool_use block with its id."""
        return self._exchange.script

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        return self._exchange.requests

    @property
    def remaining(self) -> int:
        """How many script entries no request has consumed yet."""
        return self._exchange.remaining


class _LoopbackServer(ThreadingHTTPServer):
    # Handler threads are joined by server_close(), after cut_open_connections() has
    # woken any that wait on a client, so nothing outlives the server.
    daemon_threads = False
    block_on_close = True

    def __init__(self, port: int, handler: Callable[..., BaseHTTPRequestHandler]) -> None:
        self._open_connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__((LOOPBACK, port), handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks socket.getfqdn(), a reverse lookup that can stall
        # on a host without DNS; loopback needs no name.
        TCPServer.server_bind(self)
        self.server_name = LOOPBACK
        self.server_port = self.server_address[1]

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: object
    ) -> None:
        if isinstance(request, socket.socket):
            with self._connections_lock:
                self._open_connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: socket.socket | tuple[bytes, socket.socket]) -> None:
        if isinstance(request, socket.socket):
            with self._connections_lock:
                self._open_connections.discard(request)
        super().shutdown_request(request)

    def cut_open_connections(self) -> None:
        with self._connections_lock:
            for connection in self._open_connections:
                with contextlib.suppress(OSError):  # the client closed it first
                    connection.shutdown(socket.SHUT_RDWR)

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: object
    ) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # the client hung up mid-answer, as clients under test may
        super().handle_error(request, client_address)
