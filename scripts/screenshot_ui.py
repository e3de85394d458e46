"""Screenshot the Dagster UI after a demo run: the asset graph (docs/ui-asset-graph.png),
the demo's last run, a run of the code location (docs/ui-run.png), and each source's
freshness over time, after three runs of two sources (docs/ui-freshness-plots.png: the
`freshness_metrics` asset's Overview, Metadata set to "Plots" and "Events").

    python scripts/screenshot_ui.py [--out-dir docs] [--keep-home]

Runs `freshness demo --embedder hashing` into a fresh DAGSTER_HOME, and `freshness run`
three times over two loopback sites (the demo's v1 pages, then v2 on one of them) into
another, serves each code location with `dagster-webserver` on 127.0.0.1 (no daemon: the
sensors do not tick against the stopped sites), and opens the pages in headless Debian
Chromium (`apt-get install -y chromium`); the plots are a toggle, clicked through Chromium's
DevTools protocol. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from base64 import b64decode
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from websockets.sync.client import connect

from freshness_pipeline.demo.server import DocsSite, load_folder

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "freshness_pipeline" / "demo" / "site"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=2800,1200",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"{url} did not answer within {timeout_s:.0f}s")


def skip_community_dialog(base: str) -> None:
    """Mark Dagster's first-visit 'join the community' dialog as seen (it covers the graph)."""
    req = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": "mutation { setNuxSeen }"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(req, timeout=10).close()


def last_run_id(env: dict[str, str]) -> str:
    """The demo's last run (its v2 refresh), read from the demo's instance."""
    code = "import dagster as dg; print(dg.DagsterInstance.get().get_runs(limit=1)[0].run_id)"
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True)
    return out.stdout.split()[-1]


def screenshot(url: str, out: Path, budget_ms: int) -> None:
    chromium = shutil.which("chromium") or sys.exit("chromium not found: apt-get install -y chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--virtual-time-budget={budget_ms}",
                f"--screenshot={out}",
                url,
            ],
            check=True,
            timeout=180,
            capture_output=True,
        )


@contextmanager
def webserver(env: dict[str, str]) -> Iterator[str]:
    """`dagster-webserver` on the code location of `env`'s DAGSTER_HOME: its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [Path(sys.executable).parent / "dagster-webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/server_info")
        time.sleep(5)  # the code location loads after the webserver answers
        skip_community_dialog(base)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def two_sources(home: Path) -> dict[str, str]:
    """Three `freshness run`s of two sources into `home`: both on the demo's v1 pages, then
    one of them on v2 (its figures move). The environment of that home."""
    env = {**os.environ, "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(home / "sources.yaml")}
    home.mkdir(parents=True)
    freshness = Path(sys.executable).parent / "freshness"
    with DocsSite() as guides, DocsSite() as api:
        sites = {"guides": guides, "api": api}
        (home / "sources.yaml").write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": n, "sitemap": s.sitemap_url} for n, s in sites.items()],
                    "embedder": {"provider": "hashing"},
                }
            )
        )
        for version in ("v1", "v1", "v2"):
            guides.publish(load_folder(SITE / version))
            api.publish(load_folder(SITE / "v1"))
            subprocess.run([freshness, "run", "--allow-spike"], cwd=ROOT, env=env, check=True)
    return env


def plots_screenshot(url: str, out: Path) -> None:
    """`url` (an asset's Overview) with its Metadata shown as plots per event, through
    Chromium's DevTools protocol: the toggle is not in the URL."""
    chromium = shutil.which("chromium") or sys.exit("chromium not found: apt-get install -y chromium")
    port = free_port()
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [
                chromium,
                *CHROMIUM_FLAGS[:-1],
                "--window-size=1600,2200",
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={port}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_for(f"http://127.0.0.1:{port}/json/version")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
                (page,) = [t for t in json.load(resp) if t["type"] == "page"]
            with connect(page["webSocketDebuggerUrl"], max_size=None) as ws:
                calls = iter(range(1, 1000))

                def cdp(method: str, **params: Any) -> dict[str, Any]:
                    ident = next(calls)
                    ws.send(json.dumps({"id": ident, "method": method, "params": params}))
                    while True:
                        reply = json.loads(ws.recv())
                        if reply.get("id") == ident:
                            return reply.get("result", {})

                cdp("Page.navigate", url=url)
                time.sleep(15)
                for label in ("Plots", "Events"):  # Metadata: Table -> Plots; Partitions -> Events
                    clicked = cdp(
                        "Runtime.evaluate",
                        expression="(() => { const b = [...document.querySelectorAll('button')]"
                        f".find(b => b.textContent.trim() === {label!r}); if (b) {{ b.click(); "
                        "b.scrollIntoView({block: 'start'}); } return !!b; })()",
                        returnByValue=True,
                    )
                    if not clicked.get("result", {}).get("value"):
                        sys.exit(f"no {label!r} button on {url}")
                    time.sleep(8)
                shot = cdp("Page.captureScreenshot", format="png")
                out.write_bytes(b64decode(shot["data"]))
        finally:
            os.killpg(browser.pid, signal.SIGTERM)
            browser.wait(timeout=60)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", type=Path, default=ROOT / "docs")
    p.add_argument("--budget-ms", type=int, default=30_000, help="virtual time Chromium gives the page")
    p.add_argument("--keep-home", action="store_true", help="keep the DAGSTER_HOMEs")
    p.add_argument("--only-plots", action="store_true", help="make docs/ui-freshness-plots.png only")
    args = p.parse_args()

    work = Path(tempfile.mkdtemp(prefix="freshness-ui-"))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    try:
        if not args.only_plots:
            home = work / "home"
            env = {**os.environ, "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(home / "sources.yaml")}
            freshness = Path(sys.executable).parent / "freshness"
            subprocess.run(
                [freshness, "demo", "--embedder", "hashing", "--home", str(home)], cwd=ROOT, env=env, check=True
            )
            with webserver(env) as base:
                screenshot(f"{base}/asset-groups/freshness", args.out_dir / "ui-asset-graph.png", args.budget_ms)
                screenshot(f"{base}/runs/{last_run_id(env)}", args.out_dir / "ui-run.png", args.budget_ms)
        with webserver(two_sources(work / "two")) as base:
            plots_screenshot(f"{base}/assets/freshness_metrics", args.out_dir / "ui-freshness-plots.png")
    finally:
        if not args.keep_home:
            shutil.rmtree(work, ignore_errors=True)
    print(f"saved {args.out_dir}/ui-*.png" + (f"; DAGSTER_HOMEs kept in {work}" if args.keep_home else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
