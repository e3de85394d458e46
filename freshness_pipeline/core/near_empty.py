"""Pages that turned near-empty: held at first sight, taken when the next run confirms them. Pure.

A page that had real text and now reads as a stub with no error signal
(`responses.turned_near_empty`: "Obsolete, see ...") is held by the `Ledger` like a soft
404: its row, text and indexed records stay as they were, and it is flagged. The run
remembers what it showed in `PageRow.pending` (`near_empty_key`: the text as its sections
would be cut from it, the rules applied and the template blocks of this run removed, so
a rotating "tip of the day" is not another text). The next run that sees the same key
takes the text, as `mass_holds.hold_mass_rewrites` takes a rewrite seen twice; a
different short text restarts the count, and an error signal or the page's text coming
back clears it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Mapping

from .lifecycle import CrawlDecisions, CrawlRun, Ledger, LifecyclePolicy
from .noise import RULES, normalize
from .state import PageRow

__all__ = ["near_empty_key", "settle_near_empty"]


def near_empty_key(markdown: str, url: str, template_blocks: Collection[str]) -> str:
    """The sha256 of a page's text as its sections would be cut from it (the rules ran at
    extraction; `template_blocks` are this run's)."""
    text = normalize(markdown, url=url, disabled=RULES.keys(), template_blocks=template_blocks)
    return hashlib.sha256(text.encode()).hexdigest()


def settle_near_empty(
    decisions: CrawlDecisions,
    known: Mapping[str, PageRow],
    keys: Mapping[str, str],
    run: CrawlRun,
    policy: LifecyclePolicy,
) -> str | None:
    """Settle each page `decisions` held as near-empty (`keys`: url -> its `near_empty_key`),
    in place: a page held for the same key last run is confirmed and takes its new text,
    any other remembers its key. Returns the run's line on the pages taken, if any."""
    ledger = Ledger(known, run, policy, decisions)
    taken = []
    for url, key in sorted(keys.items()):
        if (k := known.get(url)) is not None and k.pending == key:
            ledger.take(decisions.near_empty.pop(url))
            taken.append(url)
        else:
            decisions.rows[url].pending = key
    if not taken:
        return None
    more = " ..." if len(taken) > 3 else ""
    return (
        f"taken: {len(taken)} page(s) near-empty on two runs in a row with the same text, indexed as they "
        f"now read (old sections deleted): {', '.join(taken[:3])}{more}"
    )
