"""The layer rules of docs/architecture.md, read from the source with `ast`: every import,
at the top of a module or inside a function, absolute or relative."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import freshness_pipeline

PACKAGE = "freshness_pipeline"
ROOT = Path(freshness_pipeline.__file__).parent
# Pure libraries core may use besides the standard library: text in, values out, no I/O.
CORE_LIBRARIES = frozenset({"trafilatura", "htmldate", "courlan", "tiktoken", "markdown_it", "numpy", "lxml"})


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, e.g. freshness_pipeline.core.tiers
    line: int
    target: str  # the absolute name imported, e.g. freshness_pipeline.config


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(module: str, source: str, *, is_package: bool = False) -> Iterator[Import]:
    """Every import in `source`, its target made absolute (`from a import b` is `a.b`)."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (Import(module, node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            head = ".".join([*base, node.module] if node.module else base)
            # A name may be a module (`from .. import cli`): each is read as head.name.
            names = (head if alias.name == "*" else f"{head}.{alias.name}" for alias in node.names)
            yield from (Import(module, node.lineno, name) for name in names)


def _within(target: str, *layers: str) -> bool:
    return any(target == f"{PACKAGE}.{layer}" or target.startswith(f"{PACKAGE}.{layer}.") for layer in layers)


def violation(imp: Import) -> str | None:
    """Why this import breaks a layer rule, or None."""
    m, t = imp.module, imp.target
    if _within(m, "core"):
        top = t.partition(".")[0]
        if not (_within(t, "core") or top in sys.stdlib_module_names or top in CORE_LIBRARIES):
            return "core imports only core, the standard library and pure text libraries"
    elif _within(m, "adapters") and _within(t, "pipeline", "defs", "cli"):
        return "adapters never import pipeline, defs or cli"
    elif _within(m, "pipeline") and _within(t, "defs", "cli"):
        return "pipeline never imports defs or cli"
    elif _within(m, "cli") and _within(t, "adapters"):
        return "cli imports no adapter (it calls into pipeline)"
    return None


def violations(module: str, source: str, *, is_package: bool = False) -> list[str]:
    return [
        f"{imp.module} line {imp.line}: imports {imp.target}: {why}"
        for imp in sorted(imports(module, source, is_package=is_package), key=lambda i: i.line)
        if (why := violation(imp))
    ]


def test_every_module_keeps_to_its_layer() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        found += violations(module_name(path), path.read_text(), is_package=path.name == "__init__.py")
    assert not found, "layer rules broken:\n" + "\n".join(found)


def test_the_checker_flags_each_rule() -> None:
    assert violations("freshness_pipeline.core.tiers", "def f():\n    from ..config import TierPolicy\n") == [
        "freshness_pipeline.core.tiers line 2: imports freshness_pipeline.config.TierPolicy: "
        "core imports only core, the standard library and pure text libraries"
    ]
    assert violations("freshness_pipeline.core.x", "import pandas")  # not on the allow-list
    assert violations("freshness_pipeline.core.x", "import re, numpy, trafilatura\nfrom . import urls\n") == []
    assert violations("freshness_pipeline.adapters.state.store", "from ...pipeline.crawl import CrawlReport")
    assert violations("freshness_pipeline.adapters.fetch", "import freshness_pipeline.defs.assets")
    assert violations("freshness_pipeline.adapters.fetch", "from freshness_pipeline import cli")
    assert violations("freshness_pipeline.adapters.fetch", "from ..core.urls import normalize_url") == []
    assert violations("freshness_pipeline.pipeline.crawl", "from ..defs.assets import ALLOW_SPIKE_TAG")
    assert violations("freshness_pipeline.pipeline.crawl", "from .. import progress, config") == []
    assert violations("freshness_pipeline.cli", "def run():\n    from .adapters.damage import DamagedState\n")
    assert violations("freshness_pipeline.cli.commands", "from ..adapters import webhooks")
    assert violations("freshness_pipeline.cli", "from .pipeline.search import search") == []


def test_relative_imports_resolve_against_the_package() -> None:
    got = list(
        imports("freshness_pipeline.adapters.state", "from ..damage import X\nfrom . import store", is_package=True)
    )
    assert [i.target for i in got] == [
        "freshness_pipeline.adapters.damage.X",
        "freshness_pipeline.adapters.state.store",
    ]
    assert module_name(ROOT / "adapters" / "state" / "__init__.py") == "freshness_pipeline.adapters.state"


MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 60


def test_modules_and_functions_stay_small() -> None:
    """No module over 450 lines and no function over 60 (issue 14's sizes)."""
    over = []
    for path in sorted(ROOT.rglob("*.py")):
        source = path.read_text()
        if (n := len(source.splitlines())) > MAX_MODULE_LINES:
            over.append(f"{module_name(path)}: {n} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:  # type: ignore[operator]
                    over.append(f"{module_name(path)}.{node.name}: {n} lines")
    assert not over, over
