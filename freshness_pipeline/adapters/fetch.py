"""The fetch layer: polite, bounded, concurrent fetching of one source's pages.

An imperative shell over httpx: what each HTTP answer means for the index is decided by
`core.responses.classify`. Fetching never raises for one page: every target yields one
`FetchResult`, and a broken page is an ERROR whose reason names the problem. Discovery
(sitemaps, links) is in `discovery`, robots.txt in `robots`, host scope and deadlines in
`scope`.

    with Fetcher(source) as fetcher:
        found = fetcher.discover()
        for result in fetcher.fetch([Target(normalize_url(u), u) for u in found.urls]):
            ...
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception, retry_if_result, stop_after_attempt, wait_exponential

from freshness_pipeline.config import Source
from freshness_pipeline.core.models import FetchResult, Outcome
from freshness_pipeline.core.responses import classify
from freshness_pipeline.core.urls import normalize_url

from .bodies import Unusable, content_length, decode, describe, links, origin, read_capped, retry_after
from .discovery import MAX_SITEMAP_BYTES, Discovery, DiscoveryError, discover
from .in_flight import Clock, InFlight, map_in_flight
from .robots import Robots, parse_robots
from .scope import Deadline, DeadlineBackend, Refused, Scope
from .target import Target
from .transport import transports

__all__ = ["Discovery", "DiscoveryError", "Fetcher", "Target"]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_PERMANENT = frozenset({301, 308})  # only these move a page to another URL
_ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1"
_MAX_HOSTS = 4  # hosts fetched in parallel by one `fetch` call (a source is usually one)
AHEAD = 4  # answers per fetch thread fetched ahead of the reader
_DRAIN_BYTES = 64 * 1024  # small error/redirect bodies are read so the connection is reused


class _Transient(Unusable):
    """A 5xx or 429 answer, worth retrying."""


@dataclass(frozen=True, slots=True)
class _Attempt:
    result: FetchResult
    retry: bool = False
    retry_after: float | None = None  # seconds, from the server's Retry-After


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


def default_hosts(source: Source) -> list[str]:
    """The hosts a source may fetch: `fetch.allowed_hosts`, else its sitemap's and start URLs'."""
    if source.fetch.allowed_hosts is not None:
        return source.fetch.allowed_hosts
    return [u for u in (source.sitemap, *source.start_urls, source.discovery.scope_prefix) if u]


class Fetcher(AbstractContextManager["Fetcher"]):
    """Discovers and fetches the pages of one source; owns one `httpx.Client`. `cpu`: the
    process's CPU clock, which sizes the requests in flight (`core/in_flight.py`)."""

    def __init__(self, source: Source, *, cpu: Clock = time.process_time) -> None:
        self._source = source
        self._cpu = cpu
        self._policy = policy = source.fetch
        self._agent = policy.user_agent.format(contact=policy.contact)
        self._want_links = bool(source.start_urls)
        self._scope = Scope(default_hosts(source), allow_private=policy.allow_private_addresses)
        self._budget_ends = time.monotonic() + policy.run_budget_s
        pool = policy.concurrency * _MAX_HOSTS
        limits = httpx.Limits(max_connections=pool, max_keepalive_connections=pool)
        transport, mounts = transports(DeadlineBackend(self._scope), limits)
        self._client = httpx.Client(
            transport=transport,
            mounts=mounts,
            headers={"User-Agent": self._agent, "Accept": _ACCEPT},
            timeout=policy.timeout_s,
            max_redirects=policy.max_redirects,
            event_hooks={"request": [self._scope.on_request]},
        )
        self._lock = threading.Lock()
        self._robots: dict[str, Robots] = {}
        self._gates: dict[str, _HostGate] = {}
        self._normalized: dict[str, str] = {}  # discovery and the crawl normalize each URL once

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def normalize(self, url: str) -> str:
        if (done := self._normalized.get(url)) is None:
            p = self._policy
            done = self._normalized[url] = normalize_url(url, keep_params=p.keep_query_params, drop_query=p.drop_query)
        return done

    def discover(self, known: Mapping[str, Target] | None = None) -> Discovery:
        """See `discovery.discover`."""
        return discover(self, self._source, known or {})

    def budget_left(self) -> float:
        """Seconds left of the run's `fetch.run_budget_s` (discovery spends it too)."""
        return self._budget_ends - time.monotonic()

    def budget_spent(self) -> str | None:
        """Why no more requests start, once the run budget is spent; None before."""
        if self.budget_left() > 0:
            return None
        return f"the run's fetch.run_budget_s ({self._policy.run_budget_s:g}s) is spent"

    # -- fetching ------------------------------------------------------------------

    def fetch(self, targets: Sequence[Target]) -> Iterator[FetchResult]:
        """One result per target, in completion order. As many requests are in flight as
        make the crawl faster, at most `concurrency` a host (`InFlight`), and at most `AHEAD`
        answers per thread are fetched before the reader takes them: a crawl that downloads
        faster than it extracts holds a window of pages, not the site (100,000 pages held
        1.5 GiB)."""
        if not targets:
            return
        hosts = len({origin(t.fetch_url) for t in targets})
        threads = self._policy.concurrency * min(hosts, _MAX_HOSTS)
        yield from map_in_flight(self._fetch_one, targets, InFlight(threads, ahead=AHEAD, cpu=self._cpu))

    def _fetch_one(self, target: Target) -> FetchResult:
        if spent := self.budget_spent():
            why = f"not fetched: {spent}; kept, fetched next run"
            return self._result(target, target.fetch_url, Outcome.SKIPPED, why)
        deadline = self._deadline()
        self._scope.deadline(deadline)
        try:
            return self._retrying(deadline)(self._attempt, target, deadline).result
        except Exception as exc:  # one odd page must not end the crawl
            return self._result(target, target.fetch_url, Outcome.ERROR, f"unexpected {type(exc).__name__}: {exc}")
        finally:
            self._scope.deadline(None)

    def _deadline(self) -> Deadline:
        """The page deadline, or what is left of the run budget when that ends first."""
        p, left = self._policy, self.budget_left()
        if left < p.page_deadline_s:
            return Deadline(left, f"the run's fetch.run_budget_s ({p.run_budget_s:g}s)")
        return Deadline(p.page_deadline_s, f"fetch.page_deadline_s ({p.page_deadline_s:g}s)")

    def _retrying(self, deadline: Deadline) -> Retrying:
        p = self._policy
        backoff = wait_exponential(multiplier=p.backoff_s, max=p.max_retry_after_s)

        def wait(state: RetryCallState) -> float:
            after = state.outcome.result().retry_after  # type: ignore[union-attr]
            return min(backoff(state) if after is None else after, max(0.0, deadline.remaining()))

        def stop(state: RetryCallState) -> bool:
            return stop_after_attempt(p.max_retries + 1)(state) or deadline.remaining() <= 0

        def give_up(state: RetryCallState) -> _Attempt:
            last: _Attempt = state.outcome.result()  # type: ignore[union-attr]
            reason = f"{last.result.reason} after {state.attempt_number} attempts"
            return replace(last, result=replace(last.result, reason=reason))

        return Retrying(stop=stop, wait=wait, retry=retry_if_result(lambda a: a.retry), retry_error_callback=give_up)

    def _attempt(self, target: Target, deadline: Deadline) -> _Attempt:
        """One try: the request, its redirects followed by hand, the answer classified."""
        headers = {}
        if target.etag:
            headers["If-None-Match"] = target.etag
        if target.last_modified:
            headers["If-Modified-Since"] = target.last_modified
        url, seen, temporary = target.fetch_url, {target.fetch_url}, False
        for _ in range(self._policy.max_redirects + 1):
            if why := self._scope.refuse(url):
                return _Attempt(self._result(target, url, Outcome.ERROR, why))
            if why := self.blocked(url):
                return _Attempt(self._result(target, url, Outcome.SKIPPED, why))
            try:
                with self._gate(url).slot(), self._client.stream("GET", url, headers=headers) as resp:
                    if resp.status_code not in _REDIRECTS or "location" not in resp.headers:
                        attempt = self._answer(target, url, resp)
                        return replace(attempt, result=replace(attempt.result, temporary=temporary))
                    read_capped(resp, _DRAIN_BYTES)
            except httpx.HTTPError as exc:
                if deadline.expired:
                    why = f"over {deadline.why}: the server is too slow"
                    return _Attempt(self._result(target, url, Outcome.ERROR, why))
                error = self._result(target, url, Outcome.ERROR, describe(exc))
                return _Attempt(error, retry=_is_transient(exc))
            status = resp.status_code
            temporary = temporary or status not in _PERMANENT
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
        outcome, reason = classify(
            status, content_type=content_type, size=content_length(resp), policy=p.response_rules()
        )
        etag, last_modified = resp.headers.get("etag"), resp.headers.get("last-modified")
        if outcome is Outcome.NOT_MODIFIED:  # a 304 may omit validators: keep the ones we sent
            read_capped(resp, _DRAIN_BYTES)  # its (empty) body: an unread response closes the connection
            etag, last_modified = etag or target.etag, last_modified or target.last_modified
            kept = {"etag": etag, "last_modified": last_modified, "body_sha256": target.body_sha256}
            return _Attempt(self._result(target, url, outcome, reason, status, **kept))
        if outcome is not Outcome.OK:
            read_capped(resp, _DRAIN_BYTES)
            retry = status == 429 or status >= 500
            after = retry_after(resp.headers.get("retry-after")) if retry else None
            if after is not None and after > p.max_retry_after_s:
                retry, reason = False, f"{reason}, Retry-After {after:g}s over max_retry_after_s"
            return _Attempt(self._result(target, url, outcome, reason, status), retry, after if retry else None)
        body = read_capped(resp, p.max_bytes)
        if body is None:
            outcome, reason = classify(
                status, content_type=content_type, size=p.max_bytes + 1, policy=p.response_rules()
            )
            return _Attempt(self._result(target, url, outcome, reason, status))
        digest = hashlib.sha256(body).hexdigest()
        kept = {"etag": etag, "last_modified": last_modified, "body_sha256": digest}
        html = decode(body, resp.charset_encoding)
        found = links(html, url) if self._want_links else ()
        if digest == target.body_sha256:
            unchanged = "body unchanged (same sha256)"
            return _Attempt(self._result(target, url, Outcome.NOT_MODIFIED, unchanged, status, links=found, **kept))
        return _Attempt(self._result(target, url, Outcome.OK, reason, status, html=html, links=found, **kept))

    def _result(
        self, target: Target, url: str, outcome: Outcome, reason: str, status: int | None = None, **fields: object
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

    def refuse(self, url: str) -> str | None:
        """Why `url` is not this source's to fetch (its host or port), or None."""
        return self._scope.refuse(url)

    def blocked(self, url: str) -> str | None:
        """Why robots.txt keeps us from `url`, or None."""
        if not self._policy.obey_robots:
            return None
        return self.robots_for(origin(url)).block(url, self._agent)

    def robots_for(self, host_origin: str) -> Robots:
        robots = self._robots.get(host_origin)
        if robots is None:
            with self._lock:  # one download per host, however many threads ask at once
                robots = self._robots.get(host_origin)
                if robots is None:
                    robots = self._robots[host_origin] = self._load_robots(host_origin)
        return robots

    def _load_robots(self, host_origin: str) -> Robots:
        # Downloaded with our client (User-Agent, timeouts, retries, deadline, scope).
        try:
            status, body = self.download(f"{host_origin}/robots.txt", gated=False)
        except httpx.HTTPError as exc:
            down = isinstance(exc, httpx.TransportError)  # no answer at all, not a 5xx
            return Robots(unreachable=f"robots.txt unreachable ({describe(exc)})", host_down=down)
        return parse_robots(status, body)

    def _gate(self, url: str) -> _HostGate:
        host_origin = origin(url)
        gate = self._gates.get(host_origin)
        if gate is None:
            p = self._policy
            interval = 1 / p.rate_per_s if p.rate_per_s else 0.0
            if p.obey_robots:
                interval = max(interval, self.robots_for(host_origin).interval(self._agent))
            with self._lock:
                gate = self._gates.setdefault(host_origin, _HostGate(p.concurrency, interval))
        return gate

    def download(self, url: str, *, gated: bool = True, limit: int = MAX_SITEMAP_BYTES) -> tuple[int, bytes]:
        """GET with redirects (each hop in scope), retried on 5xx/429/transport errors, within
        one page deadline and what is left of the run budget: robots.txt and sitemaps."""
        p = self._policy
        if why := self._scope.refuse(url):
            raise Refused(why)
        if spent := self.budget_spent():
            raise Unusable(spent)
        deadline = self._deadline()

        def once() -> tuple[int, bytes]:
            slot: AbstractContextManager[None] = self._gate(url).slot() if gated else nullcontext()
            try:
                with slot, self._client.stream("GET", url, follow_redirects=True) as resp:
                    if resp.status_code == 429 or resp.status_code >= 500:
                        raise _Transient(f"HTTP {resp.status_code}")
                    body = read_capped(resp, limit)
            except httpx.HTTPError as exc:
                if deadline.expired:
                    raise Unusable(f"over {deadline.why}") from exc
                raise
            if body is None:
                raise Unusable(f"over {limit} bytes")
            return resp.status_code, body

        retrying = Retrying(
            stop=stop_after_attempt(p.max_retries + 1),
            wait=wait_exponential(multiplier=p.backoff_s, max=p.max_retry_after_s),
            retry=retry_if_exception(lambda e: _is_transient(e) and not deadline.expired),
            reraise=True,
        )
        previous = self._scope.deadline(deadline)
        try:
            return retrying(once)
        finally:
            self._scope.deadline(previous)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, httpx.TransportError):
        return not isinstance(exc, httpx.UnsupportedProtocol)
    return isinstance(exc, _Transient)
