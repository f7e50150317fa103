"""The ``traceq`` command line: a thin layer over :mod:`traceq.api`.

Errors from the :class:`~traceq.errors.TraceqError` hierarchy are translated at its edge, once,
into one line on stderr and an exit code (:mod:`traceq.cli_errors`; the codes are listed in
``traceq --help``); ``--debug`` shows the traceback instead.  Which files a command may write, and
how they are written, is :mod:`traceq.outputs`' business.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import polars as pl

from traceq import api, read_progress, schema
from traceq.cli_diff import check, diff
from traceq.cli_errors import TraceqGroup, exit_codes_epilog
from traceq.cli_options import (
    analysis_options,
    cache_of,
    cache_options,
    executor_of,
    format_option,
    loading,
    model_options,
    model_spec,
    output_path,
    paths_argument,
    text_writer,
)
from traceq.errors import InvalidArgumentError
from traceq.frame_text import frame_text
from traceq.outputs import check_outputs, write_output
from traceq.report.info_text import render_info
from traceq.report.render import renderer_for, shown
from traceq.report.text import render_text


@click.group(
    cls=TraceqGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    epilog=exit_codes_epilog(),
)
@click.version_option(package_name="traceq")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
def cli(debug: bool) -> None:
    """Where did the GPU step time go, and why?

    traceq reads Nsight Systems exports (.sqlite, or .nsys-rep with nsys on PATH) and PyTorch
    profiler traces (.json, .json.gz; a directory of ranks) into one event table.

    \b
    Examples:
      traceq report run.nsys-rep                    # summary, and run.report.html beside it
      traceq report ranks/ -o job.html --json job.json
      traceq report run.pt.trace.json.gz --json - --quiet | jq .findings
      traceq info run.sqlite
      traceq diff before.json.gz after.json.gz

    Colours: none when NO_COLOR is set (to anything) or TERM=dumb, or when stdout is not a
    terminal. Shell completion: eval "$(_TRACEQ_COMPLETE=bash_source traceq)" (zsh_source,
    fish_source for those shells).
    """
    if no_colour(os.environ):
        click.get_current_context().color = False


def no_colour(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for no colour: ``NO_COLOR`` set to anything non-empty
    (no-color.org), or ``TERM=dumb``."""
    return bool(env.get("NO_COLOR")) or env.get("TERM") == "dumb"


@cli.command()
@paths_argument
@format_option
@cache_options
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def info(paths: tuple[Path, ...], input_format: Any, cache_dir: Path | None, no_cache: bool, as_json: bool) -> None:
    """Metadata, rows per kind and import statistics of a trace."""
    trace = _load(paths, input_format, cache_dir, no_cache)
    summary = api.info(trace)
    if as_json:
        click.echo(json.dumps(summary, indent=2, sort_keys=True))
    else:
        click.echo(render_info(summary), nl=False)


_EVENT_COLUMNS = ("kind", "start_ns", "end_ns", "name", "pid", "tid", "device", "stream", "correlation", "rank")


@cli.command()
@paths_argument
@format_option
@cache_options
@click.option(
    "--kind", "kinds", multiple=True, type=click.Choice(schema.KINDS), help="Only rows of this kind (repeatable)."
)
@click.option("--name", "name_pattern", default=None, help="Only rows whose name matches this regex.")
@click.option(
    "--limit", type=click.IntRange(min=0), default=20, show_default=True, help="At most this many rows (0: all)."
)
@click.option("--all-columns", is_flag=True, help="Every column of the event table, not the usual few.")
@click.option(
    "--format", "output_format", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True
)
def events(
    paths: tuple[Path, ...],
    input_format: Any,
    cache_dir: Path | None,
    no_cache: bool,
    kinds: tuple[str, ...],
    name_pattern: str | None,
    limit: int,
    all_columns: bool,
    output_format: str,
) -> None:
    """Rows of the unified event table, in time order."""
    trace = _load(paths, input_format, cache_dir, no_cache)
    frame = trace.events
    if kinds:
        frame = frame.filter(pl.col("kind").is_in(kinds))
    if name_pattern is not None:
        try:
            frame = frame.filter(pl.col("name").cast(pl.String).str.contains(name_pattern))
        except pl.exceptions.ComputeError as exc:
            raise InvalidArgumentError(f"--name {name_pattern!r} is not a valid regex ({exc})") from exc
    if limit:
        frame = frame.head(limit)
    if not all_columns:
        frame = frame.select(_EVENT_COLUMNS)
    click.echo(frame_text(frame, output_format), nl=False)


