#!/usr/bin/env python3
"""Start-up time and rank memory against dataset size, file-backed tokens
beside the same tokens held in memory.

  /usr/bin/python3 bench/data_scale.py [--sizes-mb 64,1024,8192] [--runs 3]
      [--shards 16] [--ranks 2] [--steps 40] [--seq-len 256] [--bin build/bin]

Writes random uint16 token files of each size (ids below --vocab) once, as
a directory of --shards files of unequal sizes (a sharded set; 1 = one
file; the smallest size is always one file, for the in-memory peer), then
for each size runs, --runs times, the built-in gpt on --ranks single-slot
workers on loopback (a coordinator and workers as a user runs them, TLS and
tokens) with `data.format: tokens` and model.vocab_size declared, so a file
past 256 MiB is not scanned. The peer is the same job on the smallest size
with the tokens in `data.format: tensors` (torch.save, read into memory by
each rank: how every token file was read before), for throughput.

The PyTorch peer (bench/data_scale_peer.py, under each --torchrun given:
Debian's 1.13 by default, a 2.x wheel's too when passed) trains the same
gpt on the same files as a PyTorch user would: np.memmap per shard, a
ConcatDataset, DistributedSampler and DataLoader, DDP over Gloo, at the
same batch, steps and threads. Its ranks are sampled the same way.
--peer-heap-reuse gives it trainctl's rank malloc settings, as in
bench/ddp_compare.py. The 2.x peer needs NumPy in that venv
(`build-torch2-venv/bin/python -m pip install numpy`).

While a job runs, every rank process (the workers' children) is sampled
from /proc every 100 ms: peak VmRSS, and its RssAnon/RssFile split (pages
of the file a rank read are counted as RssFile only while it maps them;
pread leaves them in the page cache, shared and unmapped). Per run it
prints submit -> first step (s), data_load_ms from the first_step event,
the largest rank's peak RSS (MiB), data_manifest_ms (the shards' checksums:
paid by the first run on a node, cached after) and steady samples/s; then
medians, and
the throughput ratio file/in-memory. Targets (issue "data at scale"): RSS
independent of size and <= 1.5 GiB, first step <= 2 s, throughput within 5%.
Needs /usr/bin/python3 with NumPy and torch (Debian's python3-torch) to
write the files.
"""

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_cluster import (BenchError, Cluster, run_launcher,  # noqa: E402
                           torch_version, with_rank_malloc)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes-mb", default="64,1024,8192")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=16, help="global batch")
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--torchrun", default="/usr/bin/torchrun",
                   help="comma-separated torchrun executables for the PyTorch "
                        "peer ('' = no peer), e.g. "
                        "/usr/bin/torchrun,build-torch2-venv/bin/torchrun")
    p.add_argument("--peer-heap-reuse", action="store_true",
                   help="give the peer trainctl's rank malloc settings "
                        "(GLIBC_TUNABLES), to separate that gain from the rest")
    p.add_argument("--workdir", default=None,
                   help="where the token files and logs go (default: a "
                        "temporary directory, removed afterwards)")
    p.add_argument("--timeout", type=float, default=900)
    return p.parse_args()


def write_tokens(path, megabytes, vocab, seed):
    import numpy as np
    if os.path.exists(path) and os.path.getsize(path) == megabytes << 20:
        return
    rng = np.random.default_rng(seed)
    with open(path + ".tmp", "wb") as f:
        for _ in range(megabytes):
            f.write(rng.integers(0, vocab, 1 << 19, dtype=np.uint16).tobytes())
    os.replace(path + ".tmp", path)


def write_shards(directory, megabytes, shards, vocab):
    """`shards` files summing to `megabytes`, sizes 0.75x to 1.25x."""
    os.makedirs(directory, exist_ok=True)
    weights = [0.75 + 0.5 * (k % 3) / 2 for k in range(shards)]
    sizes = [max(1, int(megabytes * w / sum(weights))) for w in weights]
    sizes[-1] += megabytes - sum(sizes)
    for k, mb in enumerate(sizes):
        write_tokens(os.path.join(directory, f"shard-{k:05d}.bin"), mb, vocab,
                     seed=megabytes * 1000 + k)


def write_tensors(tokens_path, out_path, seq_len):
    # The same windows as the token file, as x [N, L] and y [N, L].
    script = (
        "import sys, numpy as np, torch\n"
        "t = np.fromfile(sys.argv[1], dtype=np.uint16).astype(np.int64)\n"
        "L = int(sys.argv[3]); n = (len(t) - 1) // L\n"
        "x = torch.from_numpy(t[:n * L].reshape(n, L).copy())\n"
        "y = torch.from_numpy(t[1:n * L + 1].reshape(n, L).copy())\n"
        "torch.save({'x': x, 'y': y}, sys.argv[2])\n")
    subprocess.run(["/usr/bin/python3", "-c", script, tokens_path, out_path,
                    str(seq_len)], check=True)


