"""What a user meets at the command line, typed as they type it: a status that shows the
failed and the blocked run, a mistyped home refused, one message per guard, errors and help
in their words, unknown settings refused, webhook events with each section's hash; and the
public entry point (`open_index`) the CLI is built on."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import freshness_pipeline
from freshness_pipeline import open_index
from freshness_pipeline.cli import main, run_lines
from freshness_pipeline.cli.render import print_status
from freshness_pipeline.config import CheckPolicy
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.metrics.receiver import Receiver, free_port
from freshness_pipeline_tests.sitegen import Site, generate
from freshness_pipeline_tests.test_cli import FEEDBACK, cli, write_sources

CLI = Path(freshness_pipeline.__file__).parent / "cli"


def test_status_shows_the_blocked_and_the_failed_run_beside_the_last_success(dagster_home: Path) -> None:
    docs = generate(6, sections_per_page=3, seed=5)
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    with DocsSite() as site:
        write_sources(Path(sources), site.sitemap_url)
        site.publish(docs.markdown())
        cli("run", "--sources", sources)
        cli("run", "--sources", sources)  # quiet: the history the spike rule needs
        (ok,) = json.loads(cli("status", "--json", "--sources", sources)[0])
        assert ok["last_attempt"]["status"] == "success" and ok["freshness"]["alert"] is False

        redeploy = Site({rel: [(h, f"{t} {FEEDBACK}") for h, t in secs] for rel, secs in docs.pages.items()})
        site.publish(redeploy.markdown())
        out, _ = cli("run", "--sources", sources, expect=1)
        # One message for the spike, naming the flag a user types.
        assert [line for line in out.splitlines() if "change_spike" in line] == [out.splitlines()[1]], out
        assert "freshness run --allow-spike" in out, out

        text, _ = cli("status", "--sources", sources)
        head = text.splitlines()[0]
        assert "; last success " in head and head.endswith(" blocked"), text
        assert "ALERT: not refreshed: the last refresh (" in text and "was blocked: change_spike: " in text, text
        (blocked,) = json.loads(cli("status", "--json", "--sources", sources)[0])
        assert blocked["last_attempt"]["status"] == "blocked" and blocked["freshness"]["alert"] is True
        assert blocked["last_run"]["finished_at"] < blocked["last_attempt"]["finished_at"]
    # The site is gone: discovery fails, the run fails.
    out, _ = cli("run", "--sources", sources, expect=1)
    assert "  failure: fetched_pages: " in out and "freshness_pipeline." not in out, out  # no class paths
    text, _ = cli("status", "--sources", sources)
    assert text.splitlines()[0].endswith(" failure") and "failed: fetched_pages: " in text, text
    assert "freshness_pipeline." not in text, text
    (failed,) = json.loads(cli("status", "--json", "--sources", sources)[0])
    assert failed["last_attempt"]["status"] == "failure" and failed["freshness"]["not_refreshed"]


def test_a_source_whose_only_run_failed_is_not_never_run(dagster_home: Path) -> None:
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    cli("run", "--sources", sources, expect=1)
    text, _ = cli("status", "--sources", sources)
    assert "last success never; last attempt " in text.splitlines()[0], text
    assert "nothing was ever indexed" in text, text


@pytest.mark.parametrize(
    "command",
    [["status"], ["search", "retry"], ["dump"], ["resolve", "k"], ["weak"], ["reconcile"], ["deliver"]],
    ids=lambda c: c[0],
)
def test_a_read_only_command_on_a_missing_home_says_so_and_creates_nothing(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = str(write_sources(tmp_path / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    typo = tmp_path / "typo" / "dagster_hom"
    monkeypatch.setenv("DAGSTER_HOME", str(typo))
    _, err = cli(*command, "--sources", sources, expect=2)
    assert err.startswith(f"error: the state folder {typo} does not exist ($DAGSTER_HOME)"), err
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        ({"embedder": {"provider": "openai"}}, "OPENAI_API_KEY"),
        ({"vector_store": {"provider": "pinecone", "host": "http://127.0.0.1:9"}}, "PINECONE_API_KEY"),
        ({"vector_store": {"provider": "pinecone"}}, "vector_store.host"),
    ],
    ids=["openai key", "pinecone key", "pinecone host"],
)
def test_a_missing_service_setting_fails_the_run_before_any_page_is_fetched(
    settings: dict[str, object], missing: str, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("PINECONE_API_KEY", raising=False)
    with DocsSite() as site:
        site.publish(generate(2, sections_per_page=1, seed=7).markdown())
        sources = str(write_sources(dagster_home / "sources.yaml", site.sitemap_url, **settings))
        out, _ = cli("run", "--sources", sources, expect=1)
        first, failure = out.splitlines()
        assert first == "docs: the crawl did not finish", out
        assert failure.startswith("  failure: fetched_pages: ConfigError: ") and missing in failure, out
        assert site.requests == 0, "the crawl ran before the missing setting was found"


@pytest.mark.parametrize("under", [False, True], ids=["a file", "under a file"])
def test_a_home_that_cannot_be_a_folder_is_one_line_for_a_run_and_a_read(
    under: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = str(write_sources(tmp_path / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    a_file = tmp_path / "dagster_home"
    a_file.write_text("not a folder")
    home = a_file / "sub" if under else a_file
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for command in (["run"], ["status"]):
        _, err = cli(*command, "--sources", sources, expect=2)
        assert err.startswith(f"error: the state folder {home} ") and err.count("\n") == 1, err
        assert "a file" in err and "point it at a folder" in err and "make it" not in err, err
    assert a_file.read_text() == "not a folder"


def test_the_outage_hold_is_said_once() -> None:
    why = "held: 5 of 6 live pages would be gone in one crawl; nothing deleted"
    outcome = {
        "status": "success",
        "crawled": 6,
        "new": 0,
        "errors": 6,
        "error_pages": {**{f"https://d.example/p{i}": why for i in range(5)}, "https://d.example/x": "HTTP 500"},
        "warnings": [why],
    }
    lines = run_lines("docs", outcome)
    assert sum(why in line for line in lines) == 1, lines
    grouped = f"  error on 5 pages: {why}: https://d.example/p0, https://d.example/p1, https://d.example/p2 and 2 more"
    assert grouped in lines and "  error: https://d.example/x: HTTP 500" in lines, lines


def test_pages_with_one_reason_are_one_line_and_the_counts_agree(capsys: pytest.CaptureFixture[str]) -> None:
    """80 pages flagged for one reason are one `flagged:` line in `freshness status`; a run
    summary that lists 20 of 80 pages in error says the other 60 are not in it."""
    held = "held: 80 of 80 pages would be gone"
    row = {
        "source": "docs",
        "pages_live": 80,
        "sections_indexed": 160,
        "index": {"clean": True},
        "flagged": [(f"https://d.example/p{i:02}", held) for i in range(80)] + [("https://d.example/z", "soft 404")],
    }
    print_status(row, CheckPolicy())
    flagged = [line for line in capsys.readouterr().out.splitlines() if "flagged:" in line]
    assert flagged == [
        f"  flagged: 80 pages: {held}: https://d.example/p00, https://d.example/p01, https://d.example/p02 and 77 more",
        "  flagged: https://d.example/z: soft 404",
    ]
    errors = {f"https://d.example/e{i:02}": "HTTP 503" for i in range(20)}
    lines = run_lines("docs", {"status": "success", "crawled": 80, "errors": 80, "error_pages": errors})
    assert lines[1:] == [
        "  error on 20 pages: HTTP 503: https://d.example/e00, https://d.example/e01, https://d.example/e02"
        " and 17 more",
        "  ... and 60 more pages in error, not in the run's summary",
    ]


def test_status_says_its_times_in_utc_whatever_the_machine_s_zone(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its alerts say their times in UTC; the head line and the earlier attempts do too."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        at = 1796596800.0  # 2026-12-06 22:40 UTC, 17:40 in New York
        row = {
            "source": "docs",
            "pages_live": 2,
            "sections_indexed": 4,
            "index": {"clean": True},
            "last_run": {"finished_at": at, "counts": {}},
            "last_attempt": {"finished_at": at + 3600, "status": "failure"},
            "earlier_failures": [{"finished_at": at + 1800, "status": "failure", "run_id": "r1"}],
        }
        print_status(row, CheckPolicy())
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "docs: 2 pages, 4 sections indexed; last success 2026-12-06 22:40 UTC; "
        "last attempt 2026-12-06 23:40 UTC failure"
    ), out
    assert out[1] == "  earlier attempt 2026-12-06 23:10 UTC failure (run r1)", out


def test_config_errors_name_the_source_and_say_what_is_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(
        "sources:\n  - {name: docs, sitemap: 'http://127.0.0.1:9/s.xml'}\n"
        "  - name: api\n    sitemap: 'http://127.0.0.1:9/s.xml'\n"
        "    fetch: {timeot_s: 3}\n    tiers: {default: lukewarm}\n"
    )
    assert main(["status", "--sources", str(path)]) == 2
    err = capsys.readouterr().err
    assert "source 'api': fetch.timeot_s: unknown setting 'timeot_s'; did you mean timeout_s?" in err, err
    assert "source 'api': tiers.default: must be one of hot, warm, cold (got 'lukewarm')" in err, err
    for pydantic_words in ("Value error", "Extra inputs are not permitted", "sources.1", "Input should"):
        assert pydantic_words not in err, err


def test_a_bad_argument_is_the_error_then_the_hint(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--tier", "lukewarm"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: Invalid value for '--tier': 'lukewarm' is not one of 'hot', 'warm', 'cold'.",
        "Try 'freshness run --help' for help.",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["weak", "--days", "0"], "error: Invalid value for '--days': must be at least 1 (a day), not 0"),
        (["weak", "--days", "-1"], "error: Invalid value for '--days': must be at least 1 (a day), not -1"),
        (["resolve", ""], "error: Invalid value for 'KEY': must not be empty"),
    ],
)
def test_nonsense_arguments_are_refused(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith(message)


@pytest.mark.parametrize(("variable", "allowed"), [("FRESHNESS_PROGRESS", "bar, log, off")])
def test_an_unknown_environment_value_is_refused(
    variable: str, allowed: str, dagster_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = str(write_sources(dagster_home / "sources.yaml", "http://127.0.0.1:9/sitemap.xml"))
    monkeypatch.setenv(variable, "bars")
    _, err = cli("run", "--sources", sources, expect=2)
    assert err == f"error: ${variable} is 'bars'; allowed: {allowed} (or unset)\n"


def test_help_is_written_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    pages = []
    for args in (["--help"], *([c, "--help"] for c in ("run", "search", "resolve", "weak", "status", "demo"))):
        assert main(args) == 0
        pages.append(capsys.readouterr().out)
    top, run, search, resolve, weak = pages[:5]
    assert top.splitlines()[2].strip().startswith("Keep a search index true to a documentation site"), top
    assert "--version" in top and "library call" not in top
    assert "Usage: freshness search [OPTIONS] QUERY" in search and "Usage: freshness resolve [OPTIONS] KEY" in resolve
    for page in pages:
        assert "<bool>" not in page and "{" not in page, page
        for line in page.splitlines():
            assert not ("default" in line.split("[default:")[0] and "[default:" in line), line  # said once
    assert "--allow-spike" in run and "[default: 90]" in weak


def test_the_command_alone_prints_the_help_not_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([])
    out, err = capsys.readouterr()
    assert out.startswith("Usage: freshness [OPTIONS] COMMAND") and err == ""


def test_version_is_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"freshness {version('freshness_pipeline')}\n"
    assert freshness_pipeline.__version__ == version("freshness_pipeline")


def test_webhook_events_carry_each_sections_hash(dagster_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", "s3cret")
    port = free_port()
    hook = {"url": f"http://127.0.0.1:{port}/hook", "secret_env": "HOOK_SECRET", "attempts": 1}
    with DocsSite() as site:
        sources = str(write_sources(dagster_home / "sources.yaml", site.sitemap_url, webhooks=[hook]))
        site.publish(generate(2, sections_per_page=3, seed=2).markdown())
        with Receiver(port):  # the metrics step delivers after the run
            cli("run", "--sources", sources)
        with Receiver(port) as rx:
            cli("deliver", "--sources", sources)  # nothing waits any more
            assert rx.events() == []
        records = {
            r["id"]: r["content_hash"] for r in map(json.loads, cli("dump", "--sources", sources)[0].splitlines())
        }
    # Delivered again from the first event to a new receiver: every section is named with its hash.
    hook2 = {**hook, "url": f"http://127.0.0.1:{port}/other"}
    write_sources(Path(sources), "http://127.0.0.1:9/sitemap.xml", webhooks=[hook2])
    with Receiver(port) as rx:
        cli("deliver", "--sources", sources)
    events = rx.events()
    assert len(events) == 2 and all(len(e["section_keys"]) == 3 for e in events), events
    for e in events:
        assert {s["key"] for s in e["sections"]} == set(e["section_keys"])
        assert all(s["content_hash"] in records.values() for s in e["sections"])


def test_the_entry_point_refreshes_searches_resolves_and_reads_status(dagster_home: Path) -> None:
    with DocsSite() as site:
        sources = write_sources(dagster_home / "sources.yaml", site.sitemap_url)
        site.publish(generate(3, sections_per_page=2, seed=4).markdown())
        index = open_index(dagster_home, sources)
        assert index.refresh("docs")["status"] == "success"
    (hit,) = index.search("retry limit", k=1)
    assert hit.url.startswith("http://127.0.0.1") and hit.key and hit.as_of
    assert index.resolve(hit.key)["text"] == hit.text
    (row,) = index.status()
    assert row["last_attempt"]["status"] == "success" and row["sections_indexed"] == 6


def test_the_command_line_imports_only_the_entry_point_config_and_its_rendering() -> None:
    allowed = {"api", "config", "cli", "progress", "demo"}  # progress/demo: `run` and `demo` start them
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = (node.module or "").split(".")
                target = parts[0] if node.level == 2 else "cli"
                names = [a.name for a in node.names] if node.level == 2 and not node.module else [target]
                assert set(names) <= allowed | {"__version__"}, f"{path.name} imports {node.module or names}"


def test_search_does_not_load_dagster(dagster_home: Path) -> None:
    with DocsSite() as site:
        path = str(write_sources(dagster_home / "sources.yaml", site.sitemap_url))
        site.publish(generate(2, sections_per_page=2, seed=3).markdown())
        cli("run", "--sources", path)
    probe = (
        "import sys\n"
        "from freshness_pipeline.cli import main\n"
        f"code = main(['search', 'retry limit', '--sources', {path!r}])\n"
        "loaded = sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.'))\n"
        "print('dagster modules:', loaded[:5], file=sys.stderr)\n"
        "raise SystemExit(1 if loaded or code != 0 else 0)\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr


def test_status_loads_neither_pandas_nor_the_crawl(dagster_home: Path) -> None:
    """A cold `freshness status` pays for what it reads: the state store, not pandas (which
    pyarrow imports where it is installed), trafilatura or the worker pool of the crawl. (The
    first status after a run reads the vector store, to compare it with the manifest; later
    ones remember that comparison while neither side changed.)"""
    with DocsSite() as site:
        path = str(write_sources(dagster_home / "sources.yaml", site.sitemap_url))
        site.publish(generate(2, sections_per_page=2, seed=3).markdown())
        cli("run", "--sources", path)  # a measurement, so that status prints its history table
    cli("status", "--sources", path)
    probe = (
        "import sys\n"
        "from freshness_pipeline.cli import main\n"
        f"code = main(['status', '--sources', {path!r}])\n"
        "heavy = ('dagster', 'pandas', 'trafilatura', 'concurrent.futures.process')\n"
        "print(sorted(m for m in heavy if m in sys.modules), code, file=sys.stderr)\n"
    )
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    assert done.stderr.strip().splitlines()[-1] == "[] 0", done.stderr
    assert "measured_at" in done.stdout and "freshness score" in done.stdout, done.stdout
