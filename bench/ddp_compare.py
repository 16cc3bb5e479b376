#!/usr/bin/env python3
"""trainctl against PyTorch DDP (torchrun + Gloo), side by side, same machine.

  /usr/bin/python3 bench/ddp_compare.py [--models mlp,cnn] [--ranks 1,2]
      [--runs 3] [--steps mlp=600,cnn=200] [--threads 1] [--bin build/bin]

For each (model, ranks) it starts a trainctl coordinator and `ranks` workers
on loopback (each `--slots 1 --cpus T`) once, then alternates, `--runs`
times:
  A. trainctl: `trainctl submit SPEC --follow --output json` of a job with
     the same model, data, global batch 128, AdamW(1e-3, wd 0.01) at a
     constant lr, max_steps N and threads_per_rank T;
  B. PyTorch DDP: `torchrun --standalone --nproc_per_node R ...
     bench/ddp_peer.py` with the same settings.
and then stops the daemons. Both sides are timed from right before their
launcher is spawned (time.time_ns()) to the end of training step 1
(trainctl: its `first_step` metric event; DDP: rank 0's clock), and their
steady-state throughput is taken after the same number of warm-up steps
(trainctl: median samples/s of the metric windows after the first one;
DDP: samples/s over steps W..N, W = the window length).

Prints the machine, the command line, every run and a summary table with
the targets of the performance issue (PASS/MISS; a MISS does not fail the
run). Exits non-zero, with the tails of the daemon logs, if anything fails.
Only this script uses the Python that has torch (Debian's /usr/bin/python3);
trainctl itself runs no Python.
"""

import argparse
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from bench_cluster import (BenchError, Cluster, run_launcher, torch_version,
                           with_rank_malloc)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_STEPS = {"mlp": 600, "cnn": 200}
TRAIN_SAMPLES = 60000  # Fashion-MNIST training set
# Issue targets: trainctl/DDP samples/s ratio, by (model, ranks).
THROUGHPUT_TARGET = {("mlp", 2): 1.10, ("cnn", 2): 1.00}
THROUGHPUT_TARGET_DEFAULT = 1.00  # 1 rank, and anything not listed
LAUNCH_TARGET = 5.0  # torchrun launch->first step / trainctl's


def parse_args():
    p = argparse.ArgumentParser(
        description="Benchmark trainctl against PyTorch DDP (torchrun, Gloo).")
    p.add_argument("--models", default="mlp,cnn",
                   help="comma-separated: mlp, cnn (default mlp,cnn)")
    p.add_argument("--ranks", default="1,2",
                   help="comma-separated rank counts (default 1,2)")
    p.add_argument("--runs", type=int, default=3,
                   help="A/B repetitions per (model, ranks) (default 3)")
    p.add_argument("--steps", default=None,
                   help="steps per run: one number for every model, or "
                        "model=N pairs (default mlp=600,cnn=200)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads per rank, both sides (default 1)")
    p.add_argument("--bin", default="build/bin",
                   help="directory of the trainctl binaries (default build/bin)")
    p.add_argument("--global-batch", type=int, default=128)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--torchrun", default=None,
                   help="comma-separated torchrun executables, one DDP peer "
                        "each, all run in every round (default: Debian's "
                        "/usr/bin/torchrun, and build-torch2-venv/bin/torchrun "
                        "of the 2.x wheel when it exists)")
    p.add_argument("--windows", type=int, default=6,
                   help="trainctl metric windows per run, the first being "
                        "warm-up (default 6)")
    p.add_argument("--timeout", type=float, default=1800,
                   help="seconds one training run may take (default 1800)")
    p.add_argument("--peer-heap-reuse", action="store_true",
                   help="run the DDP peer with the malloc settings trainctl's "
                        "ranks use (GLIBC_TUNABLES), to separate that gain "
                        "from the rest")
    p.add_argument("--workdir", default=None,
                   help="where specs and logs go (default: a new temp dir)")
    a = p.parse_args()
    a.models = [m for m in a.models.split(",") if m]
    for m in a.models:
        if m not in DEFAULT_STEPS:
            p.error(f"--models: unknown model {m!r} (mlp, cnn)")
    try:
        a.ranks = [int(r) for r in a.ranks.split(",") if r]
    except ValueError:
        p.error("--ranks: expected comma-separated integers")
    if not a.ranks or any(r < 1 or a.global_batch % r for r in a.ranks):
        p.error("--ranks: each must be >= 1 and divide --global-batch")
    steps = dict(DEFAULT_STEPS)
    if a.steps:
        if "=" in a.steps:
            for item in a.steps.split(","):
                k, _, v = item.partition("=")
                steps[k.strip()] = int(v)
        else:
            steps = {m: int(a.steps) for m in DEFAULT_STEPS}
    a.steps = steps
    if a.runs < 1 or a.threads < 1 or a.windows < 2:
        p.error("--runs and --threads must be >= 1, --windows >= 2")
    for m in a.models:
        if a.steps[m] < a.windows:
            p.error(f"--steps for {m} must be >= --windows ({a.windows})")
    a.bin = os.path.abspath(a.bin)
    if a.torchrun is None:
        wheel = os.path.join(REPO, "build-torch2-venv", "bin", "torchrun")
        a.torchrun = "/usr/bin/torchrun" + ("," + wheel if os.access(wheel, os.X_OK) else "")
    a.torchruns = [os.path.abspath(t) for t in a.torchrun.split(",") if t]
    return a


