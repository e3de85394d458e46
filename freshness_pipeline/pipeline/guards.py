"""The crawl's outage guards: an answer shared by too many pages at once is the site's
trouble, not news about each page. Both compare with the pages fetched in *this* run, so a
tier run is judged on its own pages.

- Many pages redirecting to one URL (a maintenance page): held as errors before they are
  applied, whatever the override says; fetched again next run.
- Many live pages gone at once (a CDN answering 404): held as errors unless the operator's
  spike override says the site really lost them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from ..core.state import PageRow
from ..config import FetchPolicy
from ..core.models import FetchResult, Outcome

__all__ = ["hold_mass_gone", "hold_mass_redirects"]


def hold_mass_redirects(results: list[FetchResult], policy: FetchPolicy) -> list[FetchResult]:
    """`results` with every page that redirected to an over-shared target turned into an
    ERROR that says why (its last text is kept, nothing moves)."""
    fetched = len(results)
    targets = Counter(r.final_url for r in results if r.final_url and r.outcome is not Outcome.ERROR)
    limit = policy.max_redirect_share
    held = {t: n for t, n in targets.items() if n >= 2 and n > limit * fetched}
    if not held:
        return results
    out = []
    for r in results:
        n = held.get(r.final_url or "") if r.outcome is not Outcome.ERROR else None
        if n:
            why = (
                f"held: {n} of {fetched} pages fetched this run redirect to {r.final_url} (over "
                f"fetch.max_redirect_share {limit:.0%}); treated as an outage (a maintenance page?), "
                "nothing moved or changed, fetched again next run"
            )
            r = FetchResult(r.url, Outcome.ERROR, status_code=r.status_code, reason=why, fetched_at=r.fetched_at)
        out.append(r)
    return out


def hold_mass_gone(
    gone: list[str],
    fetched_live: int,
    known: Mapping[str, PageRow],
    rows: dict[str, PageRow],
    errors: dict[str, str],
    *,
    policy: FetchPolicy,
    allow: bool,
) -> list[str]:
    """The pages still to declare gone: none when more than `max_gone_share` of the
    `fetched_live` live pages this run fetched would go (they become errors instead)."""
    limit = policy.max_gone_share
    if allow or len(gone) < 2 or len(gone) <= limit * fetched_live:
        return gone
    why = (
        f"held: {len(gone)} of {fetched_live} live pages would be gone in one crawl (of those fetched, over "
        f"fetch.max_gone_share {limit:.0%}); treated as an outage, nothing deleted. If the "
        "site really lost them, re-run with the spike override (freshness run --allow-spike)"
    )
    for url in gone:
        rows[url] = replace(known[url], outcome=Outcome.ERROR.value, reason=why, last_fetched=rows[url].last_fetched)
        errors[url] = why
    return []
