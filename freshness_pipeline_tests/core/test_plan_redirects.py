"""Key redirects from the planner: one target per old key, never a key that is still live,
and a removed section whose text lives on under another key is redirected there."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.plan import plan_pages
from freshness_pipeline.core.segment import segment
from freshness_pipeline_tests.core.pages import Page, Sec, pages, paragraphs

URL = "http://docs.test/page"
A = "Alpha text that explains the first example of the client in a few plain words."
B = "Beta text that explains the second example of the client in other plain words."


def keys(markdown: str, budget: int = 400) -> dict[str, str]:
    return {s.heading: s.key for s in segment(URL, markdown, budget=budget)}


def test_renaming_the_first_of_two_namesakes_redirects_the_renumbered_one() -> None:
    before = f"# P\n\n## Example\n\n{A}\n\n## Example\n\n{B}\n"
    after = f"# P\n\n## Example usage\n\n{A}\n\n## Example\n\n{B}\n"
    k0, k1 = keys(before), keys(after)
    plan = plan_pages("s", segment(URL, before), segment(URL, after))
    # "Example [2]" now reads as "Example"; "Example" itself is still live, so it stays put.
    assert plan.key_redirects == [(k0["P > Example [2]"], k1["P > Example"])]


def test_a_section_split_in_two_redirects_its_key_once_to_its_first_chunk() -> None:
    before = f"# P\n\n## Setup\n\n{A}\n\n{B}\n"
    after = f"# P\n\n## Setup one\n\n{A}\n\n## Setup two\n\n{B}\n"
    old = segment(URL, before, budget=20)
    assert [s.chunk_index for s in old] == [0, 1]
    plan = plan_pages("s", old, segment(URL, after, budget=20))
    # The heading path is part of the retrieval text: renamed sections are embedded again.
    assert not plan.moved and plan.upserts
    assert plan.key_redirects == [(old[0].key, keys(after)["P > Setup one"])]


@settings(max_examples=80, deadline=None)
@given(page=pages(min_sections=2), data=st.data())
def test_redirects_are_a_function_of_dead_keys(page: Page, data: st.DataObject) -> None:
    # Rename, drop and split sections at random; whatever the plan, a redirect names one
    # target per old key and never redirects a key that the page still has.
    secs = list(page.sections)
    for i in range(len(secs)):
        action = data.draw(st.sampled_from(["keep", "rename", "drop", "split"]))
        if action == "rename":
            secs[i] = Sec(secs[i].level, secs[i].heading + " Renamed", secs[i].paragraphs)
        elif action == "drop":
            secs[i] = None  # type: ignore[call-overload]
        elif action == "split" and len(secs[i].paragraphs) > 1:
            head, *tail = secs[i].paragraphs
            secs[i] = Sec(secs[i].level, secs[i].heading, (head,))
            secs.append(Sec(secs[i].level, secs[i].heading + " Part", tuple(tail)))
    extra = data.draw(st.lists(paragraphs, max_size=1))
    after = Page(page.title, page.preamble, tuple(s for s in secs if s) + tuple(Sec(2, "Tail", (p,)) for p in extra))
    prev, cur = segment(URL, page.markdown(), budget=40), segment(URL, after.markdown(), budget=40)
    plan = plan_pages("s", prev, cur)
    olds = [o for o, _ in plan.key_redirects]
    live = {s.key for s in cur}
    assert len(olds) == len(set(olds))
    assert not set(olds) & live
    assert all(n in live for _, n in plan.key_redirects)
