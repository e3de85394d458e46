"""Generated docs sites with known sections, so tests can state exactly what the index
must hold without running the pipeline's own segmenter."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

WORDS = (
    "cache client request response header proxy timeout retry stream upload folder token "
    "session cookie server route middleware config setting default value limit queue batch "
    "index vector section page backup restore mirror sync device account share link"
).split()


def paragraph(rng: random.Random, n: int = 40) -> str:
    words = [rng.choice(WORDS) for _ in range(n)]
    return (" ".join(words).capitalize() + ".").replace(" .", ".")


@dataclass
class Site:
    """pages: {"guide/p1.md": [(heading, paragraph), ...]}; the page title is its H1."""

    pages: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def markdown(self) -> dict[str, str]:
        out = {}
        for rel, sections in self.pages.items():
            title = rel.removesuffix(".md").replace("/", " ").title()
            parts = [f"# {title}"]
            for heading, text in sections:
                parts += [f"## {heading}", text]
            out[rel] = "\n\n".join(parts) + "\n"
        return out

    def expected(self, base_url: str) -> set[tuple[str, str, str]]:
        """(page URL, heading path, text) of every section the index must hold."""
        out = set()
        for rel, sections in self.pages.items():
            stem = rel.removesuffix(".md")
            url = base_url + ("/" if stem == "index" else f"/{stem}")
            title = stem.replace("/", " ").title()
            out |= {(url, f"{title} > {h}", t) for h, t in sections}
        return out


def generate(n_pages: int, sections_per_page: int = 3, seed: int = 0) -> Site:
    rng = random.Random(seed)
    return Site(
        {
            f"guide/page{i}.md": [(f"Topic {i}-{j}", paragraph(rng)) for j in range(sections_per_page)]
            for i in range(n_pages)
        }
    )


# -- a site's revision history ------------------------------------------------------------
#
# What a docs site does between two builds, each edit knowing what it means: new or
# rewritten words must be embedded, everything else (a section moving down a page, a
# renamed heading, a moved page, a new link target, a new date in the same month) costs
# no new words. The oracle in pipeline/test_synthetic_replay.py reads only this model.

EDITS = ("insert", "remove", "rewrite", "rename", "move", "link", "date", "add_page", "drop_page")


@dataclass(frozen=True)
class Part:
    """One section: its heading, its words, and an optional link sentence after them."""

    heading: str
    words: str
    link: tuple[str, str] | None = None  # (anchor text, target path)

    def markdown(self) -> str:
        see = f" See [{self.link[0]}]({self.link[1]})." if self.link else ""
        return f"## {self.heading}\n\n{self.words}{see}"

    def meaning(self) -> str:
        """The words a reader sees: link anchors without their targets."""
        return self.words + (f" See {self.link[0]}." if self.link else "")


@dataclass(frozen=True)
class Doc:
    title: str
    date: str  # declared "YYYY-MM-DD"
    parts: tuple[Part, ...]

    def markdown(self) -> str:
        return "\n\n".join([f"# {self.title}", *(p.markdown() for p in self.parts)]) + "\n"


@dataclass
class Revision:
    number: int
    docs: dict[str, Doc]  # {"guide/page1.md": Doc}
    edits: list[tuple[str, str]]  # (kind, what) applied to the previous revision

    def markdown(self) -> dict[str, str]:
        return {rel: d.markdown() for rel, d in self.docs.items()}

    def dates(self) -> dict[str, str]:
        return {rel: d.date for rel, d in self.docs.items()}


class _Writer:
    """Unique headings and paragraphs, from one seeded generator."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.n = rng, 0

    def heading(self) -> str:
        self.n += 1
        return f"{self.rng.choice(WORDS).title()} {self.rng.choice(WORDS)} {self.n}"

    def part(self, link_to: list[str]) -> Part:
        link = None
        if link_to and self.rng.random() < 0.5:
            link = (f"the {self.rng.choice(WORDS)} guide", self.rng.choice(link_to))
        return Part(self.heading(), paragraph(self.rng, 30), link)


def history(n_pages: int = 8, steps: int = 6, seed: int = 0) -> list[Revision]:
    """r0 and `steps` revisions after it; every kind of edit in EDITS happens at least
    once (in turn, two or three edits a step), at most one page leaves per step."""
    rng = random.Random(seed)
    w = _Writer(rng)
    paths = [f"guide/page{i}.md" for i in range(n_pages)]
    targets = ["/" + p.removesuffix(".md") + "/" for p in paths]
    docs = {
        rel: Doc(f"Guide {i}", f"2026-03-{1 + i:02d}", tuple(w.part(targets) for _ in range(3)))
        for i, rel in enumerate(paths)
    }
    revisions = [Revision(0, dict(docs), [])]
    kinds = list(EDITS)
    for number in range(1, steps + 1):
        docs = dict(docs)
        todo = [kinds.pop(0) for _ in range(min(len(kinds), 2))]
        todo.append(rng.choice(("insert", "rewrite", "rename", "link", "date")))
        edits = [_edit(kind, docs, w, rng, targets) for kind in todo]
        revisions.append(Revision(number, docs, edits))
    return revisions


def _edit(kind: str, docs: dict[str, Doc], w: _Writer, rng: random.Random, targets: list[str]) -> tuple[str, str]:
    """Apply one edit of `kind` to `docs` in place; returns (kind, what it touched)."""
    rel = rng.choice(sorted(docs))
    d = docs[rel]
    parts = list(d.parts)
    i = rng.randrange(len(parts))
    if kind == "insert":  # a new section in the middle: the ones after it shift down
        parts.insert(i, w.part(targets))
    elif kind == "remove" and len(parts) > 1:
        parts.pop(i)
    elif kind == "rewrite":
        parts[i] = replace(parts[i], words=paragraph(w.rng, 30))
    elif kind == "rename":
        parts[i] = replace(parts[i], heading=w.heading())
    elif kind == "link":  # only a link target moves; add a link where there is none
        label = parts[i].link[0] if parts[i].link else f"the {rng.choice(WORDS)} guide"
        old = parts[i].link[1] if parts[i].link else None
        parts[i] = replace(parts[i], link=(label, rng.choice([t for t in targets if t != old])))
    elif kind == "date":  # a new declared date in the same month
        day = int(d.date[-2:])
        docs[rel] = replace(d, date=f"{d.date[:-2]}{day % 27 + 1:02d}")
        return kind, rel
    elif kind == "move":  # the same page under a new path (its old URL answers 404)
        new = rel.replace("guide/", "guide/moved/")
        docs[new] = docs.pop(rel)
        return kind, f"{rel} -> {new}"
    elif kind == "add_page":
        new = f"guide/new{w.n}.md"
        docs[new] = Doc(f"New guide {w.n}", "2026-03-15", (w.part(targets), w.part(targets)))
        return kind, new
    elif kind == "drop_page":
        docs.pop(rel)
        return kind, rel
    docs[rel] = replace(d, parts=tuple(parts))
    return kind, f"{rel} #{i}"
