"""The peer of bench_async_checkpoint: the same tensors saved the way a
PyTorch user saves a training checkpoint.

Builds tensors of the shapes given (the trainctl model's state), AdamW over
those that train, one step so its state exists, then per run:
  * torch.save of {model, optimizer} to a temporary file, flushed, fsynced
    and renamed (what a checkpoint that survives a crash needs);
  * on PyTorch 2.x, torch.distributed.checkpoint.async_save, which stages
    the state into host memory and writes it in the background: how long
    it blocked, and how long until its write was done.
Prints one JSON object of medians.

  python3 async_checkpoint_peer.py --shapes FILE --dir DIR [--runs 5]
"""

import argparse
import json
import os
import shutil
import statistics
import time

import torch


def save_durably(state, path):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with open(args.shapes) as f:
        shapes = json.load(f)
    model = {}
    params = []
    for name, shape, trains in shapes:
        t = torch.randn(shape)
        if trains:
            t = torch.nn.Parameter(t)
            params.append(t)
        model[name] = t
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer.step()

    out = {"torch": torch.__version__}
    save_ms, bytes_written = [], 0
    for run in range(args.runs):
        path = os.path.join(args.dir, "peer-%d.pt" % run)
        start = time.perf_counter()
        save_durably({"model": model, "optimizer": optimizer.state_dict()}, path)
        save_ms.append((time.perf_counter() - start) * 1000)
        bytes_written = os.path.getsize(path)
        os.unlink(path)
    out["save_ms"] = statistics.median(save_ms)
    out["bytes"] = bytes_written

    try:
        import torch.distributed.checkpoint as dcp
        async_save = dcp.async_save
    except (ImportError, AttributeError):
        async_save = None
    if async_save is not None:
        blocked_ms, done_ms = [], []
        for run in range(args.runs):
            target = os.path.join(args.dir, "peer-dcp-%d" % run)
            state = {"model": model, "optimizer": optimizer.state_dict()}
            start = time.perf_counter()
            future = async_save(state, checkpoint_id=target)
            blocked_ms.append((time.perf_counter() - start) * 1000)
            future.result()
            done_ms.append((time.perf_counter() - start) * 1000)
            shutil.rmtree(target, ignore_errors=True)
        out["async_blocked_ms"] = statistics.median(blocked_ms)
        out["async_done_ms"] = statistics.median(done_ms)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
