"""The quarantine: when a page's new answer is not taken, for how long, and who may take it.
Pure: no I/O.

The detectors (`observe.py`) turn a page's fetch into an `Observation` of one `Kind`. The
rule of its kind (`Rule`, one table, `fetch.quarantine` of the sources file) says whether
it is held: only when more than a `share` of the pages fetched (and `min_pages`) show it
at once, or always (`share` None); how many further runs must see the same before it is
taken (`confirm`; None: never, it is held for as long as it lasts; 0: taken at once);
and whether an operator's `Release` takes it. A held page keeps its row, text and
records; its `Quarantine` (kind, evidence, start, runs seen) is its row's state. A page
whose answer shows nothing (its text back to what is indexed, a plain change) leaves the
quarantine at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from .responses import resemblance

__all__ = ["DEFAULT_RULES", "Kind", "Observation", "Quarantine", "Release", "Rule", "Rules", "Verdict", "judge"]


class Kind(StrEnum):
    """Why a page's answer is not taken (one row of the rule table each)."""

    GONE = "gone"  # 404/410
    ERROR = "error"  # 5xx, 429, a timeout: no answer
    SOFT_404 = "soft_404"  # a 200 reading as an error page, a bot or login wall
    NEAR_EMPTY = "near_empty"  # a page that had text and turned into a stub
    REWRITTEN = "rewritten"  # text unlike its own last text
    COLLAPSED = "collapsed"  # ... and like the new or held text of other pages
    REDIRECTED = "redirected"  # redirecting, with many others, to one URL
    MISSING = "missing"  # unlisted by discovery and unanswered


@dataclass(frozen=True, slots=True)
class Rule:
    share: float | None  # held when more than this share of the pages fetched show it; None: always
    confirm: int | None  # further runs seeing the same before it is taken; None: never; 0: at once
    releasable: bool  # an operator's release takes it


# The defaults (`config.QuarantinePolicy` overrides them per kind). MISSING's confirm is
# `fetch.missing_after` less the first miss; ERROR is the page's `error_count`.
DEFAULT_RULES: Mapping[Kind, Rule] = {
    Kind.GONE: Rule(0.2, 1, True),
    Kind.ERROR: Rule(None, None, False),
    Kind.SOFT_404: Rule(None, None, False),
    Kind.NEAR_EMPTY: Rule(None, 1, True),
    Kind.REWRITTEN: Rule(0.2, 1, True),
    Kind.COLLAPSED: Rule(None, None, True),
    Kind.REDIRECTED: Rule(0.5, None, False),
    Kind.MISSING: Rule(None, 2, False),
}
SAME_AT = 0.8  # sketch resemblance at which two texts held for one page are the same text


@dataclass(frozen=True, slots=True)
class Rules:
    """The rule table, and the fewest pages a share rule holds (fewer at once: never held)."""

    table: Mapping[Kind, Rule] = field(default_factory=lambda: dict(DEFAULT_RULES))
    min_pages: int = 2

    def __getitem__(self, kind: Kind) -> Rule:
        return self.table.get(kind, DEFAULT_RULES[kind])


@dataclass(frozen=True, slots=True)
class Quarantine:
    """A held page's state: what it was held for (`evidence`: a text's sketch in hex, a
    key, a status or a target), since when, and in how many runs in a row it was seen."""

    kind: Kind
    evidence: str
    started: float
    seen: int = 1

    def to_json(self) -> dict[str, object]:
        return {"kind": self.kind.value, "evidence": self.evidence, "started": self.started, "seen": self.seen}

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Quarantine:
        return cls(Kind(str(d["kind"])), str(d["evidence"]), float(str(d["started"])), int(str(d["seen"])))


@dataclass(frozen=True, slots=True)
class Observation:
    """What a detector saw of one page: its kind, the evidence to compare next run, why."""

    kind: Kind
    evidence: str
    why: str


