"""Content-defined chunk boundaries (core/boundaries.py) and what they buy a long section
(core/segment.py): an edit costs the chunk that holds it and at most one neighbour."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.boundaries import ends_run, fingerprint, spans
from freshness_pipeline.core.segment import segment

URL = "https://docs.example.com/changelog"
PROPS = settings(max_examples=60, deadline=None)

# A unit: a distinct fingerprint and a size in tokens.
units = st.lists(st.tuples(st.integers(0, (1 << 64) - 1), st.integers(1, 40)), min_size=1, max_size=120, unique=True)


def _groups(us: list[tuple[int, int]], target: float = 60) -> list[tuple[int, ...]]:
    """Level-0 chunks (no budget) as tuples of the units' fingerprints."""
    fps, sizes = [f for f, _ in us], [s for _, s in us]
    return [tuple(fps[a:b]) for a, b in spans(fps, sizes, lambda a, b: True, target, target / 2)]


@PROPS
@given(units, st.integers(0, 10**6), st.sampled_from(["insert", "delete", "edit"]), st.integers(1, 40))
def test_one_unit_changed_replaces_at_most_its_chunk_and_one_neighbour(
    before: list[tuple[int, int]], seed: int, kind: str, size: int
) -> None:
    at = seed % (len(before) + (kind == "insert"))
    fresh = ((seed * 0x9E3779B97F4A7C15) % (1 << 64), size)
    assert fresh not in before or kind == "delete"
    after = {
        "insert": [*before[:at], fresh, *before[at:]],
        "delete": [*before[:at], *before[at + 1 :]],
        "edit": [*before[:at], fresh, *before[at + 1 :]],
    }[kind]
    if not after:
        return
    old, new = _groups(before), _groups(after)
    lost = [g for g in old if g not in new]
    assert len(lost) <= 2, (kind, at, lost)
    if len(lost) == 2:  # the chunk that held it and the one after it
        assert old.index(lost[1]) == old.index(lost[0]) + 1
    assert len([g for g in new if g not in old]) <= 2


@PROPS
@given(units, st.integers(20, 400))
def test_spans_cover_every_unit_in_order_within_the_budget(us: list[tuple[int, int]], budget: int) -> None:
    fps, sizes = [f for f, _ in us], [s for _, s in us]
    got = spans(fps, sizes, lambda a, b: sum(sizes[a:b]) <= budget, budget / 3, budget / 6)
    assert [i for a, b in got for i in range(a, b)] == list(range(len(us)))
    assert all(b - a == 1 or sum(sizes[a:b]) <= budget for a, b in got)


def test_a_boundary_is_decided_by_the_unit_alone_in_proportion_to_its_size() -> None:
    fps = [fingerprint(f"row {i}") for i in range(20_000)]
    share = sum(ends_run(f, 10, 100) for f in fps) / len(fps)
    assert 0.09 < share < 0.11
    assert all(ends_run(f, 100, 100) for f in fps[:100])  # a unit the size of the target always ends a run
    assert fingerprint("3. Fixed a bug") == fingerprint("4. Fixed a bug")  # renumbered, same item


def _table(rows: list[str]) -> str:
    return "# Changelog\n\nEvery release.\n\n| version | change |\n| --- | --- |\n" + "\n".join(rows) + "\n"


def _rows(n: int, tag: str = "") -> list[str]:
    return [
        f"| 1.{i}{tag} | fixed the {['client', 'pool', 'proxy', 'cache'][i % 4]} timeout number {i} |" for i in range(n)
    ]


def test_one_row_changed_in_a_long_table_re_embeds_about_its_chunk_and_one_neighbour() -> None:
    """Every single-row insertion, deletion and edit across a 300-row table: on average the
    text embedded is at most two chunks' worth, and no id after the edit is renamed. (A
    content-defined group over the budget is cut again at half the target; an edit that
    changes how such a group is cut can replace more of its pieces, so the bound of
    `test_one_unit_changed_replaces_at_most_its_chunk_and_one_neighbour` holds for the
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


def test_every_table_chunk_repeats_the_header_and_keeps_the_heading_path() -> None:
    chunks = segment(URL, _table(_rows(200)), budget=120)
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
