"""The quarantine's detectors (`core/observe.py`) and rules (`core/quarantine.py`): a text
many pages collapse into is held whatever its share and never confirmed by repetition; a
real rewrite is taken at once, or after one confirmation when many pages are rewritten;
an operator's release takes what its kind's rule lets it; the run says it in one line
per kind."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.models import FetchResult, Outcome
from freshness_pipeline.core.observe import Turn, folded_sketch, observe_redirects, observe_texts
from freshness_pipeline.core.quarantine import (
    DEFAULT_RULES,
    Kind,
    Observation,
    Quarantine,
    Release,
    Rules,
    judge,
    report_lines,
)
from freshness_pipeline.core.responses import UNLIKE_BELOW, resemblance, text_sketch

SITE = "http://docs.test"
VOCABULARY = [
    f"{a}{b}" for a in ("al", "be", "co", "du", "ex", "fa", "go", "hi") for b in ("ra", "mo", "ni", "tu", "ke")
]
PAGES = 100


def prose(seed: int, words: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCABULARY) for _ in range(words))


def maintenance(path: str, seed: int) -> str:
    """A maintenance page naming its URL, a ticket number and a few words of its own."""
    rng = random.Random(seed)
    mine = " ".join(rng.choice(["alpha", "delta", "gamma", "orbit", "quartz", "sigma"]) for _ in range(4))
    return (
        f"Upgrade in progress for {SITE}{path} (ticket {seed * 7}). Our documentation platform is moving the "
        f"{path} page to a new release with faster search, better navigation and refreshed examples. "
        f"Reference {mine}. Please come back in a few minutes; nothing you bookmarked will change, and every "
        "example keeps working as before. Thank you for your patience while the upgrade finishes."
    )


def turn(old: str | None, new: str) -> Turn:
    unlike = old is not None and resemblance(text_sketch(old), text_sketch(new)) < UNLIKE_BELOW
    return Turn(folded_sketch(new), None if old is None else folded_sketch(old), unlike)


def url(i: int) -> str:
    return f"{SITE}/p{i}"


@settings(max_examples=25, deadline=None)
@given(st.integers(2, PAGES), st.integers(0, 10_000))
def test_a_maintenance_page_naming_each_url_collapses_whatever_its_share(hit: int, seed: int) -> None:
    turns = {url(i): turn(prose(seed + i), maintenance(f"/p{i}", seed + i)) for i in range(hit)}
    turns |= {url(hit): turn(prose(seed - 1), prose(seed - 1) + " one more sentence here.")}  # a plain edit
    observed = observe_texts(turns, {})
    assert observed == {u: observed[u] for u in turns if u != url(hit)}
    assert {o.kind for o in observed.values()} == {Kind.COLLAPSED}
    rules = Rules()
    verdict = judge(observed, {}, fetched=PAGES, rules=rules, release=Release(), now=1.0)
    assert verdict.held.keys() == observed.keys() and not (verdict.taken or verdict.passed)


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 40), st.integers(2, 6))
def test_repetition_never_confirms_a_collapse_and_its_count_goes_on(hit: int, runs: int) -> None:
    prior: dict[str, Quarantine | None] = {}
    for run in range(runs):
        turns = {url(i): turn(prose(i), maintenance(f"/p{i}", 1000 * run + i)) for i in range(hit)}
        verdict = judge(observe_texts(turns, {}), prior, fetched=PAGES, rules=Rules(), release=Release(), now=run)
        assert verdict.held.keys() == turns.keys() and not verdict.taken
        assert {q.seen for q in verdict.held.values()} == {run + 1}
        assert {q.started for q in verdict.held.values()} == {0}
        prior = dict(verdict.held)


def test_a_page_still_showing_its_collapsed_text_stays_held_when_the_others_came_back() -> None:
    first = observe_texts({url(i): turn(prose(i), maintenance(f"/p{i}", i)) for i in range(5)}, {})
    alone = {url(0): turn(prose(0), maintenance("/p0", 99))}
    assert observe_texts(alone, {})[url(0)].kind is Kind.REWRITTEN  # like no other page
    before = {url(0): bytes.fromhex(first[url(0)].evidence)}
    assert observe_texts(alone, before)[url(0)].kind is Kind.COLLAPSED


def test_a_new_page_showing_a_collapsed_text_is_held_and_new_pages_alone_are_not() -> None:
    turns = {url(i): turn(prose(i), maintenance(f"/p{i}", i)) for i in range(3)}
    turns[url(50)] = turn(None, maintenance("/p50", 50))
    assert observe_texts(turns, {})[url(50)].kind is Kind.COLLAPSED
    launch = {url(i): turn(None, maintenance(f"/p{i}", i)) for i in range(10)}  # a site launched with stubs
    assert observe_texts(launch, {}) == {}


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 60), st.integers(0, 10_000))
def test_a_real_rewrite_is_taken_at_once_or_after_one_confirmation(hit: int, seed: int) -> None:
    """Each page rewritten into a text of its own: unlike its last and unlike the others."""
    turns = {url(i): turn(prose(seed + i), prose(seed + 500 + i)) for i in range(hit)}
    observed = observe_texts(turns, {})
    assert {o.kind for o in observed.values()} == {Kind.REWRITTEN} and observed.keys() == turns.keys()
    rules = Rules()
    first = judge(observed, {}, fetched=PAGES, rules=rules, release=Release(), now=1.0)
    many = hit >= rules.min_pages and hit > DEFAULT_RULES[Kind.REWRITTEN].share * PAGES  # type: ignore[operator]
    assert (first.held.keys() == turns.keys()) if many else (first.passed == turns.keys() and not first.held)
    if many:
        second = judge(observed, dict(first.held), fetched=PAGES, rules=rules, release=Release(), now=2.0)
        assert second.taken == dict.fromkeys(turns, Kind.REWRITTEN) and not second.held


def test_templated_pages_rewritten_alike_are_a_rewrite_not_a_collapse() -> None:
    """Pages whose last texts were alike already (generated reference pages) and are
    rewritten alike did not collapse into one another."""
    template = prose(7)
    turns = {url(i): turn(f"{template} p{i} {prose(i, 5)}", f"{prose(8)} p{i} {prose(i + 50, 5)}") for i in range(30)}
    assert {o.kind for o in observe_texts(turns, {}).values()} == {Kind.REWRITTEN}


def test_a_release_takes_the_releasable_kinds_it_covers() -> None:
    observed = {
        url(0): Observation(Kind.COLLAPSED, "", ""),
        url(1): Observation(Kind.SOFT_404, "x", ""),
        url(2): Observation(Kind.COLLAPSED, "", ""),
    }
    every = judge(observed, {}, fetched=3, rules=Rules(), release=Release.parse("all"), now=0)
    assert every.released == {url(0): Kind.COLLAPSED, url(2): Kind.COLLAPSED} and url(1) in every.held
    one = judge(observed, {}, fetched=3, rules=Rules(), release=Release.parse(url(2)), now=0)
    assert one.released == {url(2): Kind.COLLAPSED} and one.held.keys() == {url(0), url(1)}
    assert Release.parse(f"collapsed, {url(1)}") == Release(False, frozenset([Kind.COLLAPSED]), frozenset([url(1)]))
    assert not Release.parse("") and Release.parse("all").covers("anything", Kind.GONE)


def test_pages_redirecting_to_one_url_are_observed_and_held_over_the_share() -> None:
    results = [FetchResult(url(i), Outcome.OK, 200, final_url=f"{SITE}/maintenance") for i in range(4)]
    results += [FetchResult(url(4), Outcome.OK, 200), FetchResult(url(5), Outcome.OK, 200, final_url=url(9))]
    observed = observe_redirects(results)
    assert observed.keys() == {url(i) for i in range(4)}
    verdict = judge(observed, {}, fetched=6, rules=Rules(), release=Release.parse("all"), now=0)
    assert verdict.held.keys() == observed.keys()  # over half of them, and no release takes them
    assert judge(observed, {}, fetched=10, rules=Rules(), release=Release(), now=0).passed == observed.keys()


def test_one_line_per_kind_names_the_pages() -> None:
    held = {url(i): Kind.COLLAPSED for i in range(5)} | {url(9): Kind.SOFT_404}
    lines = report_lines(held, {url(7): Kind.REWRITTEN}, {url(8): Kind.COLLAPSED}, Rules())
    assert lines == [
        f"quarantine soft_404: 1 held ({url(9)}), 0 taken, 0 released",
        f"quarantine rewritten: 0 held, 1 taken ({url(7)}), 0 released",
        f"quarantine collapsed: 5 held ({url(0)}, {url(1)}, {url(2)} and 2 more), 0 taken, 1 released ({url(8)}); "
        "`freshness release --kind collapsed` takes them",
    ]
