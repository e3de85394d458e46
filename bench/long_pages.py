"""What an edit in a long page costs: `python -m bench.long_pages` (`make bench-long-pages`).

Two generated pages, each one long section under one heading, are revised `--steps` times:

  changelog  a release list (one item per change), new items on top every step, one item
             edited in the middle, one moved down, one deleted
  table      a generated reference table, rows inserted at the top, in the middle and at
             the end, two rows edited, one row moved

and a generated settings reference (about 215 KB: 207 `##` settings in nine groups, each
with its text, a type table and a `### Example`) is moved once:

  split      one page becomes nine, a group each under its own page title; the old page
             is gone, every section keeps its heading and text
  merge      nine pages, a group each, become one page under a new title

Each step is indexed by

  ours       the project's text core (`core.segment`, the default chunk policy: cl100k,
             400 tokens; `--embedder local`: the shipped model's 256 wordpieces), paying
             for every retrieval text it never embedded before: what a refresh embeds
             (the embedding cache keys vectors by that text; the corpus replay proves the
             pipeline embeds exactly these)
  lc         LangChain `index()` with the whole site in one batch (its best configuration,
             as in `bench/peers.py`: MarkdownHeaderTextSplitter, RecursiveCharacterTextSplitter(2000),
             SQLRecordManager, cleanup="incremental"); needs the `[peers]` extra

and compared with the generator's floor: the characters of the chunks (ours) that hold a
change the generator made, an inserted, edited or moved row, or the place a row left; in a
split or merge no words change, and the floor is what the page title costs where the
embedded text holds it (chunks whose embedded heading starts with their page's title).
Targets: ours <= 1.5 x the floor on each case, and <= 0.25 x lc on the changelog and the
table (a split or a merge is reported beside lc, with no share to meet); the bench exits 1
when one is missed.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.peers import LangChainPeer
from freshness_pipeline.adapters.embedders.tokenizer import tokenizer_for
from freshness_pipeline.config import ChunkPolicy, EmbedderConfig
from freshness_pipeline.core.models import Section
from freshness_pipeline.core.segment import TokenCount, segment

_WORDS = (
    "client request response timeout pool proxy stream header cookie redirect retry "
    "limit cache route handler session token async transport encoding body json form "
    "upload download verify certificate socket event hook middleware router mount"
).split()


@dataclass
class Page:
    """One generated page: its title, the text above the list, and its rows, each unique."""

    url: str
    title: str
    head: str
    rows: list[str]
    rng: random.Random
    serial: int = 0

    def markdown(self) -> str:
        return f"# {self.title}\n\n{self.head}\n" + "\n".join(self.rows) + "\n"


def _phrase(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


class Changelog(Page):
    def row(self) -> str:
        self.serial += 1
        return f"- Fixed the {_phrase(self.rng, self.rng.randrange(6, 22))} (#{1000 + self.serial})."

    def revise(self) -> set[str]:
        """One release: four new items on top, an item edited, one moved down, one deleted.
        Returns the rows that changed or whose neighbour left."""
        r, rows = self.rng, self.rows
        touched = set()
        for _ in range(4):
            rows.insert(0, new := self.row())
            touched.add(new)
        i = r.randrange(len(rows) // 3, len(rows))
        rows[i] = self.row()
        touched.add(rows[i])
        return touched | _move(r, rows) | _delete(r, rows)


class Table(Page):
    def row(self) -> str:
        self.serial += 1
        r = self.rng
        kind = r.choice(["int", "str", "bool", "float"])
        return f"| `opt_{self.serial}` | {kind} | {r.randrange(100)} | {_phrase(r, r.randrange(4, 14))} |"

    def revise(self) -> set[str]:
        """Rows inserted at the top, in the middle and at the end, two edited, one moved."""
        r, rows = self.rng, self.rows
        touched = set()
        for at in (0, len(rows) // 2, len(rows)):
            rows.insert(at, new := self.row())
            touched.add(new)
        for _ in range(2):
            i = r.randrange(len(rows))
            rows[i] = self.row()
            touched.add(rows[i])
        return touched | _move(r, rows)


def _move(r: random.Random, rows: list[str]) -> set[str]:
    """Move one row elsewhere; returns it and the row that now stands where it was."""
    i, j = r.randrange(len(rows)), r.randrange(len(rows))
    row = rows.pop(i)
    rows.insert(j, row)
    return {row, rows[min(i, len(rows) - 1)]}


def _delete(r: random.Random, rows: list[str]) -> set[str]:
    i = r.randrange(len(rows))
    del rows[i]
    return {rows[min(i, len(rows) - 1)]}


def pages(seed: int) -> list[Changelog | Table]:
    log = Changelog("https://bench.example/changelog/", "Changelog", "Every change.\n", [], random.Random(seed))
    log.rows = [log.row() for _ in range(400)]
    head = "Every setting, with its type and default.\n\n| name | type | default | meaning |\n| --- | --- | --- | --- |"
    table = Table("https://bench.example/settings/", "Settings", head, [], random.Random(seed + 1))
    table.rows = [table.row() for _ in range(600)]
    return [log, table]


_GROUPS = ("network", "storage", "cache", "auth", "logging", "plugins", "build", "server", "testing")


def _paragraph(r: random.Random) -> str:
    return " ".join(f"The {_phrase(r, r.randrange(6, 14))} is {_phrase(r, r.randrange(3, 9))}." for _ in range(4))


def _setting(r: random.Random, group: str, n: int) -> str:
    """One `##` setting of about 1 KB: two paragraphs, a type table and an example."""
    name, kind = f"{group}.option_{n}", r.choice(["int", "str", "bool", "float"])
    return (
        f"## `{name}`\n\n{_paragraph(r)}\n\n{_paragraph(r)}\n\n| type | default |\n| --- | --- |\n"
        f"| {kind} | {r.randrange(100)} |\n\n### Example\n\n```yaml\n{group}:\n  option_{n}: {r.randrange(100)}\n```\n"
    )


def settings(seed: int) -> dict[str, list[str]]:
    """Group -> its 23 settings' markdown."""
    r = random.Random(seed)
    return {g: [_setting(r, g, n) for n in range(23)] for g in _GROUPS}


