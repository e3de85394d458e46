"""`fetch.quarantine` of the sources file: the quarantine's rule table, a kind's keys given
over its defaults (`core/quarantine.py`, docs/change-detection.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .core.quarantine import DEFAULT_RULES, Kind, Rule, Rules

Share = Annotated[float, Field(strict=True, ge=0, le=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class QuarantineRule(_Strict):
    """One row of the quarantine's table (`core/quarantine.py`); a key left out keeps the
    kind's default."""

    share: Share | None  # held when more than this share of the pages fetched show it; null: always
    confirm: Annotated[int, Field(strict=True, ge=0, le=100)] | None  # runs seeing the same again; null: never
    release: bool  # `freshness release` takes it


def _rule(kind: Kind) -> QuarantineRule:
    r = DEFAULT_RULES[kind]
    return QuarantineRule(share=r.share, confirm=r.confirm, release=r.releasable)


_RULED = (Kind.GONE, Kind.NEAR_EMPTY, Kind.REWRITTEN, Kind.COLLAPSED, Kind.REDIRECTED)


class QuarantinePolicy(_Strict):
    """`fetch.quarantine`: the rules of the kinds a setting can move (docs/change-detection.md)."""

    min_pages: Annotated[int, Field(strict=True, ge=2)] = 2  # fewer at once: a share rule never holds
    gone: QuarantineRule = _rule(Kind.GONE)
    near_empty: QuarantineRule = _rule(Kind.NEAR_EMPTY)
    rewritten: QuarantineRule = _rule(Kind.REWRITTEN)
    collapsed: QuarantineRule = _rule(Kind.COLLAPSED)
    redirected: QuarantineRule = _rule(Kind.REDIRECTED)

    @model_validator(mode="before")
    @classmethod
    def _over_defaults(cls, data: object) -> object:
        """A kind's keys given over its defaults."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for kind in _RULED:
            if isinstance(given := data.get(kind.value), dict):
                out[kind.value] = {**_rule(kind).model_dump(), **given}
        return out

    def rules(self, missing_after: int) -> Rules:
        table = {k: Rule(r.share, r.confirm, r.release) for k in _RULED for r in [getattr(self, k.value)]}
        table[Kind.MISSING] = Rule(None, missing_after - 1, False)
        return Rules({**DEFAULT_RULES, **table}, self.min_pages)
