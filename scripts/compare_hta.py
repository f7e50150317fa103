"""Print traceq's figures next to HTA 0.5.0's published ones for the real Kineto samples.

Usage: ``python scripts/compare_hta.py [../shared/sample_traces] [--hta-filter]``.  HTA's numbers are copied from
the SOURCE.md files beside the traces (computed there with HTA 0.5.0 defaults, in µs).  traceq is
run with a step pattern that matches nothing, so each device's window is its first to last GPU
activity: the same span HTA calls ``kernel_time`` before its own filtering.  docs/analyses.md
holds the resulting table and explains the differences.  ``--hta-filter`` first applies HTA's
load filter (drop CPU events from the last ProfilerStep on, then GPU ops whose launch was
dropped) to show that the remaining differences are that filter.
"""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl

import traceq

HTA = {  # file -> (kernel_time, idle, comm-comp overlap %), µs, from SOURCE.md
    "hta/df_index_resolver/df_index_resolver.json.gz": (1_396_669, 643_612, 0.0),
    "hta/trace_diff/control/control.json.gz": (383_404, 62_119, 47.03),
    "hta/trace_diff/test/test.json.gz": (628_371, 46_910, 68.8),
    "hta/negative_queue_length_values_check/rank0.json.gz": (1_016_554, 705_853, 1.37),
    "hta/nccl_parser_config/nccl_data.json.gz": (435_586, 338_781, 14.31),
    "kineto/be239c04/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz": (830_494, 327_463, None),
    "kineto/be239c04/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz": (677_173, 164_699, None),
    "kineto/02522842/resnet50_autograd_api_num_workers_0/worker0.pt.trace.json.gz": (5_243_667, 4_264_063, None),
}


def hta_filtered(trace: traceq.Trace) -> traceq.Trace:
    """HTA's load filter: drop CPU events from the last ProfilerStep on, then GPU ops without a kept launch."""
    ev = trace.events
    steps = ev.filter((pl.col("kind") == "range") & pl.col("name").cast(pl.String).str.starts_with("ProfilerStep#"))
    if steps.height >= 2:
        cut = steps["start_ns"].max()
        cpu = ev.filter(pl.col("device").is_null() & (pl.col("start_ns") < cut))
    else:
        cpu = ev.filter(pl.col("device").is_null())
    kept = cpu.filter(pl.col("kind") == "cuda_api").select("pid", "correlation").unique()
    gpu = ev.filter(pl.col("device").is_not_null()).join(kept, on=["pid", "correlation"], how="semi")
    return traceq.Trace(events=pl.concat([cpu, gpu]), import_stats=trace.import_stats, meta=trace.meta)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = Path(args[0] if args else "../shared/sample_traces")
    filtered = "--hta-filter" in sys.argv
    print("| trace | HTA span µs | traceq span µs | HTA idle µs | traceq idle µs | HTA overlap % | traceq overlap % |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for rel, (hta_span, hta_idle, hta_overlap) in HTA.items():
        trace = traceq.load(root / rel)
        if filtered:
            trace = hta_filtered(trace)
        report = traceq.report(trace, step_pattern="a^")
        devices = [d for d in report.devices if d.kernels]
        span = sum(d.dur_ns for d in devices) / 1000
        idle = sum(d.idle_ns for d in devices) / 1000
        comm = sum(d.comm_ns for d in devices)
        hidden = comm - sum(d.exposed_comm_ns for d in devices)
        overlap = f"{100 * hidden / comm:.2f}" if comm else "n/a"
        hta_o = "n/a" if hta_overlap is None else f"{hta_overlap:.2f}"
        name = rel.split("/")[-1]
        print(f"| {name} | {hta_span:,} | {span:,.0f} | {hta_idle:,} | {idle:,.0f} | {hta_o} | {overlap} |")


if __name__ == "__main__":
    main()
