"""Discovery: the page URLs of a source, from its sitemaps (or robots.txt `Sitemap:` lines)
and from link discovery within a scope. Bounded: `discovery.max_sitemaps` files and
`max_sitemap_depth` index levels, `max_pages` and `max_depth` for links; hitting a bound is
said in `Discovery.warnings` (once per bound). Discovery spends the run's `fetch.run_budget_s`
like the pages: when it runs out first, discovery fails (`DiscoveryError`), since a partial
list must not make the pages it missed look gone. Link discovery's answers are kept (`Discovery.answer`) so the
crawl fetches each page once per run.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol
from urllib.parse import urljoin, urlsplit

import httpx
from lxml import etree

from freshness_pipeline.config import Source
from freshness_pipeline.core.models import FetchResult, Outcome

from .bodies import Unusable, describe, gunzip, origin
from .robots import Robots
from .target import Target

__all__ = ["Discovery", "DiscoveryError", "Fetching", "discover"]

MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # the sitemap protocol's limit, uncompressed
_XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True)
# Compiled once: `element.xpath(text)` compiles its expression on every call (per <url>).
_URLS = etree.XPath("./*[local-name()='url']")
_LOC = etree.XPath("string(./*[local-name()='loc'])")
_LASTMOD = etree.XPath("string(./*[local-name()='lastmod'])")


class Fetching(Protocol):
    """What discovery asks of the fetcher (`fetch.Fetcher`, which calls `discover`)."""

    def normalize(self, url: str) -> str: ...
    def robots_for(self, host_origin: str) -> Robots: ...
    def blocked(self, url: str) -> str | None: ...
    def refuse(self, url: str) -> str | None: ...
    def budget_spent(self) -> str | None: ...
    def download(self, url: str, *, gated: bool = True, limit: int = ...) -> tuple[int, bytes]: ...
    def fetch(self, targets: Sequence[Target]) -> Iterator[FetchResult]: ...


class DiscoveryError(RuntimeError):
    """Discovery is incomplete or failed (an unreadable sitemap, an unreachable start URL):
    nothing may be declared gone, so the crawl stops before fetching."""


@dataclass(slots=True)
class Discovery:
    urls: list[str] = field(default_factory=list)  # raw page URLs, one per normalized identity
    # normalized URL -> the sitemap's <lastmod>: only a hint, sitemaps are often wrong
    lastmod: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # a bound hit, nothing found, ...
    # Link discovery's answers, kept for the crawl: normalized URL -> (answer without its
    # body, the body zlib-compressed), since a whole site's HTML may wait here.
    _answers: dict[str, tuple[FetchResult, bytes | None]] = field(default_factory=dict, repr=False)

    def keep(self, res: FetchResult) -> None:
        body = zlib.compress(res.html.encode(), 1) if res.html is not None else None
        self._answers[res.url] = (replace(res, html=None), body)

    def answer(self, url: str) -> FetchResult | None:
        """The answer link discovery got for `url` this run (handed out once), or None."""
        held = self._answers.pop(url, None)
        if held is None:
            return None
        res, body = held
        return res if body is None else replace(res, html=zlib.decompress(body).decode())

    def answered(self) -> set[str]:
        return set(self._answers)


def discover(fetcher: Fetching, source: Source, known: Mapping[str, Target]) -> Discovery:
    """Page URLs of `source`. `known` (normalized URL -> target with the stored body hash)
    lets link discovery tell an unchanged body without extracting it again.

    Raises `DiscoveryError` when a sitemap cannot be read, a start URL does not answer, or
    no start URL is a page (`_check_start_urls`).
    """
    found = Discovery()
    refused: list[tuple[str, str]] = []  # never a page of this source: not fetched, not stored

    def add(raw: str, lastmod: str | None = None) -> None:
        why = "not an http(s) URL" if urlsplit(raw).scheme not in ("http", "https") else fetcher.refuse(raw)
        if why:
            refused.append((raw, why))
            return
        url = fetcher.normalize(raw)
        if lastmod:
            found.lastmod.setdefault(url, lastmod)
        if url not in seen:
            seen.add(url)
            found.urls.append(raw)

    seen: set[str] = set()
    sitemaps = [source.sitemap] if source.sitemap else _robots_sitemaps(fetcher, source)
    reader = _SitemapReader(fetcher, source, add, found.warnings)
    for sitemap in sitemaps:
        reader.read(sitemap, depth=0)
    reader.finish()
    if refused:
        (first, why), more = refused[0], f" and {len(refused) - 1} more" if len(refused) > 1 else ""
        found.warnings.append(f"{len(refused)} sitemap URLs refused, not fetched: {first[:200]} ({why}){more}")
    if source.start_urls:
        for raw in _crawl_links(fetcher, source, known, found):
            add(raw)
    return found


def _robots_sitemaps(fetcher: Fetching, source: Source) -> list[str]:
    origins = dict.fromkeys(origin(u) for u in source.start_urls)
    return [sitemap for o in origins for sitemap in fetcher.robots_for(o).sitemaps()]


class _SitemapReader:
    def __init__(self, fetcher: Fetching, source: Source, add: Callable[..., None], warnings: list[str]) -> None:
        self._fetcher, self._add, self._warnings = fetcher, add, warnings
        self._policy = source.discovery
        self._visited: set[str] = set()
        # Sitemaps left unread, by the bound that left them: said once each, with a count
        # (a site listing thousands of sitemaps made a message of a quarter megabyte).
        self._unread: dict[str, list[str]] = {}

    def read(self, url: str, depth: int) -> None:
        p = self._policy
        if url in self._visited:
            return
        if depth > p.max_sitemap_depth:
            self._unread.setdefault(f"deeper than discovery.max_sitemap_depth ({p.max_sitemap_depth})", []).append(url)
            return
        if len(self._visited) >= p.max_sitemaps:
            self._unread.setdefault(f"over discovery.max_sitemaps ({p.max_sitemaps})", []).append(url)
            return
        if spent := self._fetcher.budget_spent():
            raise DiscoveryError(f"{spent} before sitemap {url} was read: discovery did not finish")
        self._visited.add(url)
        root = self._parse(url)
        kind = etree.QName(root).localname
        if kind == "sitemapindex":
            for loc in root.xpath("./*[local-name()='sitemap']/*[local-name()='loc']/text()"):
                self.read(urljoin(url, loc.strip()), depth + 1)
        elif kind == "urlset":
            for entry in _URLS(root):
                loc = str(_LOC(entry)).strip()
                if loc:
                    self._add(urljoin(url, loc), str(_LASTMOD(entry)).strip() or None)
        else:
            raise DiscoveryError(f"sitemap {url}: root <{kind}> is neither <urlset> nor <sitemapindex>")

    def finish(self) -> None:
        """One warning per bound that left sitemaps unread: how many, and the first one."""
        for why, urls in self._unread.items():
            more = f" and {len(urls) - 1} more" if len(urls) > 1 else ""
            self._warnings.append(f"{len(urls)} sitemaps {why} not read: {urls[0]}{more}")

    def _parse(self, url: str) -> etree._Element:
        try:
            status, body = self._fetcher.download(url, limit=MAX_SITEMAP_BYTES)
            if status != 200:
                raise Unusable(f"HTTP {status}")
            if body[:2] == b"\x1f\x8b":  # .xml.gz served as a file, not as Content-Encoding
                body = gunzip(body, MAX_SITEMAP_BYTES)
            return etree.fromstring(body, parser=_XML_PARSER)
        except (httpx.HTTPError, zlib.error) as exc:
            if spent := self._fetcher.budget_spent():  # the read ran into the run's end
                raise DiscoveryError(f"sitemap {url}: not read, {spent}: discovery did not finish") from exc
            raise DiscoveryError(f"sitemap {url}: {describe(exc)}") from exc
        except etree.XMLSyntaxError as exc:
            raise DiscoveryError(f"sitemap {url}: not valid XML ({exc})") from exc


def _crawl_links(fetcher: Fetching, source: Source, known: Mapping[str, Target], found: Discovery) -> list[str]:
    """Breadth-first link discovery from the start URLs, within scope, obeying robots.
    Each answer lands in `found.fetched`; the start URLs' answers are checked first
    (`_check_start_urls`)."""
    d = source.discovery
    include = [re.compile(r) for r in d.include]
    exclude = [re.compile(r) for r in d.exclude]
    prefixes = [d.scope_prefix] if d.scope_prefix else [urljoin(u, ".") for u in source.start_urls]
    scopes = [_scope(fetcher, p) for p in prefixes]

    def wanted(url: str) -> bool:
        return (
            any(url.startswith(s) or url + "/" == s for s in scopes)
            and (not include or any(r.search(url) for r in include))
            and not any(r.search(url) for r in exclude)
        )

    def target(url: str, raw: str) -> Target:
        # The stored body hash, but no validators: a 304 would carry no links to follow.
        prev = known.get(url)
        return Target(url, raw, body_sha256=prev.body_sha256 if prev else None)

    pages: dict[str, str] = {}  # normalized -> raw, in discovery order
    frontier: list[Target] = []
    for raw in source.start_urls:
        url = fetcher.normalize(raw)
        if url not in pages:
            pages[url] = raw
            frontier.append(target(url, raw))
    for depth in range(d.max_depth):  # start URLs are depth 0; pages at max_depth are not expanded
        if not frontier or len(pages) >= d.max_pages:
            break
        results = {r.url: r for r in fetcher.fetch(frontier)}
        if spent := fetcher.budget_spent():  # pages were left unread: their links unknown
            raise DiscoveryError(f"link discovery did not finish: {spent}")
        for res in results.values():
            found.keep(res)
        if depth == 0:
            _check_start_urls(source, results, fetcher, found)
        current, frontier = frontier, []
        for link in (link for t in current for link in results[t.url].links):
            url = fetcher.normalize(link)
            if url not in pages and wanted(url) and not fetcher.blocked(link):
                pages[url] = link
                frontier.append(target(url, link))
                if len(pages) >= d.max_pages:
                    found.warnings.append(f"discovery.max_pages ({d.max_pages}) reached: link discovery stopped")
                    break
    return list(pages.values())


def _check_start_urls(source: Source, results: Mapping[str, FetchResult], fetcher: Fetching, found: Discovery) -> None:
    """A start URL that does not answer fails discovery; one that answers 404/410 (a
    mistyped path, a page the site removed) fails it when neither another start URL nor a
    sitemap gave a page, and is a warning otherwise: the known pages are still checked,
    new ones beyond it missed."""
    gone: list[str] = []
    for raw in source.start_urls:
        res = results.get(fetcher.normalize(raw))
        robots = fetcher.robots_for(origin(raw)) if source.fetch.obey_robots else None
        if robots is not None and robots.host_down:  # robots.txt was asked first, in vain
            raise DiscoveryError(f"start URL {raw} did not answer ({robots.unreachable})")
        if res is not None and res.outcome is Outcome.ERROR:  # refused, unresolvable, 5xx
            raise DiscoveryError(f"start URL {raw} did not answer ({res.reason})")
        if res is not None and res.outcome is Outcome.GONE:
            gone.append(f"start URL {raw} answered {res.reason}")
    if gone and len(gone) == len(source.start_urls) and not found.urls:  # (the sitemaps' URLs, so far)
        raise DiscoveryError(f"{'; '.join(gone)}: no page to discover links from")
    found.warnings += [f"{g}: no links discovered from it; correct start_urls" for g in gone]


def _scope(fetcher: Fetching, prefix: str) -> str:
    """The normalized prefix; a directory keeps its final "/", which normalizing drops."""
    scope = fetcher.normalize(prefix)
    return scope.rstrip("/") + "/" if prefix.endswith("/") else scope