@dataclass(frozen=True, slots=True)
class Release:
    """An operator's release (the run tag `freshness/release`): every held page of the
    source (`everything`), those of some kinds, or some pages."""

    everything: bool = False
    kinds: frozenset[Kind] = frozenset()
    pages: frozenset[str] = frozenset()

    @classmethod
    def parse(cls, tag: str | None) -> Release:
        """`all`, kind names and page URLs, comma-separated (unknown words are URLs)."""
        items = [i.strip() for i in (tag or "").split(",") if i.strip()]
        kinds = {Kind(i) for i in items if i in Kind.__members__.values()}
        pages = {i for i in items if i != "all" and i not in kinds}
        return cls("all" in items, frozenset(kinds), frozenset(pages))

    def covers(self, url: str, kind: Kind) -> bool:
        return self.everything or kind in self.kinds or url in self.pages

    def __bool__(self) -> bool:
        return self.everything or bool(self.kinds or self.pages)


def same_evidence(kind: Kind, a: str, b: str) -> bool:
    """Whether two runs saw the same: texts (sketches) alike at `SAME_AT`, the rest equal."""
    if kind in (Kind.REWRITTEN, Kind.COLLAPSED) and a and b:
        return a == b or resemblance(bytes.fromhex(a), bytes.fromhex(b)) >= SAME_AT
    return a == b


def continued(prior: Quarantine | None, kind: Kind, evidence: str, now: float, *, rule: Rule) -> Quarantine:
    """The state of a page held for `kind` this run: its count goes on when the last run
    held it for the same kind and evidence (a kind never confirmed: the same kind)."""
    if prior is not None and prior.kind is kind:
        if rule.confirm is None or same_evidence(kind, prior.evidence, evidence):
            return replace(prior, evidence=evidence, seen=prior.seen + 1)
        return Quarantine(kind, evidence, prior.started, 1)
    return Quarantine(kind, evidence, now)


@dataclass(slots=True)
class Verdict:
    """What `judge` decided: the pages held (their new state), taken after being held
    (confirmed), released by the operator, and let through (under their kind's share)."""

    held: dict[str, Quarantine] = field(default_factory=dict)
    taken: dict[str, Kind] = field(default_factory=dict)
    released: dict[str, Kind] = field(default_factory=dict)
    passed: set[str] = field(default_factory=set)


def judge(
    observed: Mapping[str, Observation],
    prior: Mapping[str, Quarantine | None],
    *,
    fetched: int,
    rules: Rules,
    release: Release,
    now: float,
) -> Verdict:
    """Each observed page held, confirmed, released or let through by its kind's rule.
    A page the last run held for the same is confirmed once it was seen `confirm` times;
    the share counts the pages not confirmed (`fetched`: the pages this run asked)."""
    out = Verdict()
    by_kind: dict[Kind, list[str]] = {}
    for url, obs in observed.items():
        rule, last = rules[obs.kind], prior.get(url)
        state = continued(last, obs.kind, obs.evidence, now, rule=rule)
        if rule.confirm == 0:
            out.passed.add(url)
        elif rule.releasable and release.covers(url, obs.kind):
            out.released[url] = obs.kind
        elif rule.confirm is not None and state.seen > rule.confirm:
            out.taken[url] = obs.kind
        else:
            by_kind.setdefault(obs.kind, []).append(url)
    for kind, urls in by_kind.items():
        rule = rules[kind]
        if rule.share is not None and not (len(urls) >= rules.min_pages and len(urls) > rule.share * fetched):
            out.passed.update(urls)
            continue
        for url in urls:
            out.held[url] = continued(prior.get(url), kind, observed[url].evidence, now, rule=rule)
    return out


def report_lines(
    held: Mapping[str, Kind], taken: Mapping[str, Kind], released: Mapping[str, Kind], rules: Rules
) -> list[str]:
    """The run's one line per kind: the pages held, taken after a hold, and released."""
    lines = []
    for kind in Kind:
        parts = [[u for u, k in sorted(m.items()) if k is kind] for m in (held, taken, released)]
        if not any(parts):
            continue
        said = ", ".join(f"{len(urls)} {word}{_first(urls)}" for word, urls in zip(_WORDS, parts, strict=True))
        how = f"; `freshness release --kind {kind.value}` takes them" if parts[0] and rules[kind].releasable else ""
        lines.append(f"quarantine {kind.value}: {said}{how}")
    return lines


_WORDS = ("held", "taken", "released")


def _first(urls: Iterable[str], n: int = 3) -> str:
    urls = list(urls)
    if not urls:
        return ""
    more = f" and {len(urls) - n} more" if len(urls) > n else ""
    return f" ({', '.join(urls[:n])}{more})"
