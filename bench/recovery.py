#!/usr/bin/env python3
"""What losing a worker costs a job: in-place recovery against the restart
from the last checkpoint, side by side, same cluster, same job.

  python3 bench/recovery.py [--runs 3] [--kill-at 100] [--steps 300]
      [--bin build/bin] [--threads 1] [--spare] [--model gpt100m]

A coordinator and 3 single-slot workers on loopback (TLS, tokens, as a user
runs them), and with --spare a fourth. Each run submits a 3-rank mlp on
Fashion-MNIST (global batch 96, checkpoint every 40 steps or --checkpoint-every, a train point
every step) with `trainctl submit --follow --output json`, SIGKILLs the
agent of the worker running rank 2 (the rank dies with it) once step
--kill-at is logged, and reads the job's events to the end. The modes
alternate, --runs times each:
  restart:  fault_tolerance {min_workers: 2} (every rank is killed, the job
            reloads the checkpoint and re-trains the steps after it, on the
            spare when there is one);
  in-place: the same with in_place: true (the survivors go on: with
            --spare, held as its spare (fault_tolerance.spares: 1), with a
            replacement rank on the spare worker that gets
            their state over the collective; without, on two ranks).
The killed worker is started again between runs. With --model gpt100m the
job is the built-in gpt at 98 M parameters (12 layers, d_model 768, AdamW:
a 1.2 GB checkpoint, and the state a replacement receives), on random
tokens, global batch 6 of 32 tokens, checkpoint every --checkpoint-every
steps: where reloading from disk and sending the state cost real time.

Per run, from the train points (one per optimizer step, stamped by rank 0):
  repeated  steps logged a second time (trained again after the loss);
  lost      steps never logged;
  stall     the longest gap between two consecutive points;
  kill -> past the step of the kill: from the SIGKILL until a step beyond
            the highest one logged at that moment is logged (what the loss
            cost in all, re-trained steps included);
and the job's final state and generation. Prints every run and the medians,
with the restart/in-place stall ratio. Exits non-zero if a run fails.
"""

import argparse
import array
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from bench_cluster import BenchError, Cluster

RANKS = 3
BATCH = 96  # splits over 3 and 2 ranks


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--kill-at", type=int, default=100)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--workdir", default=None)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--spare", action="store_true",
                   help="a fourth worker, free when the job starts")
    p.add_argument("--model", choices=("mlp", "gpt100m"), default="mlp")
    p.add_argument("--checkpoint-every", type=int, default=40)
    return p.parse_args()


GPT_SEQ = 32
GPT_VOCAB = 8192


def gpt_tokens(args):
    """Random token ids for the gpt runs: what it learns does not matter here."""
    path = os.path.join(args.workdir, "tokens.u16")
    if not os.path.exists(path):
        rng = random.Random(0)
        ids = array.array("H", (rng.randrange(GPT_VOCAB)
                                for _ in range((args.steps + 10) * 6 * GPT_SEQ + 1)))
        with open(path, "wb") as f:
            ids.tofile(f)
    return path


