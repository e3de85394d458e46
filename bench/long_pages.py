"""What an edit in a long page costs: `python -m bench.long_pages` (`make bench-long-pages`).

Two generated pages, each one long section under one heading, are revised `--steps` times:

  changelog  a release list (one item per change), new items on top every step, one item
             edited in the middle, one moved down, one deleted
  table      a generated reference table, rows inserted at the top, in the middle and at
             the end, two rows edited, one row moved

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
change the generator made, an inserted, edited or moved row, or the place a row left.
Targets: ours <= 1.5 x the floor and <= 0.25 x lc, on each page.
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
from freshness_pipeline.core.segment import segment

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


@dataclass
class Figures:
    ours: list[int] = field(default_factory=list)  # characters embedded per step
    ours_texts: list[int] = field(default_factory=list)
    floor: list[int] = field(default_factory=list)
    lc: list[int] = field(default_factory=list)


def _floor(sections: list[Section], touched: set[str]) -> int:
    """Characters of the chunks that hold a touched row."""
    return sum(len(s.embed_text) for s in sections if any(row in s.text for row in touched))


def run(steps: int, seed: int, embedder: str, home: Path) -> dict[str, Figures]:
    spec = tokenizer_for(EmbedderConfig(provider=embedder), ChunkPolicy())  # type: ignore[arg-type]
    count = spec.counter()
    out: dict[str, Figures] = {}
    for page in pages(seed):
        (home / page.title).mkdir()
        lc = LangChainPeer(home / page.title, None)
        fig = out[page.title] = Figures()
        seen: set[str] = set()
        for step in range(steps + 1):
            touched = page.revise() if step else set()
            sections = segment(page.url, page.markdown(), budget=spec.budget, count=count)
            fresh = {s.content_hash: len(s.embed_text) for s in sections if s.content_hash not in seen}
            seen |= fresh.keys()
            before = lc.tally.chars
            lc.step({page.url: page.markdown()})
            if step:  # the first index is paid by every system alike
                fig.ours.append(sum(fresh.values()))
                fig.ours_texts.append(len(fresh))
                fig.floor.append(_floor(sections, touched))
                fig.lc.append(lc.tally.chars - before)
    return out


def report(figures: dict[str, Figures], embedder: str) -> str:
    lines = [
        f"| page ({embedder}) | ours: chars (texts) | floor | ours / floor | LangChain one batch | ours / LangChain |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, f in figures.items():
        ours, floor, lc = sum(f.ours), sum(f.floor), sum(f.lc)
        lines.append(
            f"| {name} | {ours:,} ({sum(f.ours_texts)}) | {floor:,} | {ours / floor:.2f} | {lc:,} | {ours / lc:.2f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.long_pages", description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8, help="revisions after the first index (default 8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--embedder", choices=["hashing", "local"], default="hashing")
    args = p.parse_args(argv)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="freshness-long-pages-") as tmp:
        figures = run(args.steps, args.seed, args.embedder, Path(tmp))
    print(report(figures, args.embedder))
    for name, f in figures.items():
        print(f"{name} per step: ours {f.ours}, floor {f.floor}, LangChain {f.lc}", file=sys.stderr)
    print(f"({time.time() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
