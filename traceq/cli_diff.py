"""``traceq diff`` and ``traceq check``: two runs compared, and budgets guarded (``docs/diff.md``).

Thin, as the other commands: options become :func:`traceq.api.diff` and :func:`traceq.api.check`
calls; outputs are checked before any import and written whole (:mod:`traceq.outputs`).  ``check``
exits 0 when every budget held and 1 when one failed; bad input and usage stay 2, as everywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from traceq import api
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
    text_writer,
)
from traceq.diff.check import budgets_of, read_budget_file, render_check_text
from traceq.diff.junit import junit_xml
from traceq.diff.render import check_diff_output, render_diff, shown_diff
from traceq.diff.text import render_diff_text
from traceq.errors import ExitCode
from traceq.outputs import check_outputs, write_output

_side = click.Path(path_type=Path, readable=False)


@click.command()
@click.argument("before", type=_side)
@click.argument("after", type=_side)
@format_option
@cache_options
@click.option("-o", "--output", type=output_path, default=None, help="Write the diff here; .html, .json or .txt.")
@click.option("--json", "json_out", type=output_path, default=None, help="Also write the JSON diff here.")
@click.option(
    "--cdn", is_flag=True, help="Link plotly.js from its CDN instead of inlining it (smaller file, needs network)."
)
@click.option("--force", is_flag=True, help="Overwrite output files that exist (never an input).")
@click.option(
    "--full-paths",
    is_flag=True,
    help="Show the trace files' paths as given on the page and in the summary (default: file names only).",
)
@analysis_options()
@model_options
def diff(
    before: Path,
    after: Path,
    input_format: Any,
    cache_dir: Path | None,
    no_cache: bool,
    output: Path | None,
    json_out: Path | None,
    cdn: bool,
    force: bool,
    full_paths: bool,
    step_pattern: str,
    input_pattern: str | None,
    all_steps: bool,
    comm_patterns: tuple[str, ...],
    no_default_comm_patterns: bool,
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
    """Two runs compared: where the step time went that it no longer goes (or the reverse).

    BEFORE and AFTER are each a trace, a directory of ranks, or a saved JSON report (traceq report
    --json). Prints the step change decomposed into compute, exposed communication and idle by cause,
    the kernels matched by name, launches and syncs, findings and MFU, with a verdict; -o writes it
    as HTML (or JSON/text, by suffix). The options apply to both sides alike.
    """
    outputs = [p for p in (output, json_out) if p is not None]
    if output is not None:
        check_diff_output(output)  # an unknown suffix fails before the import
    check_outputs(outputs, (before, after), force=force)
    with loading((before, after)) as meta:
        result = api.diff(
            before,
            after,
            step_pattern=step_pattern,
            input_pattern=input_pattern,
            all_steps=all_steps,
            comm_patterns=comm_patterns,
            default_comm_patterns=not no_default_comm_patterns,
            model=model_spec(params, layers, attn_width, seq_len, tokens_per_step, flops_per_step, recompute),
            gpus=gpus,
            peak_tflops=peak_tflops,
            fmt=input_format,
            cache=cache_of(cache_dir, no_cache),
            executor=executor_of(meta),
        )
    if output is not None:
        write_output(output, text_writer(render_diff(result, output, cdn=cdn, full_paths=full_paths)))
    if json_out is not None:
        write_output(json_out, text_writer(render_diff(result, json_out.with_suffix(".json"))))
    click.echo(render_diff_text(shown_diff(result, full_paths=full_paths)), nl=False)
    for path in outputs:
        click.echo(f"wrote {path}")


@click.command()
@click.argument("trace", type=_side)
@click.option("--baseline", type=_side, default=None, help="The run to compare with (max_regression).")
@click.option(
    "--budget",
    "budget_file",
    type=click.Path(path_type=Path, readable=False),
    default=None,
    help="A TOML file of budgets (docs/diff.md); the options below win over its values.",
)
@click.option("--max-idle", metavar="SHARE", default=None, help="GPU idle, share of the steady step (10%).")
@click.option(
    "--max-exposed-comm", metavar="SHARE", default=None, help="Exposed communication, share of the steady step (5%)."
)
@click.option("--min-mfu", metavar="SHARE", default=None, help="Lowest MFU (0.40 or 40%; needs the model options).")
@click.option("--max-step-ms", metavar="MS", default=None, help="Longest median steady step, in ms.")
@click.option(
    "--max-regression", metavar="SHARE", default=None, help="Longest median steady step over the baseline's (3%)."
)
@click.option("--forbid", metavar="FINDING", multiple=True, help="A finding id that must not fire (repeatable).")
@click.option("--junit", type=output_path, default=None, help="Write the budgets as JUnit XML here (for CI).")
@click.option("--force", is_flag=True, help="Overwrite the JUnit file if it exists (never an input).")
@format_option
@cache_options
@analysis_options()
@model_options
def check(
    trace: Path,
    baseline: Path | None,
    budget_file: Path | None,
    max_idle: str | None,
    max_exposed_comm: str | None,
    min_mfu: str | None,
    max_step_ms: str | None,
    max_regression: str | None,
    forbid: tuple[str, ...],
    junit: Path | None,
    force: bool,
    input_format: Any,
    cache_dir: Path | None,
    no_cache: bool,
    step_pattern: str,
    input_pattern: str | None,
    all_steps: bool,
    comm_patterns: tuple[str, ...],
    no_default_comm_patterns: bool,
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
    """Budgets for CI: exit 0 when every one holds, 1 when one fails.

    TRACE (and --baseline) is a trace, a directory of ranks, or a saved JSON report. Shares are
    written 10% or 0.10. Prints one line per budget: held or FAILED, and the figure.
    """
    given = {
        "max_idle": max_idle,
        "max_exposed_comm": max_exposed_comm,
        "min_mfu": min_mfu,
        "max_step_ms": max_step_ms,
        "max_regression": max_regression,
        "forbid": list(forbid) or None,
    }
    budgets = budgets_of(given)
    if budget_file is not None:
        budgets = budgets.over(read_budget_file(budget_file))
    inputs = (trace, *((baseline,) if baseline is not None else ()))
    check_outputs([junit] if junit is not None else [], inputs, force=force)
    with loading(inputs) as meta:
        result = api.check(
            trace,
            budgets,
            baseline=baseline,
            step_pattern=step_pattern,
            input_pattern=input_pattern,
            all_steps=all_steps,
            comm_patterns=comm_patterns,
            default_comm_patterns=not no_default_comm_patterns,
            model=model_spec(params, layers, attn_width, seq_len, tokens_per_step, flops_per_step, recompute),
            gpus=gpus,
            peak_tflops=peak_tflops,
            fmt=input_format,
            cache=cache_of(cache_dir, no_cache),
            executor=executor_of(meta),
        )
    if junit is not None:
        write_output(junit, text_writer(junit_xml(result)))
    click.echo(render_check_text(result), nl=False)
    if junit is not None:
        click.echo(f"wrote {junit}")
    if not result.passed:
        click.get_current_context().exit(ExitCode.CHECK_FAILED)