# ----------------------------------------------------------------- helpers

def machine_info():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), "
            f"{cpu}, {platform.system()} {platform.release()}, "
            f"load average {load}")


def tail(path, n=25):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        return f"  ({path}: {e})\n"
    return "".join("  " + line for line in lines[-n:])


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, spec=".0f"):
    return "-" if x is None else format(x, spec)


# ---------------------------------------------------------------- trainctl

def job_spec(args, model, ranks, steps, log_every):
    steps_per_epoch = TRAIN_SAMPLES // args.global_batch
    d = args.data_dir
    return {
        "name": f"bench-{model}-{ranks}r",
        "ranks": ranks,
        "seed": 42,
        "model": {"type": model},
        "data": {
            "format": "idx",
            "train_images": os.path.join(d, "train-images-idx3-ubyte.gz"),
            "train_labels": os.path.join(d, "train-labels-idx1-ubyte.gz"),
        },
        "optimizer": {"type": "adamw", "lr": 0.001, "weight_decay": 0.01},
        "scheduler": {"type": "constant"},
        "training": {
            "epochs": steps // steps_per_epoch + 1,
            "batch_size": args.global_batch,
            "max_steps": steps,
            "log_every_steps": log_every,
            "threads_per_rank": args.threads,
        },
    }


def run_trainctl(args, cluster, model, ranks, steps, log_every, tag):
    spec_path = os.path.join(cluster.logdir, f"{tag}.json")
    with open(spec_path, "w") as f:
        json.dump(job_spec(args, model, ranks, steps, log_every), f, indent=1)
    out_path = os.path.join(cluster.logdir, f"{tag}.jsonl")
    cmd = cluster.ctl("submit", spec_path, "--follow", "--output", "json")
    with open(out_path, "w") as out:
        launch_ns = time.time_ns()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
        try:
            _, err = proc.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise BenchError(f"trainctl run {tag} did not end in "
                             f"{args.timeout:.0f} s; events in {out_path}")
    with open(out_path) as f:
        lines = [line for line in f if line.strip()]
    if proc.returncode != 0:
        last = "".join(lines[-8:])
        raise BenchError(f"`{shlex.join(cmd)}` exited {proc.returncode}\n"
                         f"stderr: {err.strip()}\nlast events:\n{last}")
    first_ms, windows = None, []
    for line in lines[1:]:  # the first line is the SubmitJobResponse
        metric = json.loads(line).get("metric")
        if not metric:
            continue
        if metric["kind"] == "first_step" and first_ms is None:
            first_ms = int(metric["time_unix_ms"])
        elif metric["kind"] == "train":
            windows.append((int(metric["step"]), metric["values"]))
    if first_ms is None or len(windows) < 2:
        raise BenchError(f"trainctl run {tag}: no first_step event or fewer "
                         f"than 2 train windows in {out_path}")
    # Windows after the first (which includes step 1's warm-up); a short
    # last window (steps not a multiple of log_every) is dropped too.
    steady, prev = [], windows[0][0]
    for step, values in windows[1:]:
        if step - prev == log_every:
            steady.append(values)
        prev = step
    if not steady:
        raise BenchError(f"trainctl run {tag}: no full steady-state window")
    rates = [v["samples_per_sec"] for v in steady]
    # Also the aggregate rate (total samples / total time of those windows),
    # which is what the DDP side measures.
    aggregate = len(rates) / sum(1.0 / r for r in rates)
    return {
        "launch_s": (first_ms * 1_000_000 - launch_ns) / 1e9,
        "samples_per_sec": statistics.median(rates),
        "aggregate_samples_per_sec": aggregate,
        "windows": rates,
        **{k: statistics.median(v.get(k, 0.0) for v in steady)
           for k in ("data_ms", "compute_ms", "comm_ms", "optimizer_ms")},
        "loss": steady[-1].get("loss"),
    }


