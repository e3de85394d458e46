"""The planner: every previous and current id lands in exactly one bucket; moves and
renames reuse instead of duplicating; empty content is never planned."""

from __future__ import annotations

import hashlib
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from freshness_pipeline.core.fingerprint import content_hash, simhash
from freshness_pipeline.core.models import Plan, Section
from freshness_pipeline.core.plan import pages_losing_records, plan_pages
from freshness_pipeline.core.segment import segment
from freshness_pipeline_tests.counting import CountingStr
from freshness_pipeline_tests.sitegen import paragraph

URL = "http://docs.test/page"


def sec(heading: str, text: str, *, url: str = URL, ordinal: int = 0, chunk: int = 0, parent: str = "Page") -> Section:
    path = (parent, heading) if heading else (parent,)
    key = hashlib.sha1(f"{url}#{' > '.join(path)}".encode()).hexdigest()
    return Section(key, chunk, url, path, ordinal, text, text, content_hash(text), simhash(text), len(text.split()))


LONG = (
    "Skyline Sync copies files between your laptop and the storage service. It watches "
    "folders, uploads changes in the background and resolves conflicts without asking you "
    "anything, so that every device keeps the same copy of every file you care about most."
)


def test_buckets_by_id_and_hash() -> None:
    prev = [sec("A", "alpha text"), sec("B", "beta text", ordinal=1), sec("C", "gamma text", ordinal=2)]
    cur = [sec("A", "alpha text"), sec("B", "beta text edited", ordinal=1), sec("D", "delta text", ordinal=3)]
    plan = plan_pages("s", prev, cur)
    assert plan.unchanged == [prev[0].id]
    assert [s.id for s in plan.changed] == [cur[1].id]
    assert [s.id for s in plan.new] == [cur[2].id]
    assert plan.removed == [prev[2].id]
    assert plan.moved == [] and plan.key_redirects == []


def test_moved_page_reuses_text_and_redirects_keys() -> None:
    old_url, new_url = "http://docs.test/old", "http://docs.test/new"
    prev = [sec("A", "alpha text", url=old_url), sec("B", "beta text", url=old_url, ordinal=1)]
    cur = [sec("A", "alpha text", url=new_url), sec("B", "beta text changed", url=new_url, ordinal=1)]
    plan = plan_pages("s", prev, cur, page_moves={old_url: new_url})
    assert [(m.old_id, m.new.id) for m in plan.moved] == [(prev[0].id, cur[0].id)]
    assert [s.id for s in plan.changed] == [cur[1].id] and plan.removed == [prev[1].id]
    assert set(plan.key_redirects) == {(prev[0].key, cur[0].key), (prev[1].key, cur[1].key)}
    assert plan.new == [] and sorted(plan.deletes) == sorted([prev[0].id, prev[1].id])


def test_renamed_heading_with_same_text_is_a_move() -> None:
    prev = [sec("Network settings", "retries and timeouts", ordinal=1)]
    cur = [sec("Network options", "retries and timeouts", ordinal=1)]
    plan = plan_pages("s", prev, cur)
    assert len(plan.moved) == 1 and plan.new == [] and plan.changed == []
    assert plan.key_redirects == [(prev[0].key, cur[0].key)]


def test_renamed_heading_with_edited_text_is_changed_and_redirected() -> None:
    prev = [sec("Network settings", "retries and timeouts", ordinal=1)]
    cur = [sec("Network setting", "retries and timeouts, revised", ordinal=1)]
    plan = plan_pages("s", prev, cur)
    assert [s.id for s in plan.changed] == [cur[0].id] and plan.removed == [prev[0].id]
    assert plan.key_redirects == [(prev[0].key, cur[0].key)]


def test_fuzzy_threshold_keeps_a_typo_fix_and_logs_the_words() -> None:
    old = sec("A", LONG + " the the end")
    new = sec("A", LONG + " the end")
    plan = plan_pages("s", [old], [new], fuzzy_threshold=3)
    assert plan.changed == [] and [s.id for s in plan.payload] == [old.id]
    assert plan.fuzzy[0].removed_words == ("the",)
    assert plan_pages("s", [old], [new], fuzzy_threshold=0).changed == [new]


def md_sec(markdown: str, *, as_of: str | None = None) -> Section:
    (s,) = segment(URL, f"# Page\n\n{markdown}\n")
    return replace(s, as_of=as_of)


