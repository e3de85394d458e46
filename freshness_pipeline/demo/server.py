"""A docs site served on loopback from markdown, for the demo, tests and benchmarks.

Pages are swapped in place (`site.publish(...)`) to play a site's history. It answers
conditional requests with real ETags and serves `/sitemap.xml` of the current pages.
"""

from __future__ import annotations

import hashlib
import socket
import threading
from collections.abc import Callable, Mapping
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from .render import dress, page_path, render, title_of

Noise = Callable[[str], Mapping[str, str | None]]  # path -> render(updated=..., build=...)


class DocsSite:
    """`with DocsSite() as site: site.publish(markdown_by_path); site.sitemap_url`."""

    def __init__(self, *, etags: bool = True) -> None:
        self.etags = etags
        self._pages: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self.requests = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"  # where __init__ binds it

    @property
    def sitemap_url(self) -> str:
        return f"{self.base_url}/sitemap.xml"

    def publish(self, docs: Mapping[str, str], *, noise: Noise | None = None) -> None:
        """Replace the site with `docs` ({"a/b.md": markdown}), rendered to HTML pages, or
        ({"/a/b/": html}) pages a site generator built, served with the same noise."""
        if all(rel.startswith("/") for rel in docs):
            built = {path: dress(page, **(noise(path) if noise else {})).encode() for path, page in docs.items()}
            with self._lock:
                self._pages = built
            return
        paths = {rel: page_path(rel) for rel in docs}
        nav = {paths[rel]: title_of(text, rel) for rel, text in sorted(docs.items())}
        pages = {
            paths[rel]: render(
                text, title=title_of(text, rel), nav=nav, **(noise(paths[rel]) if noise else {})
            ).encode()
            for rel, text in docs.items()
        }
        with self._lock:
            self._pages = pages

    def page(self, path: str) -> bytes | None:
        with self._lock:
            return self._pages.get(path)

    def paths(self) -> list[str]:
        with self._lock:
            return sorted(self._pages)

    def __enter__(self) -> DocsSite:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def load_built(folder: Path) -> dict[str, str]:
    """{"/a/b/": html} of a built site's `a/b/index.html` pages."""
    return {
        "/" + "".join(f"{part}/" for part in p.parent.relative_to(folder).parts): p.read_text()
        for p in sorted(folder.rglob("index.html"))
    }


def load_folder(folder: Path) -> dict[str, str]:
    """Every `*.md` below `folder`, keyed by its relative path."""
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*.md"))}


class LoopbackHandler(BaseHTTPRequestHandler):
    """Keep-alive, quiet, and fast on loopback: without TCP_NODELAY, headers and body
    leave in two writes and Nagle plus delayed ACK add ~40 ms to every answer."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args: Any) -> None:
        pass


def _handler(site: DocsSite) -> type[BaseHTTPRequestHandler]:
    class Handler(LoopbackHandler):
        def do_GET(self) -> None:
            site.requests += 1
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path == "/sitemap.xml":
                urls = "".join(f"<url><loc>{site.base_url}{p}</loc></url>" for p in site.paths())
                body = (
                    '<?xml version="1.0" encoding="UTF-8"?>'
                    f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
                ).encode()
                return self._send(200, body, "application/xml")
            if path == "/robots.txt":
                return self._send(200, f"User-agent: *\nAllow: /\nSitemap: {site.sitemap_url}\n".encode(), "text/plain")
            if not path.endswith("/"):
                path += "/"
            page = site.page(path)
            if page is None:
                return self._send(404, b"<html><body><h1>Not found</h1></body></html>", "text/html")
            etag = f'"{hashlib.sha1(page).hexdigest()[:16]}"'
            if site.etags and self.headers.get("If-None-Match") == etag:
                return self._send(304, b"", None, etag=etag)
            self._send(200, page, "text/html; charset=utf-8", etag=etag if site.etags else None)

        def _send(self, status: int, body: bytes, ctype: str | None, etag: str | None = None) -> None:
            self.send_response(status)
            if ctype:
                self.send_header("Content-Type", ctype)
            if etag:
                self.send_header("ETag", etag)
            self.send_header("Date", formatdate(usegmt=True))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

    return Handler