# --------------------------------------------------------------------- DDP

def run_ddp(args, torchrun, model, ranks, steps, warmup, logdir, tag):
    cmd = [torchrun, "--standalone", "--nproc_per_node", str(ranks),
           "--redirects", "1", "--tee", "1",
           os.path.join(REPO, "bench", "ddp_peer.py"),
           "--model", model, "--global-batch", str(args.global_batch),
           "--steps", str(steps), "--threads", str(args.threads),
           "--warmup", str(warmup), "--data-dir", args.data_dir]
    env = dict(os.environ)
    # torchrun would otherwise set OMP_NUM_THREADS=1 for nproc_per_node > 1.
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    if args.peer_heap_reuse:
        env = with_rank_malloc(env)
    out_path = os.path.join(logdir, f"{tag}.log")
    returncode, text = run_launcher(cmd, env, out_path, args.timeout,
                                    f"DDP run {tag}")
    if returncode != 0:
        raise BenchError(f"`{shlex.join(cmd)}` exited {returncode}; "
                         f"output ({out_path}):\n{tail(out_path, 30)}")
    m = re.search(r"BENCH_RESULT (\{.*\})", text)
    if not m:
        raise BenchError(f"DDP run {tag}: no BENCH_RESULT line in {out_path}")
    r = json.loads(m.group(1))
    return {
        "launch_s": r["launch_to_first_step_s"],
        "samples_per_sec": r["samples_per_sec"],
        "window_median": median(r.get("window_samples_per_sec", [])),
        "data_ms": r["data_ms"],
        "fwd_bwd_ms": r["fwd_bwd_ms"],
        "optimizer_ms": r["optimizer_ms"],
        "loss": r.get("final_loss_rank0"),
        "command": shlex.join(cmd),
    }


# -------------------------------------------------------------------- main

