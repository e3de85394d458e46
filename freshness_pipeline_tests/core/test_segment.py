from __future__ import annotations

import hashlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.fingerprint import content_hash
from freshness_pipeline.core.noise import normalize
from freshness_pipeline.core.segment import section_key, segment, tiktoken_counter
from freshness_pipeline_tests.core.pages import VOCAB, Page, Sec, pages, paragraphs, words

count_tokens = tiktoken_counter()  # segment's default count

URL = "https://docs.example.com/guide/install"
PROPS = settings(max_examples=40, deadline=None)


def _segment(page: Page, **kw: object) -> list:
    return segment(URL, page.markdown(), **kw)


def _by_key(sections: list) -> dict[str, tuple[str, ...]]:
    """key -> the content hashes of its chunks."""
    out: dict[str, tuple[str, ...]] = {}
    for s in sections:
        out[s.key] = (*out.get(s.key, ()), s.content_hash)
    return out


def test_splits_on_headings_with_paths_and_keys() -> None:
    md = (
        "Intro text.\n\n# Guide\n\nAbout it.\n\n## Install\n\n### From `pip`\n\nRun it.\n\n"
        "```\n# not a heading\npip install x\n```\n\n## Configure\n\nSet things."
    )
    got = segment(URL, md)
    assert [s.heading_path for s in got] == [
        (),
        ("Guide",),
        ("Guide", "Install", "From pip"),
        ("Guide", "Configure"),
    ]
    assert [s.ordinal for s in got] == [0, 1, 2, 3]
    assert got[2].text == "Run it.\n\n```\n# not a heading\npip install x\n```"
    assert got[2].key == hashlib.sha1(f"{URL}#Guide > Install > From pip".encode()).hexdigest()
    assert got[0].key == section_key(URL, ()) == hashlib.sha1(f"{URL}#".encode()).hexdigest()


def test_embed_text_is_the_retrieval_text_and_the_date_is_payload() -> None:
    (s,) = segment(URL, "# A\n\nBody [text](https://x.test/t).", page_date="2026-06-03", title="A page")
    assert (s.page_date, s.title) == ("2026-06-03", "A page")
    assert s.embed_text == "A\nBody text." and s.text == "Body [text](https://x.test/t)."
    assert s.content_hash == content_hash(s.embed_text)
    assert s.tokens == count_tokens(s.embed_text)
    (undated,) = segment(URL, "# A\n\nBody text.")
    assert undated.content_hash == s.content_hash and undated.payload_hash != s.payload_hash


def test_duplicate_headings_are_numbered_in_document_order() -> None:
    md = "# T\n\n## Example\n\none\n\n### Output\n\nx\n\n## Example\n\ntwo\n\n### Output\n\ny\n\n## Example\n\nthree"
    assert [s.heading_path for s in segment(URL, md)] == [
        ("T", "Example"),
        ("T", "Example", "Output"),
        ("T", "Example [2]"),
        ("T", "Example", "Output [2]"),
        ("T", "Example [3]"),
    ]


@pytest.mark.parametrize(
    ("heading", "text"),
    [
        ("## The `Client` **class** [link](https://x) ##", "The Client class link"),
        ("###   \\_\\_init\\_\\_   and  *args*", "__init__ and args"),
        ("### __init__", "init"),  # strong emphasis, as it renders (the body's text reads it so too)
        ("## Tom &amp; Jerry <span>x</span> ![logo](a.png)", "Tom & Jerry x logo"),
        ("# C\\# and F#  ##", "C# and F#"),
        ("Setext *title*\n===", "Setext title"),
    ],
)
def test_a_heading_path_holds_the_headings_words(heading: str, text: str) -> None:
    (s,) = segment(URL, f"{heading}\n\nBody.")
    assert s.heading_path == (text,) and s.embed_text == f"{text}\nBody."


