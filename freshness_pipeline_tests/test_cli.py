"""The `freshness` command line: what `run` prints and its exit codes (checks, spikes and
the --allow-spike override), `--sources` on either side of the command, a closed pipe, and
the small commands' edge cases (`search -k 0`, `weak --json`, `deliver`, `resolve`)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest
import yaml
from sqlalchemy import create_engine, text

from freshness_pipeline.cli import main, run_lines
from freshness_pipeline.core import run_counts
from freshness_pipeline.core.tables import GOLDEN, HISTORY
from freshness_pipeline.defs.tags import ALLOW_SPIKE_TAG
from freshness_pipeline.demo.run import SITE
from freshness_pipeline.demo.server import DocsSite, load_folder
from freshness_pipeline_tests.sitegen import Site, generate

FEEDBACK = "Was this page helpful? Tell us in the forum."


def write_sources(path: Path, sitemap: str, **top: object) -> Path:
    body = {"sources": [{"name": "docs", "sitemap": sitemap}], "embedder": {"provider": "hashing"}, **top}
    path.write_text(yaml.safe_dump(body))
    return path


def cli(*args: str, expect: int = 0) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    assert code == expect, f"freshness {' '.join(args)} exited {code}:\n{out.getvalue()}\n{err.getvalue()}"
    return out.getvalue(), err.getvalue()


# -- `freshness run` text, from the runner's outcome ----------------------------------------


def test_run_lines_show_only_the_counts_the_run_produced() -> None:
    assert run_lines("docs", {"status": "failure", "message": "fetched_pages: DiscoveryError: boom"}) == [
        "docs: the crawl did not finish",
        "  failure: fetched_pages: DiscoveryError: boom",
    ]
    blocked = {"status": "blocked", "message": "change_spike: 24 of 24 sections", "crawled": 8, "errors": 0}
    assert run_lines("docs", blocked)[:2] == [
        "docs: crawled: 8 errors: 0 (nothing was indexed)",  # never made-up zeros
        "  blocked: change_spike: 24 of 24 sections",
    ]


def test_run_lines_list_failed_checks_and_the_error_pages_by_reason() -> None:
    counts = {"crawled": 30, "new": 0, "changed": 2, "unchanged": 16, "gone": 0, "errors": 12}
    outcome = {
        "status": "success",
        **counts,
        "checks": [
            {"name": "stale_share", "severity": "ERROR", "passed": False, "description": "12% stale\nsecond line"},
            {"name": "flagged_pages", "severity": "WARN", "passed": False, "description": "1 page flagged"},
        ],
        "error_pages": {f"https://d.example/p{i}": "HTTP 500" for i in range(12)},
    }
    lines = run_lines("docs", outcome)
    assert lines[0] == "docs: crawled: 30 new: 0 changed: 2 unchanged: 16 gone: 0 errors: 12"
    assert lines[1:3] == ["  check stale_share: ERROR: 12% stale", "  check flagged_pages: WARN: 1 page flagged"]
    assert lines[3:] == [
        "  error on 12 pages: HTTP 500: https://d.example/p0, https://d.example/p1, https://d.example/p2 and 9 more"
    ]


# -- through Dagster ---------------------------------------------------------------------


def test_run_exit_codes_checks_and_the_spike_override(dagster_home: Path) -> None:
    docs = generate(6, sections_per_page=3, seed=5)
    with DocsSite() as site:
        sources = str(write_sources(dagster_home / "sources.yaml", site.sitemap_url))
        site.publish(docs.markdown())
        out, _ = cli("run", "--sources", sources)  # --sources after the command
        assert out.startswith(
            "docs: crawled: 6 new: 6 changed: 0 unchanged: 0 gone: 0 errors: 0 skipped: 0 held: 0 dead_links: 0  | "
        ), out
        cli("--sources", sources, "run")  # quiet: the history the spike rule needs

        # A template redeploy rewrites every section: a blocking spike, exit 1, nothing indexed.
        redeploy = Site({rel: [(h, f"{t} {FEEDBACK}") for h, t in secs] for rel, secs in docs.pages.items()})
        site.publish(redeploy.markdown())
        out, _ = cli("run", "--sources", sources, expect=1)
        lines = out.splitlines()
        assert lines[0] == "docs: crawled: 6 errors: 0 skipped: 0 held: 0 dead_links: 0 (nothing was indexed)", out
        assert lines[1].startswith("  blocked: change_spike: ") and ALLOW_SPIKE_TAG in lines[1]

        # Reviewed: let it through. Success with a non-blocking ERROR check still exits 0.
        out, _ = cli("run", "--allow-spike", "--sources", sources)
        lines = out.splitlines()
        assert lines[0] == (
            "docs: crawled: 6 new: 0 changed: 6 unchanged: 0 gone: 0 errors: 0 skipped: 0 held: 0 dead_links: 0  | "
            "embedded: 18 payload_updated: 0 deleted: 0 reused: 0 moved: 0"
        ), out
        assert not any("check stale_share" in line for line in lines), out  # drift it repaired: information
        assert any(line.startswith("  check change_spike: WARN: ") for line in lines), out
        with dg.DagsterInstance.get() as instance:
            (last,) = instance.get_runs(limit=1)
            assert last.tags[ALLOW_SPIKE_TAG] == "true"

        out, _ = cli("run", "--json", "--sources", sources)
        quiet = json.loads(out)
        assert quiet["status"] == "success" and quiet["changed"] == 0 and quiet["checks"] == []
        assert set(run_counts.KEYS) <= quiet.keys()  # every count named in core/run_counts.py is recorded
        assert quiet["seconds"] > 0  # the run's work, discovery to commit (what bench.overhead reads)
        (stored,) = json.loads(cli("status", "--json", "--sources", sources)[0])
        assert set(run_counts.KEYS) <= stored["last_run"]["counts"].keys()

        # The small commands on this index.
        records = [json.loads(line) for line in cli("dump", "--sources", sources)[0].splitlines()]
        assert len(records) == 18 and all(FEEDBACK in r["text"] for r in records)
        _, err = cli("resolve", "0" * 40, "--sources", sources, expect=1)
        assert err.strip() == f"no current section for key {'0' * 40!r} (unknown, removed, or rewritten as it moved)"
        assert cli("deliver", "--sources", sources)[0] == "no webhooks configured\n"


def test_weak_json_is_plain_json(dagster_home: Path) -> None:
    with DocsSite() as site:
        # Every search is weak under a threshold above any cosine similarity.
        path = write_sources(dagster_home / "sources.yaml", site.sitemap_url, weak_thresholds={"hashing-v1-256": 1.5})
        site.publish(generate(2, sections_per_page=2, seed=3).markdown())
        sources = str(path)
        cli("run", "--sources", sources)
        cli("search", "where/is the retry limit?", "--sources", sources)
    out, _ = cli("weak", "--json", "--sources", sources)
    assert "\\/" not in out
    (row,) = json.loads(out)
    assert row["query"] == "where/is the retry limit?" and row["best_url"].startswith("http://127.0.0.1")
    assert row["best_score"] == round(row["best_score"], 4)


def test_search_k_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["search", "anything", "-k", "0"])
    assert exc.value.code == 2
    assert "error: Invalid value for '-k': must be at least 1, not 0" in capsys.readouterr().err


def test_sources_before_the_command_is_kept(dagster_home: Path) -> None:
    path = write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml")
    (row,) = json.loads(cli("--sources", str(path), "status", "--json")[0])
    assert row["source"] == "docs" and row["last_run"] is None
    missing = str(dagster_home / "missing.yaml")
    cli("--sources", missing, "status", "--sources", str(path))  # the one after the command wins
    _, err = cli("status", "--sources", missing, expect=2)
    assert "missing.yaml" in err


def test_a_closed_pipe_ends_quietly(dagster_home: Path) -> None:
    """`freshness status | head -0`: the reader is gone before anything is written."""
    path = write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml")
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    cmd = [sys.executable, "-m", "freshness_pipeline.cli", "status", "--sources", str(path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # type: ignore[union-attr]
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 141, err.decode()
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()


def test_the_script_exits_without_the_final_collections(dagster_home: Path) -> None:
    """`freshness` (`cli.entry`) takes the objects it made out of the exit's garbage
    collections (they are frozen when the exit handlers run; `python -c` with
    `sys.exit(main())` freezes none) and otherwise exits as Python does: output written,
    exit handlers run, threads waited for, exit codes kept."""
    path = write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml")
    probe = (
        "import atexit, gc, sys, threading, time\n"
        "from freshness_pipeline.cli import entry, main\n"
        "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count() > 1000))\n"
        "def late(): time.sleep(0.5); print('thread finished')\n"
        "threading.Thread(target=late).start()\n"
        "how, sys.argv = sys.argv[1], ['freshness', *sys.argv[2:]]\n"
        "entry() if how == 'entry' else sys.exit(main())\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    for how in ("entry", "main"):
        done = subprocess.run(
            [sys.executable, "-c", probe, how, "status", "--json", "--sources", str(path)],
            capture_output=True,
            text=True,
            env=env,
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        (row,) = json.loads("\n".join(lines[lines.index("[") : lines.index("]") + 1]))
        assert row["source"] == "docs"
        assert "thread finished" in lines, done.stdout
        assert lines[-1] == f"frozen at exit: {how == 'entry'}", done.stdout
    usage = subprocess.run([sys.executable, "-c", probe, "entry", "no-such-command"], capture_output=True, text=True)
    assert usage.returncode == 2 and "error:" in usage.stderr, usage.stderr
    assert usage.stdout.splitlines()[-1] == "frozen at exit: True", usage.stdout


def test_status_does_not_load_dagster(dagster_home: Path) -> None:
    """`freshness status` (text, with its history table, and --json) reads the state store
    and the vector store only: no Dagster import, and on SQLite state no PostgreSQL dialect."""
    path = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    cli("migrate", "--sources", path)
    engine = create_engine(f"sqlite:///{dagster_home / 'freshness.db'}")
    with engine.begin() as conn:  # one measurement, so that status prints the history table
        conn.execute(
            text(
                "INSERT INTO freshness_metrics (source, measured_at, stale_share, lag_p90_s, score, details)"
                " VALUES ('docs', 1700000000, 0.25, 7200, 0.917, '{}')"
            )
        )
    engine.dispose()
    probe = (
        "import sys\n"
        "from freshness_pipeline.cli import main\n"
        f"codes = [main(['status', '--sources', {path!r}]), main(['status', '--json', '--sources', {path!r}])]\n"
        "loaded = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))\n"
        "loaded += [m for m in sys.modules if m.startswith('sqlalchemy.dialects.postgresql')][:1]\n"
        "print('dagster or PostgreSQL modules:', loaded[:5], file=sys.stderr)\n"
        "raise SystemExit(1 if loaded or codes != [0, 0] else 0)\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    text_out, _, json_out = done.stdout.partition("\n[")
    assert text_out.startswith("docs: 0 pages, 0 sections indexed; last success never"), done.stdout
    # never run: "never refreshed", as source_fresh says it (no ERROR: nothing says since when)
    assert "\n  ALERT: never refreshed (WARN after " in text_out, done.stdout
    assert "freshness score 0.917" in text_out and "ALERT: score 0.917" in text_out, done.stdout
    assert "measured_at" in text_out and "2023-11-14 22:13" in text_out and "2.0" in text_out, done.stdout
    (row,) = json.loads("[" + json_out)
    assert row["freshness"]["score"] == 0.917
    assert (row["verdict"]["state"], row["verdict"]["level"]) == ("never", "warn")


def test_the_code_location_and_the_reading_commands_load_no_pandas(dagster_home: Path) -> None:
    """pandas, where it is installed, would be a third of a `freshness` command's start and
    a fifth of loading the code location (every launcher, code server and run worker does)."""
    path = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    cli("migrate", "--sources", path)
    probe = (
        "import sys\n"
        "import freshness_pipeline.defs.definitions\n"
        "from freshness_pipeline.cli import main\n"
        f"codes = [main([cmd, '--sources', {path!r}]) for cmd in ('dump', 'reconcile')]\n"
        "print('pandas' in sys.modules, codes, file=sys.stderr)\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "False [0, 0]", done.stderr


def test_a_refresh_and_the_reading_commands_work_without_pandas(dagster_home: Path) -> None:
    """pandas is the [pandas] extra, for the public API's frames only: with it hidden as if
    not installed, a refresh with a golden set, its metrics step and the tables it records,
    `status`, `weak` and `dump --format parquet` all work."""
    golden = dagster_home / "golden.yaml"
    golden.write_text(yaml.safe_dump([{"query": "two-factor authentication", "expect": "/security/"}]))
    parquet = dagster_home / "manifest.parquet"
    probe = (
        "import sys\n"
        "class NoPandas:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.partition('.')[0] == 'pandas':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoPandas())\n"
        "from freshness_pipeline.cli import main\n"
        "out = sys.argv[2]\n"
        "dump = ['dump', '--table', 'manifest', '--format', 'parquet', '-o', out]\n"
        "cmds = (['run'], ['status'], ['weak', '--json'], dump)\n"
        "codes = [main([*cmd, '--sources', sys.argv[1]]) for cmd in cmds]\n"
        "print(codes, file=sys.stderr)\n"
    )
    with DocsSite() as site:
        site.publish(load_folder(SITE / "v1"))
        path = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
        body = yaml.safe_load(path.read_text())
        body["sources"][0]["golden_set"] = golden.name
        path.write_text(yaml.safe_dump(body))
        done = subprocess.run(
            [sys.executable, "-c", probe, str(path), str(parquet)],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=300,
        )
    assert done.returncode == 0 and done.stderr.strip().splitlines()[-1] == "[0, 0, 0, 0]", done.stderr[-3000:]
    keys = [json.loads(line)["key"] for line in cli("dump", "--sources", str(path))[0].splitlines()]
    assert sorted(pq.read_table(parquet).column("key").to_pylist()) == sorted(set(keys))  # one row per section
    assert "measured_at" in done.stdout and done.stdout.rstrip().endswith("[]"), done.stdout  # no weak search yet
    (mat,) = dg.DagsterInstance.get().fetch_materializations(dg.AssetKey("freshness_metrics"), limit=1).records
    meta = mat.asset_materialization.metadata
    history, table = meta["history"].value, meta["golden"].value
    # The catalog's tables have the frames' columns (core/tables.py), measured_at a timestamp shown in UTC minutes.
    assert [(c.name, c.type) for c in history.schema.columns] == list(HISTORY.columns)
    assert [(c.name, c.type) for c in table.schema.columns] == list(GOLDEN.columns)
    (row,) = [r.data for r in history.records]
    assert row["score"] == round(meta["score"].value, 4) and row["age_median_h"] is not None
    assert [c.type for c in table.schema.columns] == ["string", "string", "bool", "int", "bool", "string"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", row["measured_at"]), row
    (case,) = [r.data for r in table.records]
    assert case["rank"] == 1 and case["top"].endswith("/security") and case["stale_prone"] is False, case
