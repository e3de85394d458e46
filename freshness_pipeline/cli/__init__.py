"""`freshness`: the command line operators and scripts use (typer). The commands are in
`commands.py`, what they print in `render.py`; `main` runs one and returns its exit status, and
`entry` (the `freshness` script) exits with it. Everything is imported inside `entry`, so
that a Ctrl-C while the command loads is one line too."""

from __future__ import annotations

import atexit
import gc
import io
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from .commands import app
    from .render import alert_lines, run_lines

__all__ = ["alert_lines", "app", "entry", "main", "run_lines"]
EXIT_SIGPIPE = 141  # 128 + SIGPIPE, as a shell reports `cmd | head` (no SIGPIPE on Windows)


def __getattr__(name: str) -> Any:
    if name == "app":
        from .commands import app

        return app
    if name in ("alert_lines", "run_lines"):
        from . import render

        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def entry() -> NoReturn:
    """The `freshness` script: `main`, then Python's exit without its final garbage
    collections, which walk every object of the modules a command imported (Dagster's are
    most of them): every object still tracked is frozen out of them at exit (`gc.freeze`);
    exit handlers still run, only objects in reference cycles are left to the OS
    (`adapters/memory.py`: what it saves)."""
    atexit.register(gc.freeze)
    try:
        code = main()
    except KeyboardInterrupt as stop:
        # One line, not a traceback (with what was committed, when a run was stopped). Python
        # still ends the process by SIGINT once it has cleaned up, as for any KeyboardInterrupt
        # left unhandled, so a shell or a script sees an interrupted command (exit status 130
        # in a shell), not a failed one.
        print(f"freshness: interrupted{f': {stop}' if str(stop) else ''}", file=sys.stderr, flush=True)
        sys.excepthook = lambda *_: None  # the KeyboardInterrupt is reported above
        raise
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. A usage error is an `error:` line on stderr, then the `--help` hint,
    and SystemExit(2); a bad sources file, a missing home or damaged state is one `error:`
    line on stderr and exit 2."""
    import typer

    from .. import api
    from .commands import app

    command = typer.main.get_command(app)
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        with command.make_context("freshness", args) as ctx:
            code = command.invoke(ctx)
        sys.stdout.flush()
    except typer.Exit as done:  # --help
        return done.exit_code
    except typer.TyperException as exc:  # a usage error: an unknown option, a bad value
        where, message = getattr(exc, "ctx", None), exc.format_message()
        if type(exc).__name__ == "NoArgsIsHelpError":  # `freshness` alone: the help, not an error
            print(message)
        elif message:
            print(f"error: {message.replace('Value error, ', '')}", file=sys.stderr)
            if where is not None:
                print(f"Try '{where.command_path} --help' for help.", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    except api.reported_errors() as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`freshness dump | head`): stop quietly, as `cat` would.
        # Point stdout at devnull so the interpreter's final flush cannot raise again.
        _silence_stdout()
        return EXIT_SIGPIPE
    return int(code or 0)


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, io.UnsupportedOperation):  # stdout replaced by a non-file object
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
