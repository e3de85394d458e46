"""The layer rules of docs/architecture.md, read from the source with `ast`: every import,
at the top of a module or inside a function, absolute or relative.

The checker works on a tree of module sources (name -> source), so each rule is proven on a
small made-up tree that breaks it, then held on the real package and `bench/`.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import freshness_pipeline

PACKAGE = "freshness_pipeline"
TESTS = "freshness_pipeline_tests"
ROOT = Path(freshness_pipeline.__file__).parent
REPO = ROOT.parent
ARCHITECTURE = REPO / "docs" / "architecture.md"
# Pure libraries core may use besides the standard library: text in, values out, no I/O.
CORE_LIBRARIES = frozenset({"trafilatura", "htmldate", "courlan", "tiktoken", "markdown_it", "numpy", "lxml"})
# Standard-library modules that reach files, processes, sockets or databases: none in core.
IO_MODULES = frozenset(
    {
        "os", "io", "pathlib", "shutil", "tempfile", "glob", "fileinput", "mmap", "fcntl",
        "socket", "ssl", "select", "selectors", "asyncio", "subprocess", "multiprocessing", "pty",
        "signal", "sqlite3", "dbm", "shelve", "http.client", "http.server", "http.cookiejar",
        "urllib.request", "ftplib", "smtplib", "poplib", "imaplib", "webbrowser", "logging.handlers",
    }
)  # fmt: skip
# The one exception docs/architecture.md names: tokens.py places tiktoken's rank files in its cache.
CORE_IO_EXCEPTIONS: Mapping[str, frozenset[str]] = {f"{PACKAGE}.core.tokens": frozenset({"os", "tempfile", "pathlib"})}
# The modules that build the asset graph: the CLI loads them only when `run` runs the job.
ASSET_GRAPH = frozenset(f"{PACKAGE}.defs.{m}" for m in ("definitions", "assets", "checks", "metrics_assets", "sensors"))
DATABASE_LIBRARIES = frozenset({"sqlalchemy", "alembic"})
# Dagster runs its own processes (docs/decisions/0001): the code location spawns, forks and signals none.
PROCESS_MODULES = frozenset({"subprocess", "multiprocessing", "signal"})
# pandas is the [pandas] extra, for the public API's DataFrames: only frames.py imports it, inside
# its functions, and only the public API imports frames.py, so neither a refresh nor a reading
# command loads it through the package. (pyarrow loads it wherever it is installed, when the
# vector store opens: docs/architecture.md.)
FRAMES = f"{PACKAGE}.frames"
# The packages of pyproject.toml's extras (what the default install lacks), with their extra:
# a module importing one when it loads must itself be imported only inside a function.
OPTIONAL: Mapping[str, str] = {
    "tiktoken": "tiktoken",
    "bpe_openai": "tiktoken",
    "openai": "openai",
    "pinecone": "pinecone",
    "dagster_celery": "celery",
    "celery": "celery",
    "torch": "torch",
    "sentence_transformers": "torch",
    "transformers": "torch",
}


@dataclass(frozen=True, slots=True)
class Import:
    module: str  # the importing module, e.g. freshness_pipeline.core.tiers
    line: int
    target: str  # the absolute name imported, e.g. freshness_pipeline.config
    on_load: bool = True  # runs when the module loads (not inside a function)
    typing_only: bool = False  # under `if TYPE_CHECKING:`: never runs


@dataclass(frozen=True, slots=True)
class Source:
    text: str
    is_package: bool = False


Tree = Mapping[str, Source]  # module name -> its source


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, source: str, *, is_package: bool = False) -> Iterator[Import]:
    """Every import in `source`, its target made absolute (`from a import b` is `a.b`)."""
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST, on_load: bool, typing_only: bool) -> Iterator[Import]:
        if isinstance(node, ast.Import):
            yield from (Import(module, node.lineno, a.name, on_load, typing_only) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            head = ".".join([*base, node.module] if node.module else base)
            # A name may be a module (`from .. import cli`): each is read as head.name.
            for a in node.names:
                yield Import(module, node.lineno, head if a.name == "*" else f"{head}.{a.name}", on_load, typing_only)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from visit(child, on_load, True)
            for child in node.orelse:
                yield from visit(child, on_load, typing_only)
        else:
            inner = on_load and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for child in ast.iter_child_nodes(node):
                yield from visit(child, inner, typing_only)

    yield from visit(ast.parse(source), True, False)


def _within(name: str, *layers: str) -> bool:
    return any(name == f"{PACKAGE}.{layer}" or name.startswith(f"{PACKAGE}.{layer}.") for layer in layers)


def _is(target: str, modules: frozenset[str]) -> str | None:
    """The module of `modules` that `target` is or lies in."""
    return next((m for m in modules if target == m or target.startswith(m + ".")), None)


def violation(imp: Import) -> str | None:
    """Why this one import breaks a layer rule, or None."""
    m, t = imp.module, imp.target
    top = t.partition(".")[0]
    if top == TESTS and not m.startswith(TESTS):
        return "nothing outside the tests imports test code"
    if not m.startswith(PACKAGE + ".") and m != PACKAGE:
        return None
    if top == "pandas" and (m != FRAMES or (imp.on_load and not imp.typing_only)):
        return "pandas only in frames.py, inside a function (the [pandas] extra)"
    if _is(t, frozenset({FRAMES})) and m not in (FRAMES, f"{PACKAGE}.api"):
        return "only the public API imports frames.py (pandas is never on a refresh's path)"
    if top.startswith("dagster") and not _within(m, "defs"):
        return "Dagster only in defs/"
    if _within(m, "defs") and _is(t, PROCESS_MODULES):
        return "defs imports no process module (Dagster runs its own processes)"
    if _within(m, "core"):
        if not (_within(t, "core") or top in sys.stdlib_module_names or top in CORE_LIBRARIES):
            return "core imports only core, the standard library and pure text libraries"
        if (io := _is(t, IO_MODULES)) and io not in CORE_IO_EXCEPTIONS.get(m, frozenset()):
            return "core does no I/O"
    elif _within(m, "adapters") and _within(t, "pipeline", "defs", "cli"):
        return "adapters never import pipeline, defs or cli"
    elif _within(m, "pipeline") and _within(t, "defs", "cli"):
        return "pipeline never imports defs or cli"
    elif _within(m, "pipeline") and top in DATABASE_LIBRARIES:
        return "pipeline never touches SQLAlchemy (the state store's repositories do, behind pipeline/ports.py)"
    elif _within(m, "cli") and _within(t, "adapters"):
        return "cli imports no adapter (it calls into pipeline)"
    return None


def _resolve(target: str, tree: Tree) -> str | None:
    """The module of `tree` an import target names (`a.b.X` is `a.b` when X is no module)."""
    name = target
    while name and name not in tree:
        name = name.rpartition(".")[0]
    return name or None


def _parents(name: str) -> Iterator[str]:
    """The packages Python loads before `name` (`a.b.c`: `a`, `a.b`)."""
    parts = name.split(".")
    yield from (".".join(parts[:i]) for i in range(1, len(parts)))


def _edges(tree: Tree, *, on_load_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in tree}
    for name, src in tree.items():
        for imp in imports(name, src.text, is_package=src.is_package):
            if imp.typing_only or (on_load_only and not imp.on_load):
                continue
            if (dep := _resolve(imp.target, tree)) is not None and dep != name:
                graph[name].add(dep)
    return graph


def cycles(tree: Tree) -> list[list[str]]:
    """The import cycles that run (any import but `TYPE_CHECKING` ones): each strongly
    connected group of two or more modules, sorted (Tarjan's algorithm, iterative)."""
    graph = _edges(tree, on_load_only=False)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def cli_loads(tree: Tree) -> dict[str, list[str]]:
    """What the CLI process loads: every import a `cli` module makes (its commands' too),
    then what those modules import when they load, with their parent packages. Returns each
    loaded module with the chain that reaches it."""
    graph = _edges(tree, on_load_only=True)
    every = _edges(tree, on_load_only=False)
    chains: dict[str, list[str]] = {}
    todo: list[str] = []
    for name in sorted(tree):
        if _within(name, "cli") or name == f"{PACKAGE}.cli":
            chains[name] = [name]
            todo.append(name)
    while todo:
        name = todo.pop()
        deps = every[name] if _within(name, "cli") else graph[name]
        for dep in sorted(deps | {p for d in deps for p in _parents(d) if p in tree}):
            if dep not in chains:
                chains[dep] = [*chains[name], dep]
                todo.append(dep)
    return chains


def eager_extras(tree: Tree) -> list[str]:
    """Modules that load an optional package (`OPTIONAL`) through a module loaded on load:
    the default install would fail to import them."""
    needs: dict[str, str] = {}  # module -> the first optional package it imports on load
    for name, src in tree.items():
        for imp in imports(name, src.text, is_package=src.is_package):
            if imp.on_load and not imp.typing_only and (top := imp.target.partition(".")[0]) in OPTIONAL:
                needs.setdefault(name, top)
    return [
        f"{name} loads {dep}, which imports {needs[dep]} (the [{OPTIONAL[needs[dep]]}] extra) when it loads"
        for name, deps in sorted(_edges(tree, on_load_only=True).items())
        for dep in sorted(deps)
        if dep in needs
    ]


def problems(tree: Tree) -> list[str]:
    """Every broken rule of `tree`, one line each."""
    found = [
        f"{imp.module} line {imp.line}: imports {imp.target}: {why}"
        for name, src in sorted(tree.items())
        for imp in sorted(imports(name, src.text, is_package=src.is_package), key=lambda i: i.line)
        if (why := violation(imp))
    ]
    found += [f"import cycle: {' <-> '.join(group)}" for group in cycles(tree)]
    found += eager_extras(tree)
    loaded = cli_loads(tree)
    found += [f"the CLI loads the asset graph: {' -> '.join(loaded[m])}" for m in sorted(ASSET_GRAPH) if m in loaded]
    return found


def read_tree(*folders: Path) -> dict[str, Source]:
    return {
        module_name(path): Source(path.read_text(), is_package=path.name == "__init__.py")
        for folder in folders
        for path in sorted(folder.rglob("*.py"))
    }


def test_the_package_and_the_benchmarks_keep_to_their_layers() -> None:
    tree = read_tree(ROOT, REPO / "bench")
    assert f"{PACKAGE}.cli.commands" in tree and "bench.peers" in tree and f"{PACKAGE}.core.tokens" in tree
    found = problems(tree)
    assert not found, "layer rules broken:\n" + "\n".join(found)


def _tree(**modules: str) -> dict[str, Source]:
    """A made-up tree: keyword `core__x` is module freshness_pipeline.core.x; `bench__y` is
    bench.y; a name ending in `__init` is a package."""
    tree: dict[str, Source] = {}
    for key, text in modules.items():
        parts = key.split("__")
        is_package = parts[-1] == "init"
        parts = parts[:-1] if is_package else parts
        name = ".".join(parts) if parts[0] == "bench" else ".".join([PACKAGE, *parts])
        tree[name] = Source(text, is_package=is_package)
    return tree


@pytest.mark.parametrize(
    ("modules", "why"),
    [
        ({"pipeline__crawl": "import dagster as dg"}, "Dagster only in defs/"),
        ({"progress": "def log():\n    import dagster\n"}, "Dagster only in defs/"),
        ({"cli__app": "from dagster_celery import celery_executor"}, "Dagster only in defs/"),
        ({"defs__runner": "import signal"}, "defs imports no process module"),
        ({"defs__x": "def f():\n    from subprocess import Popen\n"}, "defs imports no process module"),
        ({"defs__x": "import multiprocessing.pool"}, "defs imports no process module"),
        ({"core__x": "import socket"}, "core does no I/O"),
        ({"core__x": "def f():\n    import subprocess\n"}, "core does no I/O"),
        ({"core__x": "import sqlite3"}, "core does no I/O"),
        ({"core__x": "from http.client import HTTPConnection"}, "core does no I/O"),
        ({"core__x": "from urllib.request import urlopen"}, "core does no I/O"),
        ({"core__x": "from pathlib import Path"}, "core does no I/O"),
        ({"core__x": "import os"}, "core does no I/O"),
        ({"core__tokens": "import subprocess"}, "core does no I/O"),  # its exception is os/tempfile/pathlib only
        ({"core__x": "import httpx"}, "core imports only core, the standard library and pure text libraries"),
        ({"core__x": "import yaml"}, "core imports only core, the standard library and pure text libraries"),
        ({"defs__metrics_assets": "def table():\n    import pandas as pd\n"}, "pandas only in frames.py"),
        ({"pipeline__ports": "if TYPE_CHECKING:\n    from pandas import DataFrame\n"}, "pandas only in frames.py"),
        ({"frames": "import pandas as pd\n"}, "pandas only in frames.py, inside a function"),
        ({"pipeline__metrics": "from ..frames import Frames\n"}, "only the public API imports frames.py"),
        ({"defs__assets": "def f():\n    from .. import frames\n"}, "only the public API imports frames.py"),
        (
            {"core__tiers": "def f():\n    from ..config import TierPolicy\n"},
            "core imports only core, the standard library and pure text libraries",
        ),
        ({"adapters__state__store": "from ...pipeline.crawl import CrawlReport"}, "adapters never import"),
        ({"adapters__fetch": "from freshness_pipeline import cli"}, "adapters never import"),
        ({"pipeline__crawl": "from ..defs.tags import ALLOW_SPIKE_TAG"}, "pipeline never imports defs or cli"),
        ({"pipeline__maintenance": "from sqlalchemy.engine import make_url"}, "pipeline never touches SQLAlchemy"),
        ({"pipeline__x": "def f():\n    import alembic\n"}, "pipeline never touches SQLAlchemy"),
        ({"cli__app": "from ..adapters import webhooks"}, "cli imports no adapter"),
        ({"bench__peers": "from freshness_pipeline_tests.corpus.corpora import CORPORA"}, "imports test code"),
        ({"demo__run": "import freshness_pipeline_tests.sitegen"}, "imports test code"),
    ],
)
def test_each_import_rule_flags_its_violation(modules: dict[str, str], why: str) -> None:
    (found,) = problems(_tree(**modules))
    assert why in found, found


def test_allowed_imports_pass() -> None:
    tree = _tree(
        core__x="import re, numpy, trafilatura, hashlib\nfrom http import HTTPStatus\nfrom . import urls\n",
        core__urls="from urllib.parse import urljoin\n",
        core__tokens="import os, tempfile\nfrom pathlib import Path\n",
        adapters__fetch="import httpx\nfrom ..core.urls import urljoin\n",
        pipeline__crawl="from .. import progress, config\nfrom ..adapters import fetch\n",
        defs__assets="import dagster as dg\n",
        defs__runner="import os\nfrom ..adapters.interrupts import observing\n",
        adapters__interrupts="import signal\n",
        progress="",
        config="",
        bench__run="import dagster\nfrom freshness_pipeline.defs import assets\n",
        frames="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pandas\ndef f():\n    import pandas\n",
        api="def frames():\n    from .frames import Frames\n",
    )
    assert problems(tree) == []


def test_a_cycle_is_flagged_whether_its_import_is_on_load_or_in_a_function() -> None:
    tree = _tree(
        adapters__discovery="def crawl():\n    from .fetch import Target\n",
        adapters__fetch="from .discovery import discover\n",
        adapters__bodies="",
    )
    assert problems(tree) == [
        f"import cycle: {PACKAGE}.adapters.discovery <-> {PACKAGE}.adapters.fetch",
    ]
    longer = _tree(core__a="from . import b", core__b="from .c import X", core__c="from .a import Y", core__d="")
    assert cycles(longer) == [[f"{PACKAGE}.core.{m}" for m in "abc"]]


def test_an_extra_loaded_with_its_importer_is_flagged() -> None:
    tree = _tree(
        adapters__embedders__init="from .openai_embedder import OpenAIEmbedder\n",
        adapters__embedders__openai_embedder="import tiktoken\nfrom openai import OpenAI\n",
        adapters__embedders__local="def load():\n    from sentence_transformers import SentenceTransformer\n",
        defs__celery_app="from dagster_celery.make_app import make_app\n",  # imported by nothing: a worker's -A
        core__tokens="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tiktoken\n",
        core__segment="from .tokens import get_encoding\n",
    )
    assert problems(tree) == [
        f"{PACKAGE}.adapters.embedders loads {PACKAGE}.adapters.embedders.openai_embedder, "
        "which imports tiktoken (the [tiktoken] extra) when it loads"
    ]
    lazy = "def make():\n    from .openai_embedder import OpenAIEmbedder\n"
    tree[f"{PACKAGE}.adapters.embedders"] = Source(lazy, is_package=True)
    assert problems(tree) == []


def test_a_type_only_import_makes_no_cycle() -> None:
    tree = _tree(
        adapters__discovery="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .fetch import Fetcher\n",
        adapters__fetch="from .discovery import discover\n",
    )
    assert cycles(tree) == []


def test_the_cli_loading_the_asset_graph_is_flagged() -> None:
    runner_loads_graph = "import dagster\nfrom .definitions import defs\n"
    tree = _tree(
        cli__init="def main():\n    from .app import app\n",
        cli__app="def run():\n    from ..defs.runner import run_refresh\n",
        defs__init="",
        defs__runner=runner_loads_graph,
        defs__definitions="from . import assets\n",
        defs__assets="import dagster\n",
    )
    found = problems(tree)
    chain = " -> ".join(f"{PACKAGE}.{m}" for m in ("cli.app", "defs.runner", "defs.definitions"))
    assert f"the CLI loads the asset graph: {chain}" in found, found
    assert any(line.endswith(f"-> {PACKAGE}.defs.assets") for line in found), found


def test_a_package_that_loads_the_asset_graph_is_flagged_for_the_cli() -> None:
    tree = _tree(
        cli__app="from ..defs.instance import write_instance_config\n",
        defs__init="from .definitions import defs\n",
        defs__instance="",
        defs__definitions="",
    )
    assert problems(tree) == [
        "the CLI loads the asset graph: "
        + " -> ".join(f"{PACKAGE}.{m}" for m in ("cli.app", "defs", "defs.definitions"))
    ]


def test_the_cli_may_launch_runs_that_load_the_graph_in_their_own_process() -> None:
    """The runner imports the definitions only inside the function of the in-process launch."""
    tree = _tree(
        cli__app="def run():\n    from ..defs.runner import run_refresh\n",
        defs__init="",
        defs__runner="import dagster\ndef in_process():\n    from .definitions import defs\n",
        defs__definitions="",
    )
    assert problems(tree) == []


def test_the_architecture_names_the_exception_the_checker_allows() -> None:
    rules = ARCHITECTURE.read_text().partition("## Layer rules")[2].partition("\n## ")[0]
    for module, allowed in CORE_IO_EXCEPTIONS.items():
        path = module.removeprefix(PACKAGE + ".").replace(".", "/") + ".py"
        assert f"`{path}`" in rules, path
        assert all(f"`{name}`" in rules for name in allowed), (path, allowed)
    for claim in ("Dagster", "cycle", "SQLAlchemy", "asset graph", "test"):
        assert re.search(claim, rules), claim


def test_relative_imports_resolve_against_the_package() -> None:
    got = list(
        imports("freshness_pipeline.adapters.state", "from ..damage import X\nfrom . import store", is_package=True)
    )
    assert [i.target for i in got] == [
        "freshness_pipeline.adapters.damage.X",
        "freshness_pipeline.adapters.state.store",
    ]
    assert module_name(ROOT / "adapters" / "state" / "__init__.py") == "freshness_pipeline.adapters.state"


def test_imports_know_when_they_run() -> None:
    source = (
        "import a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import b\nelse:\n    import c\n"
        "class K:\n    import d\n    def m(self):\n        import e\n"
    )
    got = {i.target: (i.on_load, i.typing_only) for i in imports(f"{PACKAGE}.x", source)}
    assert got == {
        "a": (True, False),
        "typing.TYPE_CHECKING": (True, False),
        "b": (True, True),
        "c": (True, False),
        "d": (True, False),
        "e": (False, False),
    }


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
                if (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES:
                    over.append(f"{module_name(path)}.{node.name}: {n} lines")
    assert not over, over
