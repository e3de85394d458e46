"""A long section keeps the chunks it was indexed with that its text still makes
(core/pieces.py, core/segment.py): an edit costs the chunk that holds it, wherever it
sits; no id or boundary depends on a row's distance from the section's start."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.models import Section
from freshness_pipeline.core.pieces import Piece, anchor, kept, render
from freshness_pipeline.core.segment import segment

URL = "https://docs.example.com/changelog"
PROPS = settings(max_examples=40, deadline=None)
BUDGET = 120


def _rows(n: int, tag: str = "") -> list[str]:
    words = ["client", "pool", "proxy", "cache", "stream", "cookie"]
    return [f"| 1.{i}{tag} | fixed the {words[i % 6]} {words[i * 7 % 6]} timeout number {i} |" for i in range(n)]


def _table(rows: list[str]) -> str:
    return "# Changelog\n\nEvery release.\n\n| version | change |\n| --- | --- |\n" + "\n".join(rows) + "\n"


def _items(n: int) -> list[str]:
    words = ["client", "pool", "proxy"]
    return [f"- fixed the {words[i % 3]} timeout in release {i} ({i * 37 % 101} users)" for i in range(n)]


def _list(items: list[str]) -> str:
    return "# Changelog\n\n" + "\n".join(items) + "\n"


def _edited(rows: list[str], kind: str, at: int) -> list[str]:
    new = f"| 9.{at} | added the stream option {at} |"
    at %= len(rows) + (kind == "insert")
    return {
        "insert": [*rows[:at], new, *rows[at:]],
        "delete": [*rows[:at], *rows[at + 1 :]],
        "edit": [*rows[:at], new, *rows[at + 1 :]],
    }[kind]


def _lost(old: list[Section], new: list[Section]) -> list[Section]:
    """The chunks of `old` that `new` does not hold under the same id with the same text."""
    now = {(s.id, s.content_hash) for s in new}
    return [s for s in old if (s.id, s.content_hash) not in now]


@PROPS
@given(st.integers(40, 160), st.sampled_from(["insert", "delete", "edit"]), st.integers(0, 10**6))
def test_one_row_changed_replaces_at_most_the_chunk_that_held_it(n: int, kind: str, at: int) -> None:
    """Wherever the row is: every other chunk keeps its id and text, and what is new holds
    only the rows of the chunk that held it (and the new row)."""
    rows = _rows(n)
    old = segment(URL, _table(rows), budget=BUDGET)
    new = segment(URL, _table(_edited(rows, kind, at)), budget=BUDGET, previous=old)
    lost = _lost(old, new)
    assert len(lost) <= 1, (kind, at, [s.anchor for s in lost])
    fresh = [s for s in new if (s.id, s.content_hash) not in {(o.id, o.content_hash) for o in old}]
    held = {line for s in lost for line in s.text.split("\n")[2:]}  # the lost chunk's rows
    assert all(line in held or line.startswith("| 9.") for s in fresh for line in s.text.split("\n")[2:]), kind
    assert len(fresh) <= 2


@PROPS
@given(st.integers(30, 120), st.lists(st.integers(0, 10**6), min_size=1, max_size=6))
def test_items_inserted_on_top_cost_a_chunk_of_their_own(n: int, seeds: list[int]) -> None:
    """A changelog gaining items on top, release after release: each release embeds only
    a chunk of its new items; every chunk it had stays as it was."""
    items = _items(n)
    old = segment(URL, _list(items), budget=BUDGET)
    for release, seed in enumerate(seeds):
        items = [f"- release {release} item {seed % 97} added the {j} option" for j in range(3)] + items
        new = segment(URL, _list(items), budget=BUDGET, previous=old)
        assert not _lost(old, new)
        fresh = [s for s in new if s.id not in {o.id for o in old}]
        assert len(fresh) == 1 and fresh[0].text.count("\n- ") == 2, [s.text for s in fresh]
        old = new


@PROPS
@given(st.integers(20, 200), st.integers(40, 400))
def test_the_same_text_keeps_every_chunk_and_chunks_fit(n: int, budget: int) -> None:
    """Cut again with its own chunks, a section comes out as it was; every chunk fits the
    budget, and the chunks hold every row in order."""
    rows = _rows(n)
    first = segment(URL, _table(rows), budget=budget)
    again = segment(URL, _table(rows), budget=budget, previous=first)
    assert [(s.id, s.text) for s in again] == [(s.id, s.text) for s in first]
    assert all(s.tokens <= budget for s in first)
    body = [line for s in first for line in s.text.split("\n") if line.startswith("| 1.")]
    assert body == rows


def test_a_section_that_grew_past_the_budget_keeps_its_one_chunk() -> None:
    """A section in one chunk ("0") that grows past the budget keeps that chunk: only the
    new text is embedded."""
    rows = _rows(6)
    (old,) = segment(URL, _table(rows), budget=BUDGET)
    assert old.anchor == "0"
    grown = segment(URL, _table(rows + _rows(8, "b")), budget=BUDGET, previous=[old])
    assert grown[0].id == old.id and grown[0].content_hash == old.content_hash
    assert all("| 1.0 |" not in s.text for s in grown[1:])


def test_a_chunk_that_no_longer_fits_is_cut_again() -> None:
    """An indexed chunk is kept only if it fits the budget it is cut for now."""
    rows = _rows(60)
    wide = segment(URL, _table(rows), budget=400)
    narrow = segment(URL, _table(rows), budget=BUDGET, previous=wide)
    assert all(s.tokens <= BUDGET for s in narrow)
    assert narrow == segment(URL, _table(rows), budget=BUDGET)


def test_kept_finds_chunks_by_anchor_and_text_and_uses_each_once() -> None:
    pieces = [Piece(t, "\n") for t in ("a one", "b two", "c three", "a one", "b two")]
    first = render(pieces[:2])
    name = anchor(pieces[0])
    assert kept(pieces, [(name, first)]) == [(0, 2, name)]
    assert kept(pieces, [(name, first), (f"{name}~2", first)]) == [(0, 2, name), (3, 5, f"{name}~2")]
    assert kept(pieces, [(name, "a one\nb twoo")]) == []
    assert kept(pieces, [("0", render(pieces[2:4]))]) == [(2, 4, "0")]


def test_every_table_chunk_repeats_the_header_and_keeps_the_heading_path() -> None:
    rows = _rows(200)
    first = segment(URL, _table(rows), budget=BUDGET)
    later = segment(URL, _table(_edited(rows, "insert", 50)), budget=BUDGET, previous=first)
    for chunks in (first, later):
        assert len(chunks) > 5
        assert all(s.embed_text.startswith("Changelog\n") for s in chunks)
        assert all("| version | change |\n| --- | --- |\n" in s.text for s in chunks[1:])
        assert all("version\nchange\n" in s.embed_text for s in chunks)  # read as a table, not as pipes
        assert len({s.id for s in chunks}) == len(chunks)


def test_chunks_that_moved_within_their_section_keep_their_ids() -> None:
    """The rows of the first chunks move to the table's end: every chunk keeps its text
    and id, wherever it now stands (nothing to write or embed)."""
    rows = _rows(200)
    before = segment(URL, _table(rows), budget=BUDGET)
    cut = rows.index(before[2].text.split("\n")[2])  # the first row of the third chunk
    after = segment(URL, _table(rows[cut:] + rows[:cut]), budget=BUDGET, previous=before)
    moved = {s.content_hash: s.id for s in after}
    assert len(before) > 6
    assert all(moved.get(s.content_hash) == s.id for s in before[2:])


def test_a_section_that_fits_is_one_chunk_anchored_0() -> None:
    (only,) = segment(URL, "# A\n\nShort text.")
    assert only.id.endswith(":0") and only.anchor == "0"


def test_markup_and_list_numbers_rename_no_chunk() -> None:
    """An anchor is of a piece's words: emphasis added to every item of a long changelog,
    and the items renumbered, change no boundary, no id and no embedded text, with or
    without the chunks as indexed."""
    items = [f"{i + 1}. fixed the {['client', 'pool', 'proxy'][i % 3]} timeout number {i}" for i in range(300)]
    old = segment(URL, "# Changelog\n\n" + "\n".join(items), budget=200)
    marked = [f"{i + 2}. **fixed** the {['client', 'pool', 'proxy'][i % 3]} timeout number {i}" for i in range(300)]
    assert len(old) > 10
    for previous in ((), old):
        new = segment(URL, "# Changelog\n\n" + "\n".join(marked), budget=200, previous=previous)
        assert [(s.id, s.embed_text) for s in new] == [(s.id, s.embed_text) for s in old]
