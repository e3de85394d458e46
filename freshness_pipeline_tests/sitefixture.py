"""A loopback docs site for tests and benchmarks: mutable pages, ETags, sitemaps, faults.

    with SiteServer({"/docs/a": Page("<h1>A</h1>")}) as site:
        site.pages["/docs/b"] = Page("gone", status=410)
        site.redirects["/old"] = (301, "/docs/a")
        site.faults["/docs/a"] = [503, ("429", 1), "hang", "drip", "slow-headers", 200]  # one per request
        site.not_found = Page("<title>Oops</title>We lost it")  # unknown paths: a soft 404
        site.robots = "User-agent: *\\nDisallow: /private\\nCrawl-delay: 0.1"
        httpx.get(site.url("/docs/a"))
        site.requests  # [(method, path, {lowercased header: value}), ...]

Pages get an ETag (If-None-Match -> 304) and, when `Page.headers` has a Last-Modified,
If-Modified-Since equal to it -> 304. Every attribute may be changed while the server runs.
The order of answers for a path: fault (if one is scripted), redirect, `robots.txt`, a page,
the auto sitemap, 404.
"""

from __future__ import annotations

import gzip
import hashlib
import socket
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal
from urllib.parse import urljoin, urlsplit
from xml.sax.saxutils import escape

# 503 | "hang" | "drip" (a 200 whose body trickles a byte every `drip_s`) | "slow-headers" (a 200
# that sends one header line every `drip_s`, never ending its headers) | ("429", Retry-After)
Fault = int | str | tuple[int | str, float | str]


@dataclass
class Page:
    html: str | bytes
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers
    etag: str | None = "auto"  # "auto": a hash of the body; None: no ETag; else used as is
    content_type: str | None = "text/html; charset=utf-8"  # None: no Content-Type header
    lastmod: str | None = None  # the sitemap's <lastmod> for this page

    @property
    def body(self) -> bytes:
        return self.html.encode() if isinstance(self.html, str) else self.html


class SiteServer:
    """`ThreadingHTTPServer` on 127.0.0.1 (ephemeral port) serving `pages`; a context manager.

    etags: "auto" (hash of the body, If-None-Match answered with 304), "random" (a new
    ETag on every answer, so conditional requests never match), None (no ETags).
    sitemap: "plain" (`/sitemap.xml` lists the 200 HTML pages), "index" (`/sitemap.xml`
    is an index of `sitemap_children` gzipped child sitemaps `/sitemap-N.xml.gz`), None.
    hang_s: how long a "hang" fault stalls before answering (cut short on exit).
    drip_s: seconds between the bytes of a "drip" answer.
    delay_s: how long each page's answer waits before it leaves (a far server).
    not_found: what unknown paths answer (e.g. a 200 error page: a soft 404); None: a 404.
    """

    def __init__(
        self,
        pages: Mapping[str, Page] | None = None,
        *,
        robots: str | None = None,
        etags: Literal["auto", "random"] | None = "auto",
        sitemap: Literal["plain", "index"] | None = "plain",
        sitemap_children: int = 2,
        hang_s: float = 5.0,
        drip_s: float = 3.0,
        delay_s: float = 0.0,
    ) -> None:
        self.pages: dict[str, Page] = dict(pages or {})
        self.redirects: dict[str, tuple[int, str]] = {}  # path -> (status, target path or URL)
        self.faults: dict[str, list[Fault]] = {}
        self.robots = robots  # None: /robots.txt is a 404
        self.etags = etags
        self.sitemap = sitemap
        self.sitemap_children = sitemap_children
        self.hang_s = hang_s
        self.drip_s = drip_s
        self.delay_s = delay_s
        self.not_found: Page | None = None
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        # As each request arrived, how many were being answered (itself included); one
        # counts as answered from its arrival until its answer starts to leave.
        self.concurrent: list[int] = []
        self._answering = 0
        self.connections = 0  # TCP connections accepted (keep-alive reuses them)
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.site = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_port}"

    def url(self, path: str) -> str:
        return urljoin(self.base_url, path)

    def paths_requested(self, path: str) -> int:
        """How many requests reached `path` (query included when given)."""
        return sum(1 for _, p, _ in self.requests if p == path or urlsplit(p).path == path)

    def __enter__(self) -> SiteServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- answers -------------------------------------------------------------------

    def _next_fault(self, path: str) -> Fault | None:
        with self._lock:
            script = self.faults.get(path)
            return script.pop(0) if script else None

    def _etag(self, page: Page) -> str | None:
        if self.etags is None or page.etag is None:
            return None
        if page.etag != "auto":
            return page.etag
        if self.etags == "random":
            return f'"{uuid.uuid4().hex}"'
        return f'"{hashlib.sha1(page.body).hexdigest()[:16]}"'

    def _sitemap(self, path: str) -> bytes | None:
        listed = sorted(
            (p, pg)
            for p, pg in list(self.pages.items())  # a copy: tests edit pages meanwhile
            if pg.status == 200 and (pg.content_type or "text/html").startswith("text/html")
        )
        if self.sitemap == "plain" and path == "/sitemap.xml":
            return _urlset(self.base_url, listed)
        if self.sitemap != "index":
            return None
        n = max(1, self.sitemap_children)
        if path == "/sitemap.xml":
            locs = "".join(f"<sitemap><loc>{self.base_url}/sitemap-{i}.xml.gz</loc></sitemap>" for i in range(n))
            return f'{_XML_DECL}<sitemapindex xmlns="{_NS}">{locs}</sitemapindex>'.encode()
        for i in range(n):
            if path == f"/sitemap-{i}.xml.gz":
                return gzip.compress(_urlset(self.base_url, listed[i::n]))
        return None


