"""The ``traceq`` command line: a thin layer over :mod:`traceq.api`.

Errors from the :class:`~traceq.errors.TraceqError` hierarchy are translated at its edge, once,
into one line on stderr and an exit code (:mod:`traceq.cli_errors`; the codes are listed in
``traceq --help``); ``--debug`` shows the traceback instead.  Which files a command may write, and
how they are written, is :mod:`traceq.outputs`' business.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click
import polars as pl

from traceq import api, schema
from traceq.analyses import DEFAULT_MAX_GAPS, DEFAULT_STEP_PATTERN, DEFAULT_TOP_KERNELS
from traceq.cache import (
    CACHE_DIR_ENV,
    CACHE_VERIFY_ENV,
    VERIFY_MODES,
    Cache,
    CacheWarning,
    default_cache_dir,
)
from traceq.cli_errors import TraceqGroup, exit_codes_epilog
from traceq.errors import InvalidArgumentError
from traceq.executors import ExecutorSpec
from traceq.importers import FORMATS
from traceq.importers.compiled import CompiledReadersWarning
from traceq.outputs import check_outputs, write_output
from traceq.progress import import_progress
from traceq.report.info_text import render_info
from traceq.report.render import renderer_for
from traceq.report.text import render_text
from traceq.units import CONTROL_ESCAPES

# readable=False: an unreadable input is the loader's one-line error, which names the file.
_paths = click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, readable=False))
# Outputs are checked by traceq.outputs, before the import: no click checks, no click wording.
_output_path = click.Path(path_type=Path, readable=False)
_format_opt = click.option(
    "--input-format",
    "input_format",
    type=click.Choice(FORMATS),
    default=None,
    help="Read the inputs as this format instead of sniffing it.",
)


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep a loading option in the context, so commands need not pass it along by hand."""
    assert param.name is not None
    ctx.meta[f"traceq.{param.name}"] = value
    return value


