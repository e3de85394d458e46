"""The loopback HTTP server both stand-ins run on, with a queue of injected faults.

A fault is `(path_substring, action)`: the next request whose path contains the substring
is answered with `action` instead of normally. `action` is an HTTP status (answered with a
JSON error body), "hang" (no answer until `hang_s` passes, so the client times out), or a
stand-in's own action (e.g. "partial"). Faults are used once each, in queue order.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

Fault = tuple[str, int | str]


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw: bytes

    def json(self) -> Any:
        return json.loads(self.raw or b"{}")


@dataclass
class Reply:
    status: int
    body: Any = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        # Without it, Nagle + delayed ACK add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _serve(self) -> None:
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        request = Request(
            method=self.command,
            path=parts.path,
            query=parse_qs(parts.query),
            headers={k.lower(): v for k, v in self.headers.items()},
            raw=self.rfile.read(length),
        )
        reply = self.server.standin._respond(request)
        if reply is None:  # "hang": drop the connection without an answer
            self.close_connection = True
            return
        payload = json.dumps(reply.body).encode()
        self.send_response(reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_DELETE = do_PATCH = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    standin: LoopbackStandIn


class LoopbackStandIn:
    """Base of the stand-ins: a threaded server on 127.0.0.1 at an ephemeral port."""

    def __init__(self, *, hang_s: float = 5.0) -> None:
        self.hang_s = hang_s
        self.faults: deque[Fault] = deque()
        self.requests: list[Request] = []  # every request seen, faulted ones included
        self.lock = threading.RLock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("stand-in not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.standin = self
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _respond(self, request: Request) -> Reply | None:
        with self.lock:
            self.requests.append(request)
            action = self._take_fault(request.path)
        if action == "hang":
            self._stopping.wait(self.hang_s)
            return None
        if isinstance(action, int):
            return self.fault_reply(action)
        try:
            return self.handle(request, action)
        except ApiFailure as exc:
            return exc.reply

    def _take_fault(self, path: str) -> int | str | None:
        for fault in self.faults:
            if fault[0] in path:
                self.faults.remove(fault)
                return fault[1]
        return None

    def fault_reply(self, status: int) -> Reply:
        """The answer to an injected status; stand-ins shape it like their service."""
        return Reply(status, {"message": f"injected fault {status}"})

    def handle(self, request: Request, action: str | None) -> Reply:
        raise NotImplementedError


class ApiFailure(Exception):
    """Raised inside a handler to answer with an error reply."""

    def __init__(self, reply: Reply) -> None:
        super().__init__(reply.status)
        self.reply = reply
