#!/usr/bin/env python3
"""PyTorch DDP peer of trainctl's file-backed token training, for
bench/data_scale.py.

Run under torchrun, one process per rank:

  torchrun --standalone --nproc_per_node R --redirects 1 --tee 1 \\
      bench/data_scale_peer.py --data DIR_OR_FILE --vocab V --seq-len L \\
      --global-batch B --steps N --threads T --log-every K

How a PyTorch user trains on token files larger than memory: every shard
(the files of DIR in name order, or one FILE) is opened with np.memmap as
uint16, sample i of a shard is the window [i*L, i*L + L + 1) (windows never
cross shards, as in trainctl), a ConcatDataset joins the shards, a seeded
DistributedSampler shuffles them and gives each rank its slice, and a
DataLoader batches them. The network is trainctl's built-in `gpt` with the
bench's sizes (peer_gpt.py), trained by DDP over Gloo with
AdamW(lr 5e-4, weight decay 0.01) and next-token cross-entropy, as
data_scale.py's trainctl job is.

Rank 0 prints `BENCH_RESULT {json}`: launch_to_first_step_s (from
BENCH_LAUNCH_NS, set by the driver right before it starts torchrun, to the
end of step 1), window_samples_per_sec (global samples/s of each window of
K steps), samples, and the torch version.
"""

import argparse
import json
import os
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True)
    p.add_argument("--vocab", type=int, required=True)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--global-batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


ARGS = parse_args()
# Thread pools are sized when torch loads (see bench/ddp_peer.py).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(ARGS.threads)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402
from torch.utils.data import ConcatDataset, DataLoader, Dataset  # noqa: E402
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

from peer_gpt import Gpt  # noqa: E402


class TokenWindows(Dataset):
    """Next-token windows of one memory-mapped uint16 shard."""

    def __init__(self, path, seq_len):
        self.tokens = np.memmap(path, dtype=np.uint16, mode="r")
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.tokens) - 1) // self.seq_len

    def __getitem__(self, i):
        start = i * self.seq_len
        window = torch.from_numpy(
            self.tokens[start:start + self.seq_len + 1].astype(np.int64))
        return window[:-1], window[1:]


def shard_paths(data):
    if os.path.isdir(data):
        return [os.path.join(data, n) for n in sorted(os.listdir(data))
                if not n.startswith(".")]
    return [data]


def main():
    args = ARGS
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dataset = ConcatDataset([TokenWindows(p, args.seq_len)
                             for p in shard_paths(args.data)])
    sampler = DistributedSampler(dataset, num_replicas=world, rank=rank,
                                 shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(dataset, batch_size=args.global_batch // world,
                        sampler=sampler, drop_last=True)
    torch.manual_seed(args.seed)
    model = DDP(Gpt(args.vocab, args.d_model, args.layers, args.heads,
                    4 * args.d_model, args.seq_len))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    launch_ns = int(os.environ.get("BENCH_LAUNCH_NS", "0"))
    first_step_s, windows = None, []
    window_start = time.perf_counter()
    step = 0
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, args.vocab), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        step += 1
        if step == 1 and launch_ns:
            first_step_s = (time.time_ns() - launch_ns) / 1e9
        if step % args.log_every == 0:
            now = time.perf_counter()
            windows.append(args.log_every * args.global_batch / (now - window_start))
            window_start = now
        if step == args.steps:
            break
    if rank == 0:
        print("BENCH_RESULT " + json.dumps({
            "launch_to_first_step_s": first_step_s,
            "window_samples_per_sec": windows,
            "samples": len(dataset),
            "final_loss": float(loss.item()),
            "torch": torch.__version__,
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
