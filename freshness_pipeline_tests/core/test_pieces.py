"""A long section's chunks (core/pieces.py, core/segment.py): cut where their pieces' words
say, from the text alone. An edit costs the chunks of its first-level group and at most one
neighbour, all side by side; every other chunk keeps its id and text. Table chunks repeat
their header, every chunk its heading path, and markup or list numbers move nothing."""

from __future__ import annotations

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.models import Section
from freshness_pipeline.core.pieces import Piece, anchor, render, words
from freshness_pipeline.core.segment import segment

URL = "https://docs.example.com/changelog"
PROPS = settings(max_examples=40, deadline=None)
BUDGET = 120


def _rows(n: int, tag: str = "") -> list[str]:
    words = ["client", "pool", "proxy", "cache", "stream", "cookie"]
    return [f"| 1.{i}{tag} | fixed the {words[i % 6]} {words[i * 7 % 6]} timeout number {i} |" for i in range(n)]


def _table(rows: list[str]) -> str:
    return "# Changelog\n\nEvery release.\n\n| version | change |\n| --- | --- |\n" + "\n".join(rows) + "\n"


def _edited(rows: list[str], kind: str, at: int) -> list[str]:
    new = f"| 9.{at} | added the stream option {at} |"
    at %= len(rows) + (kind == "insert")
    return {
        "insert": [*rows[:at], new, *rows[at:]],
        "delete": [*rows[:at], *rows[at + 1 :]],
        "edit": [*rows[:at], new, *rows[at + 1 :]],
    }[kind]


def _gone(old: list[Section], new: list[Section]) -> list[int]:
    """Positions of the chunks of `old` that `new` does not hold with the same id and text."""
    now = {(s.id, s.content_hash) for s in new}
    return [i for i, s in enumerate(old) if (s.id, s.content_hash) not in now]


def _one_stretch(positions: list[int]) -> bool:
    """Neighbours, but for at most one chunk among them that stays: a group cut again can cut
    one of its chunks as before while the ones beside it change (0.7% of single-row edits
    with budgets of 60 to 100 tokens, never two)."""
    return not positions or positions[-1] - positions[0] + 1 - len(positions) <= 1


@PROPS
@given(st.integers(40, 160), st.sampled_from(["insert", "delete", "edit"]), st.integers(0, 10**6), st.integers(60, 400))
def test_one_row_changed_replaces_only_neighbouring_chunks_around_it(n: int, kind: str, at: int, budget: int) -> None:
    """Wherever the row is, in a section of any length: the chunks replaced are one stretch
    of neighbours (those of its group and at most one neighbouring group; one chunk among
    them may stay), and they held the changed row's place; every other chunk keeps its id
    and text."""
    rows = _rows(n)
    after = _edited(rows, kind, at)
    old, new = segment(URL, _table(rows), budget=budget), segment(URL, _table(after), budget=budget)
    lost, fresh = _gone(old, new), _gone(new, old)
    assert _one_stretch(lost) and _one_stretch(fresh), (kind, lost, fresh)
    assert len(old) - len(lost) == len(new) - len(fresh)  # the rest is the same chunks
    changed = {r for r in set(rows) ^ set(after)}
    assert all(any(r in s.text for s in (old[i] for i in lost)) for r in changed if r in rows)
    assert all(any(r in s.text for s in (new[i] for i in fresh)) for r in changed if r in after)


@PROPS
@given(st.integers(30, 120), st.lists(st.integers(0, 10**6), min_size=1, max_size=6))
def test_items_added_on_top_replace_only_the_first_chunks(n: int, seeds: list[int]) -> None:
    """A changelog gaining items on top, release after release: each release replaces a
    run of chunks from the top (the new items' group and at most one neighbour), and the
    chunks below keep their ids and text. New items merge into the top group: no release
    leaves a chunk of its own behind."""
    items = [f"- fixed the {['client', 'pool', 'proxy'][i % 3]} timeout in release {i}" for i in range(n)]
    old = segment(URL, "# Changelog\n\n" + "\n".join(items), budget=BUDGET)
    for release, seed in enumerate(seeds):
        items = [f"- release {release} item {seed % 97} added the {j} option" for j in range(3)] + items
        new = segment(URL, "# Changelog\n\n" + "\n".join(items), budget=BUDGET)
        lost = _gone(old, new)
        assert lost == list(range(len(lost))), lost
        assert [(s.id, s.text) for s in old[len(lost) :]] == [(s.id, s.text) for s in new[-(len(old) - len(lost)) :]]
        old = new


