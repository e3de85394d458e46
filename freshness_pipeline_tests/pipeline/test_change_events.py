"""The change events of a plan: one per page, gone pages told apart; linear in the pages."""

from __future__ import annotations

import pytest

from freshness_pipeline.core.fingerprint import content_hash
from freshness_pipeline.core.models import Section
from freshness_pipeline.pipeline.planning import change_events, gone_events
from freshness_pipeline_tests.counting import CountingStr


def _sec(url: str, key: str) -> Section:
    return Section(key, 0, url, ("Page",), 0, "t", "t", content_hash("t"), None, 1)


def test_one_event_per_page_new_changed_and_gone() -> None:
    upserts = [_sec("u/a", "k1"), _sec("u/a", "k2"), _sec("u/b", "k3")]
    events = change_events(upserts, {"u/c", "u/d"}, {"u/a", "u/c"}, {"u/d"}) + gone_events(["u/d"])
    got = [(e.url, e.kind, e.section_keys) for e in events]
    assert got == [
        ("u/a", "changed", ("k1", "k2")),
        ("u/b", "new", ("k3",)),
        ("u/c", "changed", ()),
        ("u/d", "gone", ()),
    ]
    assert events[1].content_hash == upserts[2].content_hash and events[0].content_hash is None


@pytest.mark.parametrize("pages", [200, 2000])
def test_gone_pages_are_looked_up_not_scanned(pages: int) -> None:
    """A list scan of the gone pages per touched page (the old quadratic) compares every
    gone URL once per page."""
    upserts = [_sec(f"u/{i}", f"k{i}") for i in range(pages)]
    gone = {CountingStr(f"g/{i}") for i in range(pages // 10)}
    CountingStr.reset()
    events = change_events(upserts, set(), set(), gone)
    assert len(events) == pages
    assert CountingStr.ops <= 30 * len(gone)
