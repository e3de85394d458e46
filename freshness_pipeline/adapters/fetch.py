"""The fetch layer: discovery (sitemaps, robots.txt, links) and polite, concurrent fetching.

An imperative shell over httpx: what each HTTP answer means for the index is decided by
`core.status.classify`. Fetching never raises for one page: every target yields one
`FetchResult`, and a broken page is an ERROR whose reason names the problem.

    with Fetcher(source) as fetcher:
        found = fetcher.discover()
        for result in fetcher.fetch([Target(normalize_url(u), u) for u in found.urls]):
            ...
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from email.utils import parsedate_to_datetime
from html import unescape
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.robotparser import RobotFileParser

import httpx
from lxml import etree
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    retry_if_result,
    stop_after_attempt,
    wait_exponential,
)

from freshness_pipeline.config import Source
from freshness_pipeline.core.models import FetchResult, Outcome
from freshness_pipeline.core.status import classify
from freshness_pipeline.core.urls import normalize_url

__all__ = ["Discovery", "DiscoveryError", "Fetcher", "Target"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"
_MAX_HOSTS = 4  # hosts fetched in parallel by one `fetch` call (a source is usually one)
_DRAIN_BYTES = 64 * 1024  # small error/redirect bodies are read so the connection is reused
_MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemap protocol's limit, uncompressed
_MAX_SITEMAP_DEPTH = 4
_XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True)

# A regex, not an HTML parser: hrefs are all link discovery needs, and the engine parses
# the page properly later anyway.
_HREF = re.compile(r"""<a\s[^>]*?\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
_BASE_HREF = re.compile(r"""<base\s[^>]*?\bhref\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_CRAWL_DELAY = re.compile(r"^(\s*crawl-delay\s*:\s*)(\d+(?:\.\d*)?|\.\d+)", re.IGNORECASE | re.MULTILINE)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)


class DiscoveryError(RuntimeError):
    """A sitemap could not be read: discovery is incomplete, so nothing may be declared gone."""


@dataclass(frozen=True, slots=True)
class Target:
    url: str  # the normalized identity
    fetch_url: str  # the URL to request
    etag: str | None = None
    last_modified: str | None = None
    body_sha256: str | None = None


@dataclass(slots=True)
class Discovery:
    urls: list[str] = field(default_factory=list)  # raw page URLs, one per normalized identity
    # normalized URL -> the sitemap's <lastmod>: only a hint, sitemaps are often wrong
    lastmod: dict[str, str] = field(default_factory=dict)


class _Unusable(Exception):
    """robots.txt or a sitemap could not be downloaded; the message says why."""


class _Transient(_Unusable):
    """A 5xx or 429 answer, worth retrying."""


@dataclass(frozen=True, slots=True)
class _Attempt:
    result: FetchResult
    retry: bool = False
    retry_after: float | None = None  # seconds, from the server's Retry-After


@dataclass(frozen=True, slots=True)
class _Robots:
    parser: RobotFileParser | None = None  # None: no robots.txt, everything allowed
    unreachable: str | None = None  # RFC 9309: an unreachable robots.txt disallows everything

    def block(self, url: str, agent: str) -> str | None:
        if self.unreachable:
            return self.unreachable
        if self.parser is not None and not self.parser.can_fetch(agent, url):
            return "disallowed by robots.txt"
        return None

    def interval(self, agent: str) -> float:
        """Minimum seconds between request starts (Crawl-delay, or Request-rate)."""
        if self.parser is None:
            return 0.0
        delay = float(self.parser.crawl_delay(agent) or 0) / 1000  # see _delay_in_ms
        rate = self.parser.request_rate(agent)
        return max(delay, rate.seconds / rate.requests if rate and rate.requests else 0.0)


class _HostGate:
    """At most `concurrency` requests in flight to one host, their starts `interval` s apart."""

    def __init__(self, concurrency: int, interval: float) -> None:
        self._slots = threading.Semaphore(max(1, concurrency))
        self._interval = interval
        self._lock = threading.Lock()
        self._next_start = 0.0

    @contextmanager
    def slot(self) -> Iterator[None]:
        with self._slots:
            if self._interval > 0:
                with self._lock:
                    now = time.monotonic()
                    start = max(now, self._next_start)
                    self._next_start = start + self._interval
                time.sleep(start - now)
            yield


class Fetcher(AbstractContextManager["Fetcher"]):
    """Discovers and fetches the pages of one source; owns one `httpx.Client`."""

    def __init__(self, source: Source, *, transport: httpx.BaseTransport | None = None) -> None:
        self._source = source
        self._policy = policy = source.fetch
        self._agent = policy.user_agent.format(contact=policy.contact)
        self._want_links = bool(source.start_urls)
        pool = policy.concurrency * _MAX_HOSTS
        self._client = httpx.Client(
            transport=transport,
            headers={"User-Agent": self._agent, "Accept": _ACCEPT},
            timeout=policy.timeout_s,
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
            max_redirects=policy.max_redirects,
        )
        self._lock = threading.Lock()
        self._robots: dict[str, _Robots] = {}
        self._gates: dict[str, _HostGate] = {}

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def normalize(self, url: str) -> str:
        p = self._policy
        return normalize_url(url, keep_params=p.keep_query_params, drop_query=p.drop_query)

    # -- discovery -----------------------------------------------------------------

    def discover(self) -> Discovery:
        """Page URLs from the sitemap (or robots.txt `Sitemap:` lines) and link discovery.

        Raises `DiscoveryError` when a sitemap cannot be read: a partial list would make
        pages look gone.
        """
        found = Discovery()
        seen: set[str] = set()

        def add(raw: str, lastmod: str | None = None) -> None:
            url = self.normalize(raw)
            if lastmod:
                found.lastmod.setdefault(url, lastmod)
            if url not in seen:
                seen.add(url)
                found.urls.append(raw)

        sitemaps = [self._source.sitemap] if self._source.sitemap else self._robots_sitemaps()
        visited: set[str] = set()
        for sitemap in sitemaps:
            self._read_sitemap(sitemap, add, visited, depth=0)
        if self._source.start_urls:
            for raw in self._crawl_links():
                add(raw)
        return found

    def _robots_sitemaps(self) -> list[str]:
        origins = dict.fromkeys(_origin(u) for u in self._source.start_urls)
        return [
            sitemap
            for origin in origins
            if (parser := self._robots_for(origin).parser) is not None
            for sitemap in parser.site_maps() or ()
        ]

    def _read_sitemap(self, url: str, add: Callable[[str, str | None], None], visited: set[str], depth: int) -> None:
        if url in visited or depth > _MAX_SITEMAP_DEPTH:
            return
        visited.add(url)
        try:
            status, body = self._download(url)
            if status != 200:
                raise _Unusable(f"HTTP {status}")
            if body[:2] == b"\x1f\x8b":  # .xml.gz served as a file, not as Content-Encoding
                body = _gunzip(body, _MAX_SITEMAP_BYTES)
            root = etree.fromstring(body, parser=_XML_PARSER)
        except (httpx.HTTPError, _Unusable, zlib.error) as exc:
            raise DiscoveryError(f"sitemap {url}: {_describe(exc)}") from exc
        except etree.XMLSyntaxError as exc:
            raise DiscoveryError(f"sitemap {url}: not valid XML ({exc})") from exc
        kind = etree.QName(root).localname
        if kind == "sitemapindex":
            for loc in root.xpath("./*[local-name()='sitemap']/*[local-name()='loc']/text()"):
                self._read_sitemap(urljoin(url, loc.strip()), add, visited, depth + 1)
        elif kind == "urlset":
            for entry in root.xpath("./*[local-name()='url']"):
                loc = entry.xpath("string(./*[local-name()='loc'])").strip()
                if loc:
                    add(
                        urljoin(url, loc),
                        entry.xpath("string(./*[local-name()='lastmod'])").strip() or None,
                    )
        else:
            raise DiscoveryError(f"sitemap {url}: root <{kind}> is neither <urlset> nor <sitemapindex>")

    def _crawl_links(self) -> list[str]:
        """Breadth-first link discovery from the start URLs, within scope, obeying robots."""
        d = self._source.discovery
        include = [re.compile(r) for r in d.include]
        exclude = [re.compile(r) for r in d.exclude]
        prefixes = [d.scope_prefix] if d.scope_prefix else [urljoin(u, ".") for u in self._source.start_urls]
        scopes = [self._scope(p) for p in prefixes]

        def wanted(url: str) -> bool:
            return (
                any(url.startswith(s) or url + "/" == s for s in scopes)
                and (not include or any(r.search(url) for r in include))
                and not any(r.search(url) for r in exclude)
            )

        found: dict[str, str] = {}  # normalized -> raw, in discovery order
        frontier: list[Target] = []
        for raw in self._source.start_urls:
            url = self.normalize(raw)
            if url not in found:
                found[url] = raw
                frontier.append(Target(url, raw))
        for _ in range(d.max_depth):  # start URLs are depth 0; pages at max_depth are not expanded
            if not frontier or len(found) >= d.max_pages:
                break
            results = {r.url: r for r in self.fetch(frontier)}
            current, frontier = frontier, []
            for link in (link for t in current for link in results[t.url].links):
                url = self.normalize(link)
                if url not in found and wanted(url) and not self._blocked(link):
                    found[url] = link
                    frontier.append(Target(url, link))
                    if len(found) >= d.max_pages:
                        break
        return list(found.values())

    def _scope(self, prefix: str) -> str:
        """The normalized prefix; a directory keeps its final "/", which normalizing drops."""
        scope = self.normalize(prefix)
        return scope.rstrip("/") + "/" if prefix.endswith("/") else scope

    # -- fetching ------------------------------------------------------------------

    def fetch(self, targets: Sequence[Target]) -> Iterator[FetchResult]:
        """One result per target, in completion order."""
        if not targets:
            return
        hosts = len({_origin(t.fetch_url) for t in targets})
        pool = ThreadPoolExecutor(self._policy.concurrency * min(hosts, _MAX_HOSTS), thread_name_prefix="fetch")
        try:
            for done in as_completed([pool.submit(self._fetch_one, t) for t in targets]):
                yield done.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def _fetch_one(self, target: Target) -> FetchResult:
        p = self._policy
        backoff = wait_exponential(multiplier=p.backoff_s, max=p.max_retry_after_s)

        def wait(state: RetryCallState) -> float:
            after = state.outcome.result().retry_after  # type: ignore[union-attr]
            return backoff(state) if after is None else after

        def give_up(state: RetryCallState) -> _Attempt:
            last: _Attempt = state.outcome.result()  # type: ignore[union-attr]
            reason = f"{last.result.reason} after {state.attempt_number} attempts"
            return replace(last, result=replace(last.result, reason=reason))

        try:
            retrying = Retrying(
                stop=stop_after_attempt(p.max_retries + 1),
                wait=wait,
                retry=retry_if_result(lambda a: a.retry),
                retry_error_callback=give_up,
            )
            return retrying(self._attempt, target).result
        except Exception as exc:  # one odd page must not end the crawl
            return FetchResult(
                target.url,
                Outcome.ERROR,
                reason=f"unexpected {type(exc).__name__}: {exc}",
                fetched_at=time.time(),
            )

    def _attempt(self, target: Target) -> _Attempt:
        """One try: the request, its redirects followed by hand, the answer classified."""
        headers = {}
        if target.etag:
            headers["If-None-Match"] = target.etag
        if target.last_modified:
            headers["If-Modified-Since"] = target.last_modified
        url = target.fetch_url
        seen = {url}
        for _ in range(self._policy.max_redirects + 1):
            if why := self._blocked(url):
                return _Attempt(self._result(target, url, Outcome.SKIPPED, why))
            try:
                with (
                    self._gate(url).slot(),
                    self._client.stream("GET", url, headers=headers) as resp,
                ):
                    if resp.status_code not in _REDIRECTS or "location" not in resp.headers:
                        return self._answer(target, url, resp)
                    _read_capped(resp, _DRAIN_BYTES)
            except httpx.HTTPError as exc:
                error = self._result(target, url, Outcome.ERROR, _describe(exc))
                return _Attempt(error, retry=_is_transient(exc))
            status = resp.status_code
            url = urldefrag(urljoin(url, resp.headers["location"])).url
            if url in seen or urlsplit(url).scheme not in ("http", "https"):
                why = "redirect loop" if url in seen else "redirect to a non-HTTP URL"
                return _Attempt(self._result(target, url, Outcome.ERROR, f"{why}: {url}", status))
            seen.add(url)
        why = f"more than {self._policy.max_redirects} redirects"
        return _Attempt(self._result(target, url, Outcome.ERROR, why))

    def _answer(self, target: Target, url: str, resp: httpx.Response) -> _Attempt:
        p = self._policy
        status = resp.status_code
        content_type = resp.headers.get("content-type")
        outcome, reason = classify(status, content_type=content_type, size=_content_length(resp), policy=p)
        etag, last_modified = resp.headers.get("etag"), resp.headers.get("last-modified")
        if outcome is Outcome.NOT_MODIFIED:  # a 304 may omit validators: keep the ones we sent
            etag, last_modified = etag or target.etag, last_modified or target.last_modified
            kept = {"etag": etag, "last_modified": last_modified, "body_sha256": target.body_sha256}
            return _Attempt(self._result(target, url, outcome, reason, status, **kept))
        if outcome is not Outcome.OK:
            _read_capped(resp, _DRAIN_BYTES)
            retry, after = status == 429 or status >= 500, None
            if (
                retry
                and (after := _retry_after(resp.headers.get("retry-after"))) is not None
                and after > p.max_retry_after_s
            ):
                retry, reason = False, f"{reason}, Retry-After {after:g}s over max_retry_after_s"
            return _Attempt(self._result(target, url, outcome, reason, status), retry, after if retry else None)
        body = _read_capped(resp, p.max_bytes)
        if body is None:
            outcome, reason = classify(status, content_type=content_type, size=p.max_bytes + 1, policy=p)
            return _Attempt(self._result(target, url, outcome, reason, status))
        digest = hashlib.sha256(body).hexdigest()
        kept = {"etag": etag, "last_modified": last_modified, "body_sha256": digest}
        if digest == target.body_sha256:
            unchanged = "body unchanged (same sha256)"
            return _Attempt(self._result(target, url, Outcome.NOT_MODIFIED, unchanged, status, **kept))
        html = _decode(body, resp)
        links = _links(html, url) if self._want_links else ()
        return _Attempt(self._result(target, url, Outcome.OK, reason, status, html=html, links=links, **kept))

    def _result(
        self,
        target: Target,
        url: str,
        outcome: Outcome,
        reason: str,
        status: int | None = None,
        **fields: object,
    ) -> FetchResult:
        final = self.normalize(url)
        return FetchResult(
            target.url,
            outcome,
            status_code=status,
            final_url=final if final != target.url else None,
            reason=reason,
            fetched_at=time.time(),
            **fields,  # type: ignore[arg-type]
        )

    # -- politeness ----------------------------------------------------------------

    def _blocked(self, url: str) -> str | None:
        if not self._policy.obey_robots:
            return None
        return self._robots_for(_origin(url)).block(url, self._agent)

    def _robots_for(self, origin: str) -> _Robots:
        robots = self._robots.get(origin)
        if robots is None:
            with self._lock:  # one download per host, however many threads ask at once
                robots = self._robots.get(origin)
                if robots is None:
                    robots = self._robots[origin] = self._load_robots(origin)
        return robots

    def _load_robots(self, origin: str) -> _Robots:
        # Downloaded with our client (User-Agent, timeouts, retries), then handed to
        # urllib's parser. Its own `read()` would also treat 401/403 as "disallow all",
        # where RFC 9309 says any 4xx means there are no rules.
        try:
            status, body = self._download(f"{origin}/robots.txt", gated=False)
        except (httpx.HTTPError, _Unusable) as exc:
            return _Robots(unreachable=f"robots.txt unreachable ({_describe(exc)})")
        if status >= 400:
            return _Robots()
        parser = RobotFileParser()
        parser.parse(_CRAWL_DELAY.sub(_delay_in_ms, body.decode("utf-8", errors="replace")).splitlines())
        return _Robots(parser)

    def _gate(self, url: str) -> _HostGate:
        origin = _origin(url)
        gate = self._gates.get(origin)
        if gate is None:
            p = self._policy
            interval = 1 / p.rate_per_s if p.rate_per_s else 0.0
            if p.obey_robots:
                interval = max(interval, self._robots_for(origin).interval(self._agent))
            with self._lock:
                gate = self._gates.setdefault(origin, _HostGate(p.concurrency, interval))
        return gate

    def _download(self, url: str, *, gated: bool = True) -> tuple[int, bytes]:
        """GET with redirects, retried on 5xx/429/transport errors: robots.txt and sitemaps."""
        p = self._policy

        def once() -> tuple[int, bytes]:
            slot: AbstractContextManager[None] = self._gate(url).slot() if gated else nullcontext()
            with slot, self._client.stream("GET", url, follow_redirects=True) as resp:
                if resp.status_code == 429 or resp.status_code >= 500:
                    raise _Transient(f"HTTP {resp.status_code}")
                body = _read_capped(resp, _MAX_SITEMAP_BYTES)
                if body is None:
                    raise _Unusable(f"over {_MAX_SITEMAP_BYTES} bytes")
                return resp.status_code, body

        retrying = Retrying(
            stop=stop_after_attempt(p.max_retries + 1),
            wait=wait_exponential(multiplier=p.backoff_s, max=p.max_retry_after_s),
            retry=retry_if_exception(_is_transient),
            reraise=True,
        )
        return retrying(once)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return not isinstance(exc, httpx.UnsupportedProtocol)
    return isinstance(exc, _Transient)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"connection error: {exc}"
    if isinstance(exc, httpx.TooManyRedirects):
        return "too many redirects"
    if isinstance(exc, _Unusable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _content_length(resp: httpx.Response) -> int:
    value = resp.headers.get("content-length", "")
    return int(value) if value.isdigit() else 0


def _read_capped(resp: httpx.Response, limit: int) -> bytes | None:
    """The (decoded) body, or None as soon as it is known to exceed `limit` bytes."""
    if _content_length(resp) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _gunzip(data: bytes, limit: int) -> bytes:
    out = zlib.decompressobj(wbits=31).decompress(data, limit + 1)  # bounded: no gzip bombs
    if len(out) > limit:
        raise _Unusable(f"over {limit} bytes uncompressed")
    return out


def _delay_in_ms(match: re.Match[str]) -> str:
    """urllib's robots parser reads only whole-number Crawl-delays: it is given milliseconds."""
    return f"{match.group(1)}{round(float(match.group(2)) * 1000)}"


def _retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _decode(body: bytes, resp: httpx.Response) -> str:
    """Charset from the header, else a `<meta charset>` near the top, else UTF-8."""
    meta = _META_CHARSET.search(body[:4096])
    encoding = resp.charset_encoding or (meta.group(1).decode("ascii") if meta else "utf-8")
    try:
        return body.decode(encoding, errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _links(html: str, url: str) -> tuple[str, ...]:
    """Absolute http(s) hrefs of `<a>` tags, without fragments, deduplicated in page order."""
    base = _BASE_HREF.search(html)
    base_url = urljoin(url, unescape(base.group(1))) if base else url
    links: dict[str, None] = {}
    for match in _HREF.finditer(html):
        href = unescape(next(g for g in match.groups() if g is not None)).strip()
        absolute = urldefrag(urljoin(base_url, href)).url
        if absolute.startswith(("http://", "https://")):
            links.setdefault(absolute)
    return tuple(links)
