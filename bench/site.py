"""A large generated docs site and its loopback server, run in a process of its own so
its CPU does not count against the pipeline.

Deterministic: page `i` of version `v` is the same in every process, so the parent can
compute the truth (which sections a churn changed) without asking the server.
"""

from __future__ import annotations

import hashlib
import html
import random
import time
import uuid
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from freshness_pipeline.demo.server import LoopbackHandler

SECTIONS_PER_PAGE = 8
WORDS_PER_PARAGRAPH = 60
CHURN_EVERY = 100  # version 1 edits every 100th page: 1% of the site

_WORDS = (
    "cache client request response header proxy timeout retry stream upload folder token "
    "session cookie server route middleware config setting default value limit queue batch "
    "index vector section page backup restore mirror sync device account share link policy "
    "schema table column migration cluster replica shard region bucket object version tag "
    "release branch commit build deploy pipeline job worker task schedule trigger event hook "
    "metric alert dashboard log trace span sample rate quota budget tenant project team role "
    "permission secret key certificate domain endpoint gateway socket channel buffer frame "
    "encoder decoder parser format field record payload message topic partition offset lag"
).split()


@dataclass(frozen=True, slots=True)
class SiteSpec:
    pages: int
    version: int = 0  # 1: every CHURN_EVERY-th page has one or two sections rewritten
    etags: bool = True
    noise: bool = False  # a "Last updated <now>" line and a build stamp on every answer
    delay_s: float = 0.0  # each page's answer waits this long first: a far server


def path_of(i: int) -> str:
    return f"/docs/area{i % 50}/page{i}"


def sections(i: int, version: int) -> list[tuple[str, str]]:
    """(heading, paragraph) of page `i` at `version`."""
    rng = random.Random(i)
    out = []
    for j in range(SECTIONS_PER_PAGE):
        heading = f"{rng.choice(_WORDS).title()} {rng.choice(_WORDS)} {j}"
        words = [rng.choice(_WORDS) for _ in range(WORDS_PER_PARAGRAPH)]
        out.append((heading, " ".join(words).capitalize() + "."))
    if version and i % CHURN_EVERY == 0:
        edit = random.Random(f"churn-{i}-{version}")
        for j in range(1 + (i // CHURN_EVERY) % 2):  # one or two sections per edited page
            words = [edit.choice(_WORDS) for _ in range(WORDS_PER_PARAGRAPH)]
            out[j] = (out[j][0], " ".join(words).capitalize() + ".")
    return out


def changed_sections(pages: int, old: int, new: int) -> int:
    """The truth for a churn run: sections whose text differs between two versions."""
    return sum(a != b for i in range(pages) for a, b in zip(sections(i, old), sections(i, new), strict=True))


def render(i: int, pages: int, version: int, *, updated: str = "", build: str = "") -> str:
    title = f"Page {i}"
    body = "\n".join(f"<h2>{html.escape(h)}</h2>\n<p>{html.escape(t)}</p>" for h, t in sections(i, version))
    nav = "".join(f'<li><a href="{path_of(k % pages)}">Page {k % pages}</a></li>' for k in range(i - 5, i + 6))
    stamp = f"<p>Last updated: {updated}</p>" if updated else ""
    built = f"<p>Built {build}</p>" if build else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><header><a href="/">Docs home</a></header>
<nav><ul>{nav}</ul></nav>
<main><article>
<h1>{title}</h1>
{body}
{stamp}
</article></main>
<footer>{built}<p>Documentation licensed under CC BY 4.0.</p></footer>
</body></html>"""


def serve(spec: SiteSpec, port: int, ready: Any) -> None:
    """Serve `spec` on 127.0.0.1:`port` until killed; `ready.set()` once listening."""
    pages = {path_of(i): i for i in range(spec.pages)}
    static = {} if spec.noise else {path_of(i): render(i, spec.pages, spec.version).encode() for i in range(spec.pages)}
    etags = {p: f'"{hashlib.sha1(b).hexdigest()[:16]}"' for p, b in static.items()} if spec.etags else {}
    sitemap = _sitemap(port, spec.pages)

    class Handler(LoopbackHandler):
        def do_GET(self) -> None:
            if self.path == "/sitemap.xml":
                return self._send(200, sitemap, "application/xml")
            if self.path == "/robots.txt":
                return self._send(200, b"User-agent: *\nAllow: /\n", "text/plain")
            i = pages.get(self.path)
            if i is None:
                return self._send(404, b"<h1>Not found</h1>", "text/html")
            if spec.delay_s:
                time.sleep(spec.delay_s)
            if spec.noise:
                now = time.strftime("%B %d, %Y %H:%M:%S")
                body = render(i, spec.pages, spec.version, updated=now, build=uuid.uuid4().hex[:12]).encode()
            else:
                body = static[self.path]
            etag = etags.get(self.path)
            if etag and self.headers.get("If-None-Match") == etag:
                return self._send(304, b"", None, etag)
            self._send(200, body, "text/html; charset=utf-8", etag)

        def _send(self, status: int, body: bytes, ctype: str | None, etag: str | None = None) -> None:
            self.send_response(status)
            if ctype:
                self.send_header("Content-Type", ctype)
            if etag:
                self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 128

    with Server(("127.0.0.1", port), Handler) as httpd:
        ready.set()
        httpd.serve_forever()


def _sitemap(port: int, pages: int) -> bytes:
    urls = "".join(f"<url><loc>http://127.0.0.1:{port}{path_of(i)}</loc></url>" for i in range(pages))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
    ).encode()
