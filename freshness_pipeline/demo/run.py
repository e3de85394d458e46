"""`freshness demo`: serve the shipped docs site on loopback at version 1, refresh it,
publish version 2, refresh again, then search. Embedded defaults, no keys, no network
beyond loopback. State goes to a fresh folder so the counts are always the same."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import yaml

from ..core.run_counts import run_line
from ..defs.instance import write_instance_config
from .server import DocsSite, load_folder

SITE = Path(__file__).parent / "site"
QUERY = "how many times is an upload retried after a network error?"
MARKER = ".freshness-demo"
WORKSPACE = Path(__file__).resolve().parents[2] / "workspace.yaml"  # in a checkout, not in a wheel
DEFINITIONS = "freshness_pipeline.defs.definitions"  # in every home the demo made: only such a folder is ever deleted


def _noise(version: int):
    # What a real site generator changes on every build: dates and build stamps.
    def noise(path: str) -> dict[str, str]:
        return {"updated": time.strftime("%B %d, %Y %H:%M:%S"), "build": f"v{version} at {time.time():.0f}"}

    return noise


def run_demo(home: Path, *, embedder: str = "local") -> int:
    from ..api import open_index

    refused = prepare_home(home)
    if refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bars
    write_instance_config(home)  # the pool limit, queue and monitoring that docs/dagster.md describes
    os.environ["DAGSTER_HOME"] = str(home.resolve())
    with DocsSite() as site:
        sources = home / "sources.yaml"
        sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": "demo", "sitemap": site.sitemap_url}],
                    "embedder": {"provider": embedder},
                    "vector_store": {"provider": "lancedb"},
                }
            )
        )
        os.environ["FRESHNESS_SOURCES"] = str(sources.resolve())
        index = open_index(home, sources)
        for version in (1, 2):
            site.publish(load_folder(SITE / f"v{version}"), noise=_noise(version))
            c = index.refresh("demo")  # the runs keep every event for the UI
            if c["status"] != "success":
                print(f"site v{version}: run failed: {c.get('message')}")
                return 1
            print(f"site v{version}: {run_line(c)}")
        hits = index.search(QUERY, k=1)
    print(f'search "{QUERY}"')
    for h in hits:
        print(f"  {h.score:.3f} {h.url} [{h.heading_path}]\n  {h.text[:200]}")
    print(f"\nState is in {home}. See the runs in the UI with:\n  {ui_command(home)}")
    print(
        "The demo site stopped with the demo: a `freshness run` on this state fails its discovery and deletes nothing."
    )
    return 0


def prepare_home(home: Path) -> str | None:
    """Make `home` a fresh, marked demo folder. Only a folder that is absent, empty or
    marked by an earlier demo is (re)made; otherwise returns why it was refused."""
    if home.is_symlink() or (home.exists() and not home.is_dir()):
        return f"{home} is not a folder; pick another --home"
    if home.exists() and any(home.iterdir()):
        if not (home / MARKER).is_file():
            return (
                f"{home} is not empty and was not made by `freshness demo` (no {MARKER} in it); "
                "the demo deletes its home before it starts: pick another --home"
            )
        shutil.rmtree(home)
    home.mkdir(parents=True, exist_ok=True)
    (home / MARKER).write_text("made by `freshness demo`; the next demo in this folder deletes it\n")
    return None


def ui_command(home: Path) -> str:
    """The full command that opens this demo's state in the Dagster UI, from any folder:
    this venv's `dg dev` on the checkout's workspace.yaml, or on the installed module when
    there is no checkout (a wheel install)."""
    root = home.resolve()
    dg = Path(sys.executable).parent / "dg"
    target = f"-w {shlex.quote(str(WORKSPACE))}" if WORKSPACE.is_file() else f"-m {DEFINITIONS}"
    return (
        f"DAGSTER_HOME={shlex.quote(str(root))} FRESHNESS_SOURCES={shlex.quote(str(root / 'sources.yaml'))} "
        f"{shlex.quote(str(dg))} dev {target}"
    )
