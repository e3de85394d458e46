"""Drive the `freshness` command line in-process, as an operator would, and read its output.

One `Freshness` per test: it owns a sources file with one source; `configure` rewrites it
(for a chunker or model change), every other method is one CLI command.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from freshness_pipeline.cli import main


@dataclass
class Freshness:
    sources: Path
    sitemap: str
    name: str = "docs"
    source_settings: dict[str, Any] = field(default_factory=dict)
    embedder: dict[str, Any] = field(default_factory=lambda: {"provider": "hashing"})

    def __post_init__(self) -> None:
        self.configure()

    def configure(self, *, embedder: dict[str, Any] | None = None, **source_settings: Any) -> None:
        """Rewrite the sources file; keyword arguments are source settings (`noise=...`)."""
        self.source_settings.update(source_settings)
        if embedder is not None:
            self.embedder = embedder
        self.sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": self.name, "sitemap": self.sitemap, **self.source_settings}],
                    "embedder": self.embedder,
                }
            )
        )

    def cli(self, *args: str, expect: int = 0) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["--sources", str(self.sources), *args])
        assert code == expect, f"freshness {' '.join(args)} exited {code}:\n{out.getvalue()}"
        return out.getvalue()

    def run(self) -> dict[str, Any]:
        """`freshness run --json`: the run's counts. Fails the test unless it succeeded."""
        counts = json.loads(self.cli("run", "--json").strip().splitlines()[-1])
        assert counts["status"] == "success", counts
        return counts

    def dump(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.cli("dump").splitlines() if line.strip()]

    def status(self) -> dict[str, Any]:
        (row,) = json.loads(self.cli("status", "--json"))
        return row

    def resolve(self, key: str) -> dict[str, Any]:
        return json.loads(self.cli("resolve", key, "--json"))
