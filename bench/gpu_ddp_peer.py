#!/usr/bin/env python3
"""PyTorch DDP peer of trainctl's built-in `gpt` on a GPU, for bench/gpu_throughput.py.

Run under torchrun, one process per GPU:

  torchrun --standalone --nproc_per_node 1 bench/gpu_ddp_peer.py \\
      --tokens FILE --vocab V --layers 12 --d-model 1024 --heads 16 \\
      --d-ff 4096 --seq 1024 --batch 8 --steps N --warmup W

The same network as trainctl's `gpt` (peer_gpt.py). Trained as a
PyTorch user would on one GPU with DDP: NCCL, bf16 autocast, fused AdamW
(lr 3e-4, weight decay 0.01), cross-entropy over every position, each rank
reading random windows of the uint16 token file (ids below 32768).

Rank 0 prints `BENCH_RESULT {json}`: tokens_per_sec over steps W..N (the
clock read after a CUDA synchronize), parameters, and the step time.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from peer_gpt import Gpt


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--d-ff", type=int, default=4096)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8, help="sequences per GPU per step")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cpu: Gloo on the CPU, to check the plumbing")
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw",
                   help="sgd: lr 3e-4, no momentum (torch's default foreach)")
    p.add_argument("--profile-dir", default="",
                   help="trace steps --profile-start.. with torch.profiler into "
                        "DIR/ddp-rank-R.json (bench/trace_summary.py reads it)")
    p.add_argument("--profile-start", type=int, default=20)
    p.add_argument("--profile-steps", type=int, default=3)
    args = p.parse_args()

    cuda = args.device == "cuda"
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local)
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.manual_seed(5)
    model = Gpt(args.vocab, args.d_model, args.layers, args.heads, args.d_ff,
                args.seq).to(device)
    params = sum(p.numel() for p in model.parameters())
    model = DDP(model, device_ids=[local] if cuda else None)
    if args.optimizer == "adamw":
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01,
                                      fused=cuda)
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=3e-4)
    # The ids are below 32768, so int16 reads them as the uint16 file holds them.
    with open(args.tokens, "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.int16).to(torch.int64)
    windows = (len(data) - 1) // args.seq
    generator = torch.Generator().manual_seed(rank)

    def batch():
        starts = torch.randint(0, windows, (args.batch,), generator=generator) * args.seq
        x = torch.stack([data[s:s + args.seq] for s in starts.tolist()])
        y = torch.stack([data[s + 1:s + args.seq + 1] for s in starts.tolist()])
        if not cuda:
            return x, y
        return (x.pin_memory().to(device, non_blocking=True),
                y.pin_memory().to(device, non_blocking=True))

    profiler = None
    if args.profile_dir:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        os.makedirs(args.profile_dir, exist_ok=True)
        trace = os.path.join(args.profile_dir, f"ddp-rank-{rank}.json")
        profiler = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(wait=args.profile_start, warmup=0,
                                             active=args.profile_steps, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(trace))
        profiler.start()
    start = None
    for step in range(args.steps):
        if step == args.warmup:
            sync()
            start = time.perf_counter()
        with torch.profiler.record_function(f"ddp step {step}"):
            x, y = batch()
            with torch.autocast(args.device, dtype=torch.bfloat16):
                logits = model(x)
                loss = F.cross_entropy(logits.view(-1, args.vocab).float(), y.view(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if profiler is not None:
            profiler.step()
    sync()
    if profiler is not None:
        profiler.stop()
    seconds = time.perf_counter() - start
    measured = args.steps - args.warmup
    tokens = measured * args.batch * args.seq * world
    if rank == 0:
        print("BENCH_RESULT " + json.dumps({
            "tokens_per_sec": tokens / seconds,
            "step_ms": 1000 * seconds / measured,
            "parameters": params,
            "final_loss": float(loss.item()),
            "torch": torch.__version__,
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
