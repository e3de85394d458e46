"""A page that turned near-empty (the `near_empty` row of the quarantine: `core/observe.py`
sees it, `lifecycle.settle_near_empty` judges it): held at first sight with its row as it
was, taken when the next run sees the same text, held afresh for another text, and held
for good while it reads as an error page (`soft_404`)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.lifecycle import (
    Answer,
    CrawlDecisions,
    CrawlRun,
    LifecyclePolicy,
    apply_answers,
    settle_near_empty,
)
from freshness_pipeline.core.models import FetchResult, Outcome, PageText
from freshness_pipeline.core.noise import learn_template_blocks
from freshness_pipeline.core.observe import near_empty_key
from freshness_pipeline.core.quarantine import Kind, Quarantine
from freshness_pipeline.core.state import PageRow

URL = "http://docs.test/reqcontext"
LONG = "The request context keeps track of the request-level data during a request. " * 40
POLICY = LifecyclePolicy(soft_404_min_chars=200)
RUN = CrawlRun("s", 1000.0, listed=frozenset({URL}))
TIPS = ("Tip of the day: press the slash key to search.", "Tip of the day: every page has an edit link.")
WORDS = st.sampled_from(["Obsolete,", "see", "the", "App", "Context", "instead.", "moved", "to", "guide", "Stub"])
stubs = st.lists(WORDS, min_size=1, max_size=12).map(" ".join)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _known(held: Quarantine | None = None) -> dict[str, PageRow]:
    row = PageRow(source="s", url=URL, fetch_url=URL, text_hash=_sha(LONG), title="Ctx", state="live", quarantine=held)
    return {URL: row}


def _blocks(tip: str) -> frozenset[str]:
    """The template blocks a build with this tip on every page teaches."""
    return learn_template_blocks([f"{tip}\n\nPage {i} text." for i in range(10)], share=0.5)


def _crawl(known: dict[str, PageRow], stub: str, title: str = "The Request Context", tip: str = TIPS[0]) -> tuple:
    """One run that fetches the page showing `stub` under a build's `tip`, settled on that
    build's template blocks: (decisions, whether the page was taken after its hold)."""
    text = PageText(URL, f"{tip}\n\n# {title}\n\n{stub}", title, None)
    out = apply_answers(known, [Answer(FetchResult(URL, Outcome.OK, 200), text, last_text=LONG)], RUN, POLICY)
    keys = {u: near_empty_key(a.text.markdown, u, _blocks(tip)) for u, (a, _) in out.near_empty.items() if a.text}
    settle_near_empty(out, known, keys, RUN, POLICY)
    return out, URL in out.taken


def _held(out: CrawlDecisions, known: dict[str, PageRow]) -> bool:
    row = out.rows[URL]
    return (
        row.text_hash == known[URL].text_hash
        and row.markdown is None
        and row.outcome == Outcome.FLAGGED.value
        and out.flagged[URL] == row.flag
        and out.changed_pages == 0
    )


@settings(max_examples=60, deadline=None)
@given(stubs)
def test_a_stub_is_held_at_first_sight_and_taken_when_the_next_run_sees_it_again(stub: str) -> None:
    known = _known()
    first, line = _crawl(known, stub, tip=TIPS[0])
    assert _held(first, known) and not line and first.held == {URL: Kind.NEAR_EMPTY}
    assert first.rows[URL].flag.startswith("turned near-empty") and first.rows[URL].quarantine.seen == 1
    # The next build rotates its tip of the day: the same stub, the same text for the index.
    known = {URL: replace(first.rows[URL])}
    second, line = _crawl(known, stub, tip=TIPS[1])
    row = second.rows[URL]
    assert row.text_hash == _sha(f"{TIPS[1]}\n\n# The Request Context\n\n{stub}") and row.markdown is not None
    assert (row.flag, row.quarantine, row.outcome, second.flagged, second.changed_pages) == (None, None, "ok", {}, 1)
    assert line and second.taken == {URL: Kind.NEAR_EMPTY}


@settings(max_examples=60, deadline=None)
@given(stubs, stubs)
def test_another_short_text_restarts_the_confirmation(stub: str, other: str) -> None:
    first, _ = _crawl(_known(), stub)
    known = {URL: replace(first.rows[URL])}
    second, line = _crawl(known, other)
    if other == stub:
        assert second.rows[URL].outcome == "ok"
        return
    assert _held(second, known) and not line
    assert second.rows[URL].quarantine.evidence != first.rows[URL].quarantine.evidence


@settings(max_examples=30, deadline=None)
@given(stubs, st.integers(1, 4))
def test_an_error_page_is_held_for_as_long_as_it_lasts(stub: str, runs: int) -> None:
    """A not-found page is held on every run, never confirmed, even after the same short
    text was held as near-empty the run before."""
    first, _ = _crawl(_known(), stub)
    known = {URL: replace(first.rows[URL])}
    for _ in range(runs):
        out, line = _crawl(known, stub, title="Page not found")
        assert _held(out, known) and not line and out.near_empty == {}
        assert "404" in out.rows[URL].flag and out.rows[URL].quarantine.kind is Kind.SOFT_404
        known = {URL: replace(out.rows[URL])}
