"""The detectors: what a page's fetch shows besides its text. Pure: no I/O.

Each turns a page's answer into an `Observation` (`quarantine.py` rules on it):

- `error_page`: a 200 that reads as an error page or a wall (soft 404, never confirmed),
  or a page that had text and turned near-empty (a stub, confirmed by the next run);
- `observe_texts`: a new text unlike its page's own last text is *rewritten*; rewritten
  and like the new or held text of other pages (near-duplicates once URLs, paths and
  numbers are folded: `folded_sketch`), while its last text was unlike theirs, it is
  *collapsed* (a maintenance page, per URL or not). A new page like a collapsed text is
  collapsed too;
- `observe_redirects`: pages redirecting, with others, to one URL.

404/410, errors and pages missing from discovery are the `Ledger`'s (`lifecycle.py`).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from .models import FetchResult, Outcome
from .noise import RULES, normalize
from .quarantine import Kind, Observation
from .responses import NotFoundTemplate, looks_soft_404, resemblance, text_sketch, turned_near_empty

__all__ = ["LIKE_AT", "Turn", "error_page", "folded_sketch", "near_empty_key", "observe_redirects", "observe_texts"]

LIKE_AT = 0.5  # folded-sketch resemblance at which two pages' texts are near-duplicates


def _folded(token: str) -> bool:
    return "/" in token or any(c.isdigit() for c in token)


def folded_sketch(text: str) -> bytes:
    """The sketch of a text's words, case and every word holding a `/` or a digit (URLs,
    paths, numbers, dates) aside: what pages serving one maintenance page share. Linear."""
    return text_sketch(" ".join(w for w in text.casefold().split() if not _folded(w)))


@dataclass(frozen=True, slots=True)
class Turn:
    """A page whose new text differs from its stored text (or that had none)."""

    sketch: bytes  # `folded_sketch` of the new text
    last: bytes | None  # ... of its last text; None for a page with none (a new page)
    unlike: bool  # unlike its own last text (`responses.resemblance` under `UNLIKE_BELOW`)
    short: bool = False  # under `fetch.soft_404_min_chars`: near-empty is the `Ledger`'s to judge


def observe_texts(turns: Mapping[str, Turn], collapsed_before: Mapping[str, bytes]) -> dict[str, Observation]:
    """The rewritten and collapsed pages among `turns` (`collapsed_before`: url -> the
    folded sketch of the text a page was held for as collapsed: still like it, a page
    stays collapsed when the others came back)."""
    unlike = {u: t for u, t in turns.items() if t.unlike and t.last is not None}
    new = {u: t for u, t in turns.items() if t.last is None}
    held = {_HELD + u: s for u, s in collapsed_before.items()}
    clusters = _clusters({u: t.sketch for u, t in (unlike | new).items()} | held)
    collapsed = {u for u, t in unlike.items() if _collapsed(u, t, clusters[u], unlike, held)}
    collapsed |= {u for u in new if any(o in collapsed or o in held for o in clusters[u])}
    out = {u: Observation(Kind.COLLAPSED, turns[u].sketch.hex(), _COLLAPSED) for u in sorted(collapsed)}
    for url, t in unlike.items():
        if url not in collapsed and not t.short:
            out[url] = Observation(Kind.REWRITTEN, t.sketch.hex(), _REWRITTEN)
    return out


_COLLAPSED = "collapsed: its new text is unlike its own and like other pages' (a maintenance page?)"
_REWRITTEN = "rewritten: its new text is unlike its own, as many pages' this run"
_HELD = "\0"  # (the key of a text held before, beside its page's new one)
_CHECKED = 20  # members of a cluster a page is checked against for having converged with one


def _collapsed(url: str, t: Turn, cluster: list[str], unlike: Mapping[str, Turn], held: Mapping[str, bytes]) -> bool:
    """Like another page held, or another rewritten page whose last text was unlike this
    one's (templated pages rewritten alike are no collapse)."""
    others = [o for o in cluster if o != url and (o in held or o in unlike)]
    return any(o in held or resemblance(t.last or b"", unlike[o].last or b"") < LIKE_AT for o in others[:_CHECKED])


def _clusters(sketches: Mapping[str, bytes]) -> dict[str, list[str]]:
    """url -> the pages of its cluster: each page joins the first cluster whose first page
    it is alike to at `LIKE_AT` (only first pages sharing one of its sketch hashes are
    compared: near-duplicates share most of them), so one maintenance page costs one
    comparison per page."""
    heads: dict[bytes, list[str]] = {}  # a sketch hash -> the first pages holding it
    members: dict[str, list[str]] = {}
    out: dict[str, list[str]] = {}
    for url, s in sketches.items():
        hashes = [s[i : i + 4] for i in range(0, len(s), 4)]
        shared = Counter(h for x in hashes for h in heads.get(x, ()))
        head = next(
            (
                h
                for h, n in shared.most_common()
                if n >= LIKE_AT * len(hashes) and resemblance(s, sketches[h]) >= LIKE_AT
            ),
            None,
        )
        if head is None:
            head = url
            members[url] = []
            for x in hashes:
                heads.setdefault(x, []).append(url)
        members[head].append(url)
        out[url] = members[head]
    return out


def observe_redirects(results: list[FetchResult]) -> dict[str, Observation]:
    """Pages redirecting to a URL at least one other page of this run redirects to."""
    targets = Counter(r.final_url for r in results if r.final_url and r.outcome is not Outcome.ERROR)
    return {
        r.url: Observation(
            Kind.REDIRECTED, r.final_url, f"redirected, with {targets[r.final_url] - 1} other pages, to {r.final_url}"
        )
        for r in results
        if r.final_url and r.outcome is not Outcome.ERROR and targets[r.final_url] >= 2
    }


def error_page(
    title: str | None,
    markdown: str,
    *,
    min_chars: int,
    had_chars: int | None,
    not_found: NotFoundTemplate | None,
    login_form: bool,
) -> Observation | None:
    """A 200 that reads as an error page (the title and h1, the site's not-found page, a
    wall: soft 404), or a page that had text (`had_chars`, None when judged without it)
    and turned near-empty."""
    soft = looks_soft_404(
        title, markdown, min_chars=min_chars, had_chars=had_chars, not_found=not_found, login_form=login_form
    )
    if soft:
        return Observation(Kind.SOFT_404, soft, soft)
    stub = turned_near_empty(markdown, min_chars=min_chars, had_chars=had_chars)
    return Observation(Kind.NEAR_EMPTY, "", stub) if stub else None


def near_empty_key(markdown: str, url: str, template_blocks: Collection[str]) -> str:
    """A stub's evidence: the sha256 of its text as its sections would be cut from it (the
    rules ran at extraction; `template_blocks` are this run's), so a rotating "tip of the
    day" is not another text."""
    text = normalize(markdown, url=url, disabled=RULES.keys(), template_blocks=template_blocks)
    return hashlib.sha256(text.encode()).hexdigest()