def moves(seed: int) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """Case -> (site before, site after), each {url: markdown}: the split and the merge."""
    split, merge = settings(seed), settings(seed + 1)
    one = {"https://bench.example/settings/": "# Settings\n\n" + "\n".join(s for g in split.values() for s in g)}
    nine = {f"https://bench.example/settings/{g}/": f"# {g.title()} settings\n\n" + "\n".join(split[g]) for g in split}
    merged = {"https://bench.example/options/": "# All options\n\n" + "\n".join(s for g in merge.values() for s in g)}
    apart = {f"https://bench.example/options/{g}/": f"# {g.title()} options\n\n" + "\n".join(merge[g]) for g in merge}
    return {"split": (one, nine), "merge": (apart, merged)}


@dataclass
class Figures:
    ours: list[int] = field(default_factory=list)  # characters embedded per step
    ours_texts: list[int] = field(default_factory=list)
    floor: list[int] = field(default_factory=list)
    lc: list[int] = field(default_factory=list)
    lc_texts: list[int] = field(default_factory=list)
    lc_share: float | None = 0.25  # target of ours / LangChain (None: reported, no target)
    seen: set[str] = field(default_factory=set)  # retrieval texts ours embedded

    def step(self, sections: list[Section], lc: LangChainPeer, site: dict[str, str], floor: int | None) -> None:
        """Index one step with both systems; `floor` None: the first index, paid by every
        system alike and not counted."""
        fresh = {s.content_hash: len(s.embed_text) for s in sections if s.content_hash not in self.seen}
        self.seen |= fresh.keys()
        chars, texts = lc.tally.chars, lc.tally.texts
        lc.step(site)
        if floor is not None:
            self.ours.append(sum(fresh.values()))
            self.ours_texts.append(len(fresh))
            self.floor.append(floor)
            self.lc.append(lc.tally.chars - chars)
            self.lc_texts.append(lc.tally.texts - texts)

    def held(self) -> bool:
        """Ours within 1.5 x the floor and the LangChain share."""
        ours = sum(self.ours)
        return ours <= 1.5 * sum(self.floor) and (self.lc_share is None or ours <= self.lc_share * sum(self.lc))