def test_headings_in_lists_and_block_quotes_start_no_section() -> None:
    md = "# A\n\n- Step one\n  ## Not a section\n\n> ## Nor this\n\nUnderlined\n----------\n\nText."
    assert [(s.heading_path, s.text) for s in segment(URL, md)] == [
        (("A",), "- Step one\n  ## Not a section\n\n> ## Nor this"),
        (("A", "Underlined"), "Text."),
    ]


def test_renaming_a_parent_heading_moves_its_subsections() -> None:
    before = segment(URL, "# T\n\n## A\n\nx\n\n### B\n\ny")
    after = segment(URL, "# T\n\n## A2\n\nx\n\n### B\n\ny")
    assert {s.key for s in before}.isdisjoint(s.key for s in after)


@PROPS
@given(pages())
def test_same_page_same_keys_and_hashes(page: Page) -> None:
    a, b = _segment(page, page_date="2026-06-01"), _segment(page, page_date="2026-06-01")
    assert a == b
    assert len({(s.key, s.chunk_index) for s in a}) == len(a)  # ids are unique in a page


@PROPS
@given(pages(), st.sampled_from(VOCAB), st.lists(paragraphs, min_size=1, max_size=3), st.integers(0, 1))
def test_inserting_a_section_near_the_top_changes_no_other_section(
    page: Page, word: str, body: list[str], at: int
) -> None:
    at = min(at, len(page.sections))
    level = page.sections[at].level if at < len(page.sections) else 2
    new = Sec(level, f"Inserted {word.title()} Notes", tuple(body))
    grown = Page(page.title, page.preamble, (*page.sections[:at], new, *page.sections[at:]))
    before, after = _by_key(_segment(page)), _by_key(_segment(grown))
    assert {k: after[k] for k in before} == before
    assert len(after) == len(before) + 1


@PROPS
@given(pages(min_sections=2), st.data())
def test_a_shrinking_page_makes_no_new_keys(page: Page, data: st.DataObject) -> None:
    # Drop whole sections (with their subsections) and some paragraphs of the others.
    kept: list[Sec] = []
    dropping_below: int | None = None
    for sec in page.sections:
        if dropping_below is not None and sec.level > dropping_below:
            continue
        dropping_below = sec.level if data.draw(st.booleans()) else None
        if dropping_below is None:
            n = data.draw(st.integers(0, len(sec.paragraphs)))
            kept.append(Sec(sec.level, sec.heading, sec.paragraphs[:n]))
    shrunk = Page(page.title, page.preamble, tuple(kept))
    fresh = _segment(shrunk)
    if page.preamble or any(sec.paragraphs for sec in kept):
        assert {s.key for s in fresh} <= {s.key for s in _segment(page)}
    else:  # only headings left: one section of them at the page's root
        assert [(s.heading_path, s.text.split("\n\n")[0]) for s in fresh] == [((), f"# {page.title}")]
    assert fresh == _segment(shrunk)


@PROPS
@given(pages(), st.data())
def test_renaming_a_heading_changes_only_its_key(page: Page, data: st.DataObject) -> None:
    headings = [s.heading for s in page.sections]
    candidates = [i for i, s in enumerate(page.sections) if page.is_leaf(i) and headings.count(s.heading) == 1]
    assume(candidates)
    i = data.draw(st.sampled_from(candidates))
    renamed = page.with_section(i, Sec(page.sections[i].level, "Renamed Heading", page.sections[i].paragraphs))
    before, after = _by_key(_segment(page)), _by_key(_segment(renamed))
    assert len(set(before) - set(after)) == 1
    assert len(set(after) - set(before)) == 1
    (new_key,) = set(after) - set(before)
    (old_key,) = set(before) - set(after)
    texts = {s.key: s.text for s in _segment(page)}
    assert {s.key: s.text for s in _segment(renamed)}[new_key] == texts[old_key]