def bench_config(args, model, ranks, workdir, log):
    steps = args.steps[model]
    log_every = max(1, steps // args.windows)
    logdir = os.path.join(workdir, f"{model}-{ranks}r")
    os.makedirs(logdir, exist_ok=True)
    cluster = Cluster(args, ranks, logdir)
    runs = []
    try:
        cluster.start()
        for i in range(args.runs):
            a = run_trainctl(args, cluster, model, ranks, steps, log_every,
                             f"trainctl-{i + 1}")
            cluster.check_alive()
            log(f"  run {i + 1} trainctl: {a['samples_per_sec']:8.0f} "
                f"samples/s (aggregate {a['aggregate_samples_per_sec']:.0f}), "
                f"launch->first step {a['launch_s']:.2f} s; per step "
                f"data {a['data_ms']:.2f} compute {a['compute_ms']:.2f} "
                f"comm {a['comm_ms']:.2f} optimizer {a['optimizer_ms']:.2f} ms"
                f"; loss {a['loss']:.3f}")
            peers = {}
            for p, (torchrun, version) in enumerate(zip(args.torchruns, args.peer_versions)):
                b = run_ddp(args, torchrun, model, ranks, steps, log_every, logdir,
                            f"ddp{p}-{i + 1}")
                log(f"  run {i + 1} DDP {version:<14} {b['samples_per_sec']:8.0f} "
                    f"samples/s (window median {fmt(b['window_median'])}), "
                    f"launch->first step {b['launch_s']:.2f} s; per step "
                    f"data {b['data_ms']:.2f} fwd+bwd(+comm) {b['fwd_bwd_ms']:.2f} "
                    f"optimizer {b['optimizer_ms']:.2f} ms; loss {b['loss']:.3f}")
                peers[version] = b
            runs.append((a, peers))
    finally:
        cluster.stop()
    return runs


def main():
    args = parse_args()
    workdir = args.workdir = (args.workdir or
                              tempfile.mkdtemp(prefix="trainctl-ddp-bench-"))
    os.makedirs(workdir, exist_ok=True)

    def log(msg=""):
        print(msg, flush=True)

    for name in ("trainctl", "trainctl-coordinator", "trainctl-worker"):
        if not os.access(os.path.join(args.bin, name), os.X_OK):
            log(f"error: {os.path.join(args.bin, name)} is not executable "
                "(build first, or pass --bin)")
            return 2
    for torchrun in args.torchruns:
        if not os.access(torchrun, os.X_OK):
            log(f"error: {torchrun} is not executable (pass --torchrun)")
            return 2
    args.peer_versions = [torch_version(t) for t in args.torchruns]

    log("trainctl vs PyTorch DDP (Gloo, CPU)")
    log(f"machine: {machine_info()}")
    log(f"command: {shlex.join([sys.executable] + sys.argv)}")
    log("DDP peers: " + ", ".join(f"torch {v} ({t})" for t, v in
                                  zip(args.torchruns, args.peer_versions)))
    log(f"settings: global batch {args.global_batch}, {args.threads} "
        f"thread(s) per rank, AdamW lr 1e-3 wd 0.01, steps "
        + ", ".join(f"{m} {args.steps[m]}" for m in args.models)
        + f", {args.runs} A/B run(s); logs in {workdir}")

    rows = []
    for model in args.models:
        for ranks in args.ranks:
            log(f"\n{model}, {ranks} rank(s):")
            try:
                runs = bench_config(args, model, ranks, workdir, log)
            except BenchError as e:
                log(f"\nFAILED ({model}, {ranks} ranks): {e}")
                # The cluster's logs are under workdir/<model>-<ranks>r.
                logdir = os.path.join(workdir, f"{model}-{ranks}r")
                for name in sorted(os.listdir(logdir)):
                    if name.endswith(".log") and not name.startswith("ddp"):
                        path = os.path.join(logdir, name)
                        log(f"--- {path} (last lines)\n{tail(path)}")
                return 1
            ta = [a["samples_per_sec"] for a, _ in runs]
            la = [a["launch_s"] for a, _ in runs]
            for version in args.peer_versions:
                peer = [p[version] for _, p in runs]
                tb = [b["samples_per_sec"] for b in peer]
                lb = [b["launch_s"] for b in peer]
                rows.append({
                    "model": model, "ranks": ranks, "peer": version,
                    "trainctl": median(ta), "ddp": median(tb),
                    # Each round's ratio: the two sides ran back to back.
                    "ratio": median([a / b for a, b in zip(ta, tb)]),
                    "launch_trainctl": median(la), "launch_ddp": median(lb),
                    "launch_ratio": median([b / a for a, b in zip(la, lb)
                                            if a and a > 0 and b is not None]),
                    "breakdown": {k: median([a[k] for a, _ in runs]) for k in
                                  ("data_ms", "compute_ms", "comm_ms",
                                   "optimizer_ms")},
                    "ddp_breakdown": {k: median([b[k] for b in peer]) for k in
                                      ("data_ms", "fwd_bwd_ms", "optimizer_ms")},
                })

    log("\nResults (medians over runs; samples/s after warm-up; launch = "
        "launcher spawned -> training step 1 done)")
    log("DDP peer malloc: " + ("trainctl's settings (--peer-heap-reuse)"
                               if args.peer_heap_reuse else "glibc defaults"))
    hdr = (f"{'model':<5} {'ranks':>5} {'DDP torch':<14} {'trainctl/s':>11} {'DDP/s':>9} "
           f"{'ratio':>6} {'target':>12} {'launch tc':>10} {'launch DDP':>11} "
           f"{'DDP/tc':>7} {'target':>11}")
    log(hdr)
    log("-" * len(hdr))
    for r in rows:
        target = THROUGHPUT_TARGET.get((r["model"], r["ranks"]),
                                       THROUGHPUT_TARGET_DEFAULT)
        ok = r["ratio"] is not None and r["ratio"] >= target
        lok = r["launch_ratio"] is not None and r["launch_ratio"] >= LAUNCH_TARGET
        log(f"{r['model']:<5} {r['ranks']:>5} {r['peer']:<14} {fmt(r['trainctl']):>11} "
            f"{fmt(r['ddp']):>9} {fmt(r['ratio'], '.2f'):>6} "
            f"{'>=' + format(target, '.2f') + (' PASS' if ok else ' MISS'):>12} "
            f"{fmt(r['launch_trainctl'], '.2f') + 's':>10} "
            f"{fmt(r['launch_ddp'], '.2f') + 's':>11} "
            f"{fmt(r['launch_ratio'], '.1f') + 'x':>7} "
            f"{'>=' + format(LAUNCH_TARGET, '.0f') + 'x' + (' PASS' if lok else ' MISS'):>11}")
    log("\nPer-step time, ms (medians): trainctl data/compute/comm(exposed)/"
        "optimizer | DDP data/fwd+bwd(incl. overlapped all-reduce)/optimizer")
    for r in rows:
        t, d = r["breakdown"], r["ddp_breakdown"]
        log(f"{r['model']:<5} {r['ranks']:>2} ranks, DDP {r['peer']}: trainctl "
            f"{t['data_ms']:.2f} / {t['compute_ms']:.2f} / {t['comm_ms']:.2f} / "
            f"{t['optimizer_ms']:.2f}  |  DDP {d['data_ms']:.2f} / "
            f"{d['fwd_bwd_ms']:.2f} / {d['optimizer_ms']:.2f}")
    log("\nmachine load average at the end: "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
