"""`freshness run` launches a run of the code location (not `execute_in_process`): with no
daemon it is launched at once, and it is on the `refresh` job's page (the repository label
the UI filters by); with a daemon dequeuing, it goes through the run queue and waits there.
Each launch starts real processes (its code server, the run worker)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import yaml

from freshness_pipeline import progress
from freshness_pipeline.defs.coordinator import daemon_running
from freshness_pipeline.defs.instance import write_instance_config
from freshness_pipeline.defs.launch import GATED, LaunchError, _dagster_cli, launchers
from freshness_pipeline.defs.liveness import _run_pids
from freshness_pipeline.defs.runner import LAUNCH_ENV, run_refresh, run_refreshes, summarize
from freshness_pipeline.defs.tags import run_tags
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.defs.harness import SOURCE, alive_pids
from freshness_pipeline_tests.processes import parent_pid
from freshness_pipeline_tests.sitegen import generate

JOB_PAGE = dg.RunsFilter(job_name="refresh", tags={".dagster/repository": "__repository__@freshness_pipeline"})


def event_kinds(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    records = instance.get_records_for_run(run_id).records
    return {r.event_log_entry.dagster_event.event_type_value for r in records if r.event_log_entry.dagster_event}


@pytest.fixture
def launched(sources: Path, site: DocsSite, dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The project's dagster.yaml (queue, pools, monitoring) and runs launched, not in-process."""
    (dagster_home / "dagster.yaml").unlink()
    write_instance_config(dagster_home)
    monkeypatch.delenv(LAUNCH_ENV)
    site.publish(generate(4, sections_per_page=2, seed=8).markdown())
    return dagster_home


def test_without_a_daemon_the_run_is_launched_at_once_as_a_run_of_the_location(
    launched: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CLI test earlier in this process may have attached its stderr: lines go to sys.stderr here.
    monkeypatch.setattr(progress, "_terminal", None)
    monkeypatch.setattr(progress, "_lines", None)
    started = time.monotonic()
    outcome = run_refresh(SOURCE, log_level="INFO")  # what `freshness run -v` asks for
    seconds = time.monotonic() - started
    out, err = capfd.readouterr()
    # Dagster's own lines (the launch's and its code server's) go to stderr: with
    # `freshness run --json -v`, stdout must hold nothing but the JSON lines.
    assert out == "", out[:2000]
    assert "dagster" in err.lower(), err[:2000]
    with dg.DagsterInstance.get() as instance:  # returned once the run's worker exited too
        assert alive_pids(instance, outcome["run_id"]) == []
    assert outcome["status"] == "success", outcome
    assert (outcome["crawled"], outcome["new"], outcome["embedded"]) == (4, 4, 8)
    # The run worker has no terminal: the waiting CLI shows each stage's line from the event log.
    shown = [line.split(" in ")[0] for line in err.splitlines()]
    assert ["discovery: 4 URLs", "fetch/extract: 4 pages", "embed: 8 sections"] == [
        line for line in shown if line.split(":")[0] in ("discovery", "fetch/extract", "embed")
    ]
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(outcome["run_id"])
        assert run.remote_job_origin is not None and run.remote_job_origin.location_name == "freshness_pipeline"
        assert [r.run_id for r in instance.get_runs(JOB_PAGE)] == [outcome["run_id"]]
        assert run.tags["dagster/partition"] == SOURCE
        assert not daemon_running(instance)
        assert "PIPELINE_ENQUEUED" not in event_kinds(instance, run.run_id)  # launched, not queued
    print(f"code-location launch without a daemon: {seconds:.1f} s")  # docs/dagster.md quotes it


def test_with_a_daemon_the_run_goes_through_the_queue(launched: Path, tmp_path: Path) -> None:
    env = {**os.environ}  # the test's DAGSTER_HOME and sources file
    workspace = Path(__file__).resolve().parents[2] / "workspace.yaml"
    daemon = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", str(workspace)],
        env=env,
        cwd=workspace.parent,
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "daemon.log", "w"),  # noqa: SIM115 - closed with the process
    )
    try:
        with dg.DagsterInstance.get() as instance:
            for _ in range(240):
                if daemon_running(instance):
                    break
                time.sleep(0.5)
            assert daemon_running(instance), (tmp_path / "daemon.log").read_text()[-2000:]
            with _ancestry_while_running() as ancestry:
                outcome = run_refresh(SOURCE)
            assert outcome["status"] == "success", outcome
            kinds = event_kinds(instance, outcome["run_id"])
            assert {"PIPELINE_ENQUEUED", "PIPELINE_STARTING", "PIPELINE_SUCCESS"} <= kinds  # queued, then dequeued
            # The daemon's code server forked the run worker from its preloaded copy
            # (`worker_fork.py`): the worker's parent is the copy, the code server's child.
            worker, copy, server, daemon_pid = ancestry[outcome["run_id"]]
            assert daemon_pid == daemon.pid and worker != copy != server, ancestry
            # Every step ran in the run worker (the in-process executor): no step process.
            assert list(_run_pids(instance, outcome["run_id"])) == [worker]
            assert b"api\0grpc" in Path(f"/proc/{server}/cmdline").read_bytes()
    finally:
        daemon.terminate()
        daemon.wait(60)


