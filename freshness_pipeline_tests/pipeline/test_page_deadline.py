"""A page whose processing outlasts `fetch.page_deadline_s` is not read: its extraction
says why, so the crawl flags it and it keeps its last text (as any page whose text cannot
be read whole). Its segmentation is bound the same way: a page past it is in error with the
same line and keeps its records. The deadline is injected, never guessed from a clock: a
deadline shorter than any work outlasts every page, a generous one none, and a clock that
ticks one second per reading stands for work whose every step is slow."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from freshness_pipeline.adapters.embedders.tokenizer import TokenizerSpec
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline import sections
from freshness_pipeline.pipeline.workers import Cut, ExtractJob, SegmentJob, extract_one, segment_one
from freshness_pipeline_tests.pipeline.driver import Freshness

URL = "https://docs.example.com/guide/a/"
PAGE = "<html><head><title>A</title></head><body><main><h1>A</h1><p>Some text of the page.</p></main></body></html>"
TOKENS = TokenizerSpec("tiktoken", "cl100k_base", 400)  # the hashing embedder's
LONG = "# Long\n\n## Part\n\n" + "\n\n".join(f"Paragraph {i} says what the part is about." for i in range(300))


class Ticks:
    """A clock one second later at every reading."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def test_processing_past_the_page_deadline_is_an_error_naming_it() -> None:
    late = extract_one(ExtractJob(URL, PAGE, (), deadline_s=1e-9))
    assert late.markdown == "" and late.error is not None
    assert "over fetch.page_deadline_s (1e-09s)" in late.error and "keeps it" in late.error
    # Read after extraction (1 s in: within 1.5 s) and after normalization (2 s: past it).
    late = extract_one(ExtractJob(URL, PAGE, (), deadline_s=1.5), Ticks())
    assert late.error == (
        "processing the page took 2.0s, over fetch.page_deadline_s (1.5s): not read (a page with text keeps it)"
    )


def test_processing_within_the_deadline_reads_the_page() -> None:
    for deadline in (None, 3600.0):
        text = extract_one(ExtractJob(URL, PAGE, (), deadline_s=deadline))
        assert text.error is None and text.markdown == "# A\n\nSome text of the page."


def test_segmenting_past_the_page_deadline_stops_at_the_next_count() -> None:
    """The deadline is read at every token count (each section, piece and chunk): a long
    section stops at the first count past it, not at the end of the page."""
    clock = Ticks()
    _, late = segment_one(SegmentJob(URL, LONG, None, "Long", frozenset(), TOKENS, deadline_s=50.0), clock)
    assert late == (
        "processing the page took 51.0s, over fetch.page_deadline_s (50s): not segmented (its records stay as they are)"
    )
    assert clock.reads == 52  # the start, 50 counts within the deadline, the one past it

    clock = Ticks()
    _, cut = segment_one(SegmentJob(URL, LONG, None, "Long", frozenset(), TOKENS, deadline_s=None), clock)
    assert isinstance(cut, Cut) and len(cut.sections) > 10
    assert clock.reads == 1  # no deadline: the clock is read once, counts are not wrapped


def test_a_page_past_its_deadline_in_segmentation_keeps_its_records(
    dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through `freshness run`: the long page's edit is not indexed, its old records stay,
    the run names it with the deadline's line; the short page's edit is indexed."""
    with DocsSite() as site:
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        short = "# Short\n\nA short page about the client."
        site.publish({"guide/long.md": LONG, "guide/short.md": short})
        fr.run()
        before = {r["id"]: r["text"] for r in fr.dump() if r["url"].endswith("/long")}
        assert len(before) > 10

        site.publish({"guide/long.md": LONG.replace("Paragraph 7 ", "Paragraph seven "), "guide/short.md": short + "!"})
        # In this process: a site this small is segmented inline (`workers.POOL_MIN_ITEMS`).
        monkeypatch.setattr(sections, "segment_one", partial(segment_one, clock=Ticks()))
        c = fr.run()
        (url,) = c["error_pages"]
        assert url.endswith("/guide/long") and "over fetch.page_deadline_s (60s)" in c["error_pages"][url], c
        after = fr.dump()
        assert {r["id"]: r["text"] for r in after if r["url"].endswith("/long")} == before
        assert [r["text"] for r in after if r["url"].endswith("/short")] == ["A short page about the client.!"]