@PROPS
@given(pages(), st.data())
def test_a_one_word_edit_changes_that_sections_hash(page: Page, data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(page.sections) - 1))
    sec = page.sections[i]
    p = data.draw(st.integers(0, len(sec.paragraphs) - 1))
    words = sec.paragraphs[p].split(" ")
    w = data.draw(st.integers(0, len(words) - 1))
    bare = words[w].rstrip(".").lower()
    replacement = data.draw(st.sampled_from([v for v in VOCAB if v != bare]))
    words[w] = words[w].replace(words[w].rstrip("."), replacement, 1)
    paras = (*sec.paragraphs[:p], " ".join(words), *sec.paragraphs[p + 1 :])
    edited = page.with_section(i, Sec(sec.level, sec.heading, paras))

    before, after = _by_key(_segment(page, budget=60)), _by_key(_segment(edited, budget=60))
    assert before.keys() == after.keys()
    changed = [k for k in before if before[k] != after[k]]
    assert len(changed) == 1


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.one_of(
            paragraphs,
            st.lists(st.sampled_from(VOCAB), min_size=50, max_size=300).map(" ".join),  # no sentence ends
            st.text(alphabet="abcxyz0123456789_-.é中🙂", min_size=100, max_size=1500),  # one huge "word"
            st.lists(paragraphs, min_size=2, max_size=6).map(lambda ps: "\n".join(f"- {p}" for p in ps)),
            st.lists(words, min_size=2, max_size=40).map(lambda ls: "```\n" + "\n".join(ls) + "\n```"),
        ),
        min_size=1,
        max_size=6,
    ),
    st.integers(8, 120),
)
def test_chunks_never_exceed_the_budget_and_lose_nothing(blocks: list[str], budget: int) -> None:
    md = "# Big\n\n" + "\n\n".join(blocks)
    got = segment(URL, md, budget=budget)
    assert all(s.tokens <= budget for s in got)
    assert all(s.tokens == count_tokens(s.embed_text) for s in got)
    assert [s.chunk_index for s in got] == list(range(len(got)))
    assert {s.key for s in got} == {section_key(URL, ("Big",))}
    # Every character survives, in order (chunking only moves whitespace).
    assert "".join("".join(s.text for s in got).split()) == "".join("".join(blocks).split())


def test_chunking_keeps_code_blocks_whole_when_they_fit() -> None:
    code = "```\n" + "\n".join(f"line_{i} = {i}" for i in range(12)) + "\n```"
    prose = " ".join(["Some words here."] * 30)
    got = segment(URL, f"# A\n\n{prose}\n\n{code}\n\n{prose}", budget=count_tokens(code) + 5)
    assert len(got) > 1 and any(code in s.text for s in got)


def test_budget_must_fit_a_character() -> None:
    with pytest.raises(ValueError, match="budget"):
        segment(URL, "# A\n\ntext", budget=7)


def test_heading_with_empty_body_makes_no_section() -> None:
    assert [s.heading_path for s in segment(URL, "# A\n\n## B\n\ntext\n\n## C\n")] == [("A", "B")]


def test_a_page_of_headings_only_is_one_section_of_them() -> None:
    """A title above a form: findable by its title, and citable (its text is the page's)."""
    markdown = "# Contact us\n\n## Write to us"
    (only,) = segment(URL, markdown)
    assert (only.heading_path, only.text, only.embed_text) == ((), markdown, "Contact us\nWrite to us")
    # Any body text makes the usual sections, the headings-only one goes.
    assert [s.heading_path for s in segment(URL, markdown + "\n\nA line.")] == [("Contact us", "Write to us")]


def test_every_section_text_is_found_in_the_page_text() -> None:
    """Citation offsets: a code fence tight against the prose around it (as extraction
    writes it) is set apart by normalization, as the segmenter joins blocks."""
    page = normalize("# A\n\nRun:\n```\npip install x\n```\nThen this.\n```\ny\n```\n## B\n\nMore.", url=URL)
    sections = segment(URL, page)
    assert len(sections) == 2
    assert all(page.find(s.text) >= 0 for s in sections), (page, [s.text for s in sections])