@contextlib.contextmanager
def _ancestry_while_running() -> Iterator[dict[str, tuple[int, ...]]]:
    """Run id -> its worker's pid, parent, grandparent and great-grandparent, read while the
    run's worker runs (a run waited for has ended, and its worker too)."""
    seen: dict[str, tuple[int, ...]] = {}
    stop = threading.Event()

    def watch() -> None:
        with dg.DagsterInstance.get() as instance:
            while not stop.wait(0.02):
                for run in instance.get_runs(limit=1):
                    for pid in _run_pids(instance, run.run_id):
                        with contextlib.suppress(OSError, ValueError):
                            chain = [pid]
                            for _ in range(3):
                                chain.append(parent_pid(chain[-1]))
                            seen.setdefault(run.run_id, tuple(chain))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield seen
    finally:
        stop.set()
        watcher.join(30)


class _Broker(dg.ConfigurableResource):
    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        raise ConnectionError("broker at 127.0.0.1:9 refused the connection")


@dg.asset
def _needs_broker(broker: _Broker) -> int:
    return 1


def test_a_run_that_fails_outside_its_steps_reports_the_cause(instance: dg.DagsterInstance) -> None:
    """Dagster's run failure says "An exception was thrown during execution"; the cause is in
    the failure event's error chain (a resource that did not start, a lost Celery worker)."""
    result = dg.materialize([_needs_broker], resources={"broker": _Broker()}, instance=instance, raise_on_error=False)
    outcome = summarize(instance, result.run_id)
    assert outcome["status"] == "failure"
    assert outcome["message"] == "ConnectionError: broker at 127.0.0.1:9 refused the connection"


def test_several_sources_are_launched_before_any_is_waited_for(launched: Path, sources: Path, site: DocsSite) -> None:
    """`freshness run` over several sources: every run is launched, then each waited for."""
    data = yaml.safe_load(sources.read_text())
    data["sources"].append({**data["sources"][0], "name": "second"})
    sources.write_text(yaml.safe_dump(data))
    outcomes = dict(run_refreshes([SOURCE, "second"]))
    assert [o["status"] for o in outcomes.values()] == ["success", "success"], outcomes
    with dg.DagsterInstance.get() as instance:
        first, second = (instance.get_run_record_by_id(outcomes[s]["run_id"]) for s in (SOURCE, "second"))
        assert first is not None and second is not None and first.end_time is not None
        assert second.create_timestamp.timestamp() < first.end_time  # in flight together


def test_the_code_server_starts_without_dagster_and_nothing_launches_without_a_go(launched: Path) -> None:
    """`freshness run` starts its code server before it imports Dagster (they import it side
    by side); a run is created only by a launcher's go, after the partitions exist. Stopped
    without a go, the code server exits and no run exists."""
    script = "import sys, freshness_pipeline.defs.launch, freshness_pipeline.defs.tags; print('dagster' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", script], capture_output=True, text=True).stdout.split() == ["False"]
    with launchers([SOURCE], run_tags(), "CRITICAL") as started:
        launcher = started[SOURCE]
    assert launcher.server.proc.returncode is not None  # stopped
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(launcher.run_id) is None
        assert instance.get_run_records() == []


def test_a_launch_that_fails_is_one_error_line_and_the_other_sources_still_run(launched: Path) -> None:
    """`dagster job launch` runs in the caller: a launch that Dagster refuses raises
    LaunchError with Dagster's own message, and leaves the code server to the others."""
    with dg.DagsterInstance.get() as instance:
        instance.add_dynamic_partitions("sources", [SOURCE])
    with launchers([SOURCE, "other"], run_tags(), "CRITICAL") as started:
        bad = started["other"]
        bad.args[bad.args.index("-j") + 1] = "no_such_job"
        with pytest.raises(LaunchError, match=r"(?s)did not submit run .*Job \"no_such_job\" not found"):
            bad.go()
        started[SOURCE].go()
        with dg.DagsterInstance.get() as instance:
            assert instance.get_run_by_id(bad.run_id) is None
            run = instance.get_run_by_id(started[SOURCE].run_id)
            assert run is not None and run.status != dg.DagsterRunStatus.NOT_STARTED, run
            deadline = time.monotonic() + 120
            while not run.is_finished and time.monotonic() < deadline:
                time.sleep(0.2)
                run = instance.get_run_by_id(run.run_id) or run
        assert run.status == dg.DagsterRunStatus.SUCCESS, run.status
        started[SOURCE].ended()


