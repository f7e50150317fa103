"""Regenerate the synthetic traces shipped in ``sample_traces/``, byte for byte.

    python sample_traces/make_samples.py            # rewrite the samples next to this script
    python sample_traces/make_samples.py --check    # regenerate into a temp dir and compare bytes
    python sample_traces/make_samples.py --out DIR  # write them somewhere else

The samples come from :mod:`tracegen` presets (see ``sample_traces/README.md``); the
generator is deterministic, so ``--check`` fails only when the generator, a preset or the
committed files changed.  Exit status: 0 when up to date, 1 otherwise.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
from pathlib import Path

# tracegen, the generator, is not installed with traceq (it stays out of the wheel): import it from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tracegen import build_timeline, preset, write_kineto_json, write_kineto_ranks, write_nsys_sqlite
from tracegen.planned.scenarios.pairs import BY_PAIR

HERE = Path(__file__).resolve().parent
HEADLINE_PRESET = "host_sync"
"""The preset behind ``training_step.*``, the README's first command: a realistic DDP step whose
``.item()`` after every forward layer drains the GPU's queue (the host_sync finding must fire)."""
CONTROL_PRESET = "training_step"
"""The preset behind ``clean_step.*``, the control: the same step with nothing dominant (no finding fires)."""
SAMPLES = (
    "training_step.nsys.sqlite",
    "training_step.pt.trace.json.gz",
    "clean_step.nsys.sqlite",
    "clean_step.pt.trace.json.gz",
    "ranks/rank0.pt.trace.json.gz",
    "ranks/rank1.pt.trace.json.gz",
    "ranks/rank2.pt.trace.json.gz",
    "ranks/rank3.pt.trace.json.gz",
    "before_after/input_stall.pt.trace.json.gz",
    "before_after/input_ready.pt.trace.json.gz",
)
"""Every generated file, relative to the samples folder."""


def write_samples(directory: Path) -> list[Path]:
    """Write every sample into ``directory``; returns their paths (in :data:`SAMPLES` order)."""
    directory.mkdir(parents=True, exist_ok=True)
    for stem, name in (("training_step", HEADLINE_PRESET), ("clean_step", CONTROL_PRESET)):
        single = build_timeline(preset(name))
        write_nsys_sqlite(single, directory / f"{stem}.nsys.sqlite")
        write_kineto_json(single, directory / f"{stem}.pt.trace.json.gz", rank=0)
    write_kineto_ranks(build_timeline(preset("straggler_job")), directory / "ranks")
    # traceq diff's example: issue 15's planned pair "input stall fixed" (the change known to the ns).
    pair = BY_PAIR["input_stall_fixed"]
    for scenario in (pair.before, pair.after):
        scenario.build().write(directory / "before_after", "kineto")
    return [directory / name for name in SAMPLES]


def check(committed: Path) -> list[str]:
    """Regenerate into a temporary folder; one line per sample that differs from ``committed``."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="traceq-samples-") as tmp:
        for fresh in write_samples(Path(tmp)):
            name = fresh.relative_to(tmp).as_posix()
            old = committed / name
            if not old.exists():
                problems.append(f"{name}: missing (run sample_traces/make_samples.py)")
            elif old.read_bytes() != fresh.read_bytes():
                same_payload = name.endswith(".gz") and gzip.decompress(old.read_bytes()) == gzip.decompress(
                    fresh.read_bytes()
                )
                why = "only the gzip stream differs (a different zlib build?)" if same_payload else "content differs"
                problems.append(f"{name}: out of date, {why} (run sample_traces/make_samples.py)")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare regenerated samples with the committed ones")
    parser.add_argument("--out", type=Path, default=HERE, help="folder to write into (default: this script's folder)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check(args.out)
        for line in problems:
            print(line, file=sys.stderr)
        if not problems:
            print(f"{len(SAMPLES)} samples up to date")
        return 1 if problems else 0
    for path in write_samples(args.out):
        print(f"{path.stat().st_size:>9,d}  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
