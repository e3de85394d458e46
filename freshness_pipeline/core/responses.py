"""What a raw HTTP answer means for the index, and whether a 200 page is really an error page.

Pure: no I/O. The fetcher calls `classify` on every response; the engine calls
`looks_soft_404` once the page text has been extracted, with what it knows of the page's
history and of the site's own not-found page, and `turned_near_empty` on a short text of
a page that had more: an error signal is held for as long as it lasts, a page that only
turned near-empty is held until a second run confirms its text.
"""

from __future__ import annotations

import hashlib
import heapq
import re
import zlib
from array import array
from dataclasses import dataclass
from http import HTTPStatus

from freshness_pipeline.core.fingerprint import fold_typography, hamming, simhash
from freshness_pipeline.core.models import Outcome

_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True, slots=True)
class ResponseRules:
    """`fetch.max_bytes` and `fetch.soft_404_min_chars` of the sources file."""

    max_bytes: int
    soft_404_min_chars: int


def _compile(*rules: tuple[str, str]) -> tuple[tuple[re.Pattern[str], str], ...]:
    return tuple((re.compile(pattern, re.IGNORECASE), reason) for pattern, reason in rules)


# Error pages and bot walls are short: wall phrases are searched in the text only below
# this length, so a long docs page *about* captchas or Cloudflare is not flagged.
SHORT_TEXT_CHARS = 1500
_SAME_TEMPLATE_BITS = 3  # simhash distance under which two texts are one template

