"""Replaying a real docs history: the revisions, the build noise a site generator adds on
every build, and the oracle, what the index must hold for one revision.

The oracle renders each page *without* noise and runs the project's own text core on it
(extract -> normalize -> segment): the pipeline, fed the noisy pages, must end up with
exactly these sections. What changed between two revisions is computed here, from the
oracles' (id -> content hash) maps, never from the pipeline's plan. Sharing the text core
with the pipeline, the oracle cannot catch that core's own mistakes (see test_replay.py).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from freshness_pipeline.config import ChunkPolicy
from freshness_pipeline.core.extract import extract
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.segment import segment
from freshness_pipeline.core.urls import normalize_url
from freshness_pipeline.demo.render import page_path, render, title_of
from freshness_pipeline.demo.server import load_folder

CORPORA = ("httpx", "starlette")
REPO = Path(__file__).resolve().parents[2]

# Rotated per build, the same on every page of a build, like a real "tip of the day".
TIPS = (
    "press the slash key anywhere to search these docs.",
    "every page has an edit link that opens its source on GitHub.",
    "dark mode follows your system settings unless you pick a theme.",
    "code blocks have a copy button in their top right corner.",
    "the changelog lists every release with its upgrade notes.",
)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


def corpora_root() -> Path:
    return Path(os.environ.get("FRESHNESS_CORPORA") or REPO.parent / "shared" / "corpora")


@dataclass(frozen=True)
class Revision:
    number: int
    date: str  # "YYYY-MM-DD" of the upstream commit
    docs: dict[str, str]  # {"a/b.md": markdown}


def load_revisions(folder: Path) -> list[Revision]:
    meta = json.loads((folder / "revisions.json").read_text())
    revs = [Revision(m["rev"], m["date"], load_folder(folder / f"r{m['rev']}")) for m in meta]
    for rev, m in zip(revs, meta, strict=True):
        assert len(rev.docs) == m["pages"], (
            f"{folder.name}/r{rev.number}: {len(rev.docs)} pages, revisions.json says {m['pages']}"
        )
    return revs


def first_seen(revisions: list[Revision]) -> dict[str, str]:
    """Each page's declared date: the date of the first revision it appears in."""
    dates: dict[str, str] = {}
    for rev in revisions:
        for rel in rev.docs:
            dates.setdefault(rel, rev.date)
    return dates


def build_noise(build: int, dates: Mapping[str, str]) -> Callable[[str], dict[str, str]]:
    """`DocsSite.publish(noise=...)` for one build: a "Last updated" line in the article (a
    date in any month, an ISO stamp or a relative time), an ISO build stamp in the footer,
    the build's tip of the day at the top of <main>, and each page's declared date."""
    rng = random.Random(build)
    month = rng.randrange(12)
    stamp = f"2026-{month + 1:02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:07Z"
    by_path = {page_path(rel): date for rel, date in dates.items()}

    def noise(path: str) -> dict[str, str]:
        updated = rng.choice(
            (
                f"{_MONTHS[month]} {rng.randrange(1, 29)}, 2026 {rng.randrange(24)}:{rng.randrange(60):02d}",
                stamp,
                f"{rng.randrange(2, 30)} days ago",
            )
        )
        return {
            "updated": updated,
            "build": f"with mkdocs 1.6.1 on {stamp} (build #{4000 + build}, {rng.getrandbits(32):08x})",
            "tip": TIPS[build % len(TIPS)],
            "date": by_path[path],
        }

    return noise


def oracle(base_url: str, docs: Mapping[str, str], dates: Mapping[str, str]) -> dict[str, Section]:
    """id -> section of every section the index must hold for `docs`, from clean pages."""
    out: dict[str, Section] = {}
    for rel, text in docs.items():
        url = normalize_url(base_url + page_path(rel))
        for s in _page_oracle(url, rel, text, dates[rel]):
            assert s.id not in out, f"oracle: two sections with id {s.id} ({url} {s.heading})"
            out[s.id] = s
    return out


@lru_cache(maxsize=1024)
def _page_oracle(url: str, rel: str, text: str, date: str) -> tuple[Section, ...]:
    """One clean page's sections; cached, as most pages are the same from one revision to the
    next (the text core is a pure function of these arguments)."""
    chunking = ChunkPolicy()
    page = extract(render(text, title=title_of(text, rel), nav={}, date=date), url)
    markdown = normalize(page.markdown, url=url)
    return tuple(segment(url, markdown, page_date=date, budget=chunking.token_budget, encoding=chunking.encoding))


@dataclass(frozen=True)
class Diff:
    """What one step must write: by id, and by text (the embedding cache reuses vectors)."""

    upserted: int  # records written: new ids, and ids whose content hash changed
    deleted: int  # ids that no longer exist (removed, or moved to another key)
    embedded: int  # distinct texts never indexed before in this replay


def expected_diff(before: Mapping[str, Section], after: Mapping[str, Section], indexed_texts: set[str]) -> Diff:
    written = [s for i, s in after.items() if i not in before or before[i].content_hash != s.content_hash]
    return Diff(
        upserted=len(written),
        deleted=len(before.keys() - after.keys()),
        embedded=len({s.content_hash for s in written} - indexed_texts),
    )
