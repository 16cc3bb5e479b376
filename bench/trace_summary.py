#!/usr/bin/env python3
"""Where the GPU time of a few traced steps goes, for one or two Chrome traces.

  python3 bench/trace_summary.py A.json [B.json] [--top 25]

Reads Kineto's Chrome traces (trainctl's `profile:` section writes one per
rank; bench/gpu_ddp_peer.py --profile-dir writes the peer's) and prints,
per traced step: the steps found (ranges named "trainctl step N" or "ddp
step N"), the span from the first step's start to the last one's end, GPU
kernel time, memcpy/memset time, the GPU idle time within the span, the
kernel count, and the kernels that took the most time, grouped by name.
With two traces, the kernels side by side, sorted by the difference: what
one side runs that the other does not, or runs slower.
"""

import argparse
import collections
import json
import re
import sys

STEP = re.compile(r"^(trainctl|ddp) step \d+$")
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
RUNTIME_CATS = ("cuda_runtime", "cuda_driver")
# The runtime calls that make the host wait for the GPU.
SYNCS = re.compile(r"Synchronize|cudaMemcpy(?!Async)|cuStreamSynchronize")


def short(name, width=90):
    # Template arguments make names unreadable and split one kernel in many.
    name = re.sub(r"<.*>", "<>", name)
    return name if len(name) <= width else name[:width - 3] + "..."


def summarise(path):
    with open(path) as f:
        events = json.load(f).get("traceEvents", [])
    steps = [e for e in events if e.get("ph") == "X" and STEP.match(str(e.get("name", "")))]
    # A step range appears on the host and, as an annotation, on the GPU
    # timeline too: keep the host ones.
    host_steps = [e for e in steps if e.get("cat") in ("user_annotation", "cpu_op")] or steps
    names = sorted({e["name"] for e in host_steps})
    if host_steps:
        begin = min(float(e["ts"]) for e in host_steps)
        end = max(float(e["ts"]) + float(e["dur"]) for e in host_steps)
    else:
        begin, end = float("-inf"), float("inf")
    totals = collections.Counter()
    by_kernel = collections.Counter()
    count = 0
    intervals = []
    last_gpu_end = begin
    runtime_calls = collections.Counter()
    runtime_ms = collections.Counter()
    for e in events:
        if e.get("cat") in RUNTIME_CATS and e.get("ph") == "X" and begin <= float(e["ts"]) <= end:
            runtime_calls[e.get("name", "?")] += 1
            runtime_ms[e.get("name", "?")] += float(e.get("dur", 0)) / 1000
        cat = GPU_CATS.get(e.get("cat"))
        if cat is None or e.get("ph") != "X":
            continue
        ts, dur = float(e["ts"]), float(e.get("dur", 0))
        if ts < begin or ts > end:
            continue
        totals[cat] += dur
        intervals.append((ts, ts + dur))
        last_gpu_end = max(last_gpu_end, ts + dur)
        if cat == "kernel":
            count += 1
            by_kernel[short(e.get("name", "?"))] += dur
    if host_steps:
        end = max(end, last_gpu_end)  # the last step's kernels finish after its host range
    busy, cursor = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > cursor:
            busy += stop - max(start, cursor)
            cursor = stop
    n = max(len(names), 1)
    span = (end - begin) if host_steps else busy
    return {"path": path, "steps": names, "n": n, "span_ms": span / 1000 / n,
            "kernel_ms": totals["kernel"] / 1000 / n, "memcpy_ms": totals["memcpy"] / 1000 / n,
            "memset_ms": totals["memset"] / 1000 / n, "busy_ms": busy / 1000 / n,
            "idle_ms": (span - busy) / 1000 / n, "kernels": count / n,
            "by_kernel": {k: v / 1000 / n for k, v in by_kernel.items()},
            "runtime": {k: (runtime_calls[k] / n, runtime_ms[k] / n) for k in runtime_calls}}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("traces", nargs="+")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    if len(a.traces) > 2:
        p.error("one or two traces")
    runs = [summarise(t) for t in a.traces]
    for r in runs:
        print(f"{r['path']}: {len(r['steps'])} step(s) {', '.join(r['steps'][:3])}"
              f"{' ...' if len(r['steps']) > 3 else ''}")
        print(f"  per step: span {r['span_ms']:.2f} ms, GPU busy {r['busy_ms']:.2f} ms, "
              f"idle {r['idle_ms']:.2f} ms; kernels {r['kernel_ms']:.2f} ms "
              f"({r['kernels']:.0f} launches), memcpy {r['memcpy_ms']:.2f} ms, "
              f"memset {r['memset_ms']:.2f} ms")
        # Host-side CUDA calls: many launches or any sync per step is where a
        # host-bound step loses the GPU.
        runtime = sorted(r["runtime"].items(), key=lambda kv: -kv[1][1])
        syncs = [(k, v) for k, v in runtime if SYNCS.search(k)]
        launches = sum(v[0] for k, v in runtime if "Launch" in k)
        print(f"  host CUDA calls per step: {launches:.0f} launches, "
              + (", ".join(f"{k} x{c:.1f} ({ms:.2f} ms)" for k, (c, ms) in syncs) or "no syncs"))
        for k, (c, ms) in runtime[:6]:
            print(f"    {ms:8.3f} ms  x{c:<7.1f} {k}")
    if len(runs) == 1:
        print(f"\ntop {a.top} kernels, ms per step:")
        for name, ms in collections.Counter(runs[0]["by_kernel"]).most_common(a.top):
            print(f"  {ms:8.3f}  {name}")
        return 0
    first, second = runs
    keys = set(first["by_kernel"]) | set(second["by_kernel"])
    rows = sorted(keys, key=lambda k: -abs(first["by_kernel"].get(k, 0) -
                                           second["by_kernel"].get(k, 0)))
    print(f"\nkernels, ms per step (A = {first['path']}, B = {second['path']}), "
          f"largest difference first:")
    print(f"  {'A':>8} {'B':>8} {'A-B':>8}  name")
    for k in rows[:a.top]:
        x, y = first["by_kernel"].get(k, 0), second["by_kernel"].get(k, 0)
        print(f"  {x:8.3f} {y:8.3f} {x - y:+8.3f}  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
