"""URL identity: the one normalized form every URL is compared in."""

from __future__ import annotations

import re
from collections.abc import Collection
from ipaddress import IPv6Address, ip_address
from urllib.parse import parse_qsl, quote, urlencode, urljoin, urlsplit, urlunsplit

__all__ = ["is_tracking_param", "normalize_url", "site_host", "strip_tracking", "unsafe_address"]

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
_PATH_SAFE = "/%!=:,-"  # left unescaped in a path (as courlan's `normalize_part` leaves them)


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
    # urljoin against the root resolves `.` and `..` segments; the path is quoted the same
    # way whatever escaping the page used.
    path = urljoin("/", parts.path) if parts.path else "/"
    path = _PERCENT_ESCAPE.sub(lambda m: m.group().upper(), quote(path, safe=_PATH_SAFE))
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


def site_host(url_or_host: str) -> str:
    """The host a URL (or a bare host name) names: lowercase, no `www.`, no trailing dot."""
    text = url_or_host.strip()
    host = urlsplit(text if "//" in text else f"//{text}").hostname or ""
    return host.rstrip(".").removeprefix("www.")


# Cloud instance-metadata endpoints (AWS/GCP/Azure, AWS over IPv6, Alibaba).
_METADATA = frozenset(ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200"))


def unsafe_address(address: str) -> str | None:
    """What kind of non-public address this is ("cloud metadata", "link-local", "private"),
    or None for a public or loopback one (loopback serves the tests and the demo)."""
    ip = ip_address(address.split("%", 1)[0])  # an IPv6 zone id is not part of the address
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in _METADATA:
        return "cloud metadata"
    if ip.is_loopback:
        return None
    if ip.is_link_local:
        return "link-local"
    return None if ip.is_global else "private"
