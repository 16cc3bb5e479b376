#!/usr/bin/env python3
"""checkpoint.async against the synchronous write, and both against PyTorch.

Runs bench_async_checkpoint (trainctl's Checkpointer on the built-in gpt,
about 100 M parameters, with AdamW's state) and then the peer,
async_checkpoint_peer.py, on the same tensor shapes with each PyTorch it
finds: Debian's (/usr/bin/python3, 1.13: torch.save only) and the 2.x wheel
of build-torch2-venv (torch.save and torch.distributed.checkpoint's
async_save). One thread each (as a rank on a one-thread slot), medians of
--runs. Issue #20's target: training blocked at most 20% of the
synchronous write's time.

  python3 bench/async_checkpoint.py [--bin build/bin] [--runs 5] [--layers 14]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = [("torch 1.13 (Debian)", "/usr/bin/python3"),
         ("torch 2.x (wheel)", os.path.join(ROOT, "build-torch2-venv/bin/python"))]


def one_thread_env():
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    return env


def has_torch(python):
    return os.path.exists(python) and subprocess.run(
        [python, "-c", "import torch"], capture_output=True).returncode == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, "build/bin"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--layers", type=int, default=14)
    args = parser.parse_args()
    env = one_thread_env()
    with tempfile.TemporaryDirectory(prefix="async-ckpt-") as work:
        ours = json.loads(subprocess.run(
            [os.path.join(args.bin, "bench_async_checkpoint"), "--dir", work,
             "--runs", str(args.runs), "--layers", str(args.layers)],
            env=env, check=True, capture_output=True, text=True).stdout)
        shapes = os.path.join(work, "shapes.json")
        with open(shapes, "w") as f:
            json.dump(ours["shapes"], f)
        peers = []
        for name, python in PEERS:
            if not has_torch(python):
                print("(no %s at %s)" % (name, python))
                continue
            out = subprocess.run(
                [python, "-W", "ignore", os.path.join(ROOT, "bench/async_checkpoint_peer.py"),
                 "--shapes", shapes, "--dir", work, "--runs", str(args.runs)],
                env=env, check=True, capture_output=True, text=True).stdout
            peers.append((name, json.loads(out)))

    print("checkpoint of the gpt: %.1f M parameters, %.0f MB (model + AdamW), "
          "medians of %d runs, one thread" %
          (ours["parameters"] / 1e6, ours["bytes"] / 1e6, ours["runs"]))
    header = "%-34s %12s" % ("", "trainctl")
    for name, _ in peers:
        header += " %20s" % name
    print(header)

    def row(label, mine, key):
        line = "%-34s %12s" % (label, "%.0f" % mine if mine is not None else "-")
        for _, p in peers:
            line += " %20s" % ("%.0f" % p[key] if key in p else "-")
        print(line)

    row("synchronous write, ms", ours["sync_write_ms"], "save_ms")
    row("async: training blocked, ms", ours["async_blocked_ms"], "async_blocked_ms")
    # trainctl's writer shares the machine with a training step; the peer's
    # runs alone.
    row("async: until written, ms", ours["async_write_ms"] + ours["async_blocked_ms"],
        "async_done_ms")
    print("(until written: trainctl trains a step meanwhile, the peer waits)")
    ratio = ours["async_blocked_ms"] / ours["sync_write_ms"]
    print("trainctl: blocked / synchronous write = %.3f (target <= 0.2: %s)" %
          (ratio, "met" if ratio <= 0.2 else "NOT met"))
    for name, p in peers:
        print("trainctl synchronous write / %s torch.save = %.2f" %
              (name, ours["sync_write_ms"] / p["save_ms"]))
        if "async_blocked_ms" in p:
            print("trainctl async blocked / %s async_save blocked = %.2f" %
                  (name, ours["async_blocked_ms"] / p["async_blocked_ms"]))
    print("a training step: %.0f ms alone, %.0f ms while an async write runs" %
          (ours["step_ms"], ours["step_during_write_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
