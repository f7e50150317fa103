"""What the ``traceq`` commands share: the input and output arguments, the loading options (the
cache, ``--jobs``, ``--scheduler``) and how they choose an executor and a cache, the progress line,
and the analysis options (steps, communication, the model for MFU) that ``report``, ``diff`` and
``check`` take alike.  Commands live in :mod:`traceq.cli` and :mod:`traceq.cli_diff`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from traceq import api
from traceq.analyses import DEFAULT_MAX_GAPS, DEFAULT_STEP_PATTERN, DEFAULT_TOP_KERNELS
from traceq.cache import CACHE_DIR_ENV, CACHE_VERIFY_ENV, VERIFY_MODES, Cache, CacheWarning, default_cache_dir
from traceq.errors import InvalidArgumentError
from traceq.executors import ExecutorSpec
from traceq.importers import FORMATS
from traceq.importers.compiled import CompiledReadersWarning
from traceq.progress import import_progress

Decorator = Callable[[Callable[..., None]], Callable[..., None]]

# readable=False: an unreadable input is the loader's one-line error, which names the file.
paths_argument = click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path, readable=False))
# Outputs are checked by traceq.outputs, before the import: no click checks, no click wording.
output_path = click.Path(path_type=Path, readable=False)
format_option = click.option(
    "--input-format",
    "input_format",
    type=click.Choice(FORMATS),
    default=None,
    help="Read the inputs as this format instead of sniffing it.",
)


def remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Keep a loading option in the context, so commands need not pass it along by hand."""
    assert param.name is not None
    ctx.meta[f"traceq.{param.name}"] = value
    return value


