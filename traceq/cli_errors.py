"""The command line's edge: what ends a command, turned into one line on stderr and an exit code.

:class:`TraceqGroup` runs every ``traceq`` command and translates, once: a
:class:`~traceq.errors.TraceqError` into ``traceq: error: <file>: <what is wrong>. <what to do>``
(``traceq: internal error:`` for the ones that are traceq bugs) and its
:class:`~traceq.errors.ExitCode`; any other exception into ``traceq: internal error:`` and 70; Ctrl-C
into 130; a reader of stdout that went away (``| head``) into a quiet 141; and an existing file
whose name starts with ``-``, which click reads as an unknown option, into a line naming the file.
``--debug`` lets tracebacks through instead.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from traceq.errors import ExitCode, InvalidArgumentError, TraceqError


def exit_codes_epilog() -> str:
    """The exit codes, for ``traceq --help`` (and so for ``docs/cli.md``)."""
    lines = ["\b", "Exit status:", *(f"  {code.value:<4} {code.meaning}" for code in ExitCode)]
    return "\n".join(lines)


class TraceqGroup(click.Group):
    """A click group that turns traceq errors into one line and an exit code."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["traceq.argv"] = list(args)  # kept to name a file that click took for an option
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        debug = "--debug" in sys.argv[1:] or bool(ctx.params.get("debug"))
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_stdout()
            ctx.exit(ExitCode.STDOUT_CLOSED)
        except TraceqError as exc:
            if debug:
                raise
            if exc.exit_code == ExitCode.INTERNAL:
                click.echo(f"traceq: internal error: {exc.one_line()} {_REPORT_IT}", err=True)
            else:
                click.echo(f"traceq: error: {exc.one_line()}", err=True)
            ctx.exit(exc.exit_code)
        except click.NoSuchOption as exc:
            named = _file_taken_for_an_option(ctx.meta.get("traceq.argv", []), exc.option_name)
            if named is None:
                raise
            click.echo(f"traceq: error: {named.one_line()}", err=True)
            ctx.exit(named.exit_code)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except KeyboardInterrupt:
            click.echo("traceq: interrupted", err=True)
            ctx.exit(ExitCode.INTERRUPTED)
        except Exception as exc:
            if debug:
                raise
            click.echo(f"traceq: internal error: {type(exc).__name__}: {exc} {_REPORT_IT}", err=True)
            ctx.exit(ExitCode.INTERNAL)


_REPORT_IT = "(rerun with --debug for the traceback and report it)"


def _quiet_stdout() -> None:
    """Stdout's reader is gone: point stdout at /dev/null, so that nothing tries to write to the pipe
    again (Python's flush at exit would print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (stdout replaced in-process)
        pass


def _file_taken_for_an_option(argv: list[str], option: str) -> TraceqError | None:
    """The error for an existing file whose name click read as ``option`` (it starts with '-'), if any."""
    for arg in argv:
        if arg == "--":
            break
        if arg.startswith(option) and os.path.lexists(arg):
            return InvalidArgumentError(
                "starts with '-', so it reads as an option", path=arg, hint=f"pass it as ./{arg}, or after --"
            )
    return None
