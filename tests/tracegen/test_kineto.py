"""The Kineto writer (``tracegen.kineto``): plain JSON with the keys, tracks and links readers need."""

from __future__ import annotations

import gzip
import re
from collections import Counter
from pathlib import Path

from tracegen import KINETO_BASE_TIME_NS

from .planted import KINETO_KIND, load_kineto, timeline


def test_kineto_trace_is_plain_json_with_the_keys_readers_need(files: dict[str, Path]) -> None:
    data = load_kineto(files["kineto"])
    assert data["schemaVersion"] == 1
    assert data["distributedInfo"] | {"pg_config": None} == {
        "backend": "nccl",
        "rank": 0,
        "world_size": 8,
        "pg_count": 1,
        "pg_config": None,
        "nccl_version": data["distributedInfo"]["nccl_version"],
    }
    assert data["baseTimeNanoseconds"] == KINETO_BASE_TIME_NS
    assert data["deviceProperties"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert data["deviceProperties"][0]["numSms"] == 132
    keys = list(data)
    assert keys.index("baseTimeNanoseconds") < keys.index("traceEvents")  # streaming readers get the base first
    cats = Counter(e.get("cat") for e in data["traceEvents"])
    assert set(KINETO_KIND) | {"ac2g", "Trace", None} == set(cats)
    names = {e["name"] for e in data["traceEvents"] if e["ph"] == "M"}
    assert names >= {"process_name", "thread_name", "process_labels"}
    with gzip.open(files["kineto"], "rt") as fh:
        text = fh.read()
    numbers = re.findall(r'"(?:ts|dur)": ([0-9.]+)', text)
    assert numbers and all(re.fullmatch(r"\d+\.\d{3}", n) for n in numbers)  # µs with exactly 3 decimals


def test_kineto_gpu_rows_sit_on_device_and_stream_and_are_linked_to_their_launch(files: dict[str, Path]) -> None:
    proc = timeline("training_step").processes[0]
    events = load_kineto(files["kineto"])["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "cuda_sync")]
    assert all(e["pid"] == e["args"]["device"] == proc.device and e["tid"] == e["args"]["stream"] for e in gpu)
    by_corr = {e["args"]["correlation"]: e for e in gpu}
    launches = {e["args"]["correlation"]: e for e in events if e.get("cat") == "cuda_runtime"}
    starts = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert starts.keys() == ends.keys() == by_corr.keys()
    for corr, g in by_corr.items():
        assert ends[corr]["ts"] == g["ts"] and ends[corr]["bp"] == "e"
        assert starts[corr]["ts"] == launches[corr]["ts"] and launches[corr]["ts"] <= g["ts"]
    # Each launch sits inside the cpu_op whose External id it carries.
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") in ("cpu_op", "user_annotation")}
    for call in launches.values():
        op = ops[call["args"]["External id"]]
        assert op["tid"] == call["tid"] and op["ts"] <= call["ts"] and call["ts"] + call["dur"] <= op["ts"] + op["dur"]


def test_kineto_projects_the_step_range_onto_the_stream_that_ran_its_work(files: dict[str, Path]) -> None:
    events = load_kineto(files["kineto"])["traceEvents"]
    cpu_steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    gpu_steps = [e for e in events if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert (
        [e["name"] for e in cpu_steps] == [e["name"] for e in gpu_steps] == [f"ProfilerStep#{n}" for n in range(2, 6)]
    )
    for cpu, gpu in zip(cpu_steps, gpu_steps, strict=True):
        assert (gpu["pid"], gpu["tid"]) == (0, 7)
        assert cpu["ts"] < gpu["ts"] and gpu["ts"] + gpu["dur"] <= cpu["ts"] + cpu["dur"]


def test_each_rank_file_says_its_own_rank_and_device(files: dict[str, Path]) -> None:
    for p in timeline("straggler_job").processes:
        data = load_kineto(files[f"job_rank{p.rank}"])
        assert (data["distributedInfo"]["rank"], data["distributedInfo"]["world_size"]) == (p.rank, 4)
        kernel_pids = {e["pid"] for e in data["traceEvents"] if e.get("cat") == "kernel"}
        assert kernel_pids == {p.device}
