"""The sources file's validation errors in the file's words: a source named by its name
(not `sources.1`), a list item by its index (`start_urls[0]`), what is allowed (the settings
of that place, the closest one to a mistyped name; the values of a choice; a number's
bounds) and the value given (a URL's password starred), never pydantic's own phrasing
("Value error, ", "Extra inputs are not permitted"); a YAML error by its line and column."""

from __future__ import annotations

import difflib
import re
from typing import Any, get_args

import yaml
from pydantic import BaseModel

_CREDENTIALS = re.compile(r"^([a-z][a-z0-9+.-]*://)[^/@]*@", re.IGNORECASE)


def problem(err: Any, raw: Any, root: type[BaseModel]) -> str:
    """One validation error in the words of the sources file: the source by its name, the
    setting's path, what is allowed, and the value given (never pydantic's own phrasing)."""
    loc = list(err["loc"])
    given = err.get("input")
    if isinstance(given, str):
        given = _CREDENTIALS.sub(r"\1***@", given)  # a password is never echoed
    shown = f" (got {given!r})" if err["type"] != "missing" and isinstance(given, int | float | str | bool) else ""
    return f"{_where(loc, raw)}: {_what(err, loc, root)}{shown}"


def _where(loc: list[Any], raw: Any) -> str:
    """`source 'docs': fetch.timeout_s` for `sources.0.fetch.timeout_s`; `webhooks[0].url`."""
    if len(loc) >= 2 and loc[0] == "sources" and isinstance(loc[1], int):
        entries = raw.get("sources") if isinstance(raw, dict) else None
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        who = f"source {name!r}" if isinstance(name, str) and name else f"source number {loc[1] + 1} (no name)"
        rest = _dotted(loc[2:])
        return f"{who}: {rest}" if rest else who
    return _dotted(loc) or "(top level)"


def _dotted(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _what(err: Any, loc: list[Any], root: type[BaseModel]) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = _settings_at(root, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        listed = f" (allowed here: {', '.join(allowed)})" if allowed else ""
        return f"unknown setting {loc[-1]!r}{hint}{listed}"
    if kind == "missing":
        return "is required"
    if kind == "literal_error":
        return f"must be one of {ctx['expected'].replace(' or ', ', ').replace(chr(39), '')}"
    bounds = {
        "greater_than_equal": "must be at least {ge}",
        "greater_than": "must be more than {gt}",
        "less_than_equal": "must be at most {le}",
        "less_than": "must be less than {lt}",
        "int_type": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "finite_number": "must be a finite number",
        "bool_type": "must be true or false",
        "string_type": "must be text",
        "list_type": "must be a list",
        "dict_type": "must be a mapping of settings",
        "model_type": "must be a mapping of settings",
        "string_too_short": "must not be empty",
    }
    if kind in bounds:
        return bounds[kind].format(**ctx)
    if kind == "string_pattern_mismatch" and loc[-1:] == ["name"]:
        return "a source name is lowercase letters, digits, '-' and '_' (up to 63), starting with a letter or digit"
    message = str(err["msg"])
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def _settings_at(root: type[BaseModel], loc: list[Any]) -> list[str]:
    """The settings allowed at `loc` (a path into `root`), in the file's order."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return []
        model = _model_in(field.annotation)
    return list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside `Source`, `list[Source]` or `Source | None`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _model_in(arg)) is not None:
            return found
    return None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """Where and what, by the file's line and column, with PyYAML's pointer under the line
    (its own text names the stream `<unicode string>`, not the file)."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return str(exc)
    m = exc.problem_mark
    context = exc.context_mark
    since = f" ({exc.context} at line {context.line + 1})" if exc.context and context is not None else ""
    snippet = m.get_snippet()
    return f"line {m.line + 1}, column {m.column + 1}: {exc.problem}{since}" + (f"\n{snippet}" if snippet else "")
