"""A Ctrl-C (SIGINT to the command's process group, as a terminal sends it) at seeded random
moments of `freshness run`: what the command says landed is what `freshness dump` holds.
Either the run's counts are printed (exit 0: its commit landed, said as such if the Ctrl-C
came after it), or it ends as interrupted saying nothing of its run was committed (or before
it started), and the index is the one before the run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from freshness_pipeline.defs.runner import STOPPED
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.faults import CRASH_ENV, SIGNAL_ENV
from freshness_pipeline_tests.crash.test_dead_runs import env_for, finish, freshness, records, sources_file
from freshness_pipeline_tests.sitegen import generate, paragraph

TRIALS = 8
EXTRA = 4  # trials aimed at an answer not yet seen, should the load have moved every moment to one side
SIGINT_EXIT = -signal.SIGINT  # Python ends an unhandled KeyboardInterrupt by SIGINT


def moments(rng: random.Random) -> list[float]:
    """Ctrl-C moments as shares of a run's length, one in each eighth of [0, 1.5), shuffled:
    early ones land before the commit and late ones after the run's end, whatever the load."""
    shares = [rng.uniform(k, k + 1) * 1.5 / TRIALS for k in range(TRIALS)]
    rng.shuffle(shares)
    return shares


def test_ctrl_c_at_random_moments_says_what_landed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(532)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    site_now = generate(10, sections_per_page=2, seed=6)
    with DocsSite() as site:
        site.publish(site_now.markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url)
        env = env_for(home, sources)
        span = timed_run(env)  # a run's length on this host now; every uninterrupted run updates it
        said = {"landed": 0, "not landed": 0}
        planned = moments(rng)
        for trial in range(TRIALS + EXTRA):
            if trial < TRIALS:
                share = planned[trial]
            elif all(said.values()):
                break
            else:  # the load moved every moment to one side: aim at the other
                share = 0.2 if said["landed"] else 3.0
            before = set(records(env))
            page = rng.choice(sorted(site_now.pages))  # one page edited: no hold, no spike
            heading, _ = site_now.pages[page][0]
            site_now.pages[page][0] = (heading, paragraph(rng))
            site.publish(site_now.markdown())
            after = site_now.expected(site.base_url)
            started = time.monotonic()
            run = freshness(env, "run")
            try:
                run.wait(timeout=share * span)
                span = time.monotonic() - started
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGINT)
            out, err = finish(run)
            where = f"trial {trial} at {share:.2f} of {span:.1f} s: exit {run.returncode}\n{out}\n{err[-2000:]}"
            landed = any(line.startswith("docs: ") for line in out.splitlines())
            if run.returncode == 0:
                assert landed, where
                assert "interrupted" not in err or "its commit had landed" in err, where
            else:
                assert run.returncode == SIGINT_EXIT and not landed, where
                last = err.strip().splitlines()[-1]
                assert last.startswith("freshness: interrupted"), where
                assert "docs:" not in last or "docs: nothing of its run was committed" in last, where
            assert set(records(env)) == (after if landed else before), where
            said["landed" if landed else "not landed"] += 1
            if not landed:  # the next trial starts from the site as published
                span = timed_run(env)
        assert all(said.values()), said  # both answers were seen


def timed_run(env: dict[str, str]) -> float:
    """An uninterrupted `freshness run`, which must succeed; its length in seconds."""
    started = time.monotonic()
    run = freshness(env, "run")
    out, err = finish(run)
    assert run.returncode == 0, out + err[-3000:]
    return time.monotonic() - started


def test_ctrl_c_after_vector_index_materialized_reports_its_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ctrl-C inside vector_index after its commit and its output (as `reconcile_clean`
    starts): the run fails as interrupted, and the command says the commit landed."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    pages = generate(4, sections_per_page=2, seed=7)
    with DocsSite() as site:
        site.publish(pages.markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url)
        env = env_for(home, sources) | {CRASH_ENV: "reconcile", SIGNAL_ENV: "INT"}
        run = freshness(env, "run")
        out, err = finish(run)
        assert run.returncode == 0, (run.returncode, out, err[-2000:])
        assert out.startswith("docs: ") and "interrupted by a Ctrl-C after its commit landed" in out, out
        assert err.rstrip().endswith("freshness: interrupted: docs: its commit had landed (reported above)"), err
        assert set(records(env_for(home, sources))) == pages.expected(site.base_url)


def test_ctrl_c_as_a_landed_run_is_being_recorded_says_it_landed(tmp_path: Path, dagster_home: Path) -> None:
    """A Ctrl-C after the run ended, as its attempt is recorded: its line is printed, and the
    stop says its commit had landed (exit 0), as for a Ctrl-C after the commit inside the run."""
    site_now = generate(4, sections_per_page=2, seed=10)
    with DocsSite() as site:
        site.publish(site_now.markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url)
        run = freshness(env_for(dagster_home, sources) | {CRASH_ENV: "attempt", SIGNAL_ENV: "INT"}, "run")
        out, err = finish(run)
        assert run.returncode == 0 and out.startswith("docs: crawled: 4 new: 4 "), (run.returncode, out, err[-2000:])
        assert err.rstrip().endswith("freshness: interrupted: docs: its commit had landed (reported above)"), err
        assert set(records(env_for(dagster_home, sources))) == site_now.expected(site.base_url)


def test_ctrl_c_before_the_commit_is_the_last_attempt_status_shows(tmp_path: Path, dagster_home: Path) -> None:
    """A Ctrl-C inside vector_index before its commit (as its writes are being recorded):
    nothing was committed, and `freshness status` shows that run as the last attempt, failed
    as interrupted, beside the last success."""
    with DocsSite() as site:
        site.publish(generate(4, sections_per_page=2, seed=8).markdown())
        sources = sources_file(tmp_path / "sources.yaml", site.sitemap_url)
        assert finish(run := freshness(env_for(dagster_home, sources), "run"))[0].startswith("docs: ")
        site.publish(generate(4, sections_per_page=2, seed=9).markdown())
        run = freshness(env_for(dagster_home, sources) | {CRASH_ENV: "intents", SIGNAL_ENV: "INT"}, "run")
        out, err = finish(run)
        assert run.returncode == SIGINT_EXIT and not out, (run.returncode, out, err[-2000:])
        assert err.rstrip().endswith("freshness: interrupted: docs: nothing of its run was committed"), err
        status = freshness(env_for(dagster_home, sources), "status", "--json")
        (row,) = json.loads(finish(status)[0])
    attempt = row["last_attempt"]
    assert attempt["status"] == "failure" and attempt["message"] == STOPPED, attempt
    assert attempt["finished_at"] > row["last_run"]["finished_at"], row