def test_a_fuzzy_edit_updates_the_text_and_keeps_the_embedded_retrieval_text() -> None:
    """The reader sees the page's words at once (a payload update, no embedding); the
    record keeps the retrieval text and hashes its vector was made from."""
    old = md_sec(LONG + " It recieves a copy.", as_of="2026-03")
    new = md_sec(LONG + " It receives a copy.")
    plan = plan_pages("s", [old], [new], fuzzy_threshold=3, seen_month="2026-05")
    (kept,) = plan.payload
    assert not plan.upserts and plan.unchanged == [] and len(plan.fuzzy) == 1
    assert (kept.text, kept.as_of) == (new.text, "2026-05")
    assert (kept.embed_text, kept.content_hash, kept.simhash) == (old.embed_text, old.content_hash, old.simhash)
    # Indexed so, the same page again changes nothing, and is not logged as fuzzy again.
    again = plan_pages("s", [kept], [new], fuzzy_threshold=3, seen_month="2026-06")
    assert again.unchanged == [old.id] and not (again.payload or again.upserts or again.fuzzy)
    assert [s.as_of for s in again.current] == ["2026-05"]


def test_small_edits_are_judged_against_the_embedded_text_and_cannot_add_up() -> None:
    """Five typo fixes in a row, each forgiven against the text before it: judged against
    the text that was embedded, the fifth is a change and re-embeds every fix."""
    rng = random.Random(7)
    text = f"{paragraph(rng, 150)} It recieves the fiel at teh adress, wich is kept. {paragraph(rng, 150)}"
    fixes = [("recieves", "receives"), ("fiel", "file"), ("teh", "the"), ("adress", "address"), ("wich", "which")]
    indexed, outcomes = md_sec(text), []
    for typo, fix in fixes:
        before, text = text, text.replace(typo, fix)
        assert plan_pages("s", [md_sec(before)], [md_sec(text)], fuzzy_threshold=3).fuzzy  # alone: forgiven
        plan = plan_pages("s", [indexed], [md_sec(text)], fuzzy_threshold=3)
        outcomes.append("changed" if plan.changed else "fuzzy")
        (indexed,) = plan.changed or plan.payload
        assert indexed.text == md_sec(text).text  # the reader always sees the page's words
    assert outcomes == ["fuzzy"] * 4 + ["changed"]
    assert indexed.embed_text == md_sec(text).embed_text


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ('```\npip install "fastapi[standard]"\n```', '```\nuv add "fastapi[standard]"\n```'),
        ("Then run `fastapi dev` in the project folder.", "Then run `uv run fastapi dev` in the project folder."),
    ],
)
def test_any_edit_inside_code_is_a_change_whatever_the_distance(before: str, after: str) -> None:
    old, new = md_sec(f"{LONG}\n\n{before}"), md_sec(f"{LONG}\n\n{after}")
    plan = plan_pages("s", [old], [new], fuzzy_threshold=64)
    assert plan.changed == [new] and plan.fuzzy == []


def test_fuzzy_never_hides_a_number() -> None:
    old, new = sec("A", LONG + " default is 5"), sec("A", LONG + " default is 8")
    assert plan_pages("s", [old], [new], fuzzy_threshold=64).changed == [new]


def test_a_new_page_date_never_changes_a_section() -> None:
    june = plan_pages("s", [], segment(URL, f"# Page\n\n{LONG}\n", page_date="2026-06-03")).current
    assert [s.as_of for s in june] == ["2026-06-03"]
    july = segment(URL, f"# Page\n\n{LONG}\n", page_date="2026-07-01")
    plan = plan_pages("s", june, july)
    assert plan.unchanged == [june[0].id] and not (plan.upserts or plan.payload)
    assert [s.as_of for s in plan.current] == ["2026-06-03"]  # the date its text last changed
    edited = segment(URL, f"# Page\n\n{LONG} Now also on phones.\n", page_date="2026-07-01")
    assert [s.as_of for s in plan_pages("s", june, edited).changed] == ["2026-07-01"]


def test_without_a_declared_date_as_of_is_the_month_first_seen() -> None:
    first = plan_pages("s", [], segment(URL, f"# Page\n\n{LONG}\n"), seen_month="2026-03").current
    assert [s.as_of for s in first] == ["2026-03"]
    later = plan_pages("s", first, segment(URL, f"# Page\n\n{LONG}\n"), seen_month="2026-09")
    assert [s.as_of for s in later.current] == ["2026-03"] and later.unchanged == [first[0].id]


