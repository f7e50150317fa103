"""Files derived from code and checked in: the JSON schemas and the CLI reference.

``scripts/generate_docs.py`` writes them; a test regenerates them in memory and compares, so the
checked-in copies cannot drift from the code.
"""

from __future__ import annotations

import json

import click

from traceq import schema


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
    return "\n".join(parts)


def generated_files() -> dict[str, str]:
    """Repository-relative path -> expected content."""
    from traceq.report.model import report_json_schema

    files = {
        "schemas/events.schema.json": schema.json_schema_text(),
        "schemas/report.schema.json": json.dumps(report_json_schema(), indent=2, sort_keys=True) + "\n",
        "docs/cli.md": cli_reference(),
    }
    return files