def descendants(pids):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(pids)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def memory_kib(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "RssAnon", "RssFile"):
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


class RankSampler(threading.Thread):
    """Peak memory of every process below the workers while a job runs."""

    def __init__(self, worker_pids):
        super().__init__(daemon=True)
        self.worker_pids, self.peak, self.stop = worker_pids, {}, False

    def run(self):
        while not self.stop:
            for pid in descendants(self.worker_pids):
                m = memory_kib(pid)
                if m.get("VmRSS", 0) > self.peak.get(pid, {}).get("VmRSS", 0):
                    self.peak[pid] = m
            time.sleep(0.1)


def spec(args, data, name):
    return {
        "name": name, "ranks": args.ranks, "seed": 1,
        "model": {"type": "gpt", "vocab_size": args.vocab,
                  "max_seq_len": args.seq_len},
        "data": data,
        "optimizer": {"type": "adamw", "lr": 0.0005},
        "training": {"epochs": 1, "batch_size": args.batch,
                     "max_steps": args.steps, "log_every_steps": 10,
                     "threads_per_rank": args.threads},
    }


def run_job(args, cluster, job, tag):
    spec_path = os.path.join(cluster.logdir, tag + ".json")
    with open(spec_path, "w") as f:
        json.dump(job, f)
    workers = [p.pid for name, p, _ in cluster.procs if name.startswith("worker")]
    sampler = RankSampler(workers)
    sampler.start()
    launch_ns = time.time_ns()
    r = subprocess.run(cluster.ctl("submit", spec_path, "--follow", "--output",
                                   "json"), capture_output=True, text=True,
                       timeout=args.timeout)
    sampler.stop = True
    sampler.join()
    if r.returncode != 0:
        raise BenchError(f"{tag}: submit exited {r.returncode}: "
                         f"{r.stderr.strip()}\n{r.stdout[-2000:]}")
    first_ms, load_ms, manifest_ms, rates = None, None, None, []
    for line in r.stdout.splitlines()[1:]:
        metric = json.loads(line).get("metric") if line.strip() else None
        if not metric:
            continue
        if metric["kind"] == "plan" and load_ms is None:
            load_ms = metric["values"].get("data_load_ms")
            manifest_ms = metric["values"].get("data_manifest_ms")
        elif metric["kind"] == "first_step" and first_ms is None:
            first_ms = int(metric["time_unix_ms"])
        elif metric["kind"] == "train":
            rates.append(metric["values"]["samples_per_sec"])
    if first_ms is None or len(rates) < 2:
        raise BenchError(f"{tag}: no first_step event or too few train windows")
    return run_result((first_ms * 1_000_000 - launch_ns) / 1e9, load_ms,
                      manifest_ms, sampler, rates)


def run_result(first_step_s, load_ms, manifest_ms, sampler, rates):
    """One run's figures: the largest sampled process is a rank of the job
    (standbys and launchers stay smaller); the first rate window is warm-up."""
    top = max(sampler.peak.values(), key=lambda m: m.get("VmRSS", 0), default={})
    return {
        "first_step_s": first_step_s,
        "data_load_ms": load_ms,
        "manifest_ms": manifest_ms,
        "rss_mib": top.get("VmRSS", 0) / 1024,
        "anon_mib": top.get("RssAnon", 0) / 1024,
        "file_mib": top.get("RssFile", 0) / 1024,
        "samples_per_sec": statistics.median(rates[1:]),
    }


def run_peer(args, torchrun, data_path, logdir, tag):
    """The PyTorch DDP peer on `data_path`: first step, rank RSS, samples/s."""
    cmd = [torchrun, "--standalone", "--nproc_per_node", str(args.ranks),
           "--redirects", "1", "--tee", "1",
           os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "data_scale_peer.py"),
           "--data", data_path, "--vocab", str(args.vocab),
           "--seq-len", str(args.seq_len), "--global-batch", str(args.batch),
           "--steps", str(args.steps), "--threads", str(args.threads),
           "--log-every", "10"]
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(args.threads)
    if args.peer_heap_reuse:
        env = with_rank_malloc(env)
    out_path = os.path.join(logdir, tag + ".log")
    samplers = []

    def watch(pid):
        samplers.append(RankSampler([pid]))
        samplers[0].start()
        return samplers[0]

    code, text = run_launcher(cmd, env, out_path, args.timeout, tag, watch)
    sampler = samplers[0]
    m = re.search(r"BENCH_RESULT (\{.*\})", text)
    if code != 0 or not m:
        raise BenchError(f"{tag}: exited {code}; output in {out_path}:"
                         f"\n{text[-2000:]}")
    r = json.loads(m.group(1))
    windows = r["window_samples_per_sec"]
    if len(windows) < 2:
        raise BenchError(f"{tag}: too few windows ({out_path})")
    return run_result(r["launch_to_first_step_s"], None, None, sampler, windows)


