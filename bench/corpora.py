"""The real docs histories of `../shared/corpora` (or `$FRESHNESS_CORPORA`): their
revisions, and the build noise a site generator adds on every build. The corpus replay
tests and `bench/peers.py` both read them.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from freshness_pipeline.demo.render import dress, page_path, render, title_of
from freshness_pipeline.demo.server import load_built, load_folder

CORPORA = ("httpx", "starlette", "flask", "webdriverio")  # mkdocs markdown (2), Sphinx HTML, Docusaurus HTML
REPO = Path(__file__).resolve().parents[1]

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
    docs: dict[str, str]  # {"a/b.md": markdown}, or {"/a/b/": html} of a built site (`rK/site/`)


def load_revisions(folder: Path) -> list[Revision]:
    meta = json.loads((folder / "revisions.json").read_text())
    revs = [Revision(m["rev"], m["date"], _load(folder / f"r{m['rev']}")) for m in meta]
    for rev, m in zip(revs, meta, strict=True):
        assert len(rev.docs) == m["pages"], (
            f"{folder.name}/r{rev.number}: {len(rev.docs)} pages, revisions.json says {m['pages']}"
        )
    return revs


def _load(folder: Path) -> dict[str, str]:
    return load_built(folder / "site") if (folder / "site").is_dir() else load_folder(folder)


def clean_page(rel: str, text: str, date: str | None = None) -> str:
    """A page as its site serves it without noise: markdown rendered, built HTML as built."""
    return dress(text, date=date) if rel.startswith("/") else render(text, title=title_of(text, rel), nav={}, date=date)


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
    the build's tip of the day at the top of <main>, a "Related pages" aside in <main> (three
    pages drawn for each page and build), and each page's declared date."""
    rng = random.Random(build)
    month = rng.randrange(12)
    stamp = f"2026-{month + 1:02d}-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:07Z"
    by_path = {page_path(rel): date for rel, date in dates.items()}
    paths = sorted(by_path)

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
            "related": " ".join(rng.sample(paths, min(3, len(paths)))),
        }

    return noise
