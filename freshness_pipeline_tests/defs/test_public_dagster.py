"""The package touches no attribute of a Dagster object outside Dagster's public API, and
overrides no non-public method of a Dagster class but the documented resource lifecycle hook
(docs/dagster.md).

The oracle is Dagster's own marker: `@public` on methods and properties (`is_public`), and
`PublicAttr[...]` on the fields of its records. The fields of a record that a public method
of `DagsterInstance` returns (a `RunRecord`'s `dagster_run`, …) are that method's answer and
count as public. Attributes a Dagster class inherits from another library (a log manager's
`info`, from `logging`) are that library's.

What a name holds is read from the code: a parameter annotated with a Dagster class
(`context: dg.AssetExecutionContext`, `events: Iterable[dg.DagsterEvent]`), `dg.X`
itself, and what assignments, loops and comprehensions take from them, following the
types Dagster's own annotations give (properties, fields, methods' return types)."""

from __future__ import annotations

import ast
import enum
import inspect
import types
import typing
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._annotations import is_public  # the marker Dagster's `@public` sets: the test's oracle
from dagster._symbol_annotations.public import PUBLIC  # the marker of `PublicAttr[...]` fields

PACKAGE = Path(__file__).resolve().parents[2] / "freshness_pipeline"
LIBRARIES = ("dagster", "dagster_shared")

# What the package still touches outside the public API, each with where and why; the test
# fails on anything else, and on an entry no longer touched (so the list only shrinks).
KNOWN: dict[tuple[str, str], str] = {
    # docs/decisions/0003: a dead local run is failed, and its slots freed, with no daemon.
    ("DagsterInstance", "report_run_failed"): "defs/dead_runs.py",
    ("DagsterInstance", "event_log_storage"): "defs/dead_runs.py",
    # Documented on Dagster's API pages without the marker in 1.13.
    ("AssetExecutionContext", "run"): "defs/assets.py, defs/metrics_assets.py, defs/step_endings.py",
    ("SensorEvaluationContext", "log"): "defs/sensors.py, defs/source_freshness.py",
}


def _plain(hint: Any) -> Any:
    """A hint as the scan follows it: a class, ("seq", class) for a collection of it, or None."""
    if isinstance(hint, str | typing.ForwardRef):  # "RunRecord" inside Sequence["RunRecord"]
        hint = getattr(dg, hint if isinstance(hint, str) else hint.__forward_arg__, None)
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return _plain(typing.get_args(hint)[0])
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return _plain(args[0]) if len(args) == 1 else None
    if origin is not None and typing.get_args(hint):
        inner = _plain(typing.get_args(hint)[0])
        return ("seq", inner) if isinstance(inner, type) else None
    return hint if isinstance(hint, type) else None


def _hints(obj: Any) -> dict[str, Any]:
    """Annotations of a function or a class (and its bases), forward references resolved in
    its module and `dagster`; those that do not resolve are left out."""
    module = inspect.getmodule(obj)
    names = {**vars(typing), **vars(dg), **(vars(module) if module else {})}
    annotations: dict[str, Any] = {}
    for owner in reversed(obj.__mro__) if isinstance(obj, type) else [obj]:
        annotations |= getattr(owner, "__annotations__", None) or {}
    out = {}
    for name, hint in annotations.items():
        try:
            out[name] = eval(hint, names) if isinstance(hint, str) else hint  # noqa: S307 - Dagster's own annotations
        except Exception:
            continue
    return out


def _dagster(t: Any) -> bool:
    return isinstance(t, type) and t.__module__.split(".")[0] in LIBRARIES and not issubclass(t, enum.Enum)


def _function(member: Any) -> Any:
    return member.fget if isinstance(member, property) else getattr(member, "__func__", member)


def _member_type(owner: type, attr: str) -> Any:
    try:
        member = inspect.getattr_static(owner, attr)
    except AttributeError:
        return None
    if isinstance(member, property):
        return _plain(_hints(member.fget).get("return"))
    if callable(_function(member)):
        return ("call", _plain(_hints(_function(member)).get("return")))
    return _plain(_hints(owner).get(attr))


def _answers_of_public_instance_methods() -> set[type]:
    """The record types the public methods of `DagsterInstance` return."""
    out = set()
    for name in dir(dg.DagsterInstance):
        target = _function(inspect.getattr_static(dg.DagsterInstance, name))
        if callable(target) and is_public(target):
            answer = _plain(_hints(target).get("return"))
            out.add(answer[1] if isinstance(answer, tuple) else answer)
    return {t for t in out if _dagster(t)}


ANSWERS = _answers_of_public_instance_methods()


def is_public_attribute(owner: type, attr: str) -> bool:
    for base in owner.__mro__:
        if attr not in vars(base):
            continue
        if base.__module__.split(".")[0] not in LIBRARIES:
            return True  # another library's API that a Dagster class inherits
        member = vars(base)[attr]
        if isinstance(member, property) or callable(_function(member)):
            return bool(is_public(_function(member)))
        break
    hint = _hints(owner).get(attr)
    if hint is None:
        return False
    if typing.get_origin(hint) is typing.Annotated and PUBLIC in typing.get_args(hint)[1:]:
        return True
    return any(issubclass(owner, answer) for answer in ANSWERS)  # a field of a public method's answer