_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"
_XML_DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'


def _urlset(base_url: str, pages: list[tuple[str, Page]]) -> bytes:
    entries = "".join(
        f"<url><loc>{escape(base_url + path)}</loc>"
        + (f"<lastmod>{escape(page.lastmod)}</lastmod>" if page.lastmod else "")
        + "</url>"
        for path, page in pages
    )
    return f'{_XML_DECL}<urlset xmlns="{_NS}">{entries}</urlset>'.encode()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive and "hang" threads must not hold up server_close
    site: SiteServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: a crawl reuses its connections
    server: _Server

    def setup(self) -> None:
        super().setup()
        with self.server.site._lock:
            self.server.site.connections += 1
        # Headers and body leave in two writes: without this, Nagle + delayed ACK cost ~40 ms.
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        site = self.server.site
        with site._lock:
            site._answering += 1
            site.concurrent.append(site._answering)
        self._counted = True
        try:
            self._answer(site)
        finally:
            self._answered()

    def _answered(self) -> None:
        if self._counted:
            self._counted = False
            with self.server.site._lock:
                self.server.site._answering -= 1

    def _answer(self, site: SiteServer) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}
        site.requests.append((self.command, self.path, headers))
        path = urlsplit(self.path).path
        key = self.path if self.path in site.pages else path
        try:
            fault = site._next_fault(key)
            if fault == "hang":
                site._closing.wait(site.hang_s)
            elif fault == "drip":
                return self._drip(site)
            elif fault == "slow-headers":
                return self._slow_headers(site)
            elif fault is not None and fault != 200:
                status, retry_after = fault if isinstance(fault, tuple) else (fault, None)
                extra = {} if retry_after is None else {"Retry-After": str(retry_after)}
                return self._send(int(status), b"fault", "text/plain", extra)
            if key in site.redirects:
                status, target = site.redirects[key]
                return self._send(status, b"", "text/plain", {"Location": target})
            if path == "/robots.txt":
                if site.robots is None:
                    return self._send(404, b"no robots", "text/plain")
                return self._send(200, site.robots.encode(), "text/plain")
            page = site.pages.get(key)
            if page is not None:
                return self._page(page, headers)
            sitemap = site._sitemap(path)
            if sitemap is not None:
                gz = path.endswith(".gz")
                return self._send(200, sitemap, "application/gzip" if gz else "application/xml")
            if site.not_found is not None:
                return self._page(site.not_found, headers)
            self._send(404, b"<h1>Not found</h1>", "text/html")
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
            self.close_connection = True

    def _drip(self, site: SiteServer) -> None:
        body = b"<html><body><p>" + b"slow " * 200 + b"</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        for i in range(len(body)):
            if site._closing.wait(site.drip_s):
                return
            self.wfile.write(body[i : i + 1])
            self.wfile.flush()

    def _slow_headers(self, site: SiteServer) -> None:
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        while not site._closing.wait(site.drip_s):
            self.wfile.write(b"X-Slow: still sending\r\n")
        self.close_connection = True

    def _page(self, page: Page, request_headers: dict[str, str]) -> None:
        if self.server.site.delay_s:
            self.server.site._closing.wait(self.server.site.delay_s)
        etag = self.server.site._etag(page)
        extra = dict(page.headers)
        if etag:
            extra["ETag"] = etag
        if page.status == 200:
            inm = request_headers.get("if-none-match")
            ims = request_headers.get("if-modified-since")
            if (etag and inm and (inm.strip() == "*" or etag in (t.strip() for t in inm.split(",")))) or (
                inm is None and ims and ims == page.headers.get("Last-Modified")
            ):
                return self._send(304, b"", None, extra)
        self._send(page.status, page.body, page.content_type, extra)

    def _send(self, status: int, body: bytes, content_type: str | None, headers: Mapping[str, str] = {}) -> None:
        self._answered()  # before a byte leaves: the client's next request comes after it
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        for name, value in headers.items():
            self.send_header(name, value)
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and status != 304:
            self.wfile.write(body)
