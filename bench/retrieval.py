"""Does a search find the section? `python -m bench.retrieval` (`make bench-retrieval`).

Every shipped corpus (`../shared/corpora`, or `$FRESHNESS_CORPORA`) is served on one
loopback site (`DocsSite`, with the corpus replay's build noise) and indexed twice with
`freshness run` (in-process, the default local model unless `--embedder`):

  incremental  revision by revision, first to last (what a weekly refresh leaves)
  full         the last revision only, into a fresh home

(`noise.fuzzy_threshold: 0`, as in the corpus replay: every changed text is embedded again.)

`--last-only` builds the full index alone. That is sound for comparing chunk targets or
models: a page's chunks depend only on its text and the chunking settings, so an
incremental index holds the records of a fresh index of the same text and gives the same
hits (asserted by `freshness_pipeline_tests/corpus/test_incremental_hits.py`, and by the
default run here on every corpus), while indexing every revision costs most of the run.

`--target-share N` indexes with `chunking.target_share: N` in the sources file it writes
(a long section's runs aim at budget/N; default: `TARGET_SHARE` in `core/segment.py`): the
chunk target changes with no code edited, in this process and in the segment workers alike.
Questions come from each section's chunks joined, so they are nearly the same at any target.

Questions are built from the full index's records, the same on every run (a generator
seeded by each section's URL path and heading path; `bench/questions.py`):

  sentence  one sentence of the section's retrieval text (at least 8 words, found in no
            other section), about a third of its words dropped, lower-cased
  heading   the section's heading and its parent's, lower-cased (a heading pair that
            two sections share is left out)

Each question is searched with `pipeline/search.py: ranked`, the function `freshness
search` and the golden sets use, in its three modes (vector only, full-text only, hybrid),
on both indexes, reading the committed version as a user does. A hit is a result of the
question's section (any of its chunks). Printed: hit@1, hit@5 and MRR (over the top 10)
per corpus, set, index and mode. It stops when the incremental index does not hold the
full one's records, and exits 1 (after the table) when it does not give the same hits.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cli import add_target_share, freshness
from bench.questions import Question, questions

DEPTH = 10  # results read per question (MRR looks this far)
DIFFERENCES: list[str] = []  # where the incremental index answered otherwise than the full one


@dataclass
class Score:
    ranks: list[int | None] = field(default_factory=list)

    def line(self) -> tuple[float, float, float]:
        n = len(self.ranks) or 1
        hit1 = sum(1 for r in self.ranks if r == 1) / n
        hit5 = sum(1 for r in self.ranks if r is not None and r <= 5) / n
        mrr = sum(1 / r for r in self.ranks if r is not None) / n
        return hit1, hit5, mrr


class Home:
    """One state home, driven through the `freshness` command line in this process."""

    def __init__(self, home: Path, name: str, sitemap: str, embedder: dict[str, str], chunking: dict[str, int]) -> None:
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        self.home, self.name = home, name
        self.sources = home / "sources.yaml"
        # fuzzy_threshold 0, as in the corpus replay: a fuzzy-unchanged section keeps its old
        # text by design, and the incremental index could not equal a fresh one.
        source = {
            "name": name,
            "sitemap": sitemap,
            "noise": {"fuzzy_threshold": 0},
            "checks": {"spike_min_share": 1.0},
            "chunking": chunking,
        }
        self.sources.write_text(json.dumps({"sources": [source], "embedder": embedder}))

    def cli(self, *args: str) -> str:
        return freshness(self.home, self.sources, *args)

    def run(self) -> None:
        counts = json.loads(self.cli("run", "--json").strip().splitlines()[-1])
        if counts["status"] != "success":
            raise RuntimeError(f"{self.home}: run failed: {counts}")

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.cli("dump").splitlines() if line.strip()]

    def search(self, qs: list[Question], vectors: list[list[float]]) -> dict[str, list[list[str]]]:
        """Mode -> per question, the section keys of its top results, best first."""
        from freshness_pipeline.config import load_settings
        from freshness_pipeline.core.versions import namespace
        from freshness_pipeline.pipeline.context import SourceContext
        from freshness_pipeline.pipeline.search import MODES, ranked

        os.environ["DAGSTER_HOME"] = str(self.home)
        ctx = SourceContext.open(load_settings(self.sources), self.name, read_only=True)
        try:
            state = ctx.store.sources.get(self.name)
            assert state is not None
            ns = namespace(self.name, state.active_version)
            return {
                mode: [
                    [
                        f.hit.metadata["key"]
                        for f in ranked(ctx.vectors, ns, q.text, v, DEPTH, mode=mode, committed=True)
                    ]
                    for q, v in zip(qs, vectors, strict=True)
                ]
                for mode in MODES
            }
        finally:
            ctx.close()


def bench(
    name: str,
    root: Path,
    work: Path,
    embedder: dict[str, str],
    last_only: bool = False,
    chunking: dict[str, int] | None = None,
) -> list[tuple[str, str, str, int, Score]]:
    from bench.corpora import build_noise, first_seen, load_revisions
    from freshness_pipeline.adapters.embedders import make_embedder
    from freshness_pipeline.config import EmbedderConfig
    from freshness_pipeline.demo.server import DocsSite

    revisions = load_revisions(root / name)
    dates = first_seen(revisions)
    homes = {"full": [revisions[-1]]} if last_only else {"incremental": revisions, "full": [revisions[-1]]}
    indexes: dict[str, Home] = {}
    with DocsSite() as site:
        for index, revs in homes.items():
            indexes[index] = Home(work / f"{name}-{index}", name, site.sitemap_url, embedder, chunking or {})
            started = time.perf_counter()
            for rev in revs:
                site.publish(rev.docs, noise=build_noise(rev.number + 1, dates))
                indexes[index].run()
            took = time.perf_counter() - started
            print(f"{name}: {index} r{revs[0].number}..r{revs[-1].number} in {took:.0f}s", file=sys.stderr)
    full = indexes["full"]
    records = full.records()
    held = {r["id"]: (r["content_hash"], r["text"]) for r in records}
    if (
        "incremental" in indexes
        and (other := {r["id"]: (r["content_hash"], r["text"]) for r in indexes["incremental"].records()}) != held
    ):
        differ = sorted(i for i in held.keys() & other.keys() if held[i] != other[i])
        raise SystemExit(
            f"{name}: the incremental index does not hold the full index's records: "
            f"{len(held.keys() - other.keys())} missing {sorted(held.keys() - other.keys())[:3]}, "
            f"{len(other.keys() - held.keys())} extra {sorted(other.keys() - held.keys())[:3]}, "
            f"{len(differ)} differ {[(held[i][1][:200], other[i][1][:200]) for i in differ[:2]]}"
        )
    qs = questions(records)
    config = EmbedderConfig.model_validate(embedder)
    vectors = [v.tolist() for v in make_embedder(config).embed([q.text for q in qs])]
    found = {index: home.search(qs, vectors) for index, home in indexes.items()}
    for mode, lists in found["full"].items():
        if "incremental" in found and (
            other_hits := sum(a != b for a, b in zip(lists, found["incremental"][mode], strict=True))
        ):
            DIFFERENCES.append(
                f"{name} {mode}: {other_hits} of {len(qs)} questions get other hits from the incremental index"
            )
    rows = []
    for index, by_mode in found.items():
        for mode, lists in by_mode.items():
            scores: dict[str, Score] = defaultdict(Score)
            for q, keys in zip(qs, lists, strict=True):
                scores[q.kind].ranks.append(next((i for i, k in enumerate(keys, 1) if k == q.key), None))
            rows += [(kind, index, mode, len(s.ranks), s) for kind, s in sorted(scores.items(), reverse=True)]
    return rows


def main(argv: list[str] | None = None) -> int:
    from bench.corpora import CORPORA, corpora_root
    from freshness_pipeline.core.segment import TARGET_SHARE

    p = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", action="append", choices=CORPORA, help="one corpus (repeatable; default: all)")
    p.add_argument("--embedder", default="local", choices=["local", "hashing"])
    p.add_argument(
        "--last-only",
        action="store_true",
        help="only the full index of the last revision (no incremental one to compare)",
    )
    p.add_argument("--backend", choices=["torch", "onnx", "onnx-int8"], help="the local model's (default: its default)")
    add_target_share(p)
    args = p.parse_args(argv)
    os.environ.setdefault("FRESHNESS_PROGRESS", "off")
    root = corpora_root()
    print(f"load before: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    embedder = {"provider": args.embedder, **({"backend": args.backend} if args.backend else {})}
    chunking = {"target_share": args.target_share} if args.target_share else {}
    with tempfile.TemporaryDirectory(prefix="freshness-retrieval-") as tmp:
        rows = [
            (name, *row)
            for name in args.corpus or CORPORA
            for row in bench(name, root, Path(tmp), embedder, args.last_only, chunking)
        ]
    same = "same hits" if not DIFFERENCES else "OTHER HITS: " + "; ".join(DIFFERENCES)
    indexes = "the full index alone" if args.last_only else f"incremental and full indexes: same records, {same}"
    print(f"embedder: {embedder}; target budget/{args.target_share or TARGET_SHARE}; {indexes}")
    print("| corpus | questions | index | mode | hit@1 | hit@5 | MRR |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: |")
    for name, kind, index, mode, n, score in rows:
        h1, h5, mrr = score.line()
        print(f"| {name} | {n} {kind} | {index} | {mode} | {h1:.2f} | {h5:.2f} | {mrr:.2f} |")
    print(f"load after: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    return 1 if DIFFERENCES else 0


if __name__ == "__main__":
    raise SystemExit(main())
