"""What the fetcher is asked to fetch: one page and what it knew of it. Its own module, so
that `fetch` (which runs discovery) and `discovery` (which fetches) need not import each other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Target:
    url: str  # the normalized identity
    fetch_url: str  # the URL to request
    etag: str | None = None
    last_modified: str | None = None
    body_sha256: str | None = None
