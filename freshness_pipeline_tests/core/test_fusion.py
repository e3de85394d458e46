from __future__ import annotations

from freshness_pipeline.core.fusion import K, fuse


def test_a_record_both_lists_rank_beats_one_only_one_list_ranks_first() -> None:
    fused = fuse([["a", "b", "c"], ["x", "c", "a"]])
    assert [f.id for f in fused][:2] == ["a", "c"]  # in both lists, ahead of b and x (one list each)
    by_id = {f.id: f for f in fused}
    assert by_id["a"].ranks == (1, 3) and by_id["x"].ranks == (None, 1) and by_id["b"].ranks == (2, None)
    assert by_id["a"].score == 1 / (K + 1) + 1 / (K + 3)


def test_ties_keep_the_first_list_first_and_an_empty_list_changes_nothing() -> None:
    assert [f.id for f in fuse([["a", "b"], ["x", "y"]])] == ["a", "x", "b", "y"]
    assert [f.id for f in fuse([["a", "b", "c"], []])] == ["a", "b", "c"]
    assert fuse([[], []]) == []
