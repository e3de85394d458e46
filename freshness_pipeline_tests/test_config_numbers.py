"""Every number in the sources file is checked at load time, with the setting's path in the
message: ints are positive (or at least 0 where 0 means something), floats finite, shares in
[0, 1]. Also the file itself: not UTF-8, a folder, no sources at all."""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
import yaml
from pydantic import BaseModel

from freshness_pipeline.cli import main
from freshness_pipeline.config import ConfigError, Settings, Source, Webhook, load_settings

BASE: dict[str, Any] = {
    "sources": [{"name": "docs", "sitemap": "http://127.0.0.1:9/sitemap.xml"}],
    "embedder": {"provider": "hashing"},
    "webhooks": [{"url": "http://127.0.0.1:9/hook", "secret_env": "HOOK_SECRET"}],
}
EXAMPLE = Path(__file__).resolve().parent.parent / "sources.example.yaml"


def load(tmp_path: Path, body: Any) -> ConfigError:
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(body))
    with pytest.raises(ConfigError) as err:
        load_settings(path)
    assert str(path) in str(err.value)
    return err.value


def shown(path: tuple[Any, ...]) -> str:
    """How an error names a setting: the source by its name, list items by their index."""
    out = ""
    for part in path[2:] if path[:1] == ("sources",) else path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return f"source 'docs': {out}" if path[:1] == ("sources",) else out


def _number(kind: Any) -> type | None:
    """int or float when the annotation is one (possibly constrained, possibly optional)."""
    if kind in (int, float):
        return kind
    if get_origin(kind) is Annotated:
        return _number(get_args(kind)[0])
    if get_origin(kind) in (Union, UnionType):
        found = [_number(a) for a in get_args(kind) if a is not type(None)]
        return found[0] if len(found) == 1 else None
    return None


def numeric_settings(model: type[BaseModel], prefix: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], type]]:
    """(path in the file, int or float) of every number a model and its parts take."""
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from numeric_settings(kind, (*prefix, name))
        elif (number := _number(kind)) is not None:
            yield (*prefix, name), number


SETTINGS = [
    *numeric_settings(Source, ("sources", 0)),
    *numeric_settings(Webhook, ("webhooks", 0)),
    *numeric_settings(Settings, ()),
]


def test_every_numeric_setting_is_covered() -> None:
    dotted = {".".join(map(str, p)) for p, _ in SETTINGS}
    assert {"sources.0.fetch.max_bytes", "embedder.batch_size", "sources.0.fetch.concurrency"} <= dotted
    assert {"sources.0.checks.golden_min_hit5", "vector_store.upsert_batch", "webhooks.0.attempts"} <= dotted
    # Every number sources.example.yaml sets is among them (any source counts as source 0).
    example = yaml.safe_load(EXAMPLE.read_text())
    assert set(numbers(example, ())) <= dotted