def test_one_row_changed_in_a_long_table_re_embeds_about_its_chunk_and_one_neighbour() -> None:
    """Every single-row insertion, deletion and edit across a 300-row table: on average the
    text embedded is at most two chunks' worth, and no id after the edit is renamed. (A
    content-defined group over the budget is cut again at half the target; an edit that
    changes how such a group is cut can replace more of its pieces, so the bound of
    `test_one_unit_changed_replaces_at_most_its_group_and_one_neighbour` holds for the
    groups, and here on average.)"""
    rows = _rows(300)
    old = segment(URL, _table(rows), budget=200)
    mean = sum(len(s.embed_text) for s in old) / len(old)
    old_hashes = {s.content_hash for s in old}
    embedded, edits = 0, 0
    for at in range(0, len(rows), 7):
        row = f"| 9.{at} | added the stream option {at} |"
        for after in ([*rows[:at], row, *rows[at:]], [*rows[:at], *rows[at + 1 :]], [*rows[:at], row, *rows[at + 1 :]]):
            new = segment(URL, _table(after), budget=200)
            embedded += sum(len(s.embed_text) for s in new if s.content_hash not in old_hashes)
            edits += 1
            renamed = {s.id for s in old} - {s.id for s in new}
            assert len(renamed) <= len(old) - len(new) + 3, (at, len(renamed))
    assert embedded / edits <= 2 * mean, (embedded / edits, mean)


@PROPS
@given(st.integers(20, 200), st.integers(40, 400))
def test_chunks_fit_and_hold_every_row_in_order(n: int, budget: int) -> None:
    rows = _rows(n)
    chunks = segment(URL, _table(rows), budget=budget)
    assert all(s.tokens <= budget for s in chunks)
    assert [line for s in chunks for line in s.text.split("\n") if line.startswith("| 1.")] == rows


def test_a_pages_chunks_depend_on_its_text_and_settings_alone() -> None:
    """`segment` reads nothing but the text and the chunking settings: no index, no
    history. The same text gives the same chunks, whatever was cut before it."""
    assert "previous" not in inspect.signature(segment).parameters
    rows = _rows(200)
    fresh = segment(URL, _table(rows), budget=BUDGET)
    for edit in range(5):
        segment(URL, _table(_edited(rows, "insert", edit * 41)), budget=BUDGET)
    assert segment(URL, _table(rows), budget=BUDGET) == fresh


def test_every_table_chunk_repeats_the_header_and_keeps_the_heading_path() -> None:
    chunks = segment(URL, _table(_rows(200)), budget=BUDGET)
    assert len(chunks) > 5
    assert all(s.embed_text.startswith("Changelog\n") for s in chunks)
    assert all("| version | change |\n| --- | --- |\n" in s.text for s in chunks)
    assert all("version\nchange\n" in s.embed_text for s in chunks)  # read as a table, not as pipes
    assert len({s.id for s in chunks}) == len(chunks)


def test_a_chunk_that_moved_within_its_section_keeps_its_id() -> None:
    """The rows of the first chunk move to the table's end: the chunks between the place
    they left and the place they arrived keep their text and their id (nothing to write)."""
    rows = _rows(200)
    before = segment(URL, _table(rows))
    cut = rows.index(before[1].text.split("\n")[2])  # the first row of the second chunk
    after = {s.content_hash: s.id for s in segment(URL, _table(rows[cut:] + rows[:cut]))}
    assert len(before) > 6
    assert all(after.get(s.content_hash) == s.id for s in before[2:-1])


def test_a_section_that_fits_is_one_chunk_anchored_0() -> None:
    (only,) = segment(URL, "# A\n\nShort text.")
    assert only.id.endswith(":0") and only.anchor == "0"


def test_an_anchor_is_of_a_pieces_words() -> None:
    plain, marked = Piece("1. fixed the pool", "\n"), Piece("7. **fixed** the _pool_", "\n")
    assert anchor(words(plain)) == anchor(words(marked)) != anchor(words(Piece("fixed the proxy", "\n")))
    assert render([Piece("| a |", "\n\n", "| h |\n| - |", 0), Piece("| b |", "\n", "| h |\n| - |", 0)]) == (
        "| h |\n| - |\n| a |\n| b |"
    )


def test_markup_and_list_numbers_move_no_cut_and_rename_no_chunk() -> None:
    """A unit's fingerprint is of its words: emphasis added to every item of a long
    changelog, and the items renumbered, change no boundary, no id and no embedded text."""
    items = [f"{i + 1}. fixed the {['client', 'pool', 'proxy'][i % 3]} timeout number {i}" for i in range(300)]
    old = segment(URL, "# Changelog\n\n" + "\n".join(items), budget=200)
    marked = [f"{i + 2}. **fixed** the {['client', 'pool', 'proxy'][i % 3]} timeout number {i}" for i in range(300)]
    new = segment(URL, "# Changelog\n\n" + "\n".join(marked), budget=200)
    assert len(old) > 10
    assert [(s.id, s.embed_text) for s in new] == [(s.id, s.embed_text) for s in old]
