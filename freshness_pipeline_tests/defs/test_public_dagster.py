"""docs/dagster.md lists every `DagsterInstance` method outside Dagster's public API that the
package calls, with the public feature Dagster lacks; this holds the list to the code, both
ways: a new non-public call fails until it is listed, a listed call no longer made fails
until it leaves the list."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import dagster as dg
from dagster._annotations import is_public  # the marker Dagster's `@public` sets: the test reads it

PACKAGE = Path(__file__).resolve().parents[2] / "freshness_pipeline"
DOCS = PACKAGE.parent / "docs" / "dagster.md"


def _instance_attributes() -> dict[str, set[str]]:
    """Attribute names read on an expression named `instance` (`instance.x`, `context.instance.x`),
    with the files they are read in."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name == "instance":
                found.setdefault(node.attr, set()).add(str(path.relative_to(PACKAGE)))
    return found


def _non_public(names: dict[str, set[str]]) -> set[str]:
    out = set()
    for name in names:
        try:
            member = inspect.getattr_static(dg.DagsterInstance, name)
        except AttributeError:
            continue  # not an instance method (a context's own `instance` of another type)
        target = member.fget if isinstance(member, property) else member
        if not is_public(target):
            out.add(name)
    return out


def _listed() -> set[str]:
    """The "non-public call" column of that table: its first backticked name in each row."""
    lines = DOCS.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|") and "non-public call" in line)
    rows = []
    for line in lines[start + 2 :]:  # after the header and its rule
        if not line.startswith("|"):
            break
        rows.append(line)
    return {m.group(1) for row in rows if (m := re.match(r"\| [^|]+ \| `(\w+)[`.]", row))}


def test_every_non_public_instance_call_is_listed_in_docs_dagster_md() -> None:
    used = _instance_attributes()
    assert {"get_run_by_id", "add_dynamic_partitions"} <= set(used)  # the scan finds the calls it must
    non_public = _non_public(used)
    assert "get_run_by_id" not in non_public and "launch_run" in _non_public({"launch_run": set()})  # the marker
    # The run-management calls this project once made have no reason left to come back.
    assert not {"launch_run", "report_run_failed", "get_daemon_heartbeats", "run_launcher"} & set(used)
    listed = _listed()
    unlisted = {n: sorted(used[n]) for n in non_public - listed}
    assert not unlisted, f"non-public DagsterInstance calls missing from docs/dagster.md: {unlisted}"
    assert listed <= non_public, f"docs/dagster.md lists calls the package no longer makes: {listed - non_public}"


# Dagster's documented resource lifecycle hook ("Lifecycle hooks" of its resources guide),
# which its source does not mark `@public`: the one override docs/dagster.md names.
DOCUMENTED_HOOKS = {"teardown_after_execution"}


def _overrides() -> dict[str, str]:
    """Method name -> "file: Class(dg.Base)" for each method a class of the package defines
    over a Dagster base class (`class X(dg.Base)`) that has it."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            bases = [b.attr for b in node.bases if isinstance(b, ast.Attribute) and getattr(b.value, "id", "") == "dg"]
            for base in bases:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        try:
                            member = inspect.getattr_static(getattr(dg, base), item.name)
                        except AttributeError:
                            continue  # a method of its own
                        if not is_public(member.fget if isinstance(member, property) else member):
                            found[item.name] = f"{path.relative_to(PACKAGE)}: {node.name}(dg.{base})"
    return found


def test_no_non_public_dagster_method_is_overridden() -> None:
    found = _overrides()
    assert set(found) <= DOCUMENTED_HOOKS, f"overrides of non-public Dagster methods: {found}"
