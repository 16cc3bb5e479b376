#!/bin/bash
# Several hosts on one machine: the coordinator and two workers, each in its
# own network namespace with its own address, joined by veth pairs on a
# bridge (a switch) in the coordinator's namespace:
#
#   hub ns: br0 10.231.0.1/24, trainctl-coordinator, the trainctl CLI
#     ├── veth v-w1 ── w1 ns: eth0 10.231.0.11/24, trainctl-worker --name w1
#     └── veth v-w2 ── w2 ns: eth0 10.231.0.12/24, trainctl-worker --name w2
#
# w1 is given --collective-host 10.231.0.11; w2 is not and must find
# 10.231.0.12 itself. A 2-rank Fashion-MNIST job trains across them (Gloo
# between 10.231.0.11 and 10.231.0.12). Once it has a checkpoint, the switch port of the worker
# running rank 1 goes down (`ip link set v-wN down`): its lease expires, the
# job restarts from the checkpoint on the remaining worker
# (fault_tolerance.min_workers 1), the link comes back, the cut-off worker
# registers again with nothing left running, and the job ends SUCCEEDED.
# Checked through the CLI (`status`, `list`, `workers`, `checkpoints` with
# --output json) and the job's events (`watch --output json`). Everything
# runs secure, as deployed: TLS with the CA the coordinator makes on its
# first start, workers joining with its join token, the CLI with its admin
# token.
#
# With --in-place the job asks for fault_tolerance.in_place: the cut-off
# worker's lease expiry makes the coordinator regroup the survivor, whose
# collective with the unreachable rank would otherwise wait for its
# timeout; it gives that group up, goes on alone from its state in memory
# (no restart from the checkpoint, no step trained twice); the longest gap
# between two train points is printed. A survivor that kept waiting on
# its group would stall until the hang detector restarted the job.
#
# No namespace has a default route, so nothing can leave the namespaces;
# only their private addresses and loopback are used. Needs root and
# iproute2; exit 77 (skipped) where namespaces cannot be made.
set -euo pipefail

IN_PLACE=0
[ "${1:-}" = --in-place ] && IN_PLACE=1

skip() { echo "SKIPPED: $*"; exit 77; }

DATA=/usr/share/datasets/fashion-mnist
COORDINATOR_BIN=${TRAINCTL_COORDINATOR_BIN:-${TRAINCTL_BIN_DIR:-}/trainctl-coordinator}
WORKER_BIN=${TRAINCTL_WORKER_BIN:-${TRAINCTL_BIN_DIR:-}/trainctl-worker}
CLI_BIN=${TRAINCTL_CLI_BIN:-${TRAINCTL_BIN_DIR:-}/trainctl}
PY=/usr/bin/python3

[ "$EUID" -eq 0 ] || skip "network namespaces need root (ip netns add); run as root"
command -v ip > /dev/null || skip "no 'ip' command (Debian package iproute2)"
[ -r "$DATA/train-images-idx3-ubyte.gz" ] ||
  skip "no Fashion-MNIST in $DATA (Debian package dataset-fashion-mnist)"
for p in "$COORDINATOR_BIN" "$WORKER_BIN" "$CLI_BIN"; do
  [ -x "$p" ] || { echo "FAIL: $p is not built" >&2; exit 1; }
done

# Names carry this shell's pid, so parallel runs never share a namespace;
# addresses and interface names live inside the namespaces, so they may.
tag="trainctl-nt$$"
hub="$tag-hub"
declare -A worker_ns=([w1]="$tag-w1" [w2]="$tag-w2")
declare -A worker_ip=([w1]=10.231.0.11 [w2]=10.231.0.12)
HUB_IP=10.231.0.1
LEASE_MS=2000
HEARTBEAT_MS=250

tmp=$(mktemp -d /tmp/trainctl-netns.XXXXXX)
namespaces=()
pids=()

