"""What the command line says to a new user: help text on every option, an empty query
refused, an empty index explained (before any model loads), an ALERT that names its
figure and threshold, and a `dg dev` command that works from any folder."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import httpx
import pytest
import typer
import yaml

from freshness_pipeline.cli import alert_lines, app, main
from freshness_pipeline.config import CheckPolicy
from freshness_pipeline.demo.run import WORKSPACE, ui_command
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.processes import as_in_a_terminal, in_own_group, stop_group
from freshness_pipeline_tests.sitegen import generate
from freshness_pipeline_tests.test_cli import cli, write_sources


def _subcommands() -> dict:
    return dict(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_every_command_is_listed() -> None:
    expected = {
        "run",
        "release",
        "dump",
        "search",
        "status",
        "resolve",
        "weak",
        "demo",
        "reconcile",
        "deliver",
        "migrate",
        "retire",
    }
    assert set(_subcommands()) == expected


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_option_of_every_command_says_what_it_does(name: str) -> None:
    command = _subcommands()[name]
    assert command.help, f"`freshness {name}` has no help text"
    silent = [p.name for p in command.params if not getattr(p, "help", None)]
    assert not silent, f"`freshness {name}` options without help text: {silent}"


def test_demo_does_not_offer_sources_it_ignores(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert not [p for p in _subcommands()["demo"].params if "--sources" in p.opts]
    with pytest.raises(SystemExit) as exc:
        main(["demo", "--sources", "x.yaml"])
    assert exc.value.code == 2
    assert "No such option: --sources" in capsys.readouterr().err
    assert main(["--sources", "x.yaml", "demo", "--home", str(tmp_path / "h"), "--embedder", "hashing"]) == 2
    assert "drop --sources" in capsys.readouterr().err


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_an_empty_query_is_refused_and_not_recorded(
    query: str, dagster_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    with pytest.raises(SystemExit) as exc:
        main(["search", query, "--sources", sources])
    assert exc.value.code == 2
    assert "Invalid value for 'QUERY': must not be empty" in capsys.readouterr().err
    out, _ = cli("weak", "--json", "--sources", sources)
    assert json.loads(out) == []


def test_the_library_refuses_an_empty_query_too(dagster_home: Path) -> None:
    from freshness_pipeline.config import load_settings
    from freshness_pipeline.pipeline.search import search

    os.environ["FRESHNESS_SOURCES"] = str(write_sources(dagster_home / "s.yaml", "http://127.0.0.1:9/sitemap.xml"))
    with pytest.raises(ValueError, match="empty query"):
        search(load_settings(), " ")


def test_search_on_an_empty_index_says_how_to_fill_it(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The local model: the message must come before any model is loaded (~10 s).
    from freshness_pipeline.adapters.embedders.local import LocalEmbedder

    def no_model(self: LocalEmbedder) -> None:
        raise AssertionError("an empty index needs no model")

    monkeypatch.setattr(LocalEmbedder, "_load", no_model)
    path = dagster_home / "sources.yaml"
    path.write_text("sources: [{name: docs, sitemap: 'http://127.0.0.1:9/sitemap.xml'}]\nembedder: {provider: local}\n")
    out, err = cli("search", "retry limit", "--sources", str(path), expect=1)
    assert out == ""
    assert "the index is empty: nothing of docs is indexed yet" in err and "`freshness run`" in err, err
    out, err = cli("search", "retry limit", "--json", "--sources", str(path), expect=1)
    assert json.loads(out) == [] and "`freshness run`" in err


def test_the_alert_names_the_figure_and_the_threshold() -> None:
    checks = CheckPolicy()
    measured = {"score": 0.917, "stale_retrieval_rate": 0.25, "error_share": 0.0, "lag_p90_s": 3.0}
    head, *why = alert_lines({**measured, "stale_share": 0.5, "age_median_s": 15.0}, checks)
    assert head == "  ALERT: score 0.917 is under checks.freshness_alert 0.95, because of:"
    # the stale share (drift the last commit repaired) is not a reason: it is not in the score
    assert why == ["    stale retrieval rate 25.0%: golden-set queries answered by a stale record"]
    # Two figures: the costlier one first, each with its own threshold setting.
    slow = {**measured, "stale_retrieval_rate": 0.01, "lag_p90_s": 3 * 24 * 3600.0}
    _, first, second = alert_lines({**slow, "score": 0.84}, checks)
    assert first == "    embedding lag p90 72.0h, over checks.lag_target_h 24h"
    assert second.startswith("    stale retrieval rate 1.0%")


def test_status_and_the_freshness_alert_check_agree_after_a_run_that_changed_every_section(
    dagster_home: Path,
) -> None:
    """One score, of the index as the last commit left it: `freshness status` and the run's
    `freshness_alert` check give the same figure and the same verdict."""
    with DocsSite() as site:
        settings = {
            "checks": {"spike_min_share": 1},
            "fetch": {"quarantine": {"rewritten": {"confirm": 0}}},
        }  # no spike, no quarantine
        fr = Freshness(dagster_home / "sources.yaml", site.sitemap_url, source_settings=settings)
        site.publish(generate(4, sections_per_page=3, seed=11).markdown())
        fr.run()
        site.publish(generate(4, sections_per_page=3, seed=12).markdown())  # the same pages, all new text
        fr.run()
        (status,) = json.loads(fr.cli("status", "--json"))
        out = fr.cli("status")
    f = status["freshness"]
    assert f["stale_share"] == 1.0  # the drift the second run found, and its commit repaired
    with dg.DagsterInstance.get() as instance:
        records = instance.get_records_for_run(
            status["last_attempt"]["run_id"], of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ).records
    (alert,) = [
        e.asset_check_evaluation_data
        for r in records
        if (e := r.event_log_entry.dagster_event) and e.asset_check_evaluation_data.check_name == "freshness_alert"
    ]
    assert alert.metadata["score_after_commit"].value == round(f["score"], 4) == 1.0
    assert alert.passed is not f["alert"]
    assert "ALERT" not in out and "freshness score 1.000" in out, out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_the_printed_ui_command_works_from_another_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "demo_home"
    assert main(["demo", "--home", str(home), "--embedder", "hashing"]) == 0
    printed = capsys.readouterr().out.splitlines()
    cmd = printed[printed.index(f"State is in {home}. See the runs in the UI with:") + 1].strip()
    assert cmd == ui_command(home) and f"dg dev -w {WORKSPACE}" in cmd, cmd
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = _free_port()
    command = ["bash", "-c", f"exec env {cmd} --port {port} --host 127.0.0.1"]
    proc = in_own_group(command, cwd=elsewhere, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, locations = time.monotonic() + 120, None
        query = (
            "{ workspaceOrError { ... on Workspace { locationEntries "
            "{ name loadStatus locationOrLoadError { __typename } } } } }"
        )
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                reply = httpx.post(f"http://127.0.0.1:{port}/graphql", json={"query": query}, timeout=5).json()
                locations = reply["data"]["workspaceOrError"]["locationEntries"]
                if locations and all(e["loadStatus"] == "LOADED" for e in locations):
                    break
            except (httpx.HTTPError, KeyError, TypeError):
                pass
            time.sleep(1)
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
        loaded = {"__typename": "RepositoryLocation"}
        assert locations == [{"name": "freshness_pipeline", "loadStatus": "LOADED", "locationOrLoadError": loaded}]
    finally:
        stop_group(proc)


def test_the_ui_command_without_a_checkout_names_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import freshness_pipeline.demo.run as demo_run

    monkeypatch.setattr(demo_run, "WORKSPACE", tmp_path / "absent.yaml")
    words = shlex.split(ui_command(tmp_path / "h"))
    assert words[-4:] == [str(Path(sys.executable).parent / "dg"), "dev", "-m", "freshness_pipeline.defs.definitions"]


DRIVER = "for PostgreSQL write postgresql+psycopg2://"


@pytest.mark.parametrize(
    ("url", "says", "ends"),
    [
        ("notaurl", "the state database URL 'notaurl' ($FRESHNESS_STATE_URL, ", "sqlite:////path/to/freshness.db"),
        # Port 1 on loopback: nothing listens there, the connection is refused at once.
        (
            "postgresql+psycopg2://reader:secret@127.0.0.1:1/state",
            "cannot connect to the state database postgresql+psycopg2://reader:***@127.0.0.1:1/state "
            "($FRESHNESS_STATE_URL, ",
            "",
        ),
        # psycopg 3, which SQLAlchemy 2.1 reads a bare postgresql:// as, is not installed; no dialect is postgres://.
        ("postgresql://reader:secret@127.0.0.1:1/state", "the state database URL postgresql://reader:***@", DRIVER),
        ("postgres://reader:secret@127.0.0.1:1/state", "the state database URL postgres://reader:***@", DRIVER),
        ("postgresql+psycopg2://reader:secret@127.0.0.1:1", "the state database URL postgresql+psycopg2://", "own"),
        # A password holding an unescaped @: the host the URL parses to holds the rest of it.
        ("postgresql+psycopg2://reader:a@secret@127.0.0.1:1/state", "the state database URL ", "write it %40"),
    ],
)
def test_a_state_url_that_cannot_be_opened_is_one_line_naming_it(
    url: str,
    says: str,
    ends: str,
    dagster_home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    monkeypatch.setenv("FRESHNESS_STATE_URL", url)
    for args in (["status"], ["search", "q"], ["dump"], ["resolve", "k"], ["weak"], ["reconcile"], ["migrate"]):
        assert main(["--sources", sources, *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith(f"error: {says}") and err.count("\n") == 1, (args, err)
        assert err.rstrip().endswith(ends) and "secret" not in err and "Traceback" not in err, (args, err)


def test_an_instance_that_reads_unset_variables_is_one_line_naming_them(
    dagster_home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deployment's dagster.yaml (Postgres storage) on a machine without its variables:
    one line naming them, exit 2, before Dagster tries a connection."""
    shipped = Path(__file__).resolve().parents[1] / "dagster_home" / "dagster.postgres.yaml"
    (dagster_home / "dagster.yaml").write_text(shipped.read_text())
    for name in ("DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_HOST", "DAGSTER_PG_PORT", "DAGSTER_PG_DB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DAGSTER_PG_DB", "freshness_dagster")
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    assert main(["--sources", sources, "run"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: the Dagster instance of {dagster_home} (its dagster.yaml) reads DAGSTER_PG_HOST, "
        "DAGSTER_PG_PASSWORD, DAGSTER_PG_PORT, DAGSTER_PG_USERNAME, not set in this environment\n"
    )


@pytest.mark.parametrize(
    ("text", "says"), [("storage: [unclosed\n", "not valid YAML: line 2, column 1"), ("- a list\n", "not a mapping")]
)
def test_a_dagster_yaml_that_is_not_yaml_is_one_line_naming_it(
    text: str, says: str, dagster_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (dagster_home / "dagster.yaml").write_text(text)
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    assert main(["--sources", sources, "run"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {dagster_home / 'dagster.yaml'}: {says}") and "Traceback" not in err, err
    assert (dagster_home / "dagster.yaml").read_text() == text  # left as it was


MOMENTS = {
    "starting": "0.5 s after the command started, before Dagster is imported",
    "crawling": "while the sitemap request hangs, inside the first step",
    "embedding": "inside vector_index, before its commit (the intents are written)",
    "committed": "inside vector_index, right after its commit landed",
}


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_a_ctrl_c_at_any_moment_says_whether_the_commit_landed(moment: str, tmp_path: Path) -> None:
    """A Ctrl-C (SIGINT to the command's process group, as a terminal sends it) either leaves
    nothing committed, says so in one line and ends the command by SIGINT (130 in a shell),
    or reports the commit that landed and exits 0. The second source never starts."""
    import dagster as dg

    from freshness_pipeline.pipeline.faults import CRASH_ENV, SIGNAL_ENV

    home = tmp_path / "home"
    silent, held = socket.create_server(("127.0.0.1", 0)), []
    with DocsSite() as site:
        site.publish(generate(3, sections_per_page=2, seed=31).markdown())
        first = site.sitemap_url
        if moment == "crawling":  # a server that takes the connection and never answers
            first = f"http://127.0.0.1:{silent.getsockname()[1]}/a.xml"
        sitemaps = {"a": first, "b": site.sitemap_url}
        sources = home / "sources.yaml"
        home.mkdir()
        sources.write_text(
            yaml.safe_dump(
                {
                    "sources": [{"name": n, "sitemap": url} for n, url in sitemaps.items()],
                    "embedder": {"provider": "hashing"},
                }
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("FRESHNESS_", "DAGSTER_"))}
        env |= {"DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(sources)}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
        if moment in ("embedding", "committed"):
            env |= {CRASH_ENV: "upsert" if moment == "embedding" else "committed", SIGNAL_ENV: "INT"}
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("freshness")), "run"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
            preexec_fn=as_in_a_terminal,
        )
        try:
            if moment == "starting":
                time.sleep(0.5)
                os.killpg(proc.pid, signal.SIGINT)
            elif moment == "crawling":
                deadline = time.monotonic() + 120
                while not held and time.monotonic() < deadline:
                    held.extend([silent.accept()[0]])
                os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            silent.close()
            for c in held:
                c.close()
    # No traceback of the command's code (Dagster's compute-log watcher, in the process
    # group, prints its own KeyboardInterrupt).
    assert "freshness_pipeline" not in err, err
    if moment == "committed":
        assert proc.returncode == 0, (proc.returncode, out, err)
        assert out.startswith("a: ") and "nothing was indexed" not in out, out
        assert "interrupted by a Ctrl-C after its commit landed" in out, out
        assert err.rstrip().endswith("freshness: interrupted: a: its commit had landed (reported above); not run: b")
    else:
        assert proc.returncode == -signal.SIGINT, (proc.returncode, out, err)
        assert out == "", out
        last = err.rstrip().splitlines()[-1]
        if moment == "starting":
            assert last.startswith("freshness: interrupted"), err
        else:
            assert last == "freshness: interrupted: a: nothing of its run was committed; not run: b", err
    # What the state store holds agrees: a commit only when one was reported.
    status = subprocess.run(
        [str(Path(sys.executable).with_name("freshness")), "status", "--json"],
        env={k: v for k, v in env.items() if k not in (CRASH_ENV, SIGNAL_ENV)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    if moment == "starting" and status.returncode == 2:  # interrupted before it made the home
        return
    rows = {r["source"]: r for r in json.loads(status.stdout)}
    assert bool(rows["a"].get("last_run")) == (moment == "committed"), rows["a"]
    assert not rows["b"].get("last_run"), rows["b"]
    if moment != "starting":
        with dg.DagsterInstance.from_config(str(home)) as instance:
            runs = [r.dagster_run for r in instance.get_run_records()]
        assert [(r.tags["dagster/partition"], r.status) for r in runs] == [("a", dg.DagsterRunStatus.FAILURE)]
