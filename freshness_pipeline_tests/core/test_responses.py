import pytest
from hypothesis import given
from hypothesis import strategies as st

from freshness_pipeline.core.models import Outcome
from freshness_pipeline.core.responses import (
    NotFoundTemplate,
    ResponseRules,
    classify,
    has_login_form,
    looks_soft_404,
    turned_near_empty,
)

POLICY = ResponseRules(max_bytes=1000, soft_404_min_chars=50)
MIN = POLICY.soft_404_min_chars
HTML = "text/html; charset=utf-8"
REAL_TEXT = "Install the client, then configure the index and run a first refresh. " * 3
WALL_REASONS = ("captcha / bot check", "bot wall (Cloudflare-style)", "requires JavaScript")  # read from words


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
        ("Docs", "# Page not found\n\nSorry.", "404"),  # the h1 counts like the title
        ("Access denied", REAL_TEXT, "access-denied"),
        ("Just a moment...", REAL_TEXT, "Cloudflare"),
        ("Attention Required! | Cloudflare", REAL_TEXT, "Cloudflare"),
        ("Captcha", "Are you a robot?", "captcha"),
    ],
)
def test_error_titles_flag_new_and_known_pages(title: str | None, text: str, reason_has: str) -> None:
    for had in (None, 5000):
        reason = looks_soft_404(title, text, min_chars=MIN, had_chars=had)
        assert reason is not None and reason_has.lower() in reason.lower()


@pytest.mark.parametrize(
    ("text", "reason_has"),
    [
        ("Please complete the CAPTCHA to continue. " + REAL_TEXT, "captcha"),
        ("Are you a robot? " + REAL_TEXT, "captcha"),
        ("Checking your browser before accessing docs.example. " + REAL_TEXT, "Cloudflare"),
        ("You need to enable JavaScript to run this app. " + REAL_TEXT, "JavaScript"),
    ],
)
def test_a_page_that_had_text_is_judged_on_its_words(text: str, reason_has: str) -> None:
    reason = looks_soft_404("Docs", text, min_chars=MIN, had_chars=len(REAL_TEXT))
    assert reason is not None and reason_has.lower() in reason.lower()
    assert looks_soft_404("Docs", text, min_chars=MIN, had_chars=None) is None  # new: nothing to protect


@pytest.mark.parametrize(
    ("title", "text", "had"),
    [
        ("About", "A small team building documentation tools since 2019.", None),  # short, new
        ("About", "A small team building documentation tools since 2019.", 55),  # short, always was
        ("Newsletter", "Sign up below.", None),
        # A page about auth errors says "access denied" and "404" in its body.
        (
            "Authentication errors",
            "401 means no token; 403 Forbidden / access denied means the token "
            "lacks a scope. A 404 page not found answer hides a private resource.",
            None,
        ),
        ("Authentication errors", "Access denied: the token lacks a scope.", 60),
        ("Docs", REAL_TEXT[:150], len(REAL_TEXT)),  # shorter, not near-empty
    ],
)
def test_short_real_pages_are_not_flagged(title: str, text: str, had: int | None) -> None:
    assert looks_soft_404(title, text, min_chars=MIN, had_chars=had) is None
    assert turned_near_empty(text, min_chars=MIN, had_chars=had) is None


@given(st.text(st.characters(blacklist_characters="#"), max_size=MIN - 1), st.integers(2 * MIN, 100_000))
def test_a_page_cut_to_a_stub_turned_near_empty_and_shows_no_error_signal(stub: str, had: int) -> None:
    """A stub is no error page ("Obsolete, see ..."): it turned near-empty, which a second
    run may confirm, and it is never read as an error page, which is held for good."""
    why = turned_near_empty(stub, min_chars=MIN, had_chars=had)
    assert why is not None and why.startswith("turned near-empty") and str(had) in why
    assert looks_soft_404("Docs", stub, min_chars=MIN, had_chars=had) in (None, *WALL_REASONS)
    assert turned_near_empty(stub, min_chars=MIN, had_chars=None) is None  # new: nothing to protect
    assert turned_near_empty(stub, min_chars=MIN, had_chars=MIN - 1) is None  # was short already


def test_the_sites_not_found_page_is_recognised_whatever_path_it_echoes() -> None:
    template = NotFoundTemplate("Oops", "We looked for /docs/nope-123 but it is not here. Try the search.")
    echo = "We looked for /guide/page4 but it is not here. Try the search."
    assert looks_soft_404("Oops", echo, min_chars=MIN, not_found=template) == "same as the site's not-found page"
    assert looks_soft_404("Oops", REAL_TEXT, min_chars=MIN, not_found=template) is None
    assert looks_soft_404("About", echo, min_chars=MIN, not_found=template) is None  # a page's own title
    apology = " ".join(f"nothing{i % 17} lives at{i % 5} this address{i}" for i in range(40))
    long_template = NotFoundTemplate("Docs", apology)
    near = apology + " sorry"
    assert looks_soft_404("docs", near, min_chars=MIN, not_found=long_template) is not None  # near-identical


def test_a_page_that_turns_into_a_login_form_is_a_wall() -> None:
    html = '<form action="/login"><input name="u"><input type="password" name="p"></form>'
    assert has_login_form(html) and not has_login_form('<input type="text" name="q">')
    reason = looks_soft_404("Docs", "Sign in to continue.", min_chars=MIN, login_form=True, had_chars=len(REAL_TEXT))
    assert reason is not None and "login" in reason
    # A sign-in box in the header of a page whose text is all there, or of a new short page.
    assert looks_soft_404("Docs", REAL_TEXT, min_chars=MIN, login_form=True, had_chars=len(REAL_TEXT)) is None
    assert looks_soft_404("Docs", "Sign in to continue.", min_chars=MIN, login_form=True) is None


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
    for had in (None, len(text)):
        assert looks_soft_404(title, text, min_chars=MIN, had_chars=had) is None
