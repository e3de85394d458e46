"""Screenshot the Dagster UI after a demo run: the asset graph (docs/ui-asset-graph.png) and
the demo's last run, a run of the code location (docs/ui-run.png).

    python scripts/screenshot_ui.py [--out-dir docs] [--keep-home]

Runs `freshness demo --embedder hashing` into a fresh DAGSTER_HOME, serves the code location
with `dagster-webserver` on 127.0.0.1 (no daemon: the sensors do not tick against the
stopped demo site), and opens the pages in headless Debian Chromium
(`apt-get install -y chromium`). Not run in CI.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", type=Path, default=ROOT / "docs")
    p.add_argument("--budget-ms", type=int, default=30_000, help="virtual time Chromium gives the page")
    p.add_argument("--keep-home", action="store_true", help="keep the demo DAGSTER_HOME")
    args = p.parse_args()

    home = Path(tempfile.mkdtemp(prefix="freshness-ui-")) / "home"
    env = {**os.environ, "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(home / "sources.yaml")}
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [bin_dir / "freshness", "demo", "--embedder", "hashing", "--home", str(home)], cwd=ROOT, env=env, check=True
    )
    port = free_port()
    server = subprocess.Popen(
        [bin_dir / "dagster-webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
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
        args.out_dir.mkdir(parents=True, exist_ok=True)
        screenshot(f"{base}/asset-groups/freshness", args.out_dir / "ui-asset-graph.png", args.budget_ms)
        screenshot(f"{base}/runs/{last_run_id(env)}", args.out_dir / "ui-run.png", args.budget_ms)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        if not args.keep_home:
            shutil.rmtree(home.parent, ignore_errors=True)
    print(f"saved {args.out_dir}/ui-*.png" + (f"; DAGSTER_HOME kept at {home}" if args.keep_home else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
