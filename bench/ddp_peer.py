#!/usr/bin/env python3
"""PyTorch DDP peer of trainctl's Fashion-MNIST training, for bench/ddp_compare.py.

Run under torchrun, one process per rank:

  torchrun --standalone --nproc_per_node R --redirects 1 --tee 1 \\
      bench/ddp_peer.py --model mlp|cnn --global-batch 128 --steps N \\
      --threads T --warmup W

It trains the same network as trainctl's built-in `mlp` / `cnn` (see
worker/train/models/networks.cc) the same way: Gloo process group (and
no DDP wrapper at one rank, where there is nothing to sync),
AdamW(lr=1e-3, weight_decay=0.01) at a constant learning rate,
cross-entropy, and each step every rank takes its equal slice of the global
batch from a seeded per-epoch permutation of the training set; inputs are
float [B, 1, 28, 28] scaled to [0, 1].

Rank 0 prints one line `BENCH_RESULT {json}` with
  * launch_to_first_step_s: wall time from BENCH_LAUNCH_NS (time.time_ns()
    taken by the driver right before it spawned torchrun) to the end of step 1
    (null when BENCH_LAUNCH_NS is not set);
  * samples_per_sec: global samples per second over steps W..N, i.e. after
    the first W (warm-up) steps;
  * window_samples_per_sec: the same rate per window of W steps after the
    warm-up (for a median comparable to trainctl's per-window reports);
  * data_ms / fwd_bwd_ms / optimizer_ms: mean per-step time of each phase
    over steps W..N on rank 0. DDP overlaps the gradient all-reduce with the
    backward pass, so fwd_bwd_ms includes the communication it exposes.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=["mlp", "cnn"], required=True)
    p.add_argument("--global-batch", type=int, default=128)
    p.add_argument("--steps", type=int, required=True,
                   help="optimizer steps to run (N)")
    p.add_argument("--threads", type=int, default=1,
                   help="intra-op threads per rank (T)")
    p.add_argument("--warmup", type=int, default=0,
                   help="steps excluded from the steady-state rate (W)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    return p.parse_args()


ARGS = parse_args()

# The thread pools of OpenMP (which ATen's intra-op parallelism uses) and of
# OpenBLAS are sized from these variables when the libraries are loaded,
# i.e. while `import torch` runs; torch.set_num_threads() afterwards does not
# reach every pool (OpenBLAS in particular). So they must be set before the
# import, to the same T that trainctl's worker sets for its rank processes.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def read_idx(path):
    """Reads a (gzipped) unsigned-byte IDX file into a uint8 tensor."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    data = torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8)
    return data.reshape(dims)


def load_train_set(data_dir):
    images = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"))
    x = (images.to(torch.float32) / 255.0).unsqueeze(1)
    y = labels.to(torch.int64)
    return x.contiguous(), y


def build_model(kind):
    """The networks of worker/train/models/networks.cc with default sizes."""
    if kind == "mlp":  # hidden [512, 256]
        return nn.Sequential(
            nn.Flatten(),
            nn.Linear(784, 512), nn.ReLU(),
            nn.Linear(512, 256), nn.ReLU(),
            nn.Linear(256, 10))
    # cnn: channels [32, 64], hidden [128]
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
        nn.Linear(128, 10))


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    # trainctl's rank process also runs with a single inter-op thread.
    torch.set_num_interop_threads(1)

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if a.global_batch % world:
        raise SystemExit(f"--global-batch {a.global_batch} is not a multiple "
                         f"of the {world} ranks")
    if not 0 <= a.warmup < a.steps:
        raise SystemExit("--warmup must be in [0, --steps)")
    micro = a.global_batch // world

    x, y = load_train_set(a.data_dir)
    n = x.shape[0]
    steps_per_epoch = n // a.global_batch  # the last partial batch is dropped

    torch.manual_seed(a.seed)  # same initial weights on every rank anyway;
    # DDP broadcasts rank 0's weights at wrap time. One process has nothing
    # to sync: a plain loop, as anyone writes it (DDP at world size 1 still
    # runs its reducer's hooks and bucket copies every step).
    model = build_model(a.model) if world == 1 else DDP(build_model(a.model))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr,
                            weight_decay=a.weight_decay)
    model.train()

    perm_gen = torch.Generator()
    perm = None
    t_data = t_fwd_bwd = t_opt = 0.0
    window_marks = []  # time.perf_counter() at the end of steps W, 2W, ...
    first_step_ns = None
    loss_value = float("nan")
    steady_start = time.perf_counter()  # replaced at the end of step W
    for step in range(a.steps):
        epoch, b = divmod(step, steps_per_epoch)
        t0 = time.perf_counter()
        if b == 0:
            perm_gen.manual_seed(a.seed * 1000003 + epoch)
            perm = torch.randperm(n, generator=perm_gen)
        lo = b * a.global_batch + rank * micro
        idx = perm[lo:lo + micro]
        inputs, targets = x[idx], y[idx]
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()  # DDP all-reduces the gradient buckets in here
        loss_value = loss.item()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if step == 0:
            first_step_ns = time.time_ns()
        if step >= a.warmup:
            t_data += t1 - t0
            t_fwd_bwd += t2 - t1
            t_opt += t3 - t2
        done = step + 1
        if done == a.warmup:
            steady_start = t3
        if a.warmup > 0 and done % a.warmup == 0:
            window_marks.append(t3)
    end = time.perf_counter()

    steady_steps = a.steps - a.warmup
    steady_elapsed = end - steady_start
    windows = [a.warmup * a.global_batch / (t1 - t0)
               for t0, t1 in zip(window_marks, window_marks[1:])]

    if rank == 0:
        launch = os.environ.get("BENCH_LAUNCH_NS")
        per_step = 1000.0 / max(1, a.steps - a.warmup)
        result = {
            "model": a.model,
            "ranks": world,
            "threads": a.threads,
            "global_batch": a.global_batch,
            "steps": a.steps,
            "warmup": a.warmup,
            "launch_to_first_step_s":
                (first_step_ns - int(launch)) / 1e9 if launch else None,
            "samples_per_sec":
                steady_steps * a.global_batch / steady_elapsed
                if steady_elapsed > 0 and steady_steps > 0 else None,
            "window_samples_per_sec": windows,
            "data_ms": t_data * per_step,
            "fwd_bwd_ms": t_fwd_bwd * per_step,
            "optimizer_ms": t_opt * per_step,
            "final_loss_rank0": loss_value,
            "torch": torch.__version__,
        }
        print("BENCH_RESULT " + json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