class _Scan:
    """(Dagster class, attribute) -> the files that touch it."""

    def __init__(self) -> None:
        self.touched: dict[tuple[type, str], set[str]] = {}

    def type_of(self, node: ast.AST, env: dict[str, Any], where: str) -> Any:
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "dg":
            found = getattr(dg, node.attr, None)
            return ("class", found) if isinstance(found, type) else None
        if isinstance(node, ast.Attribute):
            owner = self.type_of(node.value, env, where)
            owner = owner[1] if isinstance(owner, tuple) and owner[0] == "class" else owner
            if _dagster(owner):
                self.touched.setdefault((owner, node.attr), set()).add(where)
                return _member_type(owner, node.attr)
            return None
        if isinstance(node, ast.Call):
            called = self.type_of(node.func, env, where)
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                self.type_of(arg, env, where)
            return called[1] if isinstance(called, tuple) and called[0] == "call" else None
        if isinstance(node, ast.Subscript):
            held = self.type_of(node.value, env, where)
            return held[1] if isinstance(held, tuple) and held[0] == "seq" else None
        if isinstance(node, ast.NamedExpr):
            env[node.target.id] = found = self.type_of(node.value, env, where)
            return found
        for child in ast.iter_child_nodes(node):
            self.type_of(child, env, where)
        return None

    def element(self, node: ast.AST, env: dict[str, Any], where: str) -> Any:
        held = self.type_of(node, env, where)
        return held[1] if isinstance(held, tuple) and held[0] == "seq" else None

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, where: str) -> None:
        env: dict[str, Any] = {}
        for a in [*fn.args.args, *fn.args.kwonlyargs]:
            if a.annotation is not None and (t := _annotation(a.annotation)) is not None:
                env[a.arg] = t
        body = sorted((n for n in ast.walk(fn) if isinstance(n, ast.stmt) and n is not fn), key=lambda n: n.lineno)
        for node in body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                env[node.targets[0].id] = self.type_of(node.value, env, where)
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                env[node.target.id] = self.element(node.iter, env, where)
            else:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.expr):
                        self.type_of(child, env, where)
                    elif isinstance(child, ast.withitem):
                        self.type_of(child.context_expr, env, where)
        for comp in ast.walk(fn):
            if isinstance(comp, ast.comprehension) and isinstance(comp.target, ast.Name):
                env[comp.target.id] = self.element(comp.iter, env, where) or env.get(comp.target.id)
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute):
                self.type_of(node, env, where)


def _annotation(node: ast.AST) -> Any:
    """The Dagster type an annotation names: `dg.X`, `dg.X | None`, `Iterable[dg.X]`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _annotation(ast.parse(node.value, mode="eval").body)
    if isinstance(node, ast.Subscript):
        inner = _annotation(node.slice)
        return ("seq", inner) if isinstance(inner, type) else None
    if isinstance(node, ast.BinOp):
        return _annotation(node.left) or _annotation(node.right)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "dg":
        found = getattr(dg, node.attr, None)
        return found if isinstance(found, type) else None
    return None


def touched() -> dict[tuple[type, str], set[str]]:
    scan = _Scan()
    for path in sorted(PACKAGE.rglob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                scan.function(fn, str(path.relative_to(PACKAGE)))
    return scan.touched


def test_the_oracle_tells_public_from_not() -> None:
    assert is_public_attribute(dg.DagsterInstance, "get_run_by_id")
    assert not is_public_attribute(dg.DagsterInstance, "launch_run")
    assert is_public_attribute(dg.DagsterRun, "run_id")  # PublicAttr
    assert is_public_attribute(dg.RunRecord, "dagster_run")  # get_run_records' answer
    assert not is_public_attribute(dg.DagsterEvent, "step_materialization_data")


def test_the_scan_follows_dagster_objects_through_the_code() -> None:
    found = {(owner.__name__, attr) for owner, attr in touched()}
    # a parameter's annotation, `dg.X.method()`, a loop over a public answer, a context's member
    assert {
        ("DagsterInstance", "get_run_records"),
        ("DagsterInstance", "local_temp"),
        ("RunRecord", "dagster_run"),
    } <= found
    assert {("DagsterRun", "tags"), ("AssetExecutionContext", "partition_key")} <= found


def test_no_dagster_attribute_outside_the_public_api() -> None:
    used = touched()
    non_public = {(o.__name__, a): sorted(w) for (o, a), w in used.items() if not is_public_attribute(o, a)}
    unknown = {k: v for k, v in non_public.items() if k not in KNOWN}
    assert not unknown, f"attributes of Dagster objects outside its public API: {unknown}"
    gone = sorted(set(KNOWN) - set(non_public))
    assert not gone, f"no longer touched, drop them from KNOWN: {gone}"


# What a run did is read from the run's own record and its status, never from Dagster's event
# internals, its error records or the text of its messages (class names, stack frames).
EVENT_INTERNALS = (
    "step_materialization_data",
    "asset_check_evaluation_data",
    "step_failure_data",
    "event_specific_data",
    "SerializableErrorInfo",
    "cls_name",
    "DagsterAssetCheckFailedError",
    "/kombu/",
    "all_events",
)


def test_no_run_is_read_from_dagster_event_internals_or_messages() -> None:
    found = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for name in EVENT_INTERNALS
        if name in path.read_text()
    }
    assert not found, f"event internals read by the package: {sorted(found)}"


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
                        if not is_public(_function(member)):
                            found[item.name] = f"{path.relative_to(PACKAGE)}: {node.name}(dg.{base})"
    return found


def test_no_non_public_dagster_method_is_overridden() -> None:
    found = _overrides()
    assert set(found) <= DOCUMENTED_HOOKS, f"overrides of non-public Dagster methods: {found}"
