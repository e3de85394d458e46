"""CPU-bound per-page work (extraction, segmentation), spread over every core.

Top-level functions only, so that worker processes can import them by name.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from itertools import chain, islice
from typing import NamedTuple, TypeVar

from ..adapters.embedders.tokenizer import TokenizerSpec
from ..core.models import PageText, Section
from ..core.noise import RULES, normalize, strip_template_blocks
from ..core.segment import TokenCount, segment

T = TypeVar("T")
R = TypeVar("R")
Clock = Callable[[], float]  # seconds, monotonic

# Below this many items a pool costs more than it saves: each spawned worker starts an
# interpreter and imports the extraction modules before its first page. Where the two cross
# on 2 cores: `python -m bench.pool` (docs/benchmarks.md, "Extraction pool").
POOL_MIN_ITEMS = 512
CHUNK = 16  # items per task sent to a worker
IN_FLIGHT = 8  # tasks per worker submitted ahead of the results read: memory stays bounded


@dataclass(frozen=True, slots=True)
class ExtractJob:
    url: str
    html: str
    disabled_rules: tuple[str, ...]
    deadline_s: float | None = None  # `fetch.page_deadline_s`: processing past it is an error


@dataclass(frozen=True, slots=True)
class SegmentJob:
    url: str
    markdown: str
    page_date: str | None
    title: str | None
    template_blocks: frozenset[str]
    tokenizer: TokenizerSpec
    deadline_s: float | None = None  # `fetch.page_deadline_s`: segmenting past it is an error


def extract_one(job: ExtractJob, clock: Clock = time.monotonic) -> PageText:
    # trafilatura loads with the first page a process extracts: a run whose pages all came
    # back unchanged extracts none, and so does the code location's load (0.1 s each).
    from ..core.extract import extract

    started = clock()
    unread = "not read (a page with text keeps it)"
    try:
        page = extract(job.html, job.url)
        if page.error:
            return PageText(job.url, "", None, None, error=page.error)
        if (late := _late(job.deadline_s, clock() - started, unread)) is None:
            md = normalize(page.markdown, url=job.url, disabled=job.disabled_rules)
            late = _late(job.deadline_s, clock() - started, unread)
        if late is not None:
            return PageText(job.url, "", None, None, error=late)
        return PageText(job.url, md, page.title, page.date)
    except Exception as exc:  # one broken page never fails a run
        return PageText(job.url, "", None, None, error=f"extraction failed: {exc!r}"[:500])


def _late(deadline_s: float | None, spent: float, outcome: str) -> str | None:
    """Why the page's text is not used when its processing outlasted its deadline: the
    page is flagged and keeps what it had (`outcome` says what)."""
    if deadline_s is None or spent <= deadline_s:
        return None
    return f"processing the page took {spent:.1f}s, over fetch.page_deadline_s ({deadline_s:g}s): {outcome}"


class _Late(Exception):
    """Raised through the segmenter when the page's deadline has passed."""


class Cut(NamedTuple):
    sections: list[Section]
    blocks: frozenset[str]  # the fingerprints of the template blocks the page's text had


def segment_one(job: SegmentJob, clock: Clock = time.monotonic) -> tuple[str, Cut | str]:
    """Sections of one page, or an error message naming what went wrong. The deadline is
    checked at every token count: each section, each piece a long one is cut into, and
    each chunk is counted."""
    started = clock()
    try:
        # Rules already ran at extraction; here only the source's template blocks go.
        md = normalize(job.markdown, url=job.url, disabled=RULES.keys())
        md, stripped = strip_template_blocks(md, job.template_blocks)
        t = job.tokenizer
        count = _bounded(t.counter(), job.deadline_s, lambda: clock() - started)
        sections = segment(
            job.url,
            md,
            page_date=job.page_date,
            title=job.title,
            budget=t.budget,
            count=count,
            target_share=t.target_share,
        )
        return job.url, Cut(sections, stripped)
    except _Late as late:
        return job.url, str(late)
    except Exception as exc:
        return job.url, f"segmentation failed: {exc!r}"[:500]


def _bounded(count: TokenCount, deadline_s: float | None, spent: Clock) -> TokenCount:
    """`count`, raising `_Late` once the page has spent its deadline."""
    if deadline_s is None:
        return count

    def bounded(text: str) -> int:
        if late := _late(deadline_s, spent(), "not segmented (its records stay as they are)"):
            raise _Late(late)
        return count(text)

    return bounded


def parallel_map(fn: Callable[[T], R], items: Iterable[T]) -> Iterator[R]:
    """`map` over a process pool when there is enough work, in order; else inline.

    `items` may be a generator still being produced (pages still downloading): the pool
    starts once `POOL_MIN_ITEMS` have arrived and works while the rest come in. Items are
    taken from `items` only as results are read (`IN_FLIGHT` tasks per worker ahead), so
    neither the items nor the results pile up in memory.
    """
    rest = iter(items)
    head = list(islice(rest, POOL_MIN_ITEMS))
    workers = os.cpu_count() or 1
    if len(head) < POOL_MIN_ITEMS or workers < 2:
        yield from map(fn, chain(head, rest))
        return
    ctx = multiprocessing.get_context("spawn")
    todo = chain(head, rest)
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        pending: deque[Future[list[R]]] = deque()
        while chunk := list(islice(todo, CHUNK)):
            pending.append(pool.submit(_map_chunk, fn, chunk))
            if len(pending) >= IN_FLIGHT * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()


def _map_chunk(fn: Callable[[T], R], chunk: list[T]) -> list[R]:
    return [fn(item) for item in chunk]
