"""A quiet run's fixed costs, on a real home: its reconcile check remembers the last clean
comparison, so a run that wrote nothing never imports LanceDB (2-10 s), numpy or
markdown-it (a page that did not change is neither embedded nor parsed), courlan (with
urllib3 and babel) or charset-normalizer (a page that declares its charset), nor does a
`freshness status` after a run that wrote (its check compared the committed index), and the
memory never hides drift on either side (a record deleted from the store, a manifest row
changed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import update

from freshness_pipeline.adapters.state import schema
from freshness_pipeline.config import load_settings
from freshness_pipeline.demo.server import DocsSite
from freshness_pipeline.pipeline.context import SourceContext
from freshness_pipeline.pipeline.reconcile import reconcile
from freshness_pipeline_tests.pipeline.driver import Freshness
from freshness_pipeline_tests.sitegen import generate

REPO = Path(__file__).resolve().parents[2]
QUIET_RUN = """
import json, sys
HEAVY = ("lancedb", "numpy", "markdown_it", "courlan", "charset_normalizer")
from freshness_pipeline.defs.runner import run_refresh
out = run_refresh("docs")
print(json.dumps({"status": out["status"], "embedded": out.get("embedded"), "checks": out["checks"],
                  "loaded": sorted(m for m in HEAVY if m in sys.modules)}))
"""
LOCATION = """
import json, sys
from freshness_pipeline.defs.definitions import defs
assert defs.resolve_job_def("refresh")
print(json.dumps(sorted(m for m in ("numpy", "markdown_it", "onnxruntime", "tokenizers") if m in sys.modules)))
"""


@pytest.fixture
def app(dagster_home: Path) -> Iterator[Freshness]:
    with DocsSite() as site:
        site.publish(generate(5, sections_per_page=3, seed=4).markdown())  # 15 sections
        app = Freshness(dagster_home / "sources.yaml", site.sitemap_url)
        assert app.run()["embedded"] == 15
        yield app


def quiet_run(app: Freshness, home: Path) -> dict:
    env = {**os.environ, "DAGSTER_HOME": str(home), "FRESHNESS_SOURCES": str(app.sources), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", QUIET_RUN], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


STATUS = """
import json, sys
from freshness_pipeline.api import open_index
(row,) = open_index(sys.argv[1], sys.argv[2]).status()
print(json.dumps({"clean": row["index"]["clean"], "lancedb": "lancedb" in sys.modules}))
"""


def test_a_quiet_run_does_not_open_the_vector_store(app: Freshness, dagster_home: Path) -> None:
    run = quiet_run(app, dagster_home)
    assert run["status"] == "success" and run["embedded"] == 0 and run["checks"] == []
    assert run["loaded"] == []


def test_the_code_location_loads_the_default_model_s_window_without_numpy(tmp_path: Path) -> None:
    """The vector index's code version names the default local model, whose window caps the
    chunker's budget: both are read from the model's files, which needs no numpy, ONNX
    runtime or tokenizer (every process that loads the location would pay for them)."""
    sources = tmp_path / "sources.yaml"
    # No embedder section: the default, the local model.
    sources.write_text("sources:\n  - name: docs\n    sitemap: http://127.0.0.1:9/sitemap.xml\n")
    assert load_settings(sources).embedder.provider == "local"
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "FRESHNESS_SOURCES": str(sources), "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", LOCATION], capture_output=True, text=True, env=env, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_memory_of_a_clean_reconcile_hides_no_drift(app: Freshness, dagster_home: Path) -> None:
    ctx = SourceContext.open(load_settings(app.sources), "docs")
    try:
        assert reconcile(ctx).clean  # remembered
        ns = f"docs-v{ctx.store.sources.get('docs').active_version}"
        first, second = sorted(ctx.store.manifest.hashes("docs"))[:2]
        ctx.vectors.delete(ns, [first])  # the store changed behind the manifest's back
        assert reconcile(ctx).missing == [first]
        assert reconcile(ctx, fix=True).fixed == 1 and reconcile(ctx).clean
        with ctx.store.engine.begin() as conn:  # the manifest changed behind the store's back
            conn.execute(update(schema.sections).where(schema.sections.c.id == second).values(content_hash="0" * 64))
        assert reconcile(ctx).mismatched == [second]
    finally:
        ctx.close()


def test_status_after_a_run_that_wrote_does_not_open_the_vector_store(app: Freshness, dagster_home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-c", STATUS, str(dagster_home), str(app.sources)]
    status = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout)
    assert status == {"clean": True, "lancedb": False}  # the fixture's first run wrote 15 sections
    ctx = SourceContext.open(load_settings(app.sources), "docs")
    try:  # a write after the commit: what searches see is no longer what the store holds
        state = ctx.store.sources.get("docs")
        ctx.vectors.delete(f"docs-v{state.active_version}", sorted(ctx.store.manifest.hashes("docs"))[:1])
        assert not reconcile(ctx).clean
    finally:
        ctx.close()
    status = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stdout)
    assert status == {"clean": True, "lancedb": True}  # compared in full: committed readers still see it all
