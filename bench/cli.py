"""The `freshness` command line called in this process, as the benchmarks drive it."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from pathlib import Path


def freshness(home: Path, sources: Path, *args: str) -> str:
    """Run `freshness --sources SOURCES ARGS` against `home`; its stdout, or RuntimeError
    with the tail of it when the command did not exit 0."""
    from freshness_pipeline.cli import main

    os.environ["DAGSTER_HOME"] = str(home)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--sources", str(sources), *args])
    if code != 0:
        raise RuntimeError(f"freshness {' '.join(args)} exited {code}: {out.getvalue()[-2000:]}")
    return out.getvalue()


def add_target_share(parser: argparse.ArgumentParser) -> None:
    """`--target-share N`: the chunk target budget/N that the bench's sources file sets."""
    from freshness_pipeline.core.segment import TARGET_SHARE

    parser.add_argument(
        "--target-share",
        type=int,
        choices=range(2, 9),
        metavar="N",
        help=f"chunk target budget/N (default {TARGET_SHARE})",
    )
