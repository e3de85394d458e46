"""Planning a refresh: (previous manifest, current sections, policy) -> Plan. Pure.

Only the pages that may have changed are planned: `previous` holds the manifest rows of
those pages and `current` their sections as they are now. Every previous id ends up in
exactly one of unchanged / payload / changed / removed / moved-from, and every current id
in exactly one of unchanged / payload / changed / new / moved-to.

Only the retrieval text (`content_hash`) decides an embedding: a section whose retrieval
text is the same but whose payload (markdown links, title) differs is a `payload` update,
written to the vector store's metadata without an embedding call. Dates are payload too:
a section's `as_of` is the page's declared date when its text last changed, else the
month the pipeline first saw that text (`seen_month`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import replace
from difflib import SequenceMatcher

from .fingerprint import fuzzy_unchanged
from .models import FuzzyMatch, Move, Plan, Section

# A renamed heading keeps its identity when it stands where the old one stood and its
# text is at least this similar (difflib ratio over the heading's own words).
RENAME_MIN_SIMILARITY = 0.5


def plan_pages(
    source: str,
    previous: Iterable[Section],
    current: Iterable[Section],
    *,
    fuzzy_threshold: int = 0,
    page_moves: Mapping[str, str] | None = None,
    seen_month: str | None = None,
) -> Plan:
    """Compare sections by id, then pair what is left by content (moves) and position
    (renamed headings). `page_moves` maps an old page URL to the URL it redirects to;
    `seen_month` ("YYYY-MM", now) dates new text on pages that declare no date."""
    prev = {s.id: s for s in previous}
    cur: dict[str, Section] = {}
    for s in current:
        if not s.text.strip():
            raise ValueError(f"{s.url}: section {s.heading!r} has no text; empty content is never planned")
        cur[s.id] = replace(s, as_of=s.page_date or seen_month)  # as if its text were new
    plan = Plan(source=source)
    for sid in sorted(prev.keys() & cur.keys()):
        cur[sid] = _compare(plan, prev[sid], cur[sid], fuzzy_threshold)

    gone = {sid: prev[sid] for sid in sorted(prev.keys() - cur.keys())}
    fresh = [cur[sid] for sid in sorted(cur.keys() - prev.keys())]

    moves = page_moves or {}
    redirects, unmatched = _pair_moves(plan, gone, fresh, cur, moves)

    # Different text under a new key at the same place: a renamed heading (or a moved page
    # whose text also changed). Embed it, delete the old record, redirect the old key.
    for new in unmatched:
        old = _renamed_from(gone.values(), new, moves)
        if old is None:
            plan.new.append(new)
            continue
        del gone[old.id]
        plan.changed.append(new)
        plan.removed.append(old.id)
        redirects.append((old, new.key))

    plan.current = sorted(cur.values(), key=lambda s: (s.url, s.ordinal, s.chunk_index))
    # Removed, but its text lives on under a key that already existed: a namesake heading
    # renumbered ("Example [2]" -> "Example" when the first "Example" was renamed).
    by_text: dict[str, str] = {}
    for s in plan.current:
        by_text.setdefault(s.content_hash, s.key)
    redirects += [(old, by_text[old.content_hash]) for old in gone.values() if old.content_hash in by_text]

    plan.removed.extend(gone)
    plan.key_redirects = _one_target_per_key(redirects, live={s.key for s in cur.values()})
    return plan


def _pair_moves(
    plan: Plan, gone: dict[str, Section], fresh: list[Section], cur: dict[str, Section], moves: Mapping[str, str]
) -> tuple[list[tuple[Section, str]], list[Section]]:
    """Same retrieval text under a new key: a moved page (or a namesake renumbered). Reuse
    the vector. Pairs are taken out of `gone`; returns (redirects, new sections unpaired)."""
    by_hash: dict[str, list[Section]] = defaultdict(list)
    for old in gone.values():
        by_hash[old.content_hash].append(old)
    redirects: list[tuple[Section, str]] = []  # (old section, key its text went to)
    unmatched: list[Section] = []
    for new in fresh:
        candidates = by_hash.get(new.content_hash)
        if not candidates:
            unmatched.append(new)
            continue
        old = _best(candidates, new, moves)
        candidates.remove(old)
        del gone[old.id]
        new = cur[new.id] = _dated_like(new, old)
        plan.moved.append(Move(old_id=old.id, new=new))
        redirects.append((old, new.key))
    return redirects, unmatched


def _compare(plan: Plan, old: Section, new: Section, fuzzy_threshold: int) -> Section:
    """File a section that kept its id under unchanged / payload / changed (or fuzzy
    unchanged); returns it with its `as_of` settled.

    A fuzzy-unchanged edit keeps the vector but not the old words: the record's text,
    title and `as_of` become the page's (a payload update), while its retrieval text, hash
    and simhash stay those of the embedded text, so every later edit is judged against what
    was embedded and small edits cannot add up unseen. `old.text` may then differ from
    `old.embed_text`'s markdown: a section whose markdown is the stored one is not new."""
    if old.content_hash == new.content_hash or old.text == new.text:
        new = _dated_like(new, old)
    if old.content_hash != new.content_hash:
        if old.text != new.text:
            verdict = fuzzy_unchanged(
                old.embed_text,
                new.embed_text,
                old.simhash,
                new.simhash,
                fuzzy_threshold,
                old_markdown=old.text,
                new_markdown=new.text,
            )
            if verdict is None:
                plan.changed.append(new)
                return new
            plan.fuzzy.append(FuzzyMatch(new.id, new.url, verdict.distance, verdict.removed_words, verdict.added_words))
        new = _embedded_like(new, old)  # forgiven now, or when its stored text was written
    if old.payload_hash == new.payload_hash:
        plan.unchanged.append(new.id)
    else:
        plan.payload.append(new)  # same meaning, new links, title, date or typo fix: no embedding
    return new


