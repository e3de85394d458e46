"""URL identity: the one normalized form every URL is compared in."""

from __future__ import annotations

import re
from collections.abc import Collection
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from courlan.clean import normalize_part

__all__ = ["is_tracking_param", "normalize_url", "same_site", "strip_tracking"]

# Anchored on the whole parameter name. courlan's TRACKERS_RE is searched, not matched, and
# also drops real parameters such as `source`, `gallery` or `refresh`, so it is not used here.
_TRACKING = re.compile(
    r"(?:utm|mc|pk|mtm|matomo|piwik|oly|vero|itm|hsa|ga|_ga|_gl|_hs)_\w*"
    r"|_ga|_gl|gclid|gclsrc|dclid|fbclid|msclkid|twclid|yclid|igshid|gbraid|wbraid"
    r"|mkt_tok|_hsenc|_hsmi|hsctatracking|ref|ref_src|ref_url|referrer|trk|spm",
    re.IGNORECASE,
)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PERCENT_ESCAPE = re.compile(r"%[0-9a-fA-F]{2}")


def is_tracking_param(name: str) -> bool:
    return _TRACKING.fullmatch(name) is not None


def normalize_url(
    url: str,
    *,
    base: str | None = None,
    keep_params: Collection[str] = (),
    drop_query: bool = True,
) -> str:
    """The identity form of `url` (resolved against `base` when relative).

    Lowercase scheme and host, no `www.`, no trailing dot on the host, no default port, no
    fragment, no trailing `/` (except the root), no tracking parameters, and either only the
    `keep_params` (`drop_query=True`) or every other parameter, sorted. The scheme is kept:
    http and https stay distinct.
    """
    url = url.strip()
    if base is not None:
        url = urljoin(base, url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    host = host.removeprefix("www.")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: keep the URL's own text
        port = None
    netloc = host if port is None or port == _DEFAULT_PORTS.get(scheme) else f"{host}:{port}"
    if parts.username is not None:
        userinfo = parts.netloc.rpartition("@")[0]
        netloc = f"{userinfo}@{netloc}"
    # urljoin against the root resolves `.` and `..` segments; courlan quotes the path the
    # same way whatever escaping the page used.
    path = urljoin("/", parts.path) if parts.path else "/"
    path = _PERCENT_ESCAPE.sub(lambda m: m.group().upper(), normalize_part(path))
    if len(path) > 1:
        path = path.rstrip("/") or "/"
    params = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not is_tracking_param(k) and (not drop_query or k in keep_params)
    ]
    return urlunsplit((scheme, netloc, path, urlencode(sorted(params)), ""))


def strip_tracking(url: str) -> str:
    """`url` without its tracking parameters, otherwise untouched (fragment included)."""
    parts = urlsplit(url)
    if not parts.query:
        return url
    params = parse_qsl(parts.query, keep_blank_values=True)
    kept = [(k, v) for k, v in params if not is_tracking_param(k)]
    if len(kept) == len(params):
        return url
    return urlunsplit(parts._replace(query=urlencode(kept)))


def same_site(a: str, b: str) -> bool:
    """Whether two URLs are on the same host (scheme, port and `www.` aside)."""
    host_a = (urlsplit(a.strip()).hostname or "").rstrip(".").removeprefix("www.")
    host_b = (urlsplit(b.strip()).hostname or "").rstrip(".").removeprefix("www.")
    return bool(host_a) and host_a == host_b