def numbers(node: Any, path: tuple[Any, ...]) -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield from numbers(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from numbers(v, (*path, 0 if path == ("sources",) else i))
    elif isinstance(node, int | float) and not isinstance(node, bool):
        yield ".".join(map(str, path))


def put(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node: Any = out
    for part in path[:-1]:
        if isinstance(part, str) and part not in node:
            node[part] = {}
        node = node[part]
    node[path[-1]] = value
    return out


@pytest.mark.parametrize(("path", "kind"), SETTINGS, ids=[".".join(map(str, p)) for p, _ in SETTINGS])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, -1, True, "10"], ids=repr)
def test_nonsense_numbers_are_refused_at_load(tmp_path: Path, path: tuple[Any, ...], kind: type, value: Any) -> None:
    err = load(tmp_path, put(BASE, path, value))
    assert f"{shown(path)}: " in str(err), err


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("sources.0.fetch.max_bytes", -10, "at least 1 (got -10)"),
        ("embedder.batch_size", -1, "at least 1 (got -1)"),
        ("embedder.batch_size", 0, "at least 1 (got 0)"),
        ("embedder.batch_size", 2.5, "must be a whole number (got 2.5)"),
        ("sources.0.fetch.concurrency", 0, "at least 1"),
        ("sources.0.fetch.max_redirects", -1, "at least 0"),
        ("sources.0.fetch.timeout_s", 0, "more than 0"),
        ("sources.0.fetch.timeout_s", math.nan, "finite number"),
        ("sources.0.fetch.quarantine.gone.share", 1.5, "at most 1"),
        ("sources.0.fetch.quarantine.collapsed.confirm", -1, "at least 0"),
        ("sources.0.checks.spike_min_share", -0.1, "at least 0"),
        ("sources.0.checks.golden_min_hit5", 1.01, "at most 1"),
        ("sources.0.noise.fuzzy_threshold", 65, "at most 64"),
        ("sources.0.chunking.token_budget", 0, "at least 16"),
        ("sources.0.chunking.target_share", 9, "at most 8"),
        ("sources.0.chunking.encoding", "gpt2", "unknown encoding 'gpt2'; available offline: cl100k_base"),
        ("sources.0.discovery.max_pages", 0, "at least 1"),
        ("sources.0.tiers.warm_every_h", -1, "at least 0"),
        ("sources.0.fetch.user_agent", "bot {name}", "not a template with only {contact}"),
        ("vector_store.upsert_batch", 0, "at least 1"),
        ("webhooks.0.attempts", 0, "at least 1"),
        ("embedder.dimensions", 0, "at least 1"),
    ],
)
def test_each_setting_names_itself_and_the_value(tmp_path: Path, setting: str, value: Any, message: str) -> None:
    path = tuple(int(p) if p.isdigit() else p for p in setting.split("."))
    err = str(load(tmp_path, put(BASE, path, value)))
    assert f"{shown(path)}: " in err and message in err, err


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        ({"provider": "openai", "model": "my-model"}, "unknown dimensions for model 'my-model'"),
        ({"provider": "local", "model": "bge-small"}, "no local copy of 'bge-small'"),
        ({"provider": "local", "dimensions": 128}, "dimensions cannot be set for provider local"),
        ({"provider": "hashing", "model": "x"}, "model cannot be set for provider hashing"),
    ],
)
def test_the_embedder_is_known_at_load(tmp_path: Path, embedder: dict[str, Any], message: str) -> None:
    assert message in str(load(tmp_path, {**BASE, "embedder": embedder}))


def test_warn_must_not_exceed_error(tmp_path: Path) -> None:
    err = load(tmp_path, put(BASE, ("sources", 0, "checks"), {"stale_warn": 0.2, "stale_error": 0.1}))
    assert "source 'docs': checks: stale_warn (0.2) is above stale_error (0.1)" in str(err)


def test_an_empty_source_list_says_so(tmp_path: Path) -> None:
    err = load(tmp_path, {"sources": []})
    assert "sources: the sources file lists no source" in str(err)


def test_a_file_that_is_not_utf8_or_not_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("sources: [{name: caf\xe9, sitemap: http://u}]\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1\.yaml: not UTF-8 text \(byte 20: invalid"):
        load_settings(latin1)
    with pytest.raises(ConfigError, match=r": is a folder, not a sources file"):
        load_settings(tmp_path)
    top = tmp_path / "list.yaml"
    top.write_text("- name: docs\n")
    with pytest.raises(ConfigError, match=r"expected a mapping with `sources:` at the top level, got list"):
        load_settings(top)
    for path in (latin1, tmp_path):  # the CLI: one line, exit 2, no traceback
        assert main(["--sources", str(path), "status"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "Traceback" not in err and err.count("\n") == 1


def test_the_example_and_the_defaults_still_load(tmp_path: Path) -> None:
    assert load_settings(EXAMPLE).sources[0].fetch.quarantine.gone.share == 0.2
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(BASE))
    settings = load_settings(path)
    assert settings.sources[0].fetch.max_bytes == 5_000_000 and settings.webhooks[0].attempts == 5
