#!/usr/bin/python3
"""trainctl-coordinator serves grpc.health.v1.Health (what Kubernetes' grpc
probes call) on its --listen port:
  * Check("") and Check of each trainctl service answer SERVING;
  * Check of an unknown service fails with NOT_FOUND;
  * a Watch("") stream sees NOT_SERVING as soon as SIGTERM starts shutdown.
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
SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"


def request(service):
    data = service.encode()
    return (b"\x0a" + bytes([len(data)]) + data) if data else b""


def main():
    with tempfile.TemporaryDirectory() as tmp:
        port_file = os.path.join(tmp, "port")
        log = open(os.path.join(tmp, "coordinator.log"), "w+")
        coordinator = subprocess.Popen(
            [os.path.join(BIN, "trainctl-coordinator"), "--listen",
             "127.0.0.1:0", "--port-file", port_file, "--state-dir",
             os.path.join(tmp, "state")], stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while not os.path.exists(port_file):
                if coordinator.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit("FAIL: coordinator did not start:\n" + log.read())
                time.sleep(0.05)
            port = open(port_file).read().strip()
            check(port, coordinator)
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
            coordinator.wait()


def check(port, coordinator):
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    check_call = channel.unary_unary("/grpc.health.v1.Health/Check")
    for service in ("", "trainctl.v1.Jobs", "trainctl.v1.Workers",
                    "trainctl.v1.Rendezvous"):
        reply = check_call(request(service), timeout=5)
        if reply != SERVING:
            sys.exit(f"FAIL: Check({service!r}) = {reply!r}, want SERVING")
        print(f"ok: Check({service!r}) = SERVING")
    try:
        check_call(request("no.such.Service"), timeout=5)
        sys.exit("FAIL: Check of an unknown service succeeded")
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            sys.exit(f"FAIL: unknown service gave {e.code()}, want NOT_FOUND")
    print("ok: Check('no.such.Service') = NOT_FOUND")

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


main()
