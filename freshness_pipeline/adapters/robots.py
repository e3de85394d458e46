"""robots.txt rules of one host, read with protego (RFC 9309: `*` and `$` wildcards,
fractional Crawl-delay), which `urllib.robotparser` does not honour."""

from __future__ import annotations

from dataclasses import dataclass

from protego import Protego

__all__ = ["Robots", "parse_robots"]


@dataclass(frozen=True, slots=True)
class Robots:
    rules: Protego | None = None  # None: no robots.txt, everything allowed
    unreachable: str | None = None  # RFC 9309: an unreachable robots.txt disallows everything
    host_down: bool = False  # unreachable because the host did not answer at all

    def block(self, url: str, agent: str) -> str | None:
        """Why `agent` may not fetch `url`, or None when it may."""
        if self.unreachable:
            return self.unreachable
        if self.rules is not None and not self.rules.can_fetch(url, agent):
            return "disallowed by robots.txt"
        return None

    def interval(self, agent: str) -> float:
        """Minimum seconds between request starts (Crawl-delay, or Request-rate)."""
        if self.rules is None:
            return 0.0
        delay = float(self.rules.crawl_delay(agent) or 0.0)
        rate = self.rules.request_rate(agent)
        return max(delay, rate.seconds / rate.requests if rate and rate.requests else 0.0)

    def sitemaps(self) -> list[str]:
        return list(self.rules.sitemaps) if self.rules is not None else []


def parse_robots(status: int, body: bytes) -> Robots:
    """The rules from a downloaded robots.txt. Any 4xx means there are no rules (RFC 9309
    2.3.1.3), where urllib's own `read()` would treat 401/403 as "disallow all"."""
    if status >= 400:
        return Robots()
    return Robots(Protego.parse(body.decode("utf-8", errors="replace")))
