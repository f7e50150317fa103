"""The files derived from code and checked in, ``schemas/*.json`` and ``docs/cli.md``, and their writer.

Run ``python scripts/generate_docs.py`` after changing the event schema, the report or diff schema or
a command's ``--help``.  ``tests/test_generated_files.py`` loads this script, regenerates the files
in memory with :func:`generated_files` and fails until the checked-in copies are up to date, so
they cannot drift from the code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's traceq, even where another one is installed

import click  # noqa: E402

from traceq import schema  # noqa: E402


def cli_reference() -> str:
    """``docs/cli.md``: every command's ``--help``, as click renders it at 100 columns."""
    from traceq.cli import cli

    parts = [
        "# Command-line reference\n",
        "Generated from `--help` by `python scripts/generate_docs.py`; do not edit by hand.\n",
    ]
    settings = {**cli.context_settings, "terminal_width": 100}
    ctx = click.Context(cli, info_name="traceq", **settings)
    parts.append("## traceq\n\n```\n" + cli.get_help(ctx) + "\n```\n")
    for name in sorted(cli.list_commands(ctx)):
        command = cli.get_command(ctx, name)
        assert command is not None
        sub = click.Context(command, info_name=name, parent=ctx, **settings)
        parts.append(f"## traceq {name}\n\n```\n" + command.get_help(sub) + "\n```\n")
    parts.append(_exit_status())
    parts.append(OUTPUT_FILES)
    return "\n".join(parts)


def _exit_status() -> str:
    """The table of ``traceq.errors.ExitCode``: what ``traceq --help`` lists, with a word on each."""
    from traceq.errors import ExitCode

    rows = "".join(f"| {code.value} | `{code.name}` | {code.meaning} |\n" for code in ExitCode)
    return (
        "## Exit status\n\n"
        "Every command ends with one of these (`traceq.errors.ExitCode`). An error prints one line on\n"
        "stderr, `traceq: error: <file>: <what is wrong>. <what to do>`, and never a traceback (only\n"
        "with `--debug`); 70 is only ever a traceq bug, never bad input.\n\n"
        "| status | name | meaning |\n| ---: | --- | --- |\n" + rows
    )


OUTPUT_FILES = """## Output files

`report` (`-o`, `--json`, the default `<input>.report.html`) and `convert -o` check their outputs
before importing anything (`traceq/outputs.py`):

- An output that **is one of the inputs** is refused, with or without `--force`: the same path,
  the same file through a symbolic link, or a hard link to it (same device and inode), the trace
  files of a directory input included. `traceq convert x.parquet -o x.parquet` is refused too.
- An output **inside an input directory under a name a directory scan reads as a trace**
  (`traceq report ranks/ --json ranks/job.json`) is refused: the next run over `ranks/` would
  read it as a rank. Write it beside the directory, or under another suffix (`ranks/job.html`).
- An output that exists is replaced only with `--force`. Its directory must exist and be
  writable; otherwise one line names the output and the directory.
- Each output is written to a temporary file beside it and renamed over it when complete: a write
  that fails (a full disk) leaves the previous file as it was and nothing else behind. A symbolic
  link given as the output is written through (its target is replaced).
- The files are written before the summary is printed, so `traceq report … | head -1` still
  writes every file; traceq then stops quietly (exit status 141) when the reader of its output has
  gone.
- A file name starting with `-` reads as an option: pass it as `./-x.json` or after `--`
  (`traceq info -- -x.json`).
"""


def generated_files() -> dict[str, str]:
    """Repository-relative path -> expected content."""
    from traceq.diff.model import diff_json_schema
    from traceq.report.model import report_json_schema

    files = {
        "schemas/events.schema.json": schema.json_schema_text(),
        "schemas/report.schema.json": json.dumps(report_json_schema(), indent=2, sort_keys=True) + "\n",
        "schemas/diff.schema.json": json.dumps(diff_json_schema(), indent=2, sort_keys=True) + "\n",
        "docs/cli.md": cli_reference(),
    }
    return files


def main() -> None:
    for relative, text in generated_files().items():
        path = ROOT / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {relative}")


if __name__ == "__main__":
    main()