@cli.command()
@paths_argument
@format_option
@cache_options
@click.option("-o", "--output", required=True, type=output_path, help="out.parquet, out.db (or .sqlite), out.json(.gz)")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists (never an input).")
def convert(
    paths: tuple[Path, ...], input_format: Any, cache_dir: Path | None, no_cache: bool, output: Path, force: bool
) -> None:
    """Write the event table as Parquet (.parquet), the named tables of `traceq sql` as an SQLite
    database (.db, .sqlite), or an annotated Chrome trace for Perfetto (.json, .json.gz: the events,
    an idle-by-cause and a step track per GPU, the findings)."""
    name = output.name.lower()
    kinds = {".parquet": "parquet", ".db": "sqlite", ".sqlite": "sqlite", ".json": "chrome", ".json.gz": "chrome"}
    kind = next((k for suffix, k in kinds.items() if name.endswith(suffix)), None)
    if kind is None:
        raise InvalidArgumentError(
            f"cannot write {output}: use a .parquet, .db, .sqlite, .json or .json.gz output name"
        )
    check_outputs([output], paths, force=force)
    trace = _load(paths, input_format, cache_dir, no_cache)
    if kind == "parquet":
        write_output(output, trace.to_parquet)
    elif kind == "sqlite":
        write_output(output, lambda path: api.to_sqlite(trace, path))
    else:
        document = api.annotate(trace)
        compress = name.endswith(".gz")
        write_output(output, lambda path: api.write_annotated_trace(path, document, compress=compress))
    click.echo(f"wrote {output} ({trace.events.height:,} rows)")


_SQL_FORMATS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".txt": "table"}


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, readable=False))
@click.argument("query")
@format_option
@cache_options
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "csv", "json", "parquet"]),
    default=None,
    help="Output format (default: by the -o suffix, else table).",
)
@click.option("-o", "--output", type=output_path, default=None, help="Write the result here (.csv, .json, .parquet).")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists (never an input).")
@analysis_options()
@click.option(
    "--phase-pattern",
    "phase_patterns",
    metavar="REGEX",
    multiple=True,
    help="Regex of the CPU ranges that are phases, for the phases table (repeatable).",
)
def sql(
    paths: tuple[Path, ...],
    query: str,
    input_format: Any,
    cache_dir: Path | None,
    no_cache: bool,
    output_format: str | None,
    output: Path | None,
    force: bool,
    step_pattern: str,
    input_pattern: str | None,
    all_steps: bool,
    comm_patterns: tuple[str, ...],
    no_default_comm_patterns: bool,
    phase_patterns: tuple[str, ...],
) -> None:
    """Run an SQL query (polars' SQL) over the trace's named tables: events, kernels, api, ranges, gpu_ranges,
    gaps, steps, devices, operators, phases, import_stats, sources (columns, examples: docs/sql.md).

    traceq sql run.pt.trace.json.gz "SELECT cause, sum(dur_ns) AS ns FROM gaps GROUP BY cause"
    """
    fmt = output_format or (_SQL_FORMATS.get(output.suffix.lower()) if output is not None else None) or "table"
    if fmt == "parquet" and output is None:
        raise InvalidArgumentError("--format parquet writes a file", hint="pass -o result.parquet")
    check_outputs([] if output is None else [output], paths, force=force)
    trace = _load(paths, input_format, cache_dir, no_cache)
    result = api.sql(
        trace,
        query,
        step_pattern=step_pattern,
        input_pattern=input_pattern,
        all_steps=all_steps,
        comm_patterns=comm_patterns,
        default_comm_patterns=not no_default_comm_patterns,
        phase_patterns=phase_patterns,
    )
    if output is None:
        click.echo(frame_text(result, fmt), nl=False)
        return
    parquet = fmt == "parquet"
    write_output(output, result.write_parquet if parquet else text_writer(frame_text(result, fmt)))
    click.echo(f"wrote {output} ({result.height:,} rows)")


