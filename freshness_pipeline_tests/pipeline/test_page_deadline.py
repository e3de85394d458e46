"""A page whose processing outlasts `fetch.page_deadline_s` is not read: its extraction
says why, so the crawl flags it and it keeps its last text (as any page whose text cannot
be read whole). The deadline is injected, never guessed from a clock: a deadline shorter
than any work outlasts every page, a generous one none."""

from __future__ import annotations

from freshness_pipeline.pipeline.workers import ExtractJob, extract_one

URL = "https://docs.example.com/guide/a/"
PAGE = "<html><head><title>A</title></head><body><main><h1>A</h1><p>Some text of the page.</p></main></body></html>"


def test_processing_past_the_page_deadline_is_an_error_naming_it() -> None:
    late = extract_one(ExtractJob(URL, PAGE, (), deadline_s=1e-9))
    assert late.markdown == "" and late.error is not None
    assert "over fetch.page_deadline_s (1e-09s)" in late.error and "keeps it" in late.error


def test_processing_within_the_deadline_reads_the_page() -> None:
    for deadline in (None, 3600.0):
        text = extract_one(ExtractJob(URL, PAGE, (), deadline_s=deadline))
        assert text.error is None and text.markdown == "# A\n\nSome text of the page."
