"""Production state on the real local Postgres: the manifest and the embedding cache
(`FRESHNESS_STATE_URL`), the Dagster instance (`dagster_home/dagster.postgres.yaml`) and
its pool limits, and two refreshes of one source at once."""

from __future__ import annotations

import copy
import json
import random
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE

import dagster as dg
import pytest
import yaml
from sqlalchemy import create_engine, make_url, text

from freshness_pipeline.adapters.state.store import StateStore, migrate
from freshness_pipeline.cli import main
from freshness_pipeline.defs.assets import EMBEDDINGS_POOL
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline_tests.conftest import PG_ADMIN_URL
from freshness_pipeline_tests.crash.child import error_file, refresh, texts_embedded
from freshness_pipeline_tests.sitegen import Site, generate, paragraph

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def state_url(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The session's Postgres database, emptied, as the manifest store."""
    eng = create_engine(pg_url)
    with eng.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    eng.dispose()
    monkeypatch.setenv("FRESHNESS_STATE_URL", pg_url)
    return pg_url


@pytest.fixture
def dagster_db() -> Iterator[str]:
    """A database of its own for the Dagster instance (both have a `runs` table)."""
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"freshness_dagster_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def postgres_home(tmp_path: Path, dagster_db: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$DAGSTER_HOME with the project's Postgres instance on `dagster_db`."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.postgres.yaml", home / "dagster.yaml")
    db = make_url(dagster_db)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    for var, value in {
        "USERNAME": db.username,
        "PASSWORD": db.password or "",
        "HOST": db.host,
        "PORT": db.port or 5432,
        "DB": db.database,
    }.items():
        monkeypatch.setenv(f"DAGSTER_PG_{var}", str(value))
    # docs/deploy.md's step: the `embeddings` pool's limit, set before any run claims it
    subprocess.run([BIN / "dagster", "instance", "concurrency", "set", EMBEDDINGS_POOL, "1"], check=True)
    return home


def texts(site: Site) -> set[str]:
    return {t for sections in site.pages.values() for _, t in sections}


def write_sources(path: Path, sitemap: str) -> Path:
    path.write_text(
        yaml.safe_dump({"sources": [{"name": "docs", "sitemap": sitemap}], "embedder": {"provider": "hashing"}})
    )
    return path


def cli(capsys: pytest.CaptureFixture[str], sources: Path, *args: str) -> tuple[int, str]:
    code = main(["--sources", str(sources), *args])
    return code, capsys.readouterr().out


def index_equals(capsys: pytest.CaptureFixture[str], sources: Path, site: Site, base_url: str) -> None:
    _, out = cli(capsys, sources, "dump")
    got = [(r["url"], r["heading_path"], r["text"]) for r in map(json.loads, out.splitlines())]
    assert len(got) == len(set(got)) and set(got) == site.expected(base_url)
    code, out = cli(capsys, sources, "reconcile", "--json")
    assert code == 0 and json.loads(out)["clean"], out


def test_manifest_and_dagster_instance_on_postgres(
    state_url: str, dagster_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home = postgres_home(tmp_path, dagster_db, monkeypatch)

    v1 = generate(6, sections_per_page=3, seed=21)
    v2 = Site(copy.deepcopy(v1.pages))
    v2.pages["guide/page2.md"][0] = (v2.pages["guide/page2.md"][0][0], paragraph(random.Random(22)))
    del v2.pages["guide/page5.md"]
    with DocsSite() as site:
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        for version in (v1, v2):
            site.publish(version.markdown())
            code, out = cli(capsys, sources, "run", "--json")
            assert code == 0, out
            index_equals(capsys, sources, version, site.base_url)

    instance = dg.DagsterInstance.get()
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    eng = create_engine(dagster_db)
    with eng.connect() as conn:
        statuses = conn.execute(text("SELECT status FROM runs")).scalars().all()
    eng.dispose()
    assert statuses == ["SUCCESS", "SUCCESS"]
    store = StateStore(state_url)
    assert store.manifest.count("docs") == len(v2.expected(""))
    assert store.sources.get("docs").generation == 2
    store.close()
    assert not (home / "freshness.db").exists()  # the manifest is in Postgres, not SQLite


def test_two_runs_of_one_source_at_once(
    state_url: str, dagster_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    v1 = generate(8, sections_per_page=3, seed=31)
    with DocsSite() as site:
        sources = write_sources(tmp_path / "sources.yaml", site.sitemap_url)
        site.publish(v1.markdown())

        # Another run holds the source: `freshness run` refuses, naming the reason.
        migrate(state_url)
        store = StateStore(state_url)
        with store.locks.lock("docs"):
            code, out = cli(capsys, sources, "run", "--json")
        outcome = json.loads(out)
        assert code == 1 and outcome["status"] == "failure"
        assert "is being refreshed by another run" in outcome["message"]
        assert store.manifest.count("docs") == 0

        # Two processes at once: each one finishes or refuses cleanly; nothing is corrupted.
        logs = [tmp_path / f"run{i}.log" for i in range(2)]
        codes = _at_once(sources, dagster_home, state_url, logs)
        assert 0 in codes and set(codes) <= {0, 1}, codes
        for code, log in zip(codes, logs, strict=True):
            if code:
                err = error_file(log).read_text()
                assert "is being refreshed by another run" in err or "re-run" in err, err
        assert refresh(sources, "docs", dagster_home, embed_log=logs[0], state_url=state_url) == 0
        index_equals(capsys, sources, v1, site.base_url)
        assert sum(map(texts_embedded, logs)) == len(texts(v1))  # no text embedded twice
        assert store.intents.pending("docs") == {}
        store.close()


def _at_once(sources: Path, home: Path, state_url: str, logs: list[Path]) -> list[int]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(logs)) as pool:
        futures = [pool.submit(refresh, sources, "docs", home, embed_log=log, state_url=state_url) for log in logs]
        return [f.result() for f in futures]


def test_two_sources_start_together_on_postgres(
    state_url: str, dagster_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `freshness run`s of two sources start at once on the Postgres instance and both
    succeed. The `embeddings` pool's limit was set when the instance was made (docs/deploy.md,
    `postgres_home`), so neither run makes its row: on Postgres the first claims of a pool
    without a row race to make it, and the loser fails (dagster-io/dagster#33552, which the
    last lines pin: Dagster making an existing row again fails)."""
    postgres_home(tmp_path, dagster_db, monkeypatch)
    with DocsSite() as one, DocsSite() as two:
        for i, site in enumerate((one, two)):
            site.publish(generate(6, sections_per_page=3, seed=40 + i).markdown())
        sources = tmp_path / "sources.yaml"
        listed = [{"name": n, "sitemap": s.sitemap_url} for n, s in (("one", one), ("two", two))]
        sources.write_text(yaml.safe_dump({"sources": listed, "embedder": {"provider": "hashing"}}))
        cmd = [sys.executable, "-m", "freshness_pipeline.cli", "--sources", str(sources), "run", "--json"]
        runs = [subprocess.Popen([*cmd, "--source", n], stdout=PIPE, stderr=PIPE, text=True) for n in ("one", "two")]
        ended = [(run.communicate(timeout=300), run.returncode) for run in runs]
    for (out, err), code in ended:
        assert code == 0 and json.loads(out)["status"] == "success", (out, err)
    with dg.DagsterInstance.get() as instance:
        assert [r.status for r in instance.get_runs()] == [dg.DagsterRunStatus.SUCCESS] * 2
        storage = instance.event_log_storage
        (pool,) = [p for p in storage.get_pool_limits() if p.name == EMBEDDINGS_POOL]
        assert (pool.limit, pool.from_default) == (1, False)  # as set, not made by a run
        with pytest.raises(Exception, match="InFailedSqlTransaction"):
            storage.initialize_concurrency_limit_to_default(EMBEDDINGS_POOL)
