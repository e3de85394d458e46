import pytest

from freshness_pipeline.config import FetchPolicy
from freshness_pipeline.core.models import Outcome
from freshness_pipeline.core.status import classify, looks_soft_404

POLICY = FetchPolicy(max_bytes=1000, soft_404_min_chars=50)
HTML = "text/html; charset=utf-8"
REAL_TEXT = "Install the client, then configure the index and run a first refresh. " * 3


@pytest.mark.parametrize(
    ("status", "content_type", "size", "outcome", "reason_has"),
    [
        (200, HTML, 10, Outcome.OK, "200"),
        (200, None, 10, Outcome.OK, "200"),
        (200, "application/xhtml+xml", 10, Outcome.OK, "200"),
        (304, None, 0, Outcome.NOT_MODIFIED, "304"),
        (404, HTML, 10, Outcome.GONE, "404 not found"),
        (410, "text/plain", 10, Outcome.GONE, "410 gone"),
        (500, HTML, 10, Outcome.ERROR, "500"),
        (503, HTML, 10, Outcome.ERROR, "503 service unavailable"),
        (429, HTML, 10, Outcome.ERROR, "429 too many requests"),
        (403, HTML, 10, Outcome.ERROR, "403 forbidden"),
        (401, HTML, 10, Outcome.ERROR, "401"),
        (206, HTML, 10, Outcome.ERROR, "206"),
        (200, "application/pdf", 10, Outcome.SKIPPED, "content-type application/pdf is not HTML"),
        (200, "Text/HTML", 10, Outcome.OK, "200"),
        (200, HTML, 1001, Outcome.SKIPPED, "max_bytes"),
        (200, HTML, 1000, Outcome.OK, "200"),
        (599, HTML, 0, Outcome.ERROR, "HTTP 599"),
    ],
)
def test_classify(status: int, content_type: str | None, size: int, outcome: Outcome, reason_has: str) -> None:
    got, reason = classify(status, content_type=content_type, size=size, policy=POLICY)
    assert got is outcome
    assert reason_has in reason


def test_status_decides_before_content_type() -> None:
    assert classify(404, content_type="application/pdf", size=10**9, policy=POLICY)[0] is Outcome.GONE


@pytest.mark.parametrize(
    ("title", "text", "reason_has"),
    [
        ("404 | Docs", REAL_TEXT, "404"),
        ("Error 404", REAL_TEXT, "404"),
        ("Page not found", REAL_TEXT, "404"),
        ("Not Found", REAL_TEXT, "404"),
        ("Docs", "Sorry, the page you asked for was not here. Error 404. " + REAL_TEXT, "404"),
        ("Access denied", REAL_TEXT, "access-denied"),
        ("Docs", "Please complete the CAPTCHA to continue. " + REAL_TEXT, "captcha"),
        ("Docs", "Are you a robot? " + REAL_TEXT, "captcha"),
        ("Just a moment...", REAL_TEXT, "Cloudflare"),
        ("Docs", "Checking your browser before accessing docs.example. " + REAL_TEXT, "Cloudflare"),
        ("Attention Required! | Cloudflare", REAL_TEXT, "Cloudflare"),
        ("Docs", "You need to enable JavaScript to run this app. " + REAL_TEXT, "JavaScript"),
        ("Docs", "Loading…", "near-empty"),
        (None, "", "near-empty"),
    ],
)
def test_soft_404_flags(title: str | None, text: str, reason_has: str) -> None:
    reason = looks_soft_404(title, text, POLICY)
    assert reason is not None and reason_has.lower() in reason.lower()


@pytest.mark.parametrize(
    ("title", "text"),
    [
        ("Getting started", REAL_TEXT),
        ("Handling 404 responses", REAL_TEXT),  # a page about errors is not an error page
        (
            "Errors",
            REAL_TEXT + " The API answers 404 when the index is missing. " + "More text. " * 200,
        ),
        ("Captcha integration", REAL_TEXT + "Configure the captcha provider. " * 100),
    ],
)
def test_real_pages_are_not_flagged(title: str, text: str) -> None:
    assert looks_soft_404(title, text, POLICY) is None
