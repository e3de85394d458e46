"""An httpx transport over an httpcore pool made with our network backend, and the proxy
mounts httpx's `Client` would make from the environment.

httpx's `HTTPTransport` takes no network backend, and a `Client` given a transport reads no
proxy from the environment; so both are built here, as httpx builds them, through public
APIs only: `httpx.BaseTransport`, `httpcore.ConnectionPool`/`HTTPProxy`/`SOCKSProxy`, and
`Client(mounts=...)`.
"""

from __future__ import annotations

import ipaddress
import ssl
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from urllib.request import getproxies

import httpcore
import httpx

__all__ = ["BackendTransport", "environment_proxies", "transports"]


class BackendTransport(httpx.BaseTransport):
    """`httpx.HTTPTransport`'s work, with the sockets made by `backend`: direct, or through
    `proxy` (http, https or socks5). Through a proxy the peer is the proxy, so no `trace`
    extension sees the target's address (the proxy resolves it)."""

    def __init__(
        self,
        backend: httpcore.NetworkBackend,
        *,
        limits: httpx.Limits,
        ssl_context: ssl.SSLContext,
        proxy: httpx.Proxy | None = None,
    ) -> None:
        most, idle, expiry = limits.max_connections, limits.max_keepalive_connections, limits.keepalive_expiry
        self._proxied = proxy is not None
        self._connections: httpcore.ConnectionPool  # HTTPProxy and SOCKSProxy are pools too
        if proxy is None:
            self._connections = httpcore.ConnectionPool(
                ssl_context=ssl_context,
                max_connections=most,
                max_keepalive_connections=idle,
                keepalive_expiry=expiry,
                network_backend=backend,
            )
            return
        url = httpcore.URL(
            scheme=proxy.url.raw_scheme, host=proxy.url.raw_host, port=proxy.url.port, target=proxy.url.raw_path
        )
        if proxy.url.scheme in ("http", "https"):
            self._connections = httpcore.HTTPProxy(
                proxy_url=url,
                proxy_auth=proxy.raw_auth,
                proxy_headers=proxy.headers.raw,
                ssl_context=ssl_context,
                proxy_ssl_context=proxy.ssl_context,
                max_connections=most,
                max_keepalive_connections=idle,
                keepalive_expiry=expiry,
                network_backend=backend,
            )
        elif proxy.url.scheme in ("socks5", "socks5h"):  # needs socksio, as httpx does
            self._connections = httpcore.SOCKSProxy(
                proxy_url=url,
                proxy_auth=proxy.raw_auth,
                ssl_context=ssl_context,
                max_connections=most,
                max_keepalive_connections=idle,
                keepalive_expiry=expiry,
                network_backend=backend,
            )
        else:
            raise ValueError(f"proxy {proxy.url}: the scheme must be http, https, socks5 or socks5h")

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        extensions = request.extensions
        if self._proxied:
            extensions = {k: v for k, v in extensions.items() if k != "trace"}
        req = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=extensions,
        )
        with _as_httpx():
            resp = self._connections.handle_request(req)
        assert isinstance(resp.stream, Iterable)
        return httpx.Response(
            status_code=resp.status, headers=resp.headers, stream=_Body(resp.stream), extensions=resp.extensions
        )

    def close(self) -> None:
        self._connections.close()


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self._stream

    def close(self) -> None:
        if close := getattr(self._stream, "close", None):
            close()


@contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's errors as httpx's classes of the same name (httpx exports one for each)."""
    try:
        yield
    except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ProtocolError, httpcore.ProxyError) as exc:
        raise _httpx_class(type(exc))(str(exc)) from exc
    except httpcore.UnsupportedProtocol as exc:
        raise httpx.UnsupportedProtocol(str(exc)) from exc


def _httpx_class(cls: type[Exception]) -> type[httpx.TransportError]:
    for base in cls.__mro__:
        found = getattr(httpx, base.__name__, None)
        if isinstance(found, type) and issubclass(found, httpx.TransportError):
            return found
    return httpx.TransportError


def environment_proxies() -> dict[str, str | None]:
    """URL patterns to proxy URLs from HTTP(S)_PROXY, ALL_PROXY and NO_PROXY (None: no proxy),
    read as httpx's `Client(trust_env=True)` reads them."""
    found = getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if url := found.get(scheme):
            mounts[f"{scheme}://"] = url if "://" in url else f"http://{url}"
    for host in (h.strip() for h in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if host:
            mounts[_bypass(host)] = None
    return mounts


def _bypass(host: str) -> str:
    """The URL pattern of one NO_PROXY entry (curl's reading, as httpx's)."""
    if "://" in host:
        return host
    try:
        address = ipaddress.ip_address(host.split("/")[0])
    except ValueError:
        return f"all://{host}" if host.lower() == "localhost" else f"all://*{host}"
    return f"all://[{host}]" if address.version == 6 else f"all://{host}"


def transports(
    backend: httpcore.NetworkBackend,
    limits: httpx.Limits,
    *,
    trust_env: bool = True,
    proxy: str | None = None,
) -> tuple[BackendTransport, Mapping[str, BackendTransport | None]]:
    """The transport and mounts for `httpx.Client(transport=..., mounts=...)`: every request
    through `proxy` when given, else through the environment's proxies when `trust_env`.
    SSL_CERT_FILE/SSL_CERT_DIR are read when `trust_env`, as httpx does."""
    tls = httpx.create_ssl_context(trust_env=trust_env)  # one for all pools: each load costs ~20 ms

    def make(url: str | None) -> BackendTransport:
        return BackendTransport(backend, limits=limits, ssl_context=tls, proxy=httpx.Proxy(url) if url else None)

    if proxy is not None:
        return make(proxy), {}
    found = environment_proxies() if trust_env else {}
    return make(None), {pattern: None if url is None else make(url) for pattern, url in found.items()}
