"""The trainctl side of bench/ddp_compare.py: a coordinator and workers on
loopback, run as a user runs them (TLS, join token, admin token)."""

import json
import os
import signal
import subprocess
import time


def with_rank_malloc(env):
    """`env` with the malloc settings trainctl's agent gives its ranks
    (RankMallocTunables in worker/support/heap_reuse.cc), for a peer that is
    to run on an equal allocator."""
    env = dict(env)
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [
        "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=33554432:"
        "glibc.malloc.trim_threshold=1073741824",
        env.get("GLIBC_TUNABLES")]))
    return env


def torch_version(torchrun):
    """The torch version of the Python beside `torchrun` ("?" if none)."""
    python = os.path.join(os.path.dirname(torchrun), "python3")
    if not os.access(python, os.X_OK):
        python = "/usr/bin/python3"
    r = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                       capture_output=True, text=True)
    return r.stdout.strip() or "?"


class BenchError(Exception):
    pass


def run_launcher(cmd, env, out_path, timeout, tag, watch=None):
    """Runs a peer's launcher (torchrun) in its own session, output to
    `out_path`, with BENCH_LAUNCH_NS set the moment before it starts;
    `watch(pid)` returns a started sampler thread (with .stop and .join) or
    None. Returns (exit code, output text); kills the whole session and
    raises BenchError past `timeout` seconds."""
    env = dict(env)
    with open(out_path, "w") as out:
        env["BENCH_LAUNCH_NS"] = str(time.time_ns())
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
        sampler = watch(proc.pid) if watch else None
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise BenchError(f"{tag} did not end in {timeout:.0f} s; output in "
                             f"{out_path}")
        finally:
            if sampler:
                sampler.stop = True
                sampler.join()
    with open(out_path, errors="replace") as f:
        return proc.returncode, f.read()


class Cluster:
    """A coordinator and `ranks` single-slot workers on loopback."""

    def __init__(self, args, ranks, logdir):
        self.args, self.ranks, self.logdir = args, ranks, logdir
        self.procs = []  # (name, Popen, log path)
        self.address = None

    def _spawn(self, name, cmd, env=None):
        log = os.path.join(self.logdir, name + ".log")
        with open(log, "ab") as out:  # a restarted worker appends
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env)
        self.procs.append((name, proc, log))
        return proc

    def ctl(self, *argv):
        # TLS and a token, as a user runs it; the handshake is part of the
        # launch time measured.
        state = os.path.join(self.logdir, "state")
        with open(os.path.join(state, "auth", "admin.token")) as f:
            token = f.read().strip()
        return [os.path.join(self.args.bin, "trainctl"),
                "--coordinator", self.address,
                "--ca-cert", os.path.join(state, "tls", "ca.crt"),
                "--token", token, *argv]

    def start(self):
        port_file = os.path.join(self.logdir, "port")
        coord = self._spawn("coordinator", [
            os.path.join(self.args.bin, "trainctl-coordinator"),
            "--listen", "127.0.0.1:0", "--port-file", port_file,
            "--state-dir", os.path.join(self.logdir, "state")])
        deadline = time.monotonic() + 30
        while not (os.path.exists(port_file) and os.path.getsize(port_file)):
            if coord.poll() is not None:
                raise BenchError(f"coordinator exited with {coord.returncode}")
            if time.monotonic() > deadline:
                raise BenchError("coordinator did not write its port in 30 s")
            time.sleep(0.05)
        time.sleep(0.05)  # let a partially written file finish
        with open(port_file) as f:
            self.address = "127.0.0.1:" + f.read().strip()
        for i in range(self.ranks):
            self.start_worker(i)
        deadline = time.monotonic() + 60
        while True:
            for name, proc, _ in self.procs:
                if proc.poll() is not None:
                    raise BenchError(f"{name} exited with {proc.returncode}")
            r = subprocess.run(self.ctl("workers", "--output", "json"),
                               capture_output=True, text=True, timeout=30)
            if r.returncode == 0:
                try:
                    workers = json.loads(r.stdout).get("workers", [])
                except ValueError:
                    workers = []
                if len(workers) >= self.ranks:
                    # Registered workers start their standby rank processes
                    # (loading LibTorch) right after; "already running
                    # workers" means those are ready too.
                    time.sleep(3)
                    return
            if time.monotonic() > deadline:
                raise BenchError(f"{self.ranks} workers did not register in "
                                 f"60 s (last answer: {r.stdout or r.stderr})")
            time.sleep(0.1)

    def start_worker(self, i):
        """Starts worker i (0-based) as `bench-{i+1}`; again after a kill,
        with the same name and state directory."""
        state = os.path.join(self.logdir, "state")
        return self._spawn(f"worker-{i + 1}", [
            os.path.join(self.args.bin, "trainctl-worker"),
            "--coordinator", self.address, "--name", f"bench-{i + 1}",
            "--slots", "1", "--cpus", str(self.args.threads),
            # CPU slots for the CPU benchmarks, even on a GPU node.
            "--gpus", getattr(self.args, "gpus", "none"),
            "--ca-cert", os.path.join(state, "tls", "ca.crt"),
            "--join-token-file", os.path.join(state, "auth", "join.token"),
            "--state-dir", os.path.join(self.logdir, f"worker-{i + 1}"),
            # One decoded-data cache for the whole benchmark, as a node
            # keeps it across jobs: only the first trainctl run inflates.
            "--data-cache-dir", os.path.join(self.args.workdir,
                                             "data-cache")]
            # As root (CI containers), ranks run as root, as the
            # torchrun peer's do; a worker refuses that unless told.
            + (["--allow-root-ranks"] if os.geteuid() == 0 else []))

    def kill_worker(self, i):
        """SIGKILL to worker i's agent (its ranks die with it)."""
        for name, proc, _ in self.procs:
            if name == f"worker-{i + 1}" and proc.poll() is None:
                proc.kill()
                proc.wait()
        self.procs = [p for p in self.procs
                      if not (p[0] == f"worker-{i + 1}" and p[1].poll() is not None)]

    def check_alive(self):
        for name, proc, _ in self.procs:
            if proc.poll() is not None:
                raise BenchError(f"{name} exited with {proc.returncode}")

    def stop(self):
        # Workers first, so they do not spend the coordinator's shutdown
        # reconnecting; then the coordinator.
        for name, proc, _ in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for name, proc, _ in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
