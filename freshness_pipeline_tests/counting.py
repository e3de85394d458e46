"""A string that counts how often it is hashed or compared: a loop that rebuilds a set or
scans a list per element shows up as a count that grows with the product of two sizes."""

from __future__ import annotations

from typing import ClassVar


class CountingStr(str):
    ops: ClassVar[int] = 0

    def __hash__(self) -> int:
        CountingStr.ops += 1
        return str.__hash__(self)

    def __eq__(self, other: object) -> bool:
        CountingStr.ops += 1
        return str.__eq__(self, other)

    __ne__ = None  # type: ignore[assignment]  # fall back to __eq__

    @classmethod
    def reset(cls) -> None:
        cls.ops = 0