def main():
    args = parse_args()
    args.bin = os.path.abspath(args.bin)
    sizes = [int(s) for s in args.sizes_mb.split(",")]
    own_dir = args.workdir is None
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="data-scale-")
    os.makedirs(args.workdir, exist_ok=True)
    print(f"machine: {platform.node()} {os.cpu_count()} cpus; "
          f"{' '.join(sys.argv)}", flush=True)
    print("DDP peer malloc: " + ("trainctl's settings (--peer-heap-reuse)"
                                 if args.peer_heap_reuse else "glibc defaults"),
          flush=True)
    files = {}
    small = min(sizes)
    for mb in sizes:
        if mb == small or args.shards <= 1:
            files[mb] = os.path.join(args.workdir, f"tokens-{mb}mb.bin")
            write_tokens(files[mb], mb, args.vocab, seed=mb)
        else:
            files[mb] = os.path.join(args.workdir, f"tokens-{mb}mb-{args.shards}")
            write_shards(files[mb], mb, args.shards, args.vocab)
    tensors = os.path.join(args.workdir, f"tokens-{small}mb.pt")
    if not os.path.exists(tensors):
        write_tensors(files[small], tensors, args.seq_len)

    logdir = os.path.join(args.workdir, "cluster")
    os.makedirs(logdir, exist_ok=True)
    cluster = Cluster(args, args.ranks, logdir)
    results = {}
    try:
        cluster.start()
        def name(mb):
            return (f"tokens {mb} MiB" if mb == small or args.shards <= 1
                    else f"{args.shards} shards {mb} MiB")
        cases = [(name(mb), {"format": "tokens", "train_path": files[mb],
                                       "token_dtype": "uint16",
                                       "seq_len": args.seq_len})
                 for mb in sizes]
        cases.append((f"in memory {small} MiB",
                      {"format": "tensors", "train_path": tensors}))
        peers = []
        for torchrun in filter(None, args.torchrun.split(",")):
            torchrun = os.path.abspath(torchrun)
            version = torch_version(torchrun)
            peers.append(version)
            cases += [(f"DDP {version} {mb} MiB", (torchrun, files[mb]))
                      for mb in sizes]
        for run in range(args.runs):
            for label, data in cases:
                tag = f"{label.replace(' ', '-')}-{run}"
                if isinstance(data, tuple):
                    r = run_peer(args, data[0], data[1], logdir, tag)
                else:
                    r = run_job(args, cluster, spec(args, data, tag), tag)
                results.setdefault(label, []).append(r)
                print(f"  run {run + 1} {label:>20}: first step "
                      f"{r['first_step_s']:.2f} s, data_load_ms "
                      f"{r['data_load_ms'] or 0:.0f}, manifest_ms "
                      f"{r['manifest_ms'] or 0:.0f}, peak rank RSS {r['rss_mib']:.0f} "
                      f"MiB (anon {r['anon_mib']:.0f}, file {r['file_mib']:.0f})"
                      f", {r['samples_per_sec']:.1f} samples/s", flush=True)
    finally:
        cluster.stop()
    print(f"\nmedians of {args.runs} runs, {args.ranks} ranks, gpt, seq_len "
          f"{args.seq_len}, global batch {args.batch}:")
    print(f"{'data':>22} {'first step s':>13} {'load ms':>8} {'rank RSS MiB':>13} "
          f"{'samples/s':>10}")
    med = {}
    for label, rs in results.items():
        med[label] = {k: statistics.median(r[k] for r in rs)
                      for k in ("first_step_s", "rss_mib", "samples_per_sec")}
        loads = [r["data_load_ms"] for r in rs if r["data_load_ms"] is not None]
        print(f"{label:>22} {med[label]['first_step_s']:>13.2f} "
              f"{statistics.median(loads) if loads else float('nan'):>8.0f} "
              f"{med[label]['rss_mib']:>13.0f} "
              f"{med[label]['samples_per_sec']:>10.1f}")
    base, memory = med[f"tokens {small} MiB"], med[f"in memory {small} MiB"]
    print(f"throughput file/in-memory at {small} MiB: "
          f"{base['samples_per_sec'] / memory['samples_per_sec']:.3f}")
    largest = med[name(max(sizes))]
    print(f"rank RSS {max(sizes)} MiB / {small} MiB of tokens: "
          f"{largest['rss_mib']:.0f} / {base['rss_mib']:.0f} MiB")
    for version in peers:
        for mb in sizes:
            ours, peer = med[name(mb)], med[f"DDP {version} {mb} MiB"]
            print(f"trainctl / DDP {version} at {mb} MiB: samples/s "
                  f"{ours['samples_per_sec'] / peer['samples_per_sec']:.3f}, "
                  f"first step {ours['first_step_s']:.2f} / "
                  f"{peer['first_step_s']:.2f} s, rank RSS "
                  f"{ours['rss_mib']:.0f} / {peer['rss_mib']:.0f} MiB")
    if own_dir:
        subprocess.run(["rm", "-rf", args.workdir])


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