def cache_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--cache-dir``, ``--no-cache``, ``--cache-verify``, ``--jobs`` and ``--scheduler``, for every
    command that loads traces."""
    command = click.option(
        "--cache-verify",
        type=click.Choice(VERIFY_MODES),
        default=None,
        expose_value=False,
        callback=remember,
        help=f"How a cache entry's source is checked: 'sampled' (size, mtime, first and last MiB) or "
        f"'full' (every byte; about 0.7 s per GB). Default: ${CACHE_VERIFY_ENV}, else sampled.",
    )(command)
    command = click.option(
        "--scheduler",
        metavar="URL",
        default=None,
        expose_value=False,
        callback=remember,
        help="Import the ranks on this Dask cluster (tcp://host:8786); needs traceq[dask].",
    )(command)
    command = click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=1),
        default=None,
        expose_value=False,
        callback=remember,
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


def _apply(options: Sequence[Decorator]) -> Decorator:
    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


def analysis_options(*, listing: bool = False) -> Decorator:
    """The step and communication options of ``traceq report`` (``listing``: with ``--max-gaps``,
    ``--top-kernels`` and ``--phase-pattern``, which only a report lists by)."""
    step = [
        click.option(
            "--step-pattern",
            default=DEFAULT_STEP_PATTERN,
            show_default=True,
            help="Regex (case-insensitive) naming the CPU-side ranges that delimit steps.",
        ),
    ]
    lists = [
        click.option(
            "--max-gaps",
            type=click.IntRange(min=0),
            default=DEFAULT_MAX_GAPS,
            show_default=True,
            help="Longest gaps listed.",
        ),
        click.option(
            "--top-kernels",
            type=click.IntRange(min=0),
            default=DEFAULT_TOP_KERNELS,
            show_default=True,
            help="Kernels listed, by total GPU time.",
        ),
        click.option(
            "--phase-pattern",
            "phase_patterns",
            metavar="REGEX",
            multiple=True,
            help="Regex of the CPU ranges, ops or Python frames that are phases (repeatable; default: every CPU "
            "range that is no step, operator or module range).",
        ),
    ]
    rest = [
        click.option(
            "--input-pattern",
            metavar="REGEX",
            default=None,
            help="Regex naming your own data-loading ranges (NVTX, record_function), besides PyTorch's DataLoader.",
        ),
        click.option("--all-steps", is_flag=True, help="Keep the warm-up steps in the steady state (findings, MFU)."),
        click.option(
            "--comm-pattern",
            "comm_patterns",
            metavar="REGEX",
            multiple=True,
            help="Regex of more communication kernels, searched in the kernel name (repeatable; adds to the defaults).",
        ),
        click.option(
            "--no-default-comm-patterns",
            is_flag=True,
            help="Count only --comm-pattern kernels as communication, not the default NCCL, DeepEP, ... list.",
        ),
    ]
    return _apply([*step, *(lists if listing else []), *rest])


def model_options(command: Callable[..., None]) -> Callable[..., None]:
    """The model options of MFU (``docs/mfu.md``)."""
    return _apply(
        [
            click.option("--params", type=float, default=None, help="MFU: parameters in matmuls (Ψ), e.g. 6.74e9."),
            click.option("--layers", type=click.IntRange(min=1), default=None, help="MFU: transformer layers (L)."),
            click.option(
                "--attn-width",
                type=click.IntRange(min=1),
                default=None,
                help="MFU: attention width, heads × head dim (h).",
            ),
            click.option("--seq-len", type=click.IntRange(min=1), default=None, help="MFU: sequence length (s)."),
            click.option(
                "--tokens-per-step", type=float, default=None, help="MFU: global tokens per step, over all GPUs."
            ),
            click.option(
                "--flops-per-step",
                type=float,
                default=None,
                help="MFU: global model FLOPs per step, instead of the shape.",
            ),
            click.option(
                "--recompute", is_flag=True, help="MFU: full activation recomputation; also report HFU (4/3 of MFU)."
            ),
            click.option(
                "--gpus",
                type=click.IntRange(min=1),
                default=None,
                help="MFU: GPUs sharing the tokens (default: world size).",
            ),
            click.option(
                "--peak-tflops",
                type=float,
                default=None,
                help="MFU: dense peak TFLOP/s of one GPU (default: by GPU name).",
            ),
        ]
    )(command)


def model_spec(
    params: float | None,
    layers: int | None,
    attn_width: int | None,
    seq_len: int | None,
    tokens_per_step: float | None,
    flops_per_step: float | None,
    recompute: bool,
) -> api.ModelSpec | None:
    """The model the MFU options describe; None when none is given."""
    shape = (params, layers, attn_width, seq_len, tokens_per_step, flops_per_step)
    if all(v is None for v in shape) and not recompute:
        return None
    return api.ModelSpec(
        params=params,
        layers=layers,
        attn_width=attn_width,
        seq_len=seq_len,
        tokens_per_step=tokens_per_step,
        flops_per_step=flops_per_step,
        recompute=recompute,
    )


def executor_of(meta: dict[str, Any]) -> ExecutorSpec:
    """Where ``--jobs`` and ``--scheduler`` say the work runs (one of them at most)."""
    jobs, scheduler = meta.get("traceq.jobs"), meta.get("traceq.scheduler")
    if jobs is not None and scheduler is not None:
        raise InvalidArgumentError(
            "jobs sets the size of the local process pool; on a Dask cluster its workers decide",
            hint="drop --jobs or --scheduler",
        )
    spec: ExecutorSpec = scheduler if scheduler is not None else jobs
    return spec


def cache_of(cache_dir: Path | None, no_cache: bool) -> Cache | bool:
    """The cache the options ask for (``--cache-verify`` is read from the context, see :func:`remember`)."""
    verify = click.get_current_context().meta.get("traceq.cache_verify")
    if no_cache and (cache_dir is not None or verify is not None):
        given = "--cache-dir" if cache_dir is not None else "--cache-verify"
        raise InvalidArgumentError(f"pass {given} or --no-cache, not both")
    if no_cache:
        return False
    # The entries of fresh imports are written behind: when the command closes, after its output
    # is out (a copy sent to a worker process writes its own entries at once).
    store = Cache(cache_dir if cache_dir is not None else default_cache_dir(), verify=verify, write_behind=True)
    click.get_current_context().call_on_close(lambda: _finish_writes(store))
    return store


def _finish_writes(store: Cache) -> None:
    """Write the entries ``store`` left behind; their problems as one warning line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        store.wait()
    _say_warnings(caught)


@contextmanager
def loading(paths: tuple[Path, ...]) -> Iterator[dict[str, Any]]:
    """Around loading ``paths``: the progress line, and cache warnings and the compiled readers'
    absence as one line each on stderr.
    Yields the context's loading options (``traceq.jobs``, ``traceq.scheduler``; see :func:`executor_of`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CacheWarning)
        warnings.simplefilter("always", CompiledReadersWarning)
        quiet = bool(click.get_current_context().meta.get("traceq.quiet"))
        with import_progress(list(paths), enabled=not quiet):
            yield click.get_current_context().meta
    _say_warnings(caught)


def _say_warnings(caught: list[warnings.WarningMessage]) -> None:
    """Cache warnings and the compiled readers' absence as one ``traceq: warning:`` line each (the
    same message once), any other warning as Python shows it."""
    said: set[str] = set()  # (each worker process warns of missing compiled readers once)
    for warning in caught:
        if issubclass(warning.category, (CacheWarning, CompiledReadersWarning)):
            if str(warning.message) not in said:
                said.add(str(warning.message))
                click.echo(f"traceq: warning: {warning.message}", err=True)
        else:
            warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)


def text_writer(text: str) -> Callable[[Path], object]:
    """What :func:`traceq.outputs.write_output` calls to write ``text`` as UTF-8."""
    return lambda path: path.write_text(text, encoding="utf-8")