def job_spec(args, in_place, checkpoint_dir):
    d = args.data_dir
    ft = {"min_workers": 2, "max_restarts": 2}
    if in_place:
        ft["in_place"] = True
        if args.spare:
            ft["spares"] = 1  # the fourth worker is held for it
    if args.model == "gpt100m":
        return {
            "name": "recovery-gpt-" + ("in-place" if in_place else "restart"),
            "ranks": RANKS, "seed": 7, "task": "language_model",
            "model": {"type": "gpt", "d_model": 768, "n_layers": 12, "n_heads": 12,
                      "d_ff": 3072, "max_seq_len": GPT_SEQ, "vocab_size": GPT_VOCAB},
            "data": {"format": "tokens", "train_path": gpt_tokens(args),
                     "seq_len": GPT_SEQ},
            "optimizer": {"type": "adamw", "lr": 3e-4},
            # 6 splits over 3 ranks and over the 2 left without a spare.
            "training": {"epochs": 1, "batch_size": 6, "max_steps": args.steps,
                         "log_every_steps": 1, "threads_per_rank": args.threads},
            "checkpoint": {"dir": checkpoint_dir, "every_steps": args.checkpoint_every},
            # A step takes seconds here: the default hang bound is ample.
            "fault_tolerance": ft,
        }
    return {
        "name": "recovery-" + ("in-place" if in_place else "restart"),
        "ranks": RANKS,
        "seed": 7,
        "model": {"type": "mlp"},
        "data": {
            "format": "idx",
            "train_images": os.path.join(d, "train-images-idx3-ubyte.gz"),
            "train_labels": os.path.join(d, "train-labels-idx1-ubyte.gz"),
        },
        "optimizer": {"type": "adamw", "lr": 0.001},
        "training": {"epochs": 1, "batch_size": BATCH, "max_steps": args.steps,
                     "log_every_steps": 1, "threads_per_rank": args.threads},
        "checkpoint": {"dir": checkpoint_dir, "every_steps": args.checkpoint_every},
        "fault_tolerance": ft,
    }


def run_once(args, cluster, in_place, tag):
    spec_path = os.path.join(cluster.logdir, tag + ".json")
    with open(spec_path, "w") as f:
        json.dump(job_spec(args, in_place, os.path.join(cluster.logdir, "ckpt")), f)
    out_path = os.path.join(cluster.logdir, tag + ".jsonl")
    cmd = cluster.ctl("submit", spec_path, "--follow", "--output", "json")
    with open(out_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, text=True)
    killed_ms, victim, deadline = None, None, time.monotonic() + args.timeout
    while proc.poll() is None and time.monotonic() < deadline:
        # Where rank 2 runs, looked up ahead so that the kill is not late.
        if victim is None and logged_step(out_path) >= max(1, args.kill_at - 20):
            victim = worker_of_rank(cluster, RANKS - 1)
        if killed_ms is None and victim is not None and logged_step(out_path) >= args.kill_at:
            cluster.kill_worker(victim)
            killed_ms = time.time() * 1000
            reached = logged_step(out_path)
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
        raise BenchError(f"{tag} did not end in {args.timeout:.0f} s; events in {out_path}")
    err = proc.stderr.read()
    if killed_ms is not None:
        cluster.start_worker(victim)
    if killed_ms is None:
        raise BenchError(f"{tag} ended before step {args.kill_at} was logged")
    points = []
    with open(out_path) as f:
        for line in f:
            if not line.strip():
                continue
            event = json.loads(line)
            metric = event.get("metric")
            if metric and metric.get("kind") == "train":
                points.append((int(metric["step"]), int(metric["time_unix_ms"])))
    if proc.returncode != 0:
        raise BenchError(f"`{shlex.join(cmd)}` exited {proc.returncode}: {err.strip()}")
    seen, repeated = set(), 0
    for step, _ in points:
        repeated += step in seen
        seen.add(step)
    lost = len(set(range(1, args.steps + 1)) - seen)
    gaps = [(b[1] - a[1], a[0]) for a, b in zip(points, points[1:])]
    stall_ms, stall_after = max(gaps)
    # Back where it was: the first new step past the highest one logged
    # when the worker was killed.
    caught_up = next((t for s, t in points if s > reached and t > killed_ms), None)
    return {"mode": "in-place" if in_place else "restart", "repeated": repeated,
            "step_ms": statistics.median(g for g, _ in gaps),
            "caught_up_ms": None if caught_up is None else caught_up - killed_ms,
            "lost": lost, "stall_ms": stall_ms, "stall_after_step": stall_after,
            "kill_to_next_ms": next((t - killed_ms for _, t in points if t > killed_ms), None)}


