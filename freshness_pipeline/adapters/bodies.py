"""Reading HTTP bodies: capped, decoded to text, their links; plus the small helpers that
turn httpx answers and errors into the fetch layer's words."""

from __future__ import annotations

import re
import time
import zlib
from email.utils import parsedate_to_datetime
from html import unescape
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx

__all__ = [
    "Unusable",
    "content_length",
    "decode",
    "describe",
    "gunzip",
    "links",
    "origin",
    "read_capped",
    "retry_after",
]

# A regex, not an HTML parser: hrefs are all link discovery needs, and the engine parses
# the page properly later anyway.
_HREF = re.compile(r"""<a\s[^>]*?\bhref\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
_BASE_HREF = re.compile(r"""<base\s[^>]*?\bhref\s*=\s*["']?([^"'\s>]+)""", re.IGNORECASE)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([\w.:-]+)""", re.IGNORECASE)


class Unusable(httpx.HTTPError):
    """A download that cannot be used (too big, refused, ...); the message says why."""


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout ({type(exc).__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"connection error: {exc}"
    if isinstance(exc, httpx.TooManyRedirects):
        return "too many redirects"
    if isinstance(exc, Unusable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def content_length(resp: httpx.Response) -> int:
    value = resp.headers.get("content-length", "")
    return int(value) if value.isdigit() else 0


def read_capped(resp: httpx.Response, limit: int) -> bytes | None:
    """The (decoded) body, or None as soon as it is known to exceed `limit` bytes."""
    if content_length(resp) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def gunzip(data: bytes, limit: int) -> bytes:
    out = zlib.decompressobj(wbits=31).decompress(data, limit + 1)  # bounded: no gzip bombs
    if len(out) > limit:
        raise Unusable(f"over {limit} bytes uncompressed")
    return out


def retry_after(value: str | None) -> float | None:
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


def decode(body: bytes, declared: str | None) -> str:
    """Text of an HTML body: the charset the headers declare, else a `<meta charset>` near
    the top, else UTF-8 when the bytes are valid UTF-8, else detected from the bytes with
    charset-normalizer (a cp1252 page without a charset is not read as mojibake)."""
    meta = _META_CHARSET.search(body[:4096])
    encoding = declared or (meta.group(1).decode("ascii") if meta else None)
    if encoding:
        try:
            return body.decode(encoding, errors="replace")
        except LookupError:
            pass
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    # charset-normalizer cannot tell the single-byte Latin code pages apart on short texts
    # (it may rank cp1257 first for French); windows-1252 is the web's fallback (WHATWG),
    # so it wins whenever it is a plausible reading. Otherwise (Cyrillic, CJK, ...) the best.
    from charset_normalizer import from_bytes  # the last resort: most pages never load it

    matches = from_bytes(body)
    if any(m.encoding == "cp1252" for m in matches):
        return body.decode("cp1252", errors="replace")
    best = matches.best()
    return str(best) if best is not None else body.decode("utf-8", errors="replace")


def links(html: str, url: str) -> tuple[str, ...]:
    """Absolute http(s) hrefs of `<a>` tags, without fragments, deduplicated in page order."""
    base = _BASE_HREF.search(html)
    base_url = urljoin(url, unescape(base.group(1))) if base else url
    found: dict[str, None] = {}
    for match in _HREF.finditer(html):
        href = unescape(next(g for g in match.groups() if g is not None)).strip()
        absolute = urldefrag(urljoin(base_url, href)).url
        if absolute.startswith(("http://", "https://")):
            found.setdefault(absolute)
    return tuple(found)
