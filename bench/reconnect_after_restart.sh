#!/bin/bash
# Whole-process timing: kill -9 of a TLS coordinator, restart 3 s later on
# the same port, and the milliseconds until its worker registers again (the
# agent reconnects by itself; issue #15 saw 33 s and 63 s). Includes the
# coordinator's own start-up. Usage:
#   bench/reconnect_after_restart.sh [BIN_DIR] [RUNS]
# Run several times: the machine is shared.
set -u
bin=${1:-build/bin}
runs=${2:-3}
for run in $(seq "$runs"); do
  d=$(mktemp -d)
  "$bin/trainctl-coordinator" --listen 127.0.0.1:0 --port-file "$d/port" \
    --state-dir "$d/state" > "$d/coord.log" 2>&1 &
  coord=$!
  for _ in $(seq 300); do [ -s "$d/port" ] && break; sleep 0.1; done
  port=$(cat "$d/port")
  "$bin/trainctl-worker" --coordinator "127.0.0.1:$port" --name bench \
    --slots 1 --state-dir "$d/worker" --ca-cert "$d/state/tls/ca.crt" \
    --join-token-file "$d/state/auth/join.token" \
    $([ "$(id -u)" -ne 0 ] || echo --allow-root-ranks) > "$d/worker.log" 2>&1 &
  worker=$!
  for _ in $(seq 300); do grep -q "registered with" "$d/worker.log" && break; sleep 0.1; done
  kill -9 "$coord"; wait "$coord" 2>/dev/null
  sleep 3
  start=$(date +%s%N)
  "$bin/trainctl-coordinator" --listen "127.0.0.1:$port" \
    --state-dir "$d/state" >> "$d/coord.log" 2>&1 &
  coord=$!
  for _ in $(seq 1500); do
    [ "$(grep -c 'registered with' "$d/worker.log")" -ge 2 ] && break
    sleep 0.02
  done
  end=$(date +%s%N)
  if [ "$(grep -c 'registered with' "$d/worker.log")" -ge 2 ]; then
    echo "run $run: re-registered $(( (end - start) / 1000000 )) ms after the restart"
    kept=""
  else
    echo "run $run: not re-registered within 30 s; logs kept in $d" >&2
    kept=1
  fi
  kill "$worker" "$coord" 2>/dev/null; wait 2>/dev/null
  [ -n "$kept" ] || rm -rf "$d"
done
