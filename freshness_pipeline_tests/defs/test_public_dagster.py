"""The package calls no `DagsterInstance` method outside Dagster's public API (`@public`) and
overrides no non-public method of a Dagster class but the documented resource lifecycle hook
(docs/dagster.md)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dagster as dg
from dagster._annotations import is_public  # the marker Dagster's `@public` sets: the test reads it

PACKAGE = Path(__file__).resolve().parents[2] / "freshness_pipeline"


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


def test_no_non_public_instance_method_is_called() -> None:
    used = _instance_attributes()
    assert {"get_run_by_id", "add_dynamic_partitions"} <= set(used)  # the scan finds the calls it must
    assert "launch_run" in _non_public({"launch_run": set()})  # the marker tells them apart
    non_public = {n: sorted(used[n]) for n in _non_public(used)}
    assert not non_public, f"non-public DagsterInstance calls: {non_public}"


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
