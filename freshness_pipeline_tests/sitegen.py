"""Generated docs sites with known sections, so tests can state exactly what the index
must hold without running the pipeline's own segmenter."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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
