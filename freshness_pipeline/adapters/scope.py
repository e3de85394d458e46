"""What one source may request, and for how long: its hosts, safe addresses, and a
wall-clock deadline per page that ends even a read trickling one byte at a time.

`Scope.on_request` runs for every request the client sends (redirect hops and robots.txt
included) and installs httpcore's `trace` extension, which sees each new connection: its
peer address is checked (after DNS, so a name that resolves to a private address is caught
too). `DeadlineBackend` makes the sockets: every wait on them ends at the deadline of the
request the thread is making.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

from freshness_pipeline.core.urls import site_host, unsafe_address

from .bodies import Unusable

__all__ = ["Deadline", "DeadlineBackend", "Refused", "Scope"]


class Refused(Unusable):
    """A request this source may not make; the message says why and which setting allows it."""


class Deadline:
    """At most `seconds` of wall clock for one page (or one robots.txt or sitemap read). Every
    socket wait of the requests made under it (`Scope.deadline`) ends when it passes: the
    connect, the TLS handshake, each read of the headers and the body, on a new connection and
    on a reused keep-alive one alike (`DeadlineBackend`). `why` says which bound it is, and
    its figure ("fetch.page_deadline_s (10s)")."""

    def __init__(self, seconds: float, why: str) -> None:
        self.seconds, self.why = seconds, why
        self._at = time.monotonic() + seconds

    def remaining(self) -> float:
        return self._at - time.monotonic()

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0


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
        previous = self.current()
        self._local.deadline = d
        return previous

    def current(self) -> Deadline | None:
        """The deadline of the request this thread is making, if any."""
        found: Deadline | None = getattr(self._local, "deadline", None)
        return found

    def on_request(self, request: httpx.Request) -> None:
        """httpx request hook: refuse off-scope URLs, check each new connection's address."""
        if why := self.refuse(str(request.url)):
            raise Refused(why)
        request.extensions["trace"] = self._trace

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete" or self.allow_private:
            return
        stream = info["return_value"]
        address = str(stream.get_extra_info("server_addr")[0])
        if kind := unsafe_address(address):
            sock = stream.get_extra_info("socket")
            _shutdown(sock)
            sock.close()
            raise Refused(_private(address, kind))


class DeadlineBackend(httpcore.SyncBackend):
    """httpcore's sockets, each wait cut at the deadline of the thread's request: a socket
    timeout is per read, so a server sending a header line or a body byte a second would
    otherwise hold a page for as long as it keeps sending. Reads are where a reused
    keep-alive connection waits, so it is bounded as a new one is (no connect event tells
    which socket a reused connection has before its response headers arrive)."""

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _within(self._scope.current(), timeout, httpcore.ConnectTimeout)
        stream = super().connect_tcp(host, port, timeout, local_address, socket_options)
        return _DeadlineStream(stream, self._scope)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream, scope: Scope) -> None:
        self._stream, self._scope = stream, scope

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _within(self._scope.current(), timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _within(self._scope.current(), timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        timeout = _within(self._scope.current(), timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout), self._scope)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


def _within(deadline: Deadline | None, timeout: float | None, late: type[httpcore.TimeoutException]) -> float | None:
    """`timeout` cut to what is left of `deadline`; `late` raised when nothing is."""
    if deadline is None:
        return timeout
    left = deadline.remaining()
    if left <= 0:
        raise late(f"over {deadline.why}")
    return left if timeout is None else min(timeout, left)
