#!/usr/bin/env python3
"""trainctl's built-in `gpt` on one GPU against PyTorch DDP on the same GPU.

  python bench/gpu_throughput.py --bin BUILD/bin --out DIR [--layers 12]
      [--d-model 1024] [--seq 1024] [--batch 8] [--steps 60] [--runs 1]

Generates a token file (uniform random ids, vocab 32768), then, `--runs`
times, alternating:
  A. trainctl: a coordinator and one worker (`--slots 1 --gpus auto`) on
     loopback; `trainctl submit --follow` of a gpt job on `device: cuda`,
     bf16, AdamW(3e-4, wd 0.01); tokens/s is the median of its train metric
     windows after the first;
  B. PyTorch DDP: `torchrun --standalone --nproc_per_node 1
     bench/gpu_ddp_peer.py` with the same network, data and batch.
Also measures the GPU's bf16 matmul peak (8192^3, median of 20) and reports
model FLOP utilisation for both: 6 * N * tokens/s + the attention's
12 * layers * seq * d_model per token (N: parameters without the
embeddings), over that peak.

Writes DIR/gpu_throughput.json after every stage (what finished stays when
a later stage fails), keeps each trainctl run's daemon logs and events in
DIR/trainctl-N/, and prints a summary. Uses the Python that has torch.
`--device cpu` runs both sides on the CPU with a small model, to check the
plumbing (no peak, no MFU; the two sides' thread counts differ, so its
ratio means nothing).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cluster import BenchError, Cluster  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = 32768
PROFILE_START, PROFILE_STEPS = 20, 3


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=240)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw",
                   help="sgd (lr 3e-4, no momentum) on both sides takes the "
                        "optimizer out of the comparison")
    p.add_argument("--profile", action="store_true",
                   help="after the measured runs, one more of each side tracing "
                        "steps 20-22 (trainctl's profile: section, torch.profiler "
                        "for the peer) into OUT/traces, summarised by "
                        "bench/trace_summary.py into OUT/traces/summary.txt")
    p.add_argument("--budget", type=float, default=None,
                   help="seconds for all the runs: no run pair starts that "
                        "the longest pair so far would carry past it")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: both sides on the CPU, to check the plumbing "
                        "with a small --layers/--d-model/--seq (no peak, no MFU)")
    a = p.parse_args()
    a.bin = os.path.abspath(a.bin)
    a.threads = 4
    # auto finds /dev/nvidiaN; a container that hides those device files
    # but lets CUDA see a GPU gets the first one, and the results say so.
    a.gpus = "auto" if a.device == "cpu" or os.path.exists("/dev/nvidia0") else "0"
    a.d_ff = 4 * a.d_model
    return a


class Results:
    def __init__(self, path):
        self.path, self.data = path, {"stages": {}}

    def put(self, stage, value):
        self.data["stages"][stage] = value
        with open(self.path + ".tmp", "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(self.path + ".tmp", self.path)


def matmul_peak_tflops():
    import torch
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        a @ b
    times = []
    for _ in range(20):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / 1000)
    return 2 * 8192 ** 3 / statistics.median(times) / 1e12


def flops_per_token(a):
    d, L, ff = a.d_model, a.layers, a.d_ff
    block = 3 * d * d + 3 * d + d * d + d + d * ff + ff + ff * d + d + 4 * d
    non_embedding = L * block + 2 * d + d * VOCAB + VOCAB
    return 6 * non_embedding + 12 * L * a.seq * d


def job_spec(a, tokens, trace_dir=None):
    spec = {
        "name": "gpu-throughput", "ranks": 1, "seed": 5, "task": "language_model",
        "model": {"type": "gpt", "d_model": a.d_model, "n_layers": a.layers,
                  "n_heads": a.heads, "d_ff": a.d_ff, "max_seq_len": a.seq,
                  "vocab_size": VOCAB},
        "data": {"format": "tokens", "train_path": tokens, "seq_len": a.seq},
        "optimizer": ({"type": "adamw", "lr": 3e-4, "weight_decay": 0.01}
                      if a.optimizer == "adamw" else {"type": "sgd", "lr": 3e-4}),
        "training": {"batch_size": a.batch, "max_steps": a.steps,
                     "log_every_steps": a.log_every, "precision": "bf16",
                     "device": a.device, "epochs": 100},
    }
    if trace_dir:
        spec["profile"] = {"dir": trace_dir, "start_step": PROFILE_START,
                           "steps": PROFILE_STEPS}
    return spec


def run_trainctl(a, tokens, workdir, tag, trace_dir=None):
    # The daemons' logs and the job's events stay with the results.
    logdir = os.path.join(a.out, tag)
    shutil.rmtree(logdir, ignore_errors=True)
    os.makedirs(logdir)
    a.workdir = workdir
    cluster = Cluster(a, 1, logdir)
    try:
        cluster.start()
        spec = os.path.join(logdir, "job.json")
        with open(spec, "w") as f:
            json.dump(job_spec(a, tokens, trace_dir), f)
        r = subprocess.run(cluster.ctl("submit", spec, "--follow", "--output", "json"),
                           capture_output=True, text=True, timeout=a.timeout)
        with open(os.path.join(logdir, "events.jsonl"), "w") as f:
            f.write(r.stdout)
        if r.returncode != 0:
            raise BenchError(f"trainctl exited {r.returncode}: {r.stderr[-2000:]}\n"
                             f"{r.stdout[-2000:]}")
        windows = []
        for line in r.stdout.splitlines()[1:]:
            metric = json.loads(line).get("metric") if line.strip() else None
            if metric and metric["kind"] == "train":
                windows.append(metric["values"])
        if len(windows) < 2:
            raise BenchError(f"fewer than 2 train windows: {r.stdout[-2000:]}")
        rates = [w["tokens_per_sec"] for w in windows[1:]]
        return {"tokens_per_sec": statistics.median(rates), "windows": rates,
                "step_ms": statistics.median(w["step_ms"] for w in windows[1:]),
                "comm_ms": statistics.median(w["comm_ms"] for w in windows[1:]),
                "final_loss": windows[-1]["loss"]}
    finally:
        cluster.stop()


def run_ddp(a, tokens, tag, trace_dir=None):
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    cmd = torchrun + ["--standalone", "--nproc_per_node", "1",
                      os.path.join(REPO, "bench", "gpu_ddp_peer.py"),
                      "--tokens", tokens, "--vocab", str(VOCAB),
                      "--layers", str(a.layers), "--d-model", str(a.d_model),
                      "--heads", str(a.heads), "--d-ff", str(a.d_ff),
                      "--seq", str(a.seq), "--batch", str(a.batch),
                      "--steps", str(a.steps), "--warmup", str(a.log_every),
                      "--device", a.device, "--optimizer", a.optimizer]
    if trace_dir:
        cmd += ["--profile-dir", trace_dir, "--profile-start", str(PROFILE_START),
                "--profile-steps", str(PROFILE_STEPS)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    with open(os.path.join(a.out, tag + ".log"), "w") as f:
        f.write(r.stdout + r.stderr)
    for line in r.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return json.loads(line[len("BENCH_RESULT "):])
    raise BenchError(f"DDP peer exited {r.returncode}: {r.stderr[-3000:]}")


def trace(a, results, tokens, workdir, began, longest):
    """One traced run of each side (not among the measured ones)."""
    elapsed = time.monotonic() - began
    if a.budget and elapsed + 1.2 * longest > a.budget:
        results.put("profile", f"not run: {elapsed:.0f} s of {a.budget:.0f} s spent")
        return
    traces = os.path.join(a.out, "traces")
    shutil.rmtree(traces, ignore_errors=True)
    os.makedirs(traces)
    try:
        run_trainctl(a, tokens, workdir, "trainctl-traced", traces)
        run_ddp(a, tokens, "ddp-traced", traces)
    except (BenchError, subprocess.TimeoutExpired, OSError) as e:
        results.put("profile", f"failed: {str(e)[-2000:]}")
        return
    ours = [os.path.join(root, f) for root, _, files in os.walk(traces)
            for f in files if f.startswith("rank-0-") and f.endswith(".json")]
    peer = os.path.join(traces, "ddp-rank-0.json")
    if not ours or not os.path.exists(peer):
        results.put("profile", f"traces missing: trainctl {ours}, ddp {os.path.exists(peer)}")
        return
    r = subprocess.run([sys.executable, os.path.join(REPO, "bench", "trace_summary.py"),
                        ours[0], peer], capture_output=True, text=True, timeout=300)
    with open(os.path.join(traces, "summary.txt"), "w") as f:
        f.write(r.stdout + r.stderr)
    results.put("profile", {"trainctl": ours[0], "ddp": peer,
                            "summary": os.path.join(traces, "summary.txt")})


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    results = Results(os.path.join(a.out, "gpu_throughput.json"))
    results.data["config"] = {k: v for k, v in vars(a).items() if k != "bin"}
    results.data["flops_per_token"] = flops_per_token(a)
    peak = matmul_peak_tflops() if a.device == "cuda" else None
    results.put("peak", {"bf16_matmul_tflops": peak})
    workdir = tempfile.mkdtemp(prefix="gpu_throughput.")
    try:
        return measure(a, results, peak, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def measure(a, results, peak, workdir):
    import array
    import torch
    tokens = os.path.join(workdir, "tokens.u16")
    # Enough windows that neither side repeats one in the run. Ids below
    # 32768: int16 and uint16 hold them alike.
    n = (a.steps + 1) * a.batch * a.seq * 2 + 1
    ids = torch.randint(0, VOCAB, (n,), generator=torch.Generator().manual_seed(0))
    with open(tokens, "wb") as f:
        array.array("h", ids.tolist()).tofile(f)
    ours, peer = [], []
    began, longest = time.monotonic(), 0.0
    for run in range(a.runs):
        elapsed = time.monotonic() - began
        if a.budget and run > 0 and elapsed + 1.2 * longest > a.budget:
            results.put("budget", f"stopped after {run} run(s): {elapsed:.0f} s of "
                                  f"{a.budget:.0f} s spent, a pair takes {longest:.0f} s")
            break
        pair_began = time.monotonic()
        for side in ("trainctl", "ddp"):
            try:
                r = (run_trainctl(a, tokens, workdir, f"trainctl-{run}")
                     if side == "trainctl" else run_ddp(a, tokens, f"ddp-{run}"))
                (ours if side == "trainctl" else peer).append(r)
            except (BenchError, subprocess.TimeoutExpired, OSError) as e:
                results.put(f"{side}-{run}-error", str(e)[-4000:])
                continue
            results.put(f"{side}-{run}", r)
        longest = max(longest, time.monotonic() - pair_began)
    if a.profile:
        trace(a, results, tokens, workdir, began, longest)
    summary = {}
    for name, runs in (("trainctl", ours), ("ddp", peer)):
        if runs:
            rate = statistics.median(r["tokens_per_sec"] for r in runs)
            summary[name] = {"tokens_per_sec": rate,
                             "mfu": rate * results.data["flops_per_token"] / (peak * 1e12)
                             if peak else None}
    if "trainctl" in summary and "ddp" in summary:
        summary["ratio_trainctl_over_ddp"] = (summary["trainctl"]["tokens_per_sec"] /
                                              summary["ddp"]["tokens_per_sec"])
    results.put("summary", summary)
    print(json.dumps(results.data, indent=1))
    return 0 if "ratio_trainctl_over_ddp" in summary else 1


if __name__ == "__main__":
    sys.exit(main())
