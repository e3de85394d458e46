"""The page lifecycle's properties (`core/lifecycle.py`, with the quarantine's rules of
`core/quarantine.py` for 404s), on generated crawls: when a page is gone, kept, flagged,
held or moved, and that a run's rows are a function of its inputs. The detectors' and
the rules' own tests are in test_quarantine.py."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.lifecycle import (
    Answer,
    CrawlDecisions,
    CrawlRun,
    LifecyclePolicy,
    apply_answers,
    needs_last_text,
    settle_crawl,
)
from freshness_pipeline.core.models import FetchResult, Outcome, PageText
from freshness_pipeline.core.quarantine import DEFAULT_RULES, Kind, Release, Rule, Rules
from freshness_pipeline.core.state import PageRow

SITE = "http://docs.test"
URLS = [f"{SITE}/p{i}" for i in range(6)]
POLICY = LifecyclePolicy()
LONG = "Skyline Sync copies files between your laptop and the storage service. " * 8
TEXTS = {
    "long": PageText("", LONG, "Sync", None),
    "other": PageText("", LONG.replace("laptop", "phone"), "Sync", None),
    "short": PageText("", "A short page.", "Short", None),
    "not_found": PageText("", "We looked everywhere.", "Page not found", None),
    "broken": PageText("", "", None, None, error="extraction failed: boom"),
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _live(url: str, text: str = LONG, **kw: object) -> PageRow:
    return PageRow(source="s", url=url, fetch_url=url, markdown=None, text_hash=_sha(text), title="Sync", **kw)


def _run(now: float = 1000.0, listed: frozenset[str] = frozenset(URLS), release: Release | None = None) -> CrawlRun:
    return CrawlRun("s", now, listed=listed, release=release or Release())


def _answer(res: FetchResult, text: PageText | None, known: dict[str, PageRow]) -> Answer:
    """What the shell hands over: the stored text of the pages that `needs_last_text`."""
    row = known.get(res.url)
    last = LONG if needs_last_text(res, text) and row is not None and row.text_hash == _sha(LONG) else None
    return Answer(res, text, last)


rows_st = st.builds(
    lambda url, state, has_text, misses, errors: PageRow(
        source="s",
        url=url,
        fetch_url=url,
        state=state,
        text_hash=_sha(LONG) if has_text else None,
        miss_count=misses,
        error_count=errors,
    ),
    st.sampled_from(URLS),
    st.sampled_from(["live", "live", "gone", "moved"]),
    st.booleans(),
    st.integers(0, 3),
    st.integers(0, 3),
)
result_st = st.builds(
    lambda url, outcome, final, temporary: FetchResult(
        url, outcome, status_code=200, final_url=final if final != url else None, temporary=temporary, reason="r"
    ),
    st.sampled_from(URLS),
    st.sampled_from([Outcome.OK, Outcome.NOT_MODIFIED, Outcome.GONE, Outcome.ERROR, Outcome.SKIPPED]),
    st.none() | st.sampled_from(URLS),
    st.booleans(),
)


@st.composite
def crawls(draw: st.DrawFn) -> tuple[dict[str, PageRow], list[Answer], CrawlRun]:
    known = {r.url: r for r in draw(st.lists(rows_st, max_size=6, unique_by=lambda r: r.url))}
    results = draw(st.lists(result_st, min_size=1, max_size=6, unique_by=lambda r: r.url))
    texts = draw(st.lists(st.sampled_from(sorted(TEXTS)), min_size=len(results), max_size=len(results)))
    listed = frozenset(draw(st.sets(st.sampled_from(URLS))))
    answers = [
        _answer(r, TEXTS[t] if r.outcome is Outcome.OK else None, known) for r, t in zip(results, texts, strict=True)
    ]
    return known, answers, _run(listed=listed)


@settings(max_examples=300, deadline=None)
@given(crawls(), st.booleans())
def test_a_crawl_decides_each_page_once_and_leaves_its_inputs_alone(
    crawl: tuple[dict[str, PageRow], list[Answer], CrawlRun], allow: bool
) -> None:
    known, answers, run = crawl
    before = copy.deepcopy(known)
    out = settle_crawl(known, answers, replace(run, release=Release(everything=allow)), POLICY)
    assert known == before  # pure: the previous rows are not touched
    answered = {a.result.url for a in answers}
    finals = {a.result.final_url for a in answers if a.result.final_url}
    assert answered <= out.rows.keys() <= answered | finals  # every page answered has one row
    assert all(url == row.url for url, row in out.rows.items())
    assert len(out.gone) == len(set(out.gone))
    for url in out.gone:  # only a live page goes, and it is gone in its row
        assert out.rows[url].state == "gone"
        # known live with a text, or made live earlier in this run by a move onto it
        assert (url in known and known[url].state == "live" and known[url].text_hash) or url in finals
    for a in answers:
        if a.result.url in finals:
            continue  # another page moved onto it: judged as that page's new row
        res, row, prev = a.result, out.rows[a.result.url], known.get(a.result.url)
        if res.outcome is Outcome.ERROR and res.url in run.listed:
            assert res.url not in out.gone  # a 5xx or a timeout never deletes a listed page
        if res.outcome in (Outcome.ERROR, Outcome.SKIPPED) or row.outcome == Outcome.FLAGGED.value:
            assert row.text_hash == (prev.text_hash if prev else None)  # its last text is kept
        assert res.url not in out.held or res.url not in out.errors  # a held page is no error
        redirected = res.final_url and res.temporary and res.outcome not in (Outcome.ERROR, Outcome.SKIPPED)
        if redirected and prev is not None and prev.text_hash is not None:
            assert row.outcome == Outcome.SKIPPED.value  # a 302/303/307 is no move: its text is kept
        elif res.outcome is Outcome.OK and a.text is TEXTS["not_found"]:
            assert row.outcome == Outcome.FLAGGED.value and res.url in out.flagged


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12), st.integers(1, 4))
def test_an_unanswered_page_goes_after_exactly_n_consecutive_misses(listed_runs: list[bool], n: int) -> None:
    """Every run the page errs; `listed_runs[k]`: discovery found it in run k. It is gone
    at the first run that ends `n` consecutive misses, and never before."""
    policy = LifecyclePolicy(missing_after=n)
    known = {URLS[0]: _live(URLS[0])}
    misses = 0
    for k, listed in enumerate(listed_runs):
        misses = 0 if listed else misses + 1
        res = FetchResult(URLS[0], Outcome.ERROR, status_code=503, reason="HTTP 503")
        run = _run(now=1000.0 + k, listed=frozenset([URLS[0]] if listed else []))
        out = apply_answers(known, [Answer(res)], run, policy)
        row = out.rows[URLS[0]]
        if misses == n:
            assert out.gone == [URLS[0]] and row.state == "gone"
            return
        assert out.gone == [] and row.state == "live" and row.miss_count == misses
        assert row.text_hash == _sha(LONG)
        known = {URLS[0]: row}


def test_an_answer_resets_the_misses() -> None:
    known = {URLS[0]: _live(URLS[0], miss_count=2, error_count=2)}
    res = FetchResult(URLS[0], Outcome.NOT_MODIFIED, status_code=304)
    row = apply_answers(known, [Answer(res)], _run(listed=frozenset()), POLICY).rows[URLS[0]]
    assert (row.miss_count, row.error_count, row.state) == (0, 0, "live")


@settings(max_examples=150, deadline=None)
@given(st.integers(4, 30), st.data())
def test_a_held_mass_gone_run_deletes_nothing(pages: int, data: st.DataObject) -> None:
    urls = [f"{SITE}/m{i}" for i in range(pages)]
    known = {u: _live(u) for u in urls}
    share = data.draw(st.floats(0.1, 0.9))
    policy = _gone_share(share)
    lost = data.draw(st.integers(max(2, int(share * pages) + 1), pages))  # over the share
    results = [FetchResult(u, Outcome.GONE if i < lost else Outcome.NOT_MODIFIED, 404) for i, u in enumerate(urls)]
    answers = [Answer(r) for r in results]
    held = settle_crawl(known, answers, _run(listed=frozenset(urls)), policy)
    assert held.gone == [] and all(r.state == "live" and r.text_hash == _sha(LONG) for r in held.rows.values())
    assert held.errors == {} and held.held == dict.fromkeys(urls[:lost], Kind.GONE)  # held, no error
    assert all(held.rows[u].quarantine.kind is Kind.GONE and held.rows[u].error_count == 0 for u in urls[:lost])
    assert all(why.startswith("held: gone") for why in held.flagged.values())
    released = settle_crawl(
        known, answers, _run(listed=frozenset(urls), release=Release(kinds=frozenset([Kind.GONE]))), policy
    )
    assert sorted(released.gone) == sorted(urls[:lost]) and released.released == held.held
    # The next run sees them gone again: confirmed, they go.
    again = settle_crawl({**known, **held.rows}, answers, _run(listed=frozenset(urls)), policy)
    assert sorted(again.gone) == sorted(urls[:lost]) and not again.errors and again.taken == held.held


def _gone_share(share: float, min_pages: int = 2) -> LifecyclePolicy:
    return LifecyclePolicy(rules=Rules({**DEFAULT_RULES, Kind.GONE: Rule(share, 1, True)}, min_pages))


def test_a_gone_share_at_the_limit_is_not_held() -> None:
    urls = [f"{SITE}/m{i}" for i in range(4)]
    known = {u: _live(u) for u in urls}
    answers = [Answer(FetchResult(u, Outcome.GONE if i < 2 else Outcome.NOT_MODIFIED, 404)) for i, u in enumerate(urls)]
    policy = _gone_share(0.5)
    assert settle_crawl(known, answers, _run(), policy).gone == urls[:2]  # 2 of 4 is not over 50%
    fewer = _gone_share(0.2, min_pages=3)
    assert settle_crawl(known, answers, _run(), fewer).gone == urls[:2]  # under min_outage_pages


def test_a_url_never_answered_with_a_page_is_a_candidate() -> None:
    """A listed URL that 404s or errs on its first fetch never was a page: it is not live,
    not gone news, and never counts towards (or is held by) the mass-gone hold."""
    known = {u: _live(u) for u in URLS[:2]}
    phantoms = [f"{SITE}/phantom{i}" for i in range(20)]
    answers = [Answer(FetchResult(u, Outcome.GONE, 404)) for u in phantoms]
    answers += [Answer(FetchResult(u, Outcome.NOT_MODIFIED, 304)) for u in URLS[:2]]
    out = settle_crawl(known, answers, _run(listed=frozenset(phantoms) | set(URLS[:2])), POLICY)
    assert out.gone == [] and out.errors == {} and {out.rows[u].state for u in phantoms} == {"gone"}
    errs = apply_answers({}, [Answer(FetchResult(phantoms[0], Outcome.ERROR, 503, reason="HTTP 503"))], _run(), POLICY)
    assert errs.rows[phantoms[0]].state == "candidate"


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["not_found", "short", "broken"]), st.booleans())
def test_a_soft_404_never_replaces_the_last_good_text(kind: str, redirected: bool) -> None:
    known = {URLS[0]: _live(URLS[0])}
    res = FetchResult(URLS[0], Outcome.OK, 200, final_url=URLS[1] if redirected else None)
    out = apply_answers(known, [_answer(res, TEXTS[kind], known)], _run(), LifecyclePolicy(soft_404_min_chars=200))
    row = out.rows[URLS[0]]
    assert row.text_hash == _sha(LONG) and row.markdown is None and row.state == "live"
    assert row.outcome == Outcome.FLAGGED.value and out.flagged[URLS[0]] == row.flag
    assert out.moves == {} and URLS[1] not in out.rows  # no redirect followed to a wall


def test_a_new_short_page_is_a_real_page() -> None:
    res = FetchResult(URLS[0], Outcome.OK, 200)
    out = apply_answers({}, [Answer(res, TEXTS["short"])], _run(), POLICY)
    assert out.rows[URLS[0]].text_hash == _sha(TEXTS["short"].markdown) and out.new_pages == 1


def test_only_a_permanent_redirect_moves_a_page() -> None:
    known = {URLS[0]: _live(URLS[0])}
    permanent = FetchResult(URLS[0], Outcome.OK, 200, final_url=URLS[1])
    out = apply_answers(known, [Answer(permanent, TEXTS["long"])], _run(), POLICY)
    assert out.moves == {URLS[0]: URLS[1]} and out.rows[URLS[0]].state == "moved"
    assert out.rows[URLS[1]].text_hash == _sha(LONG) and out.new_pages == out.changed_pages == 0
    temporary = FetchResult(URLS[0], Outcome.OK, 200, final_url=URLS[1], temporary=True)
    out = apply_answers(known, [Answer(temporary, TEXTS["other"])], _run(), POLICY)
    row = out.rows[URLS[0]]
    assert out.moves == {} and URLS[1] not in out.rows and URLS[0] in out.skipped
    assert row.state == "live" and row.text_hash == _sha(LONG)


def test_repeated_errors_flag_a_page() -> None:
    known = {URLS[0]: _live(URLS[0], error_count=POLICY.errors_before_flag - 1)}
    out = apply_answers(known, [Answer(FetchResult(URLS[0], Outcome.ERROR, 500, reason="HTTP 500"))], _run(), POLICY)
    assert out.flagged == {URLS[0]: f"{POLICY.errors_before_flag} consecutive errors: HTTP 500"}


@settings(max_examples=100, deadline=None)
@given(st.sets(st.sampled_from(URLS), min_size=1), st.sampled_from([Outcome.NOT_MODIFIED, Outcome.OK]))
def test_the_same_quiet_crawl_twice_is_idempotent(urls: set[str], outcome: Outcome) -> None:
    known = {u: _live(u) for u in urls}
    answers = [Answer(FetchResult(u, outcome, 200, etag=f'"{u}"'), TEXTS["long"]) for u in sorted(urls)]
    first = settle_crawl(known, answers, _run(), POLICY)
    second = settle_crawl({**known, **first.rows}, answers, _run(), POLICY)
    assert second.rows == first.rows
    assert _quiet(second) and second.changed_pages == second.new_pages == 0


def _quiet(out: CrawlDecisions) -> bool:
    return not (out.gone or out.moves or out.errors or out.flagged or out.skipped)


def test_a_text_already_stored_is_not_written_again() -> None:
    """A 200 whose text is the stored one (a new date stamp, a new build id) keeps the row's
    text unset, so the save does not rewrite it; a changed text and a moved page's text at a
    URL that had none are set, to be saved."""
    known = {URLS[0]: _live(URLS[0]), URLS[1]: _live(URLS[1])}
    same = FetchResult(URLS[0], Outcome.OK, 200, body_sha256="new-bytes")
    changed = FetchResult(URLS[1], Outcome.OK, 200)
    out = apply_answers(known, [Answer(same, TEXTS["long"]), Answer(changed, TEXTS["other"])], _run(), POLICY)
    kept, edited = out.rows[URLS[0]], out.rows[URLS[1]]
    assert kept.markdown is None and kept.text_hash == _sha(LONG) and kept.body_sha256 == "new-bytes"
    assert edited.markdown == TEXTS["other"].markdown and out.changed_pages == 1
    moved = FetchResult(URLS[0], Outcome.OK, 301, final_url=URLS[2])
    out = apply_answers(known, [Answer(moved, TEXTS["long"])], _run(), POLICY)
    assert out.rows[URLS[2]].markdown == LONG  # the same text, but nothing is stored under its URL yet