def _embedded_like(new: Section, old: Section) -> Section:
    """`new` with the retrieval text (and its fingerprints) of `old`: what its vector holds."""
    return replace(
        new, embed_text=old.embed_text, content_hash=old.content_hash, simhash=old.simhash, tokens=old.tokens
    )


def _dated_like(new: Section, old: Section) -> Section:
    """`new` keeping the `as_of` of `old`, whose text it has: a date moves only with text."""
    return replace(new, as_of=old.as_of) if old.as_of else new


def _one_target_per_key(redirects: Iterable[tuple[Section, str]], live: set[str]) -> list[tuple[str, str]]:
    """(old key, new key) pairs, one per old key: where its first chunk went. A key that is
    still live is never redirected (it resolves to itself)."""
    target: dict[str, tuple[int, str]] = {}
    for old, new_key in redirects:
        if old.key == new_key or old.key in live:
            continue
        if old.key not in target or old.chunk_index < target[old.key][0]:
            target[old.key] = (old.chunk_index, new_key)
    return sorted((old_key, new_key) for old_key, (_, new_key) in target.items())


def _best(candidates: list[Section], new: Section, moves: Mapping[str, str]) -> Section:
    """Prefer the candidate from the page that redirected here, then the same position."""

    def rank(old: Section) -> tuple[bool, bool, bool, str]:
        return (
            moves.get(old.url) != new.url and old.url != new.url,
            old.heading_path[:-1] != new.heading_path[:-1],
            old.ordinal != new.ordinal,
            old.id,
        )

    return min(candidates, key=rank)


def _renamed_from(gone: Iterable[Section], new: Section, moves: Mapping[str, str]) -> Section | None:
    for old in gone:
        same_page = old.url == new.url or moves.get(old.url) == new.url
        if not same_page or old.chunk_index != new.chunk_index:
            continue
        if old.heading_path == new.heading_path:  # page moved, same heading, text edited
            return old
        if (
            old.ordinal == new.ordinal
            and len(old.heading_path) == len(new.heading_path)
            and old.heading_path[:-1] == new.heading_path[:-1]
            and _similar(old.heading_path[-1:], new.heading_path[-1:])
        ):
            return old
    return None


def _similar(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    return SequenceMatcher(None, " ".join(a).lower(), " ".join(b).lower()).ratio() >= RENAME_MIN_SIMILARITY


def pages_losing_records(previous: Iterable[Section], plan: Plan) -> set[str]:
    """The URLs of the `previous` sections whose record `plan` deletes."""
    deleted = set(plan.deletes)  # once: not per section
    return {s.url for s in previous if s.id in deleted}
