"""Hypothesis strategies for docs pages as markdown, shared by the core text tests."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import strategies as st

# Plain prose words: nothing a noise rule or the fuzzy rule's "meaningful" test reacts to.
VOCAB = (
    "the a of to and in for with on client request response server cache page index "
    "section token header body stream value field option setting default user site "
    "document text query result error retry timeout limit pool proxy route handler "
    "library module package install configure send receive open close read write "
    "simple fast small large every other each first last new old quick careful"
).split()

words = st.lists(st.sampled_from(VOCAB), min_size=3, max_size=18).map(" ".join)
sentences = words.map(lambda w: w[0].upper() + w[1:] + ".")
paragraphs = st.lists(sentences, min_size=1, max_size=5).map(" ".join)
# A small pool, so that pages sometimes repeat a heading.
heading_names = st.lists(st.sampled_from(VOCAB[8:40]), min_size=1, max_size=2).map(lambda ws: " ".join(ws).title())


@dataclass(frozen=True)
class Sec:
    level: int  # 2 or 3
    heading: str
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class Page:
    title: str
    preamble: tuple[str, ...]
    sections: tuple[Sec, ...]

    def blocks(self) -> list[str]:
        out = [f"# {self.title}", *self.preamble]
        for s in self.sections:
            out += [f"{'#' * s.level} {s.heading}", *s.paragraphs]
        return out

    def markdown(self) -> str:
        return "\n\n".join(self.blocks()) + "\n"

    def is_leaf(self, i: int) -> bool:
        nxt = self.sections[i + 1] if i + 1 < len(self.sections) else None
        return nxt is None or nxt.level <= self.sections[i].level

    def with_section(self, i: int, sec: Sec) -> Page:
        return replace(self, sections=(*self.sections[:i], sec, *self.sections[i + 1 :]))


@st.composite
def sections(draw: st.DrawFn, min_paragraphs: int = 1) -> Sec:
    return Sec(
        level=draw(st.integers(2, 3)),
        heading=draw(heading_names),
        paragraphs=tuple(draw(st.lists(paragraphs, min_size=min_paragraphs, max_size=4))),
    )


@st.composite
def pages(draw: st.DrawFn, min_sections: int = 1, max_sections: int = 7) -> Page:
    return Page(
        title=draw(heading_names),
        preamble=tuple(draw(st.lists(paragraphs, max_size=2))),
        sections=tuple(draw(st.lists(sections(), min_size=min_sections, max_size=max_sections))),
    )