def test_a_link_target_edit_is_a_payload_update_not_an_embedding() -> None:
    before = segment(URL, "# Page\n\nSee [the guide](https://a.test/old) for details.\n")
    after = segment(URL, "# Page\n\nSee [the guide](https://a.test/new) for details.\n", title="Page")
    assert before[0].content_hash == after[0].content_hash
    plan = plan_pages("s", before, after)
    assert [s.text for s in plan.payload] == [after[0].text]
    assert not (plan.upserts or plan.deletes or plan.unchanged)


def test_every_previous_id_is_unchanged_payload_changed_or_deleted() -> None:
    prev = [sec("A", "same"), sec("B", "links", ordinal=1), sec("C", "words", ordinal=2)]
    cur = [sec("A", "same"), sec("B", "links", ordinal=1), sec("C", "other words", ordinal=2)]
    cur[1] = replace(cur[1], text="[links](https://x.test)")
    plan = plan_pages("s", prev, cur)
    assert (plan.unchanged, [s.id for s in plan.payload], [s.id for s in plan.changed]) == (
        [prev[0].id],
        [prev[1].id],
        [prev[2].id],
    )


def test_empty_content_is_never_planned() -> None:
    with pytest.raises(ValueError, match="no text"):
        plan_pages("s", [sec("A", "x")], [sec("A", "   ")])


texts = st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=12).filter(str.strip), min_size=0, max_size=8)


@settings(max_examples=150, deadline=None)
@given(before=texts, after=texts)
def test_every_id_lands_in_exactly_one_bucket(before: list[str], after: list[str]) -> None:
    prev = [sec(f"H{i}", t, ordinal=i) for i, t in enumerate(before)]
    cur = [sec(f"H{i}", t, ordinal=i) for i, t in enumerate(after)]
    plan = plan_pages("s", prev, cur)
    rewritten = [*plan.changed, *plan.payload]
    prev_side = [*plan.unchanged, *(s.id for s in rewritten if s.id in {p.id for p in prev}), *plan.deletes]
    assert sorted(prev_side) == sorted(p.id for p in prev)
    cur_side = [*plan.unchanged, *(s.id for s in [*plan.upserts, *plan.payload])]
    assert sorted(cur_side) == sorted(c.id for c in cur)
    # Applying the plan to the manifest yields exactly the current sections.
    manifest = {p.id: p.content_hash for p in prev}
    for i in plan.deletes:
        manifest.pop(i)
    manifest.update({s.id: s.content_hash for s in plan.upserts})
    assert manifest == {c.id: c.content_hash for c in cur}


from dataclasses import replace as _replace  # noqa: E402

from freshness_pipeline_tests.core.pages import Page, pages  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(page=pages(min_sections=2), data=st.data())
def test_a_page_that_shrinks_leaves_no_stale_keys(page: Page, data: st.DataObject) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(page.sections), max_size=len(page.sections)))
    smaller = _replace(page, sections=tuple(s for s, k in zip(page.sections, keep, strict=True) if k))
    before = segment(URL, page.markdown(), budget=120)
    after = segment(URL, smaller.markdown(), budget=120)
    plan = plan_pages("s", before, after, fuzzy_threshold=3)
    manifest = {s.id: s.content_hash for s in before}
    for i in plan.deletes:
        del manifest[i]
    manifest.update({s.id: s.content_hash for s in plan.upserts})
    # A fuzzy-unchanged section keeps its embedded retrieval text (and hash) on purpose.
    fuzzy = {f.id for f in plan.fuzzy}
    assert {i: h for i, h in manifest.items() if i not in fuzzy} == {
        s.id: s.content_hash for s in after if s.id not in fuzzy
    }
    assert manifest.keys() == {s.id for s in after}
    assert not ({s.id for s in plan.upserts} - {s.id for s in after})


@pytest.mark.parametrize("pages", [200, 2000])
def test_pages_losing_records_looks_each_deleted_id_up_a_bounded_number_of_times(pages: int) -> None:
    """Linear in its inputs: rebuilding the set of deleted ids per previous section (the old
    quadratic) hashes every deleted id once per section."""
    prev = [sec(f"H{i}", f"text {i}", url=f"{URL}/{i % (pages // 10)}", ordinal=i) for i in range(pages)]
    removed = [CountingStr(s.id) for s in prev[::10]]
    plan = Plan(source="s", removed=list(removed))
    CountingStr.reset()
    got = pages_losing_records(prev, plan)
    assert got == {s.url for s in prev[::10]}
    assert CountingStr.ops <= 4 * len(removed)
