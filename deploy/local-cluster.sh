#!/usr/bin/env bash
# Starts a coordinator and two workers on loopback, submits a job spec,
# streams its events until it ends, then stops the daemons.
#
#   deploy/local-cluster.sh [--bin DIR] [--workers N] SPEC.yaml
#
# Daemon logs go to .demo/ in the current directory. Exits with the status
# of `trainctl submit --follow` (0 only when the job SUCCEEDED).
set -uo pipefail

bin=build/bin
workers=2
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
spec="${1:?usage: $0 [--bin DIR] [--workers N] SPEC.yaml}"
[ -r "$spec" ] || { echo "cannot read job spec $spec" >&2; exit 2; }

state=.demo
mkdir -p "$state"
rm -f "$state/port"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

# Secure as deployed: the coordinator's first start makes the cluster CA, a
# server certificate, an admin token and a worker join token in its state
# directory; workers trade the join token for certificates and the CLI uses
# the admin token.
"$bin/trainctl-coordinator" --listen 127.0.0.1:0 --port-file "$state/port" \
  --state-dir "$state/state" \
  > "$state/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [ -s "$state/port" ] && break; sleep 0.1; done
[ -s "$state/port" ] || { echo "coordinator did not start; see $state/coordinator.log" >&2; exit 1; }
export TRAINCTL_COORDINATOR="127.0.0.1:$(cat "$state/port")"
export TRAINCTL_CA_CERT="$state/state/tls/ca.crt"
TRAINCTL_TOKEN="$(cat "$state/state/auth/admin.token")"
export TRAINCTL_TOKEN
echo "coordinator at $TRAINCTL_COORDINATOR over TLS (logs in $state/)"

# A worker run as root refuses to run job code as root unless told to
# (docs/security.md); on a throwaway machine the demo tells it to.
root_ranks=()
if [ "$(id -u)" -eq 0 ]; then
  echo "running as root: the workers run the demo's ranks as root too" \
       "(--allow-root-ranks); on a shared machine run it as a normal user"
  root_ranks=(--allow-root-ranks)
fi
# Split the cores between the workers so their ranks do not oversubscribe.
cpus=$(( $(nproc) / workers )); [ "$cpus" -ge 1 ] || cpus=1
for i in $(seq 1 "$workers"); do
  "$bin/trainctl-worker" --name "worker-$i" --slots 1 --cpus "$cpus" \
    --ca-cert "$TRAINCTL_CA_CERT" \
    --join-token-file "$state/state/auth/join.token" \
    --state-dir "$state/worker-$i" "${root_ranks[@]}" \
    > "$state/worker-$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 300); do
  [ "$("$bin/trainctl" workers --output json | grep -c '"name"')" -ge "$workers" ] && break
  sleep 0.1
done
"$bin/trainctl" workers

"$bin/trainctl" submit "$spec" --follow | tee "$state/follow.log"
status=${PIPESTATUS[0]}
job=$(head -n 1 "$state/follow.log")
echo
"$bin/trainctl" status "$job" || true
exit "$status"
