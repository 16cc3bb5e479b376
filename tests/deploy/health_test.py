#!/usr/bin/python3
"""trainctl-coordinator serves grpc.health.v1.Health on its --listen port,
over TLS by default:
  * with the cluster CA the coordinator made in its --state-dir, Check("")
    and Check of each trainctl service answer SERVING, without a token,
    while a trainctl call without a token is UNAUTHENTICATED;
  * Check of an unknown service fails with NOT_FOUND;
  * plaintext, and TLS verified with another cluster's CA, do not get
    through (UNAVAILABLE);
  * a Watch("") stream sees NOT_SERVING as soon as SIGTERM starts shutdown;
  * with --insecure (and only then) plaintext works, and the coordinator
    warns that it is insecure.
trainctl-worker --health-listen serves grpc.health.v1.Health (plaintext, for
probes): SERVING once it has joined and registered, NOT_SERVING when it loses
the coordinator.
Uses Debian's python3-grpcio with raw bytes (HealthCheckRequest is one string
field, HealthCheckResponse one enum), so no generated code is needed.
Skipped (77) without python3-grpcio.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time

try:
    import grpc
except ImportError:
    print("SKIPPED: python3-grpcio is not installed (deploy/install-deps.sh "
          "installs it)")
    sys.exit(77)

BIN = os.environ["TRAINCTL_BIN_DIR"]
COORDINATOR = os.path.join(BIN, "trainctl-coordinator")
WORKER = os.path.join(BIN, "trainctl-worker")
SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


def request(service):
    data = service.encode()
    return (b"\x0a" + bytes([len(data)]) + data) if data else b""


def start(tmp, name, *flags):
    """A coordinator on 127.0.0.1:0 with its state in tmp/name; returns the
    process, its port and its log file."""
    port_file = os.path.join(tmp, name + ".port")
    log = open(os.path.join(tmp, name + ".log"), "w+")
    process = subprocess.Popen(
        [COORDINATOR, "--listen", "127.0.0.1:0", "--port-file", port_file,
         "--state-dir", os.path.join(tmp, name), *flags],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log.seek(0)
            sys.exit(f"FAIL: coordinator {name} did not start:\n" + log.read())
        time.sleep(0.05)
    return process, open(port_file).read().strip(), log


def stop(process):
    if process.poll() is None:
        process.kill()
    process.wait()


def health_check(channel, service=""):
    return channel.unary_unary("/grpc.health.v1.Health/Check")(
        request(service), timeout=5)


def expect_code(what, call, code):
    try:
        call()
    except grpc.RpcError as e:
        if e.code() != code:
            sys.exit(f"FAIL: {what} gave {e.code()}, want {code}")
        return
    sys.exit(f"FAIL: {what} succeeded, want {code}")


def tls_channel(port, ca_path):
    with open(ca_path, "rb") as f:
        credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
    return grpc.secure_channel(f"127.0.0.1:{port}", credentials)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # Another cluster's CA, made ahead of time by `init`.
        subprocess.run([COORDINATOR, "init", "--state-dir",
                        os.path.join(tmp, "other")], check=True,
                       stdout=subprocess.DEVNULL)
        coordinator, port, _ = start(tmp, "state")
        worker = None
        try:
            worker, worker_port = start_worker(tmp, port)
            wait_for_health(worker_port, SERVING, "after registering")
            print("ok: worker health SERVING once registered")
            check_secure(tmp, port, coordinator)
            wait_for_health(worker_port, NOT_SERVING,
                            "after the coordinator stopped")
            print("ok: worker health NOT_SERVING once the coordinator is gone")
        finally:
            stop(coordinator)
            if worker is not None:
                stop(worker)
        insecure, port, log = start(tmp, "insecure", "--insecure")
        try:
            check_insecure(port, log)
        finally:
            stop(insecure)


def start_worker(tmp, port):
    """A worker that joins the coordinator on `port` with a health port."""
    state = os.path.join(tmp, "state")
    port_file = os.path.join(tmp, "worker-health.port")
    log = open(os.path.join(tmp, "worker.log"), "w+")
    process = subprocess.Popen(
        [WORKER, "--coordinator", f"127.0.0.1:{port}", "--name", "hw",
         "--ca-cert", os.path.join(state, "tls", "ca.crt"),
         "--join-token-file", os.path.join(state, "auth", "join.token"),
         "--state-dir", os.path.join(tmp, "worker-state"),
         "--health-listen", "127.0.0.1:0", "--health-port-file", port_file,
         "--kill-grace-ms", "500"],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log.seek(0)
            sys.exit("FAIL: the worker's health port did not start:\n" +
                     log.read())
        time.sleep(0.05)
    return process, open(port_file).read().strip()


def wait_for_health(port, want, when):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    reply = None
    while time.monotonic() < deadline:
        try:
            reply = health_check(channel)
        except grpc.RpcError as e:
            reply = e.code()
        if reply == want:
            return
        time.sleep(0.1)
    sys.exit(f"FAIL: worker health {when}: {reply!r}, want {want!r}")


def check_secure(tmp, port, coordinator):
    ca = os.path.join(tmp, "state", "tls", "ca.crt")
    if not os.path.exists(ca):
        sys.exit(f"FAIL: the coordinator made no {ca} on its first start")
    channel = tls_channel(port, ca)
    for service in ("", "trainctl.v1.Jobs", "trainctl.v1.Workers",
                    "trainctl.v1.Rendezvous"):
        reply = health_check(channel, service)
        if reply != SERVING:
            sys.exit(f"FAIL: Check({service!r}) = {reply!r}, want SERVING")
        print(f"ok: TLS with the cluster CA, no token: Check({service!r}) = "
              "SERVING")
    expect_code("Check('no.such.Service')",
                lambda: health_check(channel, "no.such.Service"),
                grpc.StatusCode.NOT_FOUND)
    print("ok: Check('no.such.Service') = NOT_FOUND")
    # ListJobsRequest{} is the empty message.
    expect_code("ListJobs without a token",
                lambda: channel.unary_unary("/trainctl.v1.Jobs/ListJobs")(
                    b"", timeout=5),
                grpc.StatusCode.UNAUTHENTICATED)
    print("ok: trainctl.v1.Jobs/ListJobs without a token = UNAUTHENTICATED")

    expect_code("plaintext Check('') on the TLS port",
                lambda: health_check(
                    grpc.insecure_channel(f"127.0.0.1:{port}")),
                grpc.StatusCode.UNAVAILABLE)
    print("ok: plaintext without --insecure does not get through "
          "(UNAVAILABLE)")
    expect_code("Check('') verified with another cluster's CA",
                lambda: health_check(tls_channel(
                    port, os.path.join(tmp, "other", "tls", "ca.crt"))),
                grpc.StatusCode.UNAVAILABLE)
    print("ok: TLS verified with another cluster's CA does not get through "
          "(UNAVAILABLE)")

    watch = channel.unary_stream("/grpc.health.v1.Health/Watch")(
        request(""), timeout=15)
    first = next(watch)
    if first != SERVING:
        sys.exit(f"FAIL: Watch('') starts with {first!r}, want SERVING")
    coordinator.send_signal(signal.SIGTERM)
    seen = []
    try:
        for reply in watch:
            seen.append(reply)
            if reply == NOT_SERVING:
                break
    except grpc.RpcError:
        pass  # the server went away; `seen` says whether it warned first
    if NOT_SERVING not in seen:
        sys.exit(f"FAIL: Watch('') saw {seen!r} after SIGTERM, want NOT_SERVING")
    print("ok: Watch('') turns NOT_SERVING on SIGTERM")
    if coordinator.wait(timeout=15) != 0:
        sys.exit(f"FAIL: coordinator exited {coordinator.returncode} on SIGTERM")
    print("ok: coordinator exits 0 on SIGTERM")


def check_insecure(port, log):
    reply = health_check(grpc.insecure_channel(f"127.0.0.1:{port}"))
    if reply != SERVING:
        sys.exit(f"FAIL: --insecure: plaintext Check('') = {reply!r}")
    log.seek(0)
    if "--insecure" not in log.read():
        sys.exit("FAIL: the coordinator does not warn that it runs --insecure")
    print("ok: --insecure: plaintext Check('') = SERVING, and it warns")


main()
