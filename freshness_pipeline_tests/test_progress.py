"""Progress of long work: a rich bar per stage on a terminal (counts, rate), one log line per
stage without one (in the run's Dagster event log), and no third-party bars."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from freshness_pipeline import progress
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.test_cli import cli, write_sources


def test_without_a_terminal_a_stage_is_one_line_with_count_and_rate(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(progress.MODE_ENV, raising=False)
    assert progress.mode() == "log"  # pytest's stderr is not a terminal
    caplog.set_level(logging.INFO)
    assert [len(b) for b in progress.batches(list(range(70)), 32, "embed", unit="sections")] == [32, 32, 6]
    assert list(progress.track(iter([]), "fetch/extract", total=0, unit="pages")) == []  # empty: silent
    found = progress.call("discovery", lambda: ["a", "b", "c"], unit="URLs", count=len)
    assert found == ["a", "b", "c"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert lines[0].startswith("embed: 70 sections in ") and " sections/s" in lines[0]
    assert lines[1].startswith("discovery: 3 URLs in ")


def test_a_bar_shows_the_count_of_the_total(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv(progress.MODE_ENV, "bar")
    assert list(progress.track(range(5), "fetch/extract", total=5, unit="pages")) == [0, 1, 2, 3, 4]
    err = capsys.readouterr().err
    assert "fetch/extract" in err and "5/5" in err and "pages/s" in err, err
    monkeypatch.setenv(progress.MODE_ENV, "off")
    assert list(progress.track(range(3), "embed", total=3)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def _run_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run with stderr on a pseudo-terminal (stdout piped); returns (exit code, stderr)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        ready, _, _ = select.select([master], [], [], 180)
        if not ready:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    proc.wait(timeout=60)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


def test_a_run_on_a_terminal_shows_progress_per_stage(dagster_home: Path) -> None:
    with DocsSite() as site:
        sources = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(generate(6, sections_per_page=3, seed=2).markdown())
        env = {k: v for k, v in os.environ.items() if k != progress.MODE_ENV}
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--sources", str(sources)]
        code, err = _run_on_a_terminal(cmd, env)
    assert code == 0, err
    assert "\x1b[" in err  # drawn for a terminal (rich's control codes)
    err = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    assert "discovery: 6 URLs in " in err, err
    assert "fetch/extract" in err and "6/6 pages" in err, err
    assert "embed" in err and "18/18 sections" in err, err


def test_without_a_terminal_the_cli_prints_a_line_per_stage(dagster_home: Path) -> None:
    """`freshness run 2>> cron.log`: one plain line per stage, no bar, no control codes."""
    with DocsSite() as site:
        sources = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(generate(3, sections_per_page=2, seed=6).markdown())
        env = {k: v for k, v in os.environ.items() if k != progress.MODE_ENV}
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "--json", "--sources", str(sources)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    stages = ("discovery", "fetch/extract", "embed")
    lines = [line for line in done.stderr.splitlines() if line.split(":")[0] in stages]
    want = ["discovery: 3 URLs", "fetch/extract: 3 pages", "embed: 6 sections"]
    assert [line.split(" in ")[0] for line in lines] == want, done.stderr
    assert "\x1b[" not in done.stderr and "━" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["status"] == "success"  # stdout stays one JSON object


def test_with_verbose_each_stage_is_one_line_on_stderr(dagster_home: Path) -> None:
    """`freshness run -v` prints Dagster's event log: a stage's line once, as its log line,
    not a second time plain."""
    with DocsSite() as site:
        sources = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(generate(3, sections_per_page=2, seed=6).markdown())
        env = {k: v for k, v in os.environ.items() if k != progress.MODE_ENV}
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "run", "-v", "--json", "--sources", str(sources)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    for stage in ("discovery: 3 URLs in ", "fetch/extract: 3 pages in ", "embed: 6 sections in "):
        assert sum(stage in line for line in done.stderr.splitlines()) == 1, (stage, done.stderr[-3000:])


def test_without_a_terminal_each_stage_logs_a_line_in_the_dagster_run(dagster_home: Path) -> None:
    with DocsSite() as site:
        sources = str(write_sources(dagster_home / "sources.yaml", site.sitemap_url))
        site.publish(generate(4, sections_per_page=2, seed=4).markdown())
        cli("run", "--sources", sources)
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs(limit=1)
        messages = [e.user_message for e in instance.all_logs(run.run_id)]
    for stage in ("discovery: 4 URLs in ", "fetch/extract: 4 pages in ", "embed: 8 sections in "):
        assert sum(m.startswith(stage) for m in messages) == 1, (stage, [m for m in messages if ":" in m][:40])


@pytest.mark.slow
def test_the_model_loads_without_third_party_bars() -> None:
    """In a fresh process (the model loads once per process) with no bar setting of its own."""
    probe = "from freshness_pipeline.adapters.embedders.local import LocalEmbedder; LocalEmbedder().embed(['x'])"
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Loading weights" not in done.stderr and "it/s]" not in done.stderr, done.stderr