def test_dagster_s_cli_runs_in_this_process_with_its_output_and_exit_status() -> None:
    """What a launch runs in the caller: `python -m dagster` on the arguments, its output
    where it is told, its exit status returned (not this process's exit), sys.argv kept."""
    argv, out = list(sys.argv), io.StringIO()
    assert _dagster_cli(["job", "launch", "--no-such-option"], out) == 2
    assert "No such option '--no-such-option'" in out.getvalue(), out.getvalue()
    assert sys.argv == argv
    version = io.StringIO()
    assert _dagster_cli(["--version"], version) == 0 and dg.__version__ in version.getvalue()


# A launch that hangs (a code server that accepts connections and never answers), then a
# Ctrl-C from the terminal 1 s into it.
INTERRUPTED_LAUNCH = """
import io, os, signal, socket, sys, tempfile, threading, time
from pathlib import Path
from freshness_pipeline.defs.launch import _dagster_cli
signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, however pytest started
home = Path(tempfile.mkdtemp(prefix="fresh-"))  # a short path: a Unix socket's limit
silent = socket.socket(socket.AF_UNIX)
silent.bind(str(home / "grpc.sock"))
silent.listen(8)
(home / "w.yaml").write_text(
    f"load_from:\\n  - grpc_server:\\n      socket: {home}/grpc.sock\\n      location_name: x\\n"
)
_dagster_cli(["--version"], io.StringIO())  # the CLI's modules loaded: the Ctrl-C lands in click
threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
out, started = io.StringIO(), time.monotonic()
try:
    print("returned", _dagster_cli(["job", "launch", "-w", str(home / "w.yaml"), "-j", "refresh"], out))
except KeyboardInterrupt:
    print("interrupted", round(time.monotonic() - started, 1), "Aborted!" in out.getvalue())
"""


def test_a_ctrl_c_during_a_launch_stops_the_command(tmp_path: Path) -> None:
    """Dagster's CLI (click) turns a Ctrl-C into "Aborted!" and exit 1: in the caller, that
    would read as one source's failed launch and the command would go on. The launch
    raises KeyboardInterrupt instead, at once (the hung launch alone takes over 20 s)."""
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_LAUNCH], capture_output=True, text=True, timeout=120, env=env
    )
    kind, seconds, aborted = done.stdout.split()
    assert kind == "interrupted" and float(seconds) < 10 and aborted == "True", done.stdout + done.stderr[-2000:]


def test_the_code_server_runs_dagster_only_after_its_go(dagster_home: Path) -> None:
    """The code server's main module: Dagster and the code location imported, then nothing
    without the go, `python -m dagster` with it."""
    cmd = [sys.executable, "-m", GATED, "--version"]
    sources = dagster_home / "sources.yaml"
    sources.write_text("sources:\n  - name: docs\n    sitemap: http://127.0.0.1:9/sitemap.xml\n")
    env = {**os.environ, "FRESHNESS_SOURCES": str(sources)}
    stopped = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=120, check=False, env=env)
    assert (stopped.returncode, stopped.stdout, stopped.stderr) == (0, "", "")
    went = subprocess.run(cmd, input="go\n", capture_output=True, text=True, timeout=120, check=False, env=env)
    assert went.returncode == 0 and f"version {dg.__version__}" in went.stdout, went.stdout + went.stderr


# What multiprocessing's spawn does first in each run worker the code server starts: import
# the server's main module as `__mp_main__` (by its name: `python -m` gave it one).
WORKER_START = """
import gc, json, runpy, sys
collections = []  # those once Dagster's import began
gc.callbacks.append(lambda phase, _: collections.append(1) if phase == "start" and "dagster" in sys.modules else None)
runpy.run_module(%r, run_name="__mp_main__", alter_sys=True)
print(json.dumps({"dagster": "dagster" in sys.modules, "collections": len(collections),
                  "frozen": gc.get_freeze_count(), "enabled": gc.isenabled()}))
"""


def test_a_run_worker_imports_dagster_first_without_collections() -> None:
    """In a run worker, the code server's main module imports Dagster with the collector
    kept out, leaves those objects out of later collections and turns it on for the run; it
    reads no go (a run worker has none). The import alone runs hundreds of collections."""
    cmd = [sys.executable, "-c", WORKER_START % GATED]
    out = subprocess.run(cmd, input="", capture_output=True, text=True, timeout=120, check=True).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["dagster"] and seen["enabled"] and seen["collections"] == 0, seen
    assert seen["frozen"] > 100_000, seen
    unpaused = "import gc, sys; n = []; gc.callbacks.append(lambda p, i: n.append(1)); import dagster; print(len(n))"
    assert int(subprocess.run([sys.executable, "-c", unpaused], capture_output=True, text=True, check=True).stdout) > 50