def _floor(sections: list[Section], touched: set[str]) -> int:
    """Characters of the chunks that hold a touched row."""
    return sum(len(s.embed_text) for s in sections if any(row in s.text for row in touched))


def _titled(s: Section) -> bool:
    """Whether the chunk's embedded heading starts with its page's title."""
    return len(s.heading_path) > 1 and s.embed_text.startswith(f"{s.heading_path[0]} > ")


def run(steps: int, seed: int, count: TokenCount, budget: int, home: Path) -> dict[str, Figures]:
    """The changelog and the table, revised `steps` times."""
    out: dict[str, Figures] = {}
    for page in pages(seed):
        (home / page.title).mkdir()
        lc, fig = LangChainPeer(home / page.title, None), out.setdefault(page.title, Figures())
        for step in range(steps + 1):
            touched = page.revise() if step else set()
            sections = segment(page.url, page.markdown(), budget=budget, count=count)
            fig.step(sections, lc, {page.url: page.markdown()}, _floor(sections, touched) if step else None)
    return out


def run_moves(seed: int, count: TokenCount, budget: int, home: Path) -> dict[str, Figures]:
    """The split and the merge: the site before is indexed, then the site after paid for."""
    out: dict[str, Figures] = {}
    for case, (before, after) in moves(seed).items():
        (home / case).mkdir()
        lc, fig = LangChainPeer(home / case, None), out.setdefault(case, Figures(lc_share=None))
        for step, site in enumerate((before, after)):
            sections = [s for url, md in site.items() for s in segment(url, md, budget=budget, count=count)]
            fig.step(sections, lc, site, sum(len(s.embed_text) for s in sections if _titled(s)) if step else None)
    return out


def report(figures: dict[str, Figures], embedder: str) -> str:
    lines = [
        f"| page ({embedder}) | ours: chars (texts) | floor | ours / floor "
        "| LangChain one batch: chars (texts) | ours / LangChain |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, f in figures.items():
        ours, floor, lc = sum(f.ours), sum(f.floor), sum(f.lc)
        share = f"{ours / floor:.2f}" if floor else ("0" if not ours else "over")
        lines.append(
            f"| {name} | {ours:,} ({sum(f.ours_texts)}) | {floor:,} | {share} "
            f"| {lc:,} ({sum(f.lc_texts)}) | {ours / lc:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.long_pages", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8, help="revisions after the first index (default 8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--embedder", choices=["hashing", "local"], default="hashing")
    args = p.parse_args(argv)
    started = time.time()
    spec = tokenizer_for(EmbedderConfig(provider=args.embedder), ChunkPolicy())
    count = spec.counter()
    with tempfile.TemporaryDirectory(prefix="freshness-long-pages-") as tmp:
        figures = run(args.steps, args.seed, count, spec.budget, Path(tmp))
        figures |= run_moves(args.seed, count, spec.budget, Path(tmp))
    print(report(figures, args.embedder))
    for name, f in figures.items():
        print(f"{name} per step: ours {f.ours}, floor {f.floor}, LangChain {f.lc}", file=sys.stderr)
    print(f"({time.time() - started:.0f} s)")
    missed = [name for name, f in figures.items() if not f.held()]
    if missed:
        print(f"over target: {', '.join(missed)}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