_NOT_FOUND = r"page\s+(?:was\s+)?not\s+found"
_ACCESS = r"access\s+denied|\b403\s+forbidden\b"
_ROBOT = r"are\s+you\s+a\s+robot|verify\s+(?:that\s+)?you\s+are\s+(?:a\s+)?human"
_WALL = (
    r"checking\s+your\s+browser|just\s+a\s+moment\.\.\.|attention\s+required"
    r"|cloudflare\s+ray\s+id|ddos\s+protection\s+by"
)
_JS = r"enable\s+javascript|javascript\s+is\s+(?:required|disabled)"
# (pattern, reason) on the title and the first h1: the unambiguous forms only. A bare "404"
# at the start ("404 | Docs", "Error 404"), a bare "captcha" as the whole title; so
# "Handling 404 responses" or "Captcha integration" stay real pages.
_HEADING_RULES = _compile(
    (rf"^\W*(?:error\s*)?404\b|{_NOT_FOUND}|^\W*not\s+found\W*$", "looks like a 404 page"),
    (_ACCESS, "access-denied page"),
    (rf"{_ROBOT}|^\W*captcha\W*$", "captcha / bot check"),
    (_WALL, "bot wall (Cloudflare-style)"),
    (_JS, "requires JavaScript"),
)
# Bot walls in a short text, for a page that had real text. "Not found" and "access denied"
# are never read from body words: a page about error codes says them.
_WALL_TEXT_RULES = _compile(
    (rf"captcha|{_ROBOT}", "captcha / bot check"),
    (_WALL, "bot wall (Cloudflare-style)"),
    (_JS, "requires JavaScript"),
)
_H1 = re.compile(r"^#\s+(.+)$", re.MULTILINE)
_PASSWORD_INPUT = re.compile(r"<input\b[^>]*\btype\s*=\s*[\"']?password\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class NotFoundTemplate:
    """The site's own answer to a URL that cannot exist, when it is a 200 (a soft 404):
    a page that reads like it is the same error page."""

    title: str | None
    text: str
    served_at: str | None = None  # the page the probe was redirected to: itself no error page

    def matches(self, title: str | None, text: str) -> bool:
        """Same title and the same (or a near-identical) text, the URLs they echo aside. The
        title must agree: a real page has its own, even when its text is mostly chrome."""
        if _words(title or "") != _words(self.title or ""):
            return False
        mine, theirs = _words(text), _words(self.text)
        if mine == theirs:
            return True
        a, b = simhash(" ".join(mine)), simhash(" ".join(theirs))
        return a is not None and b is not None and hamming(a, b) <= _SAME_TEMPLATE_BITS


def _words(text: str) -> list[str]:
    """The words of a text, casefolded and typography folded, bar those holding a `/`
    (paths and URLs: an error page echoes the one asked for). A split, not a regex: linear
    on any token."""
    return [w for w in fold_typography(text).casefold().split() if "/" not in w]


def text_shape(text: str) -> str:
    """What pages serving one error or maintenance page have in common: the words of the
    text, case and the URLs it echoes aside (a hash)."""
    return hashlib.sha256(" ".join(_words(text)).encode()).hexdigest()


SKETCH_SIZE = 64  # shingle hashes kept per text: a bottom-k sketch (about 6% error at k=64)
UNLIKE_BELOW = 0.2  # resemblance under which a page's new text is another text (half a page rewritten: ~0.3)


def text_sketch(text: str) -> bytes:
    """A small fixed-size summary of a text's word 3-shingles (the `SKETCH_SIZE` smallest
    of their hashes, packed), from which `resemblance` estimates how alike two texts are.
    Kept for every changed page of a run, so it is bytes, not a set."""
    words = _words(text)
    n = min(3, len(words))
    hashes = {zlib.crc32(" ".join(words[i : i + n]).encode()) for i in range(len(words) - n + 1)} if words else set()
    return array("I", heapq.nsmallest(SKETCH_SIZE, hashes)).tobytes()


def resemblance(a: bytes, b: bytes) -> float:
    """Estimated share of word 3-shingles two texts have in common (Jaccard, 0 to 1)."""
    sa, sb = set(array("I", a)), set(array("I", b))
    if not sa and not sb:
        return 1.0
    union = heapq.nsmallest(SKETCH_SIZE, sa | sb)
    return sum(1 for h in union if h in sa and h in sb) / len(union)


def has_login_form(html: str) -> bool:
    """A password field: the page asks to sign in rather than showing content."""
    return _PASSWORD_INPUT.search(html) is not None


def _phrase(code: int) -> str:
    try:
        return f"HTTP {code} {HTTPStatus(code).phrase.lower()}"
    except ValueError:
        return f"HTTP {code}"


def _is_html(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() in _HTML_TYPES


def classify(status_code: int, *, content_type: str | None, size: int, policy: ResponseRules) -> tuple[Outcome, str]:
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


def looks_soft_404(
    title: str | None,
    text: str,
    *,
    min_chars: int,
    had_chars: int | None = None,
    not_found: NotFoundTemplate | None = None,
    login_form: bool = False,
) -> str | None:
    """Why a 200 page looks like an error page or a bot wall, or None when it shows no error
    signal (see `turned_near_empty` for a page that only lost its text).

    Judged from the title and the first h1, the site's own not-found page (`not_found`), and
    the page's own history: `had_chars` is the length of its last indexed text (None for a
    new page). Only a page that had real text can turn into a login form (`login_form`: the
    HTML has a password field) or be read as a wall from its words; a new short page is a
    real page.
    """
    body = text.strip()
    h1 = _H1.search(body)
    headings = [(title or "").strip(), h1.group(1).strip() if h1 else ""]
    for pattern, reason in _HEADING_RULES:
        if any(pattern.search(h) for h in headings if h):
            return reason
    if not_found is not None and not_found.matches(title, body):
        return "same as the site's not-found page"
    if had_chars is None or had_chars < min_chars:
        return None  # nothing to protect: a short page that was always short is real
    if login_form and len(body) * 2 < had_chars:  # a sign-in box in the header alone is not
        return "login wall (a sign-in form instead of the page's text)"
    if len(body) < SHORT_TEXT_CHARS:
        for pattern, reason in _WALL_TEXT_RULES:
            if pattern.search(body):
                return reason
    return None


def turned_near_empty(text: str, *, min_chars: int, had_chars: int | None) -> str | None:
    """Why a page that had real text (`had_chars`, None for a new page) now reads as
    near-empty, or None. No error signal: a real page may be cut to a stub ("Obsolete, see
    ..."), so a second run that sees the same text confirms it."""
    body = text.strip()
    if had_chars is not None and had_chars >= min_chars and len(body) < min_chars and len(body) * 2 < had_chars:
        return f"turned near-empty ({len(body)} chars of text, had {had_chars})"
    return None
