"""The sources file: defaults, and errors that name the file and the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from freshness_pipeline.cli import main
from freshness_pipeline.config import ConfigError, load_settings, state_url
from freshness_pipeline.core.cadence import Cadence
from freshness_pipeline.core.responses import ResponseRules
from freshness_pipeline.core.spike import SpikeRule
from freshness_pipeline.core.tiers import TierRules, base_tier


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sources.yaml"
    p.write_text(text)
    return p


def test_minimal_file_gets_embedded_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FRESHNESS_STATE_URL", raising=False)
    s = load_settings(write(tmp_path, "sources: [{name: docs, sitemap: 'http://x.test/sitemap.xml'}]"))
    assert (s.embedder.provider, s.vector_store.provider) == ("local", "lancedb")
    assert s.sources[0].fetch.missing_after == 3
    assert state_url(s) == f"sqlite:///{tmp_path / 'home' / 'freshness.db'}"


def test_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "FRESHNESS_SOURCES", str(write(tmp_path, "sources: [{name: a, start_urls: ['http://a.test/']}]"))
    )
    assert load_settings().sources[0].name == "a"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sources: [{name: docs}]", r"source 'docs': needs `sitemap` or `start_urls`"),
        # A bare host is a path to urlsplit: it failed only at the run's first fetch, as off scope.
        (
            "sources: [{name: d, sitemap: www.python-httpx.org/sitemap.xml}]",
            r"source 'd': sitemap: must be an absolute http\(s\) URL, like https://docs\.example\.com/"
            r"sitemap\.xml \(got 'www\.python-httpx\.org/sitemap\.xml'\)",
        ),
        (
            "sources: [{name: d, start_urls: [http://u, 'ftp://u/']}]",
            r"source 'd': start_urls\[1\]: must be",
        ),
        ("sources: [{name: d, sitemap: 'https:///sitemap.xml'}]", r"source 'd': sitemap: must be"),
        (
            "sources: [{name: d, sitemap: http://u, fetch: {timeout: 3}}]",
            r"source 'd': fetch\.timeout: unknown setting 'timeout'; did you mean timeout_s\? \(allowed here: ",
        ),
        ("sources: [{name: Docs!, sitemap: http://u}]", r"source 'Docs!': name: a source name is lowercase letters"),
        ("sources: [{name: a, sitemap: http://u}, {name: a, sitemap: http://v}]", "duplicate source names: a"),
        (
            "sources: [{name: a, sitemap: http://u}]\nembedder: {provider: x}",
            r"embedder\.provider: must be one of local, openai, hashing \(got 'x'\)",
        ),
        ("sources: [", "not valid YAML"),
        (
            "sources:\n  - name: docs\n   sitemap: http://u\n",
            r"not valid YAML: line 3, column 4: expected <block end>, but found '<block mapping start>' "
            r"\(while parsing a block collection at line 2\)\n       sitemap: http://u\n       \^$",
        ),
        (
            "sources: [{name: a, sitemap: http://u, noise: {disabled_rules: [last_updatd]}}]",
            r"source 'a': noise\.disabled_rules: unknown rule\(s\) last_updatd; known: ",
        ),
        ("", r"sources: is required"),
        (
            "sources: [{name: a, sitemap: http://u, tiers: {rules: [{pattern: '(', tier: hot}]}}]",
            r"source 'a': tiers\.rules\[0\]\.pattern: not a valid regex '\(': missing \)",
        ),
        (
            "sources: [{name: a, start_urls: [http://u], discovery: {include: ['/docs/', '[a-']}}]",
            r"source 'a': discovery\.include\[1\]: not a valid regex '\[a-'",
        ),
        (
            "sources: [{name: a, start_urls: [http://u], discovery: {exclude: ['*.pdf']}}]",
            r"source 'a': discovery\.exclude\[0\]: not a valid regex '\*\.pdf'",
        ),
    ],
)
def test_errors_name_the_file_and_the_setting(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as err:
        load_settings(path)
    assert str(path) in str(err.value) and "<unicode string>" not in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="sources file not found"):
        load_settings(tmp_path / "nope.yaml")


def test_cli_reports_config_errors_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "sources: [{name: docs}]")
    assert main(["--sources", str(path), "status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "needs `sitemap` or `start_urls`" in err


def test_unknown_source_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "sources: [{name: docs, sitemap: http://u}]")
    assert main(["--sources", str(path), "run", "--source", "nope"]) == 2
    assert "unknown source 'nope'; the sources file defines: docs" in capsys.readouterr().err


def test_golden_set_resolves_against_the_sources_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "golden.yaml").write_text("- {query: q, expect: /x/}\n")
    monkeypatch.chdir(tmp_path.parent)  # not the sources file's folder
    s = load_settings(write(tmp_path, "sources: [{name: docs, sitemap: http://u, golden_set: golden.yaml}]"))
    assert s.sources[0].golden_set == str(tmp_path / "golden.yaml")


def test_missing_golden_set_is_named_at_load(tmp_path: Path) -> None:
    path = write(
        tmp_path, "sources: [{name: a, sitemap: http://u}, {name: docs, sitemap: http://u, golden_set: s/g.yaml}]"
    )
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert str(err.value) == (f"{path}: source 'docs': golden_set: file not found: {tmp_path / 's' / 'g.yaml'}")


def test_policies_become_core_rules(tmp_path: Path) -> None:
    """The file's settings reach core as plain values: tier rules in order, cadence hours,
    the spike rule and the response limits."""
    text = """
sources:
  - name: a
    sitemap: http://u
    fetch: {max_bytes: 1000, soft_404_min_chars: 50}
    tiers:
      rules: [{pattern: '/news/', tier: hot}, {pattern: '/news/archive/', tier: cold}]
      default: cold
      hot_every_h: 1
    checks: {spike_min_share: 0.3, spike_factor: 2}
"""
    src = load_settings(write(tmp_path, text)).sources[0]
    rules = src.tiers.url_rules()
    assert rules == TierRules((("/news/", "hot"), ("/news/archive/", "cold")), "cold")
    assert [base_tier(u, rules) for u in ("http://a/news/archive/1", "http://a/guide")] == ["hot", "cold"]
    assert src.tiers.cadence() == Cadence(hot_every_h=1, warm_every_h=24, cold_every_h=168)
    assert src.checks.spike_rule() == SpikeRule(min_share=0.3, factor=2)
    assert src.fetch.response_rules() == ResponseRules(max_bytes=1000, soft_404_min_chars=50)
