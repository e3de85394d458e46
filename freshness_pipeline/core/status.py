"""What a raw HTTP answer means for the index, and whether a 200 page is really an error page.

Pure: no I/O. The fetcher calls `classify` on every response; the engine calls
`looks_soft_404` once the page text has been extracted.
"""

from __future__ import annotations

import re
from http import HTTPStatus

from freshness_pipeline.config import FetchPolicy
from freshness_pipeline.core.models import Outcome

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def _compile(*rules: tuple[str, str]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, re.IGNORECASE), reason) for pattern, reason in rules)


# Error pages and bot walls are short: their phrases are searched in the text only
# below this length, so a long docs page *about* 404s or captchas is not flagged.
_WALL_TEXT_MAX_CHARS = 1500

_NOT_FOUND = r"page\s+(?:was\s+)?not\s+found"
_ACCESS = r"access\s+denied|\b403\s+forbidden\b"
_ROBOT = r"are\s+you\s+a\s+robot|verify\s+(?:that\s+)?you\s+are\s+(?:a\s+)?human"
_WALL = (
    r"checking\s+your\s+browser|just\s+a\s+moment\.\.\.|attention\s+required"
    r"|cloudflare\s+ray\s+id|ddos\s+protection\s+by"
)
_JS = r"enable\s+javascript|javascript\s+is\s+(?:required|disabled)"
# (pattern, reason). Titles get the unambiguous forms only: a bare "404" at the start
# ("404 | Docs", "Error 404"), a bare "captcha" as the whole title; so "Handling 404
# responses" or "Captcha integration" stay real pages. Short texts may say them anywhere.
_TITLE_RULES = _compile(
    (rf"^\W*(?:error\s*)?404\b|{_NOT_FOUND}|^\W*not\s+found\W*$", "looks like a 404 page"),
    (_ACCESS, "access-denied page"),
    (rf"{_ROBOT}|^\W*captcha\W*$", "captcha / bot check"),
    (_WALL, "bot wall (Cloudflare-style)"),
    (_JS, "requires JavaScript"),
)
_TEXT_RULES = _compile(
    (rf"\b404\b|{_NOT_FOUND}", "looks like a 404 page"),
    (_ACCESS, "access-denied page"),
    (rf"captcha|{_ROBOT}", "captcha / bot check"),
    (_WALL, "bot wall (Cloudflare-style)"),
    (_JS, "requires JavaScript"),
)


def _phrase(code: int) -> str:
    try:
        return f"HTTP {code} {HTTPStatus(code).phrase.lower()}"
    except ValueError:
        return f"HTTP {code}"


def _is_html(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in _HTML_TYPES


def classify(status_code: int, *, content_type: str | None, size: int, policy: FetchPolicy) -> tuple[Outcome, str]:
    """Outcome and a short reason for a final (non-redirect) HTTP answer.

    The status decides first, so a 404 served as text/plain is GONE, not SKIPPED.
    `size` is the body size in bytes when known (0 otherwise).
    """
    reason = _phrase(status_code)
    if status_code == 304:
        return Outcome.NOT_MODIFIED, reason
    if status_code in (404, 410):
        return Outcome.GONE, reason
    if status_code not in (200, 203):  # 5xx, 429, 401/403, other 4xx, odd 2xx/3xx
        return Outcome.ERROR, reason
    if content_type and not _is_html(content_type):  # a missing type is taken as HTML
        return Outcome.SKIPPED, f"content-type {content_type.split(';', 1)[0].strip()} is not HTML"
    if size > policy.max_bytes:
        return Outcome.SKIPPED, f"body over max_bytes ({policy.max_bytes} bytes)"
    return Outcome.OK, reason


def looks_soft_404(title: str | None, text: str, policy: FetchPolicy) -> str | None:
    """Why a 200 page looks like an error page or a bot wall, or None when it looks real."""
    title = (title or "").strip()
    body = text.strip()
    for pattern, reason in _TITLE_RULES:
        if pattern.search(title):
            return reason
    if len(body) < _WALL_TEXT_MAX_CHARS:
        for pattern, reason in _TEXT_RULES:
            if pattern.search(body):
                return reason
    if len(body) < policy.soft_404_min_chars:
        return f"near-empty page ({len(body)} chars of text)"
    return None