cleanup() {
  local rc=$? pid ns i
  set +e
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2> /dev/null; done
  for ((i = 0; i < 50; i++)); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.2
  done
  # Whatever still runs in our namespaces (a daemon that ignored SIGTERM,
  # a rank its agent left behind) was started by this test: kill it by pid.
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns" 2> /dev/null); do
      kill -KILL "$pid" 2> /dev/null
    done
  done
  for pid in "${pids[@]}"; do wait "$pid" 2> /dev/null; done
  # Deleting a namespace destroys its interfaces, and a veth pair goes with
  # either end.
  for ns in "${namespaces[@]}"; do ip netns delete "$ns" 2> /dev/null; done
  rm -rf "$tmp"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

dump_logs() {
  local f
  for f in "$tmp"/*.log; do
    [ -e "$f" ] || continue
    echo "---- $(basename "$f") (last 40 lines) ----" >&2
    tail -n 40 "$f" >&2
  done
}
fail() { echo "FAIL: $*" >&2; dump_logs; exit 1; }
# say TEXT: TEXT with the time of day, for reading the logs side by side.
say() { echo "$(date +%T.%3N) $*"; }
now_ms() { date +%s%3N; }
# secs FROM_MS TO_MS: the seconds between two now_ms times, to 0.1 s.
secs() {
  local d=$(($2 - $1))
  echo "$((d / 1000)).$((d % 1000 / 100))"
}

# The whole test stops at this many seconds (it takes about 50 s on a busy
# 2-core machine), well inside CTest's TIMEOUT, so the cleanup always runs.
BUDGET_S=170

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 0.25 s until it
# succeeds; fails the test naming WHAT after SECONDS, or when the budget of
# the whole test is spent.
wait_until() {
  local limit=$1 what=$2
  shift 2
  local end=$((SECONDS + limit))
  [ $end -le $BUDGET_S ] || end=$BUDGET_S
  until "$@"; do
    [ $SECONDS -lt $end ] ||
      fail "timed out waiting until $what (after ${limit} s, or the test's ${BUDGET_S} s)"
    sleep 0.25
  done
}

# json_true EXPR: the Python expression EXPR, with j the JSON on stdin, is
# true. json_get EXPR: prints it.
json_true() {
  "$PY" -c 'import json, sys
sys.exit(0 if eval(sys.argv[1], {}, {"j": json.load(sys.stdin)}) else 1)' "$1"
}
json_get() {
  "$PY" -c 'import json, sys
print(eval(sys.argv[1], {}, {"j": json.load(sys.stdin)}))' "$1"
}

# ---- How the programs are started: the one place for transport flags ----
# Secure, as deployed: the coordinator makes the cluster's CA, its server
# certificate (naming $HUB_IP, the address the others dial) and the tokens
# in its state directory on its first start. Each worker verifies it with
# the CA and trades the join token for its own certificate, kept in its own
# state directory (w1 takes the token as --join-token, w2 reads the file with
# --join-token-file); the CLI uses the CA and the admin token.

# start NS NAME PROGRAM ARGS...: runs PROGRAM in namespace NS in the
# background, its output in $tmp/NAME.log.
start() {
  local ns=$1 name=$2
  shift 2
  ip netns exec "$ns" "$@" > "$tmp/$name.log" 2>&1 &
  pids+=("$!")
}
CA_CERT="$tmp/state/tls/ca.crt"
JOIN_TOKEN_FILE="$tmp/state/auth/join.token"
ADMIN_TOKEN_FILE="$tmp/state/auth/admin.token"
start_coordinator() {
  start "$hub" coordinator "$COORDINATOR_BIN" --listen "$HUB_IP:0" \
    --san "$HUB_IP" --port-file "$tmp/port" --state-dir "$tmp/state" \
    --lease-ms "$LEASE_MS" --heartbeat-ms "$HEARTBEAT_MS"
}
# start_worker NAME [FLAGS...]: one slot, one core.
start_worker() {
  local name=$1 token
  shift
  if [ "$name" = w1 ]; then
    token=(--join-token "$(cat "$JOIN_TOKEN_FILE")")
  else
    token=(--join-token-file "$JOIN_TOKEN_FILE")
  fi
  start "${worker_ns[$name]}" "$name" "$WORKER_BIN" \
    --coordinator "$coordinator" --name "$name" --slots 1 --cpus 1 \
    --ca-cert "$CA_CERT" "${token[@]}" --state-dir "$tmp/$name-state" \
    --kill-grace-ms 1000 "$@"
}
# cli ARGS...: trainctl from the coordinator's namespace, bounded.
cli() {
  timeout 20 ip netns exec "$hub" "$CLI_BIN" --coordinator "$coordinator" \
    --ca-cert "$CA_CERT" --token "$(cat "$ADMIN_TOKEN_FILE")" "$@"
}

# ---- The network ----
t0=$(now_ms)
if ! ip netns add "$hub" 2> "$tmp/netns.err"; then
  skip "cannot create a network namespace: $(cat "$tmp/netns.err")"
fi
namespaces+=("$hub")
for w in w1 w2; do
  ip netns add "${worker_ns[$w]}"
  namespaces+=("${worker_ns[$w]}")
done
for ns in "${namespaces[@]}"; do ip -n "$ns" link set lo up; done
if ! ip -n "$hub" link add br0 type bridge 2> "$tmp/bridge.err"; then
  skip "cannot create a bridge in a namespace: $(cat "$tmp/bridge.err")"
fi
ip -n "$hub" addr add "$HUB_IP/24" dev br0
ip -n "$hub" link set br0 up
for w in w1 w2; do
  # Both ends are created inside the namespaces: nothing appears in the
  # host's own network namespace.
  ip -n "$hub" link add "v-$w" type veth peer name eth0 netns "${worker_ns[$w]}"
  ip -n "$hub" link set "v-$w" master br0 up
  ip -n "${worker_ns[$w]}" addr add "${worker_ip[$w]}/24" dev eth0
  ip -n "${worker_ns[$w]}" link set eth0 up
done
for ns in "${namespaces[@]}"; do
  if ip -n "$ns" route get 192.0.2.1 > /dev/null 2>&1; then
    fail "namespace $ns has a route beyond its subnet"
  fi
done
say "ok: namespaces $hub, ${worker_ns[w1]}, ${worker_ns[w2]} on bridge 10.231.0.0/24, no route out"

# ---- The cluster ----
start_coordinator
wait_until 20 "the coordinator writes its port" test -s "$tmp/port"
coordinator="$HUB_IP:$(cat "$tmp/port")"
for f in "$CA_CERT" "$JOIN_TOKEN_FILE" "$ADMIN_TOKEN_FILE"; do
  [ -s "$f" ] || fail "the coordinator made no $f on its first start"
done
# Other ranks reach a worker's ranks at its collective host, which Gloo
# binds: w1 is told its address, w2 finds it (the local address of its
# route to the coordinator; the hostname would resolve to loopback here).
start_worker w1 --collective-host "${worker_ip[w1]}"
start_worker w2
# An agent links LibTorch and starts a standby rank first: on a busy 2-core
# machine registering can take half a minute.
workers_registered() {
  cli workers --output json 2> /dev/null | json_true \
    '{w["name"]: w["host"] for w in j["workers"]} == {"w1": "10.231.0.11", "w2": "10.231.0.12"}'
}
wait_until 60 "w1 and w2 register with their namespace addresses" workers_registered
t_ready=$(now_ms)
for w in w1 w2; do
  [ -s "$tmp/$w-state/worker.crt" ] || fail "$w kept no certificate in $tmp/$w-state"
done
say "ok: coordinator at $coordinator (TLS), workers w1 and w2 joined and registered with their namespace addresses"

cat > "$tmp/job.yaml" << EOF
name: netns
ranks: 2
seed: 7
model: {type: mlp, hidden: [128]}
data:
  format: idx
  train_images: $DATA/train-images-idx3-ubyte.gz
  train_labels: $DATA/train-labels-idx1-ubyte.gz
  eval_images: $DATA/t10k-images-idx3-ubyte.gz
  eval_labels: $DATA/t10k-labels-idx1-ubyte.gz
  train_limit: 19200
  eval_limit: 2000
optimizer: {type: adamw, lr: 0.002}
training: {epochs: 3, batch_size: 96, log_every_steps: 5}
checkpoint: {dir: $tmp/checkpoints, every_steps: 20}
fault_tolerance: {min_workers: 1, max_restarts: 2, in_place: $([ $IN_PLACE = 1 ] && echo true || echo false)}
EOF
total_steps=$((3 * 19200 / 96))
job=$(cli submit "$tmp/job.yaml") || fail "submit failed"
t_submit=$(now_ms)
say "ok: submitted $job ($total_steps steps over 2 ranks)"

# Which worker runs rank 1 (the one to cut off), and at which address.
running() {
  cli status "$job" --output json > "$tmp/running.json" 2> /dev/null &&
    json_true 'j["state"] == "JOB_STATE_RUNNING" and j["generation"] == 1' < "$tmp/running.json"
}
wait_until 30 "$job runs" running
json_true "sorted((r['worker'], r['host']) for r in j['ranks']) == [('w1', '10.231.0.11'), ('w2', '10.231.0.12')]" \
  < "$tmp/running.json" || fail "ranks are not on w1 and w2 at their addresses: $(cat "$tmp/running.json")"
lost=$(json_get '[r["worker"] for r in j["ranks"] if r["rank"] == 1][0]' < "$tmp/running.json")
kept=$([ "$lost" = w1 ] && echo w2 || echo w1)
# The ranks' TCP connections between the two worker namespaces are Gloo's
# (the agents only ever talk to the coordinator).
gloo_pair() {
  ip netns exec "${worker_ns[$kept]}" ss -Htn state established > "$tmp/ss.log"
  grep -q " ${worker_ip[$lost]}:" "$tmp/ss.log"
}
wait_until 60 "the ranks on $kept and $lost are connected to each other" gloo_pair
say "ok: rank 0 on $kept, rank 1 on $lost; Gloo connected ${worker_ip[$kept]} <-> ${worker_ip[$lost]}"

# Cut as soon as a checkpoint is cataloged, so the restart has one to load.
has_checkpoint() {
  cli checkpoints "$job" --output json 2> /dev/null |
    json_true 'len(j["checkpoints"]) > 0'
}
wait_until 90 "$job has a checkpoint" has_checkpoint
t_checkpoint=$(now_ms)

# ---- The fault ----
ip -n "$hub" link set "v-$lost" down
t_cut=$(now_ms)
say "cut: switch port v-$lost of $lost (rank 1) is down ($(secs "$t_submit" "$t_checkpoint") s after submit)"
# (SUCCEEDED too: a fast machine may finish generation 2 between polls.)
restarted() {
  cli status "$job" --output json 2> /dev/null | json_true \
    'j["generation"] == 2 and j["state"] in ("JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED")'
}
wait_until 60 "$job runs generation 2 without $lost" restarted
t_restarted=$(now_ms)
cli status "$job" --output json > "$tmp/restarted.json" || fail "status $job"
json_true "j['world_size'] == 1 and [r['worker'] for r in j['ranks']] == ['$kept']" \
  < "$tmp/restarted.json" || fail "generation 2 is not rank 0 alone on $kept: $(cat "$tmp/restarted.json")"
cli workers --output json | json_true "[w['name'] for w in j['workers']] == ['$kept']" ||
  fail "$lost is still registered after its lease expired"
say "ok: $lost's lease expired; generation 2 runs on $kept alone ($(secs "$t_cut" "$t_restarted") s after the cut)"

ip -n "$hub" link set "v-$lost" up
t_up=$(now_ms)
back_and_idle() {
  cli workers --output json 2> /dev/null | json_true \
    "[(w['name'], w['slots_free'], len(w['ranks'])) for w in j['workers'] if w['name'] == '$lost'] == [('$lost', 1, 0)]"
}
wait_until 60 "$lost registers again with no rank left running" back_and_idle
t_back=$(now_ms)
say "ok: link up; $lost registered again, its generation-1 rank gone ($(secs "$t_up" "$t_back") s after the link came back)"

# ---- The outcome ----
final() {
  cli status "$job" --output json 2> /dev/null |
    json_true 'j["state"] in ("JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED")'
}
wait_until 120 "$job ends" final
t_end=$(now_ms)
cli status "$job" --output json > "$tmp/done.json" || fail "status $job"
json_true 'j["state"] == "JOB_STATE_SUCCEEDED"' < "$tmp/done.json" ||
  fail "$job did not succeed: $(json_get 'j["state"] + ": " + j["reason"]' < "$tmp/done.json")"
json_true "j['generation'] == 2 and j['restarts'] == 1 and j['world_size'] == 1 and int(j['latest_train']['step']) == $total_steps" \
  < "$tmp/done.json" || fail "unexpected final job: $(cat "$tmp/done.json")"
if [ $IN_PLACE = 1 ]; then
  json_true 'int(j.get("resume_from", {}).get("step", 0)) == 0' < "$tmp/done.json" ||
    fail "generation 2 reloaded a checkpoint instead of going on in place: $(cat "$tmp/done.json")"
else
  json_true 'int(j["resume_from"]["step"]) > 0 and j["resume_from"]["world_size"] == 2' \
    < "$tmp/done.json" || fail "generation 2 did not resume from a 2-rank checkpoint: $(cat "$tmp/done.json")"
fi
accuracy=$(json_get 'j["latest_eval"]["values"]["eval_accuracy"]' < "$tmp/done.json")
"$PY" -c "import sys; sys.exit(0 if $accuracy > 0.7 else 1)" ||
  fail "eval accuracy $accuracy after the restart is not above 0.7"
cli list --output json | json_true \
  "[x['state'] for x in j['jobs'] if x['id'] == '$job'] == ['JOB_STATE_SUCCEEDED']" ||
  fail "trainctl list does not show $job SUCCEEDED"

# The job's events, replayed by `watch` (it exits once the job is final).
cli watch "$job" --output json > "$tmp/events.jsonl" || fail "watch $job exited $?"
resume_step=$(json_get 'j.get("resume_from", {}).get("step", 0)' < "$tmp/done.json")
"$PY" - "$tmp/events.jsonl" "$lost" "$resume_step" "$IN_PLACE" "$LEASE_MS" \
  > "$tmp/restart_reason" 2>&1 << 'EOF' ||
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
lost, resume_step = sys.argv[2], sys.argv[3]
in_place, lease_ms = sys.argv[4] == "1", sys.argv[5]
moves = [e["transition"] for e in events if "transition" in e]
if in_place:
    # One recovery, RUNNING -> RUNNING, no restart, every logged step once.
    restarts = [t["reason"] for t in moves
                if t["from"] == "JOB_STATE_RUNNING" and t["to"] == "JOB_STATE_RUNNING"]
    want = (f"worker {lost} running rank 1 was lost: its lease expired",
            "recovered in place: generation 2 goes on with 1 of 2 ranks")
    if any(t["to"] == "JOB_STATE_RESTARTING" for t in moves):
        sys.exit(f"restarted from a checkpoint: {moves}")
    train = [(int(e["metric"]["step"]), int(e["time_unix_ms"])) for e in events
             if e.get("metric", {}).get("kind") == "train"]
    steps = [step for step, _ in train]
    if steps != sorted(set(steps)):
        sys.exit(f"train steps repeated or out of order: {steps}")
    # Measured, not asserted (a test asserts no timings): bench/README.md.
    gap = max(b[1] - a[1] for a, b in zip(train, train[1:]))
    print(f"longest gap between two train points {gap} ms (lease {lease_ms} ms); ", end="")
else:
    restarts = [t["reason"] for t in moves if t["to"] == "JOB_STATE_RESTARTING"]
    want = (f"worker {lost} running rank 1 was lost: its lease expired",
            f"from the checkpoint at step {resume_step}")
if len(restarts) != 1 or not all(w in restarts[0] for w in want):
    sys.exit(f"want one recovery saying {want}, got {restarts}")
if [t["to"] for t in moves[-2:]] != ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"]:
    sys.exit(f"the last transitions are {moves[-2:]}")
print(restarts[0])
EOF
  fail "events of $job: $(cat "$tmp/restart_reason")"
say "ok: $job SUCCEEDED in generation 2 on 1 rank, eval accuracy $accuracy"
say "ok: $([ $IN_PLACE = 1 ] && echo recovery || echo restart) reason: $(cat "$tmp/restart_reason")"
say "times: start-up $(secs "$t0" "$t_ready") s, submit->first checkpoint $(secs "$t_submit" "$t_checkpoint") s," \
  "cut->generation 2 running $(secs "$t_cut" "$t_restarted") s, link up->re-registered $(secs "$t_up" "$t_back") s," \
  "submit->SUCCEEDED $(secs "$t_submit" "$t_end") s, all but the clean-up $(secs "$t0" "$(now_ms)") s"