def _cache_opts(command: Callable[..., None]) -> Callable[..., None]:
    """``--cache-dir``, ``--no-cache``, ``--cache-verify``, ``--jobs`` and ``--scheduler``, for every
    command that loads traces."""
    command = click.option(
        "--cache-verify",
        type=click.Choice(VERIFY_MODES),
        default=None,
        expose_value=False,
        callback=_remember,
        help=f"How a cache entry's source is checked: 'sampled' (size, mtime, first and last MiB) or "
        f"'full' (every byte; about 1 s per GB). Default: ${CACHE_VERIFY_ENV}, else sampled.",
    )(command)
    command = click.option(
        "--scheduler",
        metavar="URL",
        default=None,
        expose_value=False,
        callback=_remember,
        help="Import the ranks on this Dask cluster (tcp://host:8786); needs traceq[dask].",
    )(command)
    command = click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        expose_value=False,
        callback=_remember,
        help="Import several files in N processes (default: one per core; 1: in this process).",
    )(command)
    command = click.option(
        "--no-cache", is_flag=True, help="Import every input afresh; read and write no cache entries."
    )(command)
    return click.option(
        "--cache-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=None,
        help=f"Keep imported tables here (default: ${CACHE_DIR_ENV}, else ~/.cache/traceq).",
    )(command)


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
    """


@cli.command()
@_paths
@_format_opt
@_cache_opts
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
@_paths
@_format_opt
@_cache_opts
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
    if output_format == "csv":
        click.echo(frame.write_csv(), nl=False)
    elif output_format == "json":
        rows = frame.with_columns(pl.col(pl.Categorical, pl.Enum).cast(pl.String)).to_dicts()
        click.echo(json.dumps(rows, indent=1))
    else:
        # The terminal gets the control characters of names as escapes (units.printable).
        text = pl.col(pl.Categorical, pl.Enum, pl.String).cast(pl.String)
        frame = frame.with_columns(text.str.replace_many(list(CONTROL_ESCAPES), list(CONTROL_ESCAPES.values())))
        with pl.Config(
            tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=60, tbl_width_chars=200, tbl_hide_dataframe_shape=True
        ):
            click.echo(str(frame))


@cli.command()
@_paths
@_format_opt
@_cache_opts
@click.option("-o", "--output", required=True, type=_output_path, help="out.parquet or out.db")
@click.option("--force", is_flag=True, help="Overwrite the output if it exists (never an input).")
def convert(
    paths: tuple[Path, ...], input_format: Any, cache_dir: Path | None, no_cache: bool, output: Path, force: bool
) -> None:
    """Write the event table as Parquet (.parquet) or an SQLite database (.db, .sqlite)."""
    suffix = output.suffix.lower()
    if suffix not in (".parquet", ".db", ".sqlite"):
        raise InvalidArgumentError(f"cannot write {output}: use a .parquet, .db or .sqlite output name")
    check_outputs([output], paths, force=force)
    trace = _load(paths, input_format, cache_dir, no_cache)
    write_output(output, trace.to_parquet if suffix == ".parquet" else trace.to_sqlite)
    click.echo(f"wrote {output} ({trace.events.height:,} rows)")


def default_html_path(paths: tuple[Path, ...]) -> Path:
    """``<input>.report.html`` next to the (first) input: ``step.nsys-rep`` -> ``step.report.html``."""
    first = paths[0]
    name = first.name.rstrip("/")
    for suffix in (".gz", ".json", ".sqlite", ".nsys-rep", ".qdrep", ".parquet", ".db"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return first.parent / f"{name or 'trace'}.report.html"


@cli.command()
@_paths
@_format_opt
@_cache_opts
@click.option(
    "-o",
    "--output",
    type=_output_path,
    default=None,
    help="Write the report here; .html, .json or .txt by suffix. Default: <input>.report.html next to the input.",
)
@click.option("--json", "json_out", type=_output_path, default=None, help="Also write the JSON report here.")
@click.option("--no-html", is_flag=True, help="Print the summary only; write no HTML file.")
@click.option(
    "--cdn", is_flag=True, help="Link plotly.js from its CDN instead of inlining it (smaller file, needs network)."
)
@click.option("--force", is_flag=True, help="Overwrite output files that exist (never an input).")
@click.option(
    "--step-pattern",
    default=DEFAULT_STEP_PATTERN,
    show_default=True,
    help="Regex (case-insensitive) naming the CPU-side ranges that delimit steps.",
)
@click.option(
    "--max-gaps", type=click.IntRange(min=0), default=DEFAULT_MAX_GAPS, show_default=True, help="Longest gaps listed."
)
@click.option(
    "--top-kernels",
    type=click.IntRange(min=0),
    default=DEFAULT_TOP_KERNELS,
    show_default=True,
    help="Kernels listed, by total GPU time.",
)
@click.option(
    "--input-pattern",
    metavar="REGEX",
    default=None,
    help="Regex naming your own data-loading ranges (NVTX, record_function), besides PyTorch's DataLoader.",
)
@click.option("--all-steps", is_flag=True, help="Keep the warm-up steps in the steady state (findings, MFU).")
@click.option(
    "--comm-pattern",
    "comm_patterns",
    metavar="REGEX",
    multiple=True,
    help="Regex of more communication kernels, searched in the kernel name (repeatable; adds to the defaults).",
)
@click.option(
    "--no-default-comm-patterns",
    is_flag=True,
    help="Count only --comm-pattern kernels as communication, not the default NCCL, DeepEP, ... list.",
)
@click.option("--params", type=float, default=None, help="MFU: parameters in matmuls (Ψ), e.g. 6.74e9.")
@click.option("--layers", type=click.IntRange(min=1), default=None, help="MFU: transformer layers (L).")
@click.option(
    "--attn-width", type=click.IntRange(min=1), default=None, help="MFU: attention width, heads × head dim (h)."
)
@click.option("--seq-len", type=click.IntRange(min=1), default=None, help="MFU: sequence length (s).")
@click.option("--tokens-per-step", type=float, default=None, help="MFU: global tokens per step, over all GPUs.")
@click.option(
    "--flops-per-step", type=float, default=None, help="MFU: global model FLOPs per step, instead of the shape."
)
@click.option("--recompute", is_flag=True, help="MFU: full activation recomputation; also report HFU (4/3 of MFU).")
@click.option(
    "--gpus", type=click.IntRange(min=1), default=None, help="MFU: GPUs sharing the tokens (default: world size)."
)
@click.option(
    "--peak-tflops", type=float, default=None, help="MFU: dense peak TFLOP/s of one GPU (default: by GPU name)."
)
def report(
    paths: tuple[Path, ...],
    input_format: Any,
    cache_dir: Path | None,
    no_cache: bool,
    output: Path | None,
    json_out: Path | None,
    no_html: bool,
    cdn: bool,
    force: bool,
    step_pattern: str,
    max_gaps: int,
    top_kernels: int,
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
    """Where the step time went, and why: findings, per-step breakdown, idle gaps and their causes.

    Prints a summary and writes a self-contained HTML report (or JSON/text, by the -o suffix).
    Several files (a job's ranks) are reported rank by rank: each worker loads and summarises one
    rank, so no process holds more than one rank's events.
    """
    outputs: list[Path] = []
    if output is not None:
        renderer_for(output)  # an unknown suffix fails before the import
        outputs.append(output)
    elif not no_html:
        outputs.append(default_html_path(paths))
    if json_out is not None:
        outputs.append(json_out)
    check_outputs(outputs, paths, force=force)
    model = None
    shape = (params, layers, attn_width, seq_len, tokens_per_step, flops_per_step)
    if any(v is not None for v in shape) or recompute:
        model = api.ModelSpec(
            params=params,
            layers=layers,
            attn_width=attn_width,
            seq_len=seq_len,
            tokens_per_step=tokens_per_step,
            flops_per_step=flops_per_step,
            recompute=recompute,
        )
    with _loading(paths) as meta:
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
            model=model,
            gpus=gpus,
            peak_tflops=peak_tflops,
            fmt=input_format,
            cache=_cache(cache_dir, no_cache),
            executor=_executor(meta),
        )
    for path in outputs:  # the files first: a reader of stdout that goes away early loses no file
        write_output(path, _text_writer(renderer_for(path, cdn=cdn).render(result)))
    click.echo(render_text(result), nl=False)
    for path in outputs:
        click.echo(f"wrote {path}")


def _text_writer(text: str) -> Callable[[Path], object]:
    return lambda path: path.write_text(text, encoding="utf-8")


def _load(paths: tuple[Path, ...], input_format: Any, cache_dir: Path | None, no_cache: bool) -> api.Trace:
    with _loading(paths) as meta:
        return api.load(list(paths), fmt=input_format, cache=_cache(cache_dir, no_cache), executor=_executor(meta))


def _executor(meta: dict[str, Any]) -> ExecutorSpec:
    """Where ``--jobs`` and ``--scheduler`` say the work runs (one of them at most)."""
    jobs, scheduler = meta.get("traceq.jobs"), meta.get("traceq.scheduler")
    if jobs is not None and scheduler is not None:
        raise InvalidArgumentError(
            "jobs sets the size of the local process pool; on a Dask cluster its workers decide",
            hint="drop --jobs or --scheduler",
        )
    spec: ExecutorSpec = scheduler if scheduler is not None else jobs
    return spec


def _cache(cache_dir: Path | None, no_cache: bool) -> Cache | bool:
    """The cache the options ask for (``--cache-verify`` is read from the context, see :func:`_remember`)."""
    verify = click.get_current_context().meta.get("traceq.cache_verify")
    if no_cache and (cache_dir is not None or verify is not None):
        given = "--cache-dir" if cache_dir is not None else "--cache-verify"
        raise InvalidArgumentError(f"pass {given} or --no-cache, not both")
    if no_cache:
        return False
    if cache_dir is None and verify is None:
        return True  # the default cache, as each worker finds it (Cache.default)
    return Cache(cache_dir if cache_dir is not None else default_cache_dir(), verify=verify)


@contextmanager
def _loading(paths: tuple[Path, ...]) -> Iterator[dict[str, Any]]:
    """Around loading ``paths``: the progress line, and cache warnings and the compiled readers' absence
    as one line each on stderr.
    Yields the context's loading options (``traceq.jobs``, ``traceq.scheduler``; see :func:`_executor`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        warnings.simplefilter("always", CompiledReadersWarning)
        with import_progress(list(paths)):
            yield click.get_current_context().meta
    said: set[str] = set()  # (each worker process warns of missing compiled readers once)
    for warning in caught:
        if issubclass(warning.category, (CacheWarning, CompiledReadersWarning)):
            if str(warning.message) not in said:
                said.add(str(warning.message))
                click.echo(f"traceq: warning: {warning.message}", err=True)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="traceq")
