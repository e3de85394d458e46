"""What the change-spike check decides and explains. Pure: runs and texts in, verdicts out.

A run is a spike when the share of the index it would write or delete is above the source's
`spike_min_share` *and* `spike_factor` times the median share of its recent runs. Runs
that rewrote everything (the first build, a version re-index) and runs an operator let
through (`spike_override` in their counts, recorded by `vector_index`) are left out of
the history; with no history left, nothing is a spike.
"""

from __future__ import annotations

import difflib
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

OVERRIDE_COUNT = "spike_override"  # 1 in a run's counts when it carried the operator's override


@dataclass(frozen=True, slots=True)
class SpikeRule:
    """`checks.spike_min_share` and `checks.spike_factor` of the sources file."""

    min_share: float
    factor: float


@dataclass(frozen=True, slots=True)
class SpikeVerdict:
    spike: bool
    share: float
    median: float | None  # None: no usable history
    runs: int  # runs in the history


def history_shares(runs: Iterable[Mapping[str, Any]]) -> list[float]:
    """Change share of each past incremental run (`StateStore.runs` rows)."""
    shares = []
    for run in runs:
        c = run.get("counts") or {}
        after = c.get("sections_indexed", 0)
        base = max(after, c.get("sections_indexed_before", after))
        touched = c.get("upserted", 0) + c.get("sections_removed", 0)
        if run.get("reason") or c.get(OVERRIDE_COUNT) or not base or touched >= base:
            continue  # version re-index, an override, first build, or a whole rewrite or wipe
        shares.append(touched / base)
    return shares


def judge(share: float, history: Sequence[float], rule: SpikeRule) -> SpikeVerdict:
    if not history:
        return SpikeVerdict(False, share, None, 0)
    median = statistics.median(history)
    spike = share > rule.min_share and share > rule.factor * median
    return SpikeVerdict(spike, share, median, len(history))


def suspects(pairs: Iterable[tuple[str, str]], n: int = 5) -> list[tuple[str, int]]:
    """Phrases added (`+`) or removed (`-`) in many changed sections: what a normalization
    rule would have to strip. `pairs` are (old text, new text); returns (phrase, sections)."""
    seen: Counter[str] = Counter()
    total = 0
    for old, new in pairs:
        total += 1
        a, b = old.split(), new.split()
        phrases = set()
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
            if op in ("replace", "delete") and i2 > i1:
                phrases.add("- " + " ".join(a[i1:i2])[:120])
            if op in ("replace", "insert") and j2 > j1:
                phrases.add("+ " + " ".join(b[j1:j2])[:120])
        seen.update(phrases)
    return [(p, k) for p, k in seen.most_common(n) if k > 1 or total == 1]