def ctl_json(cluster, *argv):
    r = subprocess.run(cluster.ctl(*argv, "--output", "json"), capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        raise BenchError(f"trainctl {' '.join(argv)}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def worker_of_rank(cluster, rank):
    """The index of the worker (bench-N is N-1) running `rank` of the one
    running job."""
    def dicts(node):
        if isinstance(node, dict):
            yield node
            node = list(node.values())
        if isinstance(node, list):
            for child in node:
                yield from dicts(child)
    running = [d["id"] for d in dicts(ctl_json(cluster, "list"))
               if "id" in d and "RUNNING" in str(d.get("state", ""))]
    if len(running) != 1:
        raise BenchError(f"expected one running job, found {running}")
    for d in dicts(ctl_json(cluster, "status", running[0])):
        # proto JSON leaves out zeros: rank 0 has no "rank"
        if "worker" in d and "host" in d and int(d.get("rank", 0)) == rank:
            return int(d["worker"].rsplit("-", 1)[1]) - 1
    raise BenchError(f"no worker runs rank {rank} of job {running[0]}")


def logged_step(path):
    """The highest train step in the event file so far (0: none)."""
    best = 0
    try:
        with open(path) as f:
            for line in f:
                if '"train"' in line:
                    try:
                        best = max(best, int(json.loads(line)["metric"]["step"]))
                    except (ValueError, KeyError):
                        pass  # a line still being written
    except FileNotFoundError:
        pass
    return best


def main():
    args = parse_args()
    for name in ("trainctl", "trainctl-coordinator", "trainctl-worker"):
        if not os.access(os.path.join(args.bin, name), os.X_OK):
            print(f"error: {os.path.join(args.bin, name)} is not built (make build)")
            return 2
    workdir = args.workdir = args.workdir or tempfile.mkdtemp(prefix="trainctl-recovery-")
    print(f"recovery benchmark: {args.model}, {RANKS} ranks"
          f"{' and a spare worker' if args.spare else ''}, kill -9 of rank {RANKS - 1}'s "
          f"worker at step {args.kill_at} of {args.steps}, checkpoint every "
          f"{args.checkpoint_every} steps; {args.runs} runs per mode; logs in {workdir}")
    cluster = Cluster(args, RANKS + (1 if args.spare else 0), workdir)
    rows = []
    try:
        cluster.start()
        for run in range(args.runs):
            for in_place in (False, True):
                tag = f"{'in-place' if in_place else 'restart'}-{run + 1}"
                row = run_once(args, cluster, in_place, tag)
                rows.append(row)
                print(f"  {tag:12s} repeated {row['repeated']:3d}  lost {row['lost']}  "
                      f"stall {row['stall_ms']:6d} ms (after step {row['stall_after_step']})  "
                      f"kill -> next step {row['kill_to_next_ms']:.0f} ms, -> past step "
                      f"of the kill {row['caught_up_ms']:.0f} ms (a step: "
                      f"{row['step_ms']:.0f} ms)", flush=True)
                time.sleep(2)  # the restarted worker registers, its standby loads
    except BenchError as e:
        print(f"error: {e}")
        return 1
    finally:
        cluster.stop()
    print("\n| mode | repeated steps | lost steps | stall (median) | kill -> next step "
          "| kill -> past the step of the kill | a step |")
    print("|---|---|---|---|---|---|---|")
    medians = {}
    for mode in ("restart", "in-place"):
        mine = [r for r in rows if r["mode"] == mode]
        medians[mode] = statistics.median(r["stall_ms"] for r in mine)
        print(f"| {mode} | {statistics.median(r['repeated'] for r in mine):.0f} | "
              f"{max(r['lost'] for r in mine)} | {medians[mode]:.0f} ms | "
              f"{statistics.median(r['kill_to_next_ms'] for r in mine):.0f} ms | "
              f"{statistics.median(r['caught_up_ms'] for r in mine):.0f} ms | "
              f"{statistics.median(r['step_ms'] for r in mine):.0f} ms |")
    print(f"\nstall ratio restart / in-place: {medians['restart'] / medians['in-place']:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
