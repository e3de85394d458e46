"""A loopback webhook receiver that can be down, failing, or fine."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Receiver:
    """Answers `fail_first` requests with 500, then 200. `accepted` holds (headers, body)
    of the requests answered 200, in arrival order; `seen` counts every request."""

    def __init__(self, port: int, *, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.seen = 0
        self.accepted: list[tuple[dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(body) for _, body in self.accepted]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.seen += 1
                    ok = receiver.seen > receiver.fail_first
                    if ok:
                        receiver.accepted.append((dict(self.headers), body))
                self.send_response(200 if ok else 500)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
