"""What one source may request, and for how long: its hosts, safe addresses, and a
wall-clock deadline per page that ends even a read trickling one byte at a time.

Both hook into httpx: `Scope.on_request` runs for every request the client sends (redirect
hops and robots.txt included) and installs httpcore's `trace` extension, which sees each new
connection: its peer address is checked (after DNS, so a name that resolves to a private
address is caught too), and its socket is handed to the page's `Deadline`.
"""

from __future__ import annotations

import heapq
import socket
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpx

from freshness_pipeline.core.urls import site_host, unsafe_address

from .bodies import Unusable

__all__ = ["Deadline", "Refused", "Scope"]


class Refused(Unusable):
    """A request this source may not make; the message says why and which setting allows it."""


class Deadline:
    """At most `seconds` of wall clock for one page. When it passes, the sockets of the
    page's connections are shut down, which ends a blocked read at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.expired = False
        self.closed = False
        _WATCH.add(self)

    def remaining(self) -> float:
        return self._at - time.monotonic()

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            _shutdown(sock)

    def watch_response(self, resp: httpx.Response) -> None:
        """A reused connection was not seen connecting: take its socket from the response."""
        stream = resp.extensions.get("network_stream")
        self.watch(stream.get_extra_info("socket") if stream is not None else None)

    def fire(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._sockets.clear()


class _Watch:
    """One thread that fires every page's deadline when it passes. (A `threading.Timer` per
    page started an OS thread per page, 10,000 in a quiet crawl of 10,000 pages; `sched`
    cannot be woken when an earlier deadline is added while it sleeps.) A closed deadline
    stays queued until its time, then does nothing."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Deadline]] = []
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._seq = 0

    def add(self, d: Deadline) -> None:
        with self._wake:
            self._seq += 1
            heapq.heappush(self._due, (d._at, self._seq, d))
            if self._thread is None or not self._thread.is_alive():  # none yet, or forked
                self._thread = threading.Thread(target=self._run, name="page-deadlines", daemon=True)
                self._thread.start()
            if self._due[0][2] is d:
                self._wake.notify()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._due or (wait := self._due[0][0] - time.monotonic()) > 0:
                    self._wake.wait(None if not self._due else wait)
                _, _, d = heapq.heappop(self._due)
            d.fire()  # outside the lock: a shutdown may block briefly


_WATCH = _Watch()


def _literal_kind(host: str) -> str | None:
    """`unsafe_address` of a host written as an IP address; None for a name."""
    try:
        return unsafe_address(host.strip("[]"))
    except ValueError:
        return None


def _private(address: str, kind: str) -> str:
    return f"refused: {address} is a {kind} address; allow it with fetch.allow_private_addresses: true"


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


ANY_PORT = 0  # a bare host name in `fetch.allowed_hosts`: every port of it


def _port(url_or_host: str) -> int | None:
    """The port a URL (or a `host:port`) names; None for a web default (80, 443: a site
    moving from http to https stays in scope) or none written. -1 when it does not parse."""
    text = url_or_host.strip()
    try:
        port = urlsplit(text if "//" in text else f"//{text}").port
    except ValueError:
        return -1
    return None if port in (None, 80, 443) else port


def _allowed_port(entry: str) -> int | None:
    """What an entry of the allowed hosts lets through: a URL or `host:port` that port (or
    the web defaults), a bare host name any port (the operator named a machine)."""
    text = entry.strip()
    if "//" in text:
        return _port(text)
    try:
        written = urlsplit(f"//{text}").port
    except ValueError:
        return -1
    return ANY_PORT if written is None else _port(text)


def _named(host: str, port: int | None) -> str:
    return host if port in (None, ANY_PORT) else f"{host}:{port}"


class Scope:
    """The hosts (and ports) a source may fetch and whether private addresses are allowed.
    The default hosts are the sitemap's and start URLs': another port of those machines (a
    sitemap entry pointing at another service) is out of scope."""

    def __init__(self, hosts: Iterable[str], *, allow_private: bool) -> None:
        self.hosts = frozenset((site_host(h), _allowed_port(h)) for h in hosts if site_host(h))
        self.allow_private = allow_private
        self._local = threading.local()  # the Deadline of the page this thread is fetching

    def refuse(self, url: str) -> str | None:
        """Why `url` may not be requested, or None."""
        host, port = site_host(url), _port(url)
        if (host, port) not in self.hosts and (host, ANY_PORT) not in self.hosts:
            allowed = ", ".join(sorted(_named(h, p) for h, p in self.hosts))
            named = _named(host, port) if host else "(none)"
            return f"refused: host {named} is not in the source's fetch.allowed_hosts ({allowed})"
        if not self.allow_private and (kind := _literal_kind(host)):
            return _private(host, kind)
        return None

    def deadline(self, d: Deadline | None) -> Deadline | None:
        """Make `d` the deadline of the requests this thread sends from now on; returns the
        one it replaces (robots.txt is downloaded in the middle of a page's fetch)."""
        previous: Deadline | None = getattr(self._local, "deadline", None)
        self._local.deadline = d
        return previous

    def on_request(self, request: httpx.Request) -> None:
        """httpx request hook: refuse off-scope URLs, watch each new connection."""
        if why := self.refuse(str(request.url)):
            raise Refused(why)
        request.extensions["trace"] = self._trace

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        stream = info["return_value"]
        sock = stream.get_extra_info("socket")
        if not self.allow_private:
            address = str(stream.get_extra_info("server_addr")[0])
            if kind := unsafe_address(address):
                _shutdown(sock)
                sock.close()
                raise Refused(_private(address, kind))
        deadline: Deadline | None = getattr(self._local, "deadline", None)
        if deadline is not None:
            deadline.watch(sock)