def default_html_path(paths: tuple[Path, ...]) -> Path:
    """``<input>.report.html`` next to the (first) input: ``step.nsys-rep`` -> ``step.report.html``."""
    first = paths[0]
    name = first.name.rstrip("/")
    for suffix in (".gz", ".json", ".sqlite", ".nsys-rep", ".qdrep", ".parquet", ".db"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return first.parent / f"{name or 'trace'}.report.html"


@cli.command()
@paths_argument
@format_option
@cache_options
@click.option(
    "-o",
    "--output",
    type=output_path,
    default=None,
    help="Write the report here; .html, .json or .txt by suffix; - writes the HTML to stdout. "
    "Default: <input>.report.html next to the input.",
)
@click.option(
    "--json", "json_out", type=output_path, default=None, help="Also write the JSON report here; - for stdout."
)
@click.option("--no-html", is_flag=True, help="Print the summary only; write no HTML file.")
@click.option(
    "-q", "--quiet", is_flag=True, help="No summary, no progress line, no 'wrote' lines: only errors and warnings."
)
@click.option(
    "--cdn", is_flag=True, help="Link plotly.js from its CDN instead of inlining it (smaller file, needs network)."
)
@click.option("--force", is_flag=True, help="Overwrite output files that exist (never an input).")
@click.option(
    "--full-paths",
    is_flag=True,
    help="Show the trace files' paths as given on the page and in the summary (default: file names only).",
)
@analysis_options(listing=True)
@model_options
def report(
    paths: tuple[Path, ...],
    input_format: Any,
    cache_dir: Path | None,
    no_cache: bool,
    output: Path | None,
    json_out: Path | None,
    no_html: bool,
    quiet: bool,
    cdn: bool,
    force: bool,
    full_paths: bool,
    step_pattern: str,
    max_gaps: int,
    top_kernels: int,
    input_pattern: str | None,
    all_steps: bool,
    comm_patterns: tuple[str, ...],
    no_default_comm_patterns: bool,
    phase_patterns: tuple[str, ...],
    params: float | None,
    layers: int | None,
    attn_width: int | None,
    seq_len: int | None,
    tokens_per_step: float | None,
    flops_per_step: float | None,
    recompute: bool,
    gpus: int | None,
    peak_tflops: float | None,
) -> None:
    """Where the step time went, and why: findings, per-step breakdown, idle gaps and their causes.

    Prints a summary and writes a self-contained HTML report (or JSON/text, by the -o suffix).
    Several files (a job's ranks) are reported rank by rank: each worker loads and summarises one
    rank, so no process holds more than one rank's events.
    """
    stdout = [name for name, path in (("-o", output), ("--json", json_out)) if path == STDOUT]
    if len(stdout) > 1:
        raise click.UsageError("-o - and --json - both write to stdout: choose one")
    if no_html and output is not None and output != STDOUT and output.suffix.lower() in (".html", ".htm"):
        raise click.UsageError(f"--no-html and -o {output} contradict each other: drop one")
    outputs: list[Path] = []
    if output is not None and output != STDOUT:
        renderer_for(output)  # an unknown suffix fails before the import
        outputs.append(output)
    elif output is None and not no_html and not stdout:
        outputs.append(default_html_path(paths))
    if json_out is not None and json_out != STDOUT:
        outputs.append(json_out)
    check_outputs(outputs, paths, force=force)
    # With a report on stdout, the summary and the 'wrote' lines go to stderr (a pipe gets the report only).
    to_stderr = bool(stdout)
    ctx = click.get_current_context()
    ctx.meta["traceq.quiet"] = quiet
    model = model_spec(params, layers, attn_width, seq_len, tokens_per_step, flops_per_step, recompute)
    with loading(paths) as meta:
        # Several files are reported rank by rank: no process holds more than one rank's table.
        result = api.report(
            list(paths),
            step_pattern=step_pattern,
            max_gaps=max_gaps,
            top_kernels=top_kernels,
            input_pattern=input_pattern,
            all_steps=all_steps,
            comm_patterns=comm_patterns,
            default_comm_patterns=not no_default_comm_patterns,
            phase_patterns=phase_patterns,
            model=model,
            gpus=gpus,
            peak_tflops=peak_tflops,
            fmt=input_format,
            cache=cache_of(cache_dir, no_cache),
            executor=executor_of(meta),
        )
        # The progress line stays up (saying so) until the files are written, and is gone before the summary.
        read_progress.set_stage(read_progress.RENDERING)
        for path in outputs:  # the files first: a reader of stdout that goes away early loses no file
            write_output(path, text_writer(renderer_for(path, cdn=cdn, full_paths=full_paths).render(result)))
    if stdout:
        suffix = ".json" if stdout[0] == "--json" else ".html"
        sys.stdout.write(renderer_for(Path("stdout" + suffix), cdn=cdn, full_paths=full_paths).render(result))
        sys.stdout.flush()
    if quiet:
        return
    click.echo(render_text(shown(result, full_paths=full_paths)), nl=False, err=to_stderr)
    for path in outputs:
        click.echo(f"wrote {path}", err=to_stderr)


STDOUT = Path("-")
"""``-o -`` and ``--json -``: the report goes to stdout."""


def _load(paths: tuple[Path, ...], input_format: Any, cache_dir: Path | None, no_cache: bool) -> api.Trace:
    with loading(paths) as meta:
        return api.load(list(paths), fmt=input_format, cache=cache_of(cache_dir, no_cache), executor=executor_of(meta))


cli.add_command(diff)
cli.add_command(check)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="traceq")
