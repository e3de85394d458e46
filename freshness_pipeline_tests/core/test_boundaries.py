"""Content-defined chunk boundaries (core/boundaries.py): an edit costs the group that holds
it and at most one neighbour, and only chunks of those groups (what that buys a section:
`test_pieces.py`)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.boundaries import ends_run, fingerprint, spans

PROPS = settings(max_examples=60, deadline=None)

# A unit: a distinct fingerprint and a size in tokens.
units = st.lists(
    st.tuples(st.integers(0, (1 << 64) - 1), st.integers(1, 40)), min_size=1, max_size=120, unique_by=lambda u: u[0]
)
FULL = 1 << 64


def _groups(us: list[tuple[int, int]], target: float = 60) -> list[tuple[int, ...]]:
    """Level-0 chunks (no budget) as tuples of the units' fingerprints."""
    fps, sizes = [f for f, _ in us], [s for _, s in us]
    return [tuple(fps[a:b]) for a, b in spans(fps, sizes, lambda a, b: True, target, target / 2)]


def _edited(before: list[tuple[int, int]], seed: int, kind: str, size: int) -> list[tuple[int, int]]:
    """`before` with one unit inserted, deleted or edited at a place drawn from `seed`."""
    at = seed % (len(before) + (kind == "insert"))
    fresh = ((seed * 0x9E3779B97F4A7C15) % FULL, size)
    assume(all(f != fresh[0] for f, _ in before))
    return {
        "insert": [*before[:at], fresh, *before[at:]],
        "delete": [*before[:at], *before[at + 1 :]],
        "edit": [*before[:at], fresh, *before[at + 1 :]],
    }[kind]


def _changed(old: list[tuple[int, ...]], new: list[tuple[int, ...]]) -> list[int]:
    """Indexes of the chunks of `old` that `new` does not have."""
    return [i for i, g in enumerate(old) if g not in new]


EDITS = (units, st.integers(0, 10**6), st.sampled_from(["insert", "delete", "edit"]), st.integers(1, 40))


@PROPS
@given(*EDITS)
def test_one_unit_changed_replaces_at_most_its_group_and_one_neighbour(
    before: list[tuple[int, int]], seed: int, kind: str, size: int
) -> None:
    """The first-level groups (the chunks when every group fits the budget)."""
    after = _edited(before, seed, kind, size)
    assume(after)
    old, new = _groups(before), _groups(after)
    for lost in (_changed(old, new), _changed(new, old)):
        assert len(lost) <= 2, (kind, lost)
        assert len(lost) < 2 or lost[1] == lost[0] + 1  # the group that held it and the next


def _chunks(us: list[tuple[int, int]], budget: int) -> list[tuple[int, ...]]:
    fps, sizes = [f for f, _ in us], [s for _, s in us]
    return [
        tuple(fps[a:b]) for a, b in spans(fps, sizes, lambda a, b: sum(sizes[a:b]) <= budget, budget / 3, budget / 6)
    ]


@PROPS
@given(*EDITS, st.integers(40, 200))
def test_under_a_budget_an_edit_replaces_only_chunks_inside_its_group_and_one_neighbour(
    before: list[tuple[int, int]], seed: int, kind: str, size: int, budget: int
) -> None:
    """With a budget, a group over it is cut again (at half the target), so an edit can
    replace several chunks, but only chunks of the (at most two, adjacent) first-level
    groups it changes: every other chunk keeps its units, on both sides of the edit."""
    after = _edited(before, seed, kind, size)
    assume(after)
    old_groups, new_groups = _groups(before, budget / 3), _groups(after, budget / 3)
    old, new = _chunks(before, budget), _chunks(after, budget)
    for chunks, groups, other, other_groups in ((old, old_groups, new, new_groups), (new, new_groups, old, old_groups)):
        changed = [groups[i] for i in _changed(groups, other_groups)]
        assert len(changed) <= 2
        assert all(any(set(chunks[i]) <= set(g) for g in changed) for i in _changed(chunks, other))


def test_one_inserted_unit_can_replace_three_chunks_of_a_group_that_was_cut_again() -> None:
    """Why the one-neighbour bound holds for groups, not for chunks: twelve units of 20
    tokens that no first-level cut ends (240 tokens, over a budget of 180) are cut again at
    half the target into three chunks; a unit that ends a first-level run, inserted in the
    middle one, makes two groups that fit, and all three chunks are replaced by two."""
    never, second_level_only = FULL - 1, FULL // 2  # 1/2 of 2**64: under 20/30, over 20/60
    group = [(never - i, 20) for i in range(12)]
    for i in (3, 7):
        group[i] = (second_level_only + i, 20)
    old = _chunks(group, 180)
    assert [len(c) for c in old] == [4, 4, 4]
    new = _chunks([*group[:6], (0, 20), *group[6:]], 180)
    assert [len(c) for c in new] == [7, 6]
    assert _changed(old, new) == [0, 1, 2]


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
