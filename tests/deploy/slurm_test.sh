#!/bin/bash
# deploy/slurm/trainctl-workers.sbatch: valid bash (bash -n), clean for the
# ShellCheck linter when installed, and, run against stand-ins for srun,
# hostname and trainctl-worker, first joins every node (`--join-only` with
# the cluster CA and the join token: a file by flag, or the token in the
# environment, never on a command line), then starts one worker per node
# with the right flags and a state directory of its own, from a process
# that no longer holds the token (neither the workers nor the srun that
# replaced the batch shell); refuses to start without a CA and token unless
# --insecure. No Slurm is needed.
set -euo pipefail
script="${TRAINCTL_SOURCE_DIR:?}/deploy/slurm/trainctl-workers.sbatch"

bash -n "$script"
echo "ok: bash -n"
if command -v shellcheck >/dev/null; then
  shellcheck "$script"
  echo "ok: shellcheck"
else
  echo "note: shellcheck not installed; only bash -n checked the syntax"
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/bin"
# srun stand-in: checks it was asked for one task per node, then runs the
# task once per fake node, as Slurm would on each node. The workers' step
# (--kill-on-bad-exit=0) replaced the batch shell: it records whether its
# environment still holds a token.
cat > "$tmp/bin/srun" <<SRUN
#!/bin/bash
if [[ " \$* " == *" --kill-on-bad-exit=0 "* ]] &&
   [ -n "\${TRAINCTL_JOIN_TOKEN:-}\${TRAINCTL_JOIN_TOKEN_FILE:-}" ]; then
  echo "the workers' srun holds the token" >> "$tmp/calls"
fi
SRUN
cat >> "$tmp/bin/srun" <<'SRUN'
[[ " $* " == *" --ntasks-per-node=1 "* ]] || { echo "srun: no --ntasks-per-node=1: $*" >&2; exit 90; }
while [ $# -gt 0 ] && [[ "$1" == -* ]]; do shift; done
for node in node1 node2; do
  FAKE_HOST=$node SLURM_CPUS_ON_NODE=8 "$@" || exit $?
done
SRUN
# shellcheck disable=SC2016  # $FAKE_HOST expands when the stand-in runs
printf '#!/bin/bash\necho "$FAKE_HOST"\n' > "$tmp/bin/hostname"
# The stand-in worker records its command line, and the join token or token
# file its environment holds (as "env token: ..." when there is one).
# shellcheck disable=SC2016  # expanded when the stand-in runs
printf '#!/bin/bash\necho "$*" >> "%s/calls"\n[ -z "${TRAINCTL_JOIN_TOKEN:-}" ] || echo "env token: $TRAINCTL_JOIN_TOKEN" >> "%s/calls"\n[ -z "${TRAINCTL_JOIN_TOKEN_FILE:-}" ] || echo "env token file" >> "%s/calls"\n' \
  "$tmp" "$tmp" "$tmp" > "$tmp/bin/fake-worker"
# shellcheck disable=SC2016  # expanded when the stand-in runs
echo '[[ " $* " != *" --join-only "* ]] || [ -z "${FAKE_JOIN_FAILS:-}" ] || exit 3' \
  >> "$tmp/bin/fake-worker"
chmod +x "$tmp/bin/"*
echo "-----BEGIN CERTIFICATE-----" > "$tmp/ca.crt"
echo "tcjoin_file" > "$tmp/join.token"

# run [VAR=VALUE...] COMMAND...: the script in a clean environment with the
# CA and the join token file set (override them with VAR=).
run() {
  env -u TRAINCTL_COORDINATOR -u TRAINCTL_SLOTS -u TRAINCTL_WORKER_ARGS \
    -u TRAINCTL_JOIN_TOKEN -u TRAINCTL_WORKER_STATE \
    PATH="$tmp/bin:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 \
    SLURM_JOB_NODELIST='node[1-2]' TRAINCTL_WORKER=fake-worker \
    TMPDIR=/scratch TRAINCTL_CA_CERT="$tmp/ca.crt" \
    TRAINCTL_JOIN_TOKEN_FILE="$tmp/join.token" "$@"
}
# expect_calls WHAT EXPECTED: the stand-in's record is EXPECTED; clears it.
expect_calls() {
  if [ "$(cat "$tmp/calls")" != "$2" ]; then
    echo "FAIL: $1: worker command lines differ; want:" >&2
    echo "$2" >&2
    echo "got:" >&2
    cat "$tmp/calls" >&2
    exit 1
  fi
  rm -f "$tmp/calls"
}

run SLURM_GPUS_ON_NODE=4 TRAINCTL_WORKER_ARGS="--kill-grace-ms 500" \
  bash "$script" head:7070 > "$tmp/out"
expect_calls "flags from the allocation" \
"--join-only --coordinator head:7070 --name slurm-42-node1 --slots 4 --ca-cert $tmp/ca.crt --join-token-file $tmp/join.token --state-dir /scratch/slurm-42-node1 --kill-grace-ms 500
env token file
--join-only --coordinator head:7070 --name slurm-42-node2 --slots 4 --ca-cert $tmp/ca.crt --join-token-file $tmp/join.token --state-dir /scratch/slurm-42-node2 --kill-grace-ms 500
env token file
--coordinator head:7070 --name slurm-42-node1 --slots 4 --cpus 8 --collective-host node1 --ca-cert $tmp/ca.crt --state-dir /scratch/slurm-42-node1 --kill-grace-ms 500
--coordinator head:7070 --name slurm-42-node2 --slots 4 --cpus 8 --collective-host node2 --ca-cert $tmp/ca.crt --state-dir /scratch/slurm-42-node2 --kill-grace-ms 500"
echo "ok: every node joins first with the CA and the join token file; then one worker per node, flags from the allocation, a state directory each, and no token anywhere"

run TRAINCTL_COORDINATOR=c:1 TRAINCTL_SLOTS=2 TRAINCTL_JOIN_TOKEN_FILE= \
  TRAINCTL_JOIN_TOKEN=tcjoin_env TRAINCTL_WORKER_STATE=/var/tw \
  bash "$script" > /dev/null
expect_calls "coordinator, slots, token and state from the environment" \
"--join-only --coordinator c:1 --name slurm-42-node1 --slots 2 --ca-cert $tmp/ca.crt --state-dir /var/tw/slurm-42-node1
env token: tcjoin_env
--join-only --coordinator c:1 --name slurm-42-node2 --slots 2 --ca-cert $tmp/ca.crt --state-dir /var/tw/slurm-42-node2
env token: tcjoin_env
--coordinator c:1 --name slurm-42-node1 --slots 2 --cpus 8 --collective-host node1 --ca-cert $tmp/ca.crt --state-dir /var/tw/slurm-42-node1
--coordinator c:1 --name slurm-42-node2 --slots 2 --cpus 8 --collective-host node2 --ca-cert $tmp/ca.crt --state-dir /var/tw/slurm-42-node2"
echo "ok: coordinator, slots and state directory from the environment; TRAINCTL_JOIN_TOKEN reaches the join step's environment, never a command line, and not the workers"

rc=0
run FAKE_JOIN_FAILS=1 bash "$script" head:7070 > /dev/null 2>&1 || rc=$?
if [ "$rc" -eq 0 ] || grep -q -- "--collective-host" "$tmp/calls"; then
  echo "FAIL: a failed join step (exit $rc) went on to start workers" >&2
  cat "$tmp/calls" >&2; exit 1
fi
rm -f "$tmp/calls"
echo "ok: a node that cannot join ends the allocation before any worker starts"

run TRAINCTL_CA_CERT= TRAINCTL_JOIN_TOKEN_FILE= \
  TRAINCTL_WORKER_ARGS="--insecure" bash "$script" h:1 > /dev/null
expect_calls "--insecure" \
"--coordinator h:1 --name slurm-42-node1 --slots 1 --cpus 8 --collective-host node1 --state-dir /scratch/slurm-42-node1 --insecure
--coordinator h:1 --name slurm-42-node2 --slots 1 --cpus 8 --collective-host node2 --state-dir /scratch/slurm-42-node2 --insecure"
echo "ok: with --insecure, no CA or token is needed"

# refused WHAT WANT [VAR=VALUE...]: with these variables, the script exits 2 before starting any
# worker, saying WANT.
refused() {
  local what=$1 want=$2
  shift 2
  local rc=0
  run "$@" bash "$script" > /dev/null 2> "$tmp/err" || rc=$?
  if [ "$rc" -ne 2 ] || [ -e "$tmp/calls" ]; then
    echo "FAIL: $what: exit $rc, want 2 and no worker started" >&2; exit 1
  fi
  grep -qF -- "$want" "$tmp/err" || {
    echo "FAIL: $what: the error does not say '$want':" >&2
    cat "$tmp/err" >&2; exit 1; }
  echo "ok: $what is an error: $(head -n 1 "$tmp/err")"
}
refused "a missing coordinator" "give the coordinator"
refused "a missing CA" "set TRAINCTL_CA_CERT" TRAINCTL_COORDINATOR=h:1 \
  TRAINCTL_CA_CERT=
refused "an unreadable CA" "TRAINCTL_CA_CERT $tmp/nope.crt: cannot read" \
  TRAINCTL_COORDINATOR=h:1 TRAINCTL_CA_CERT="$tmp/nope.crt"
refused "a missing join token" "set TRAINCTL_JOIN_TOKEN_FILE" \
  TRAINCTL_COORDINATOR=h:1 TRAINCTL_JOIN_TOKEN_FILE=
refused "an unreadable token file" "TRAINCTL_JOIN_TOKEN_FILE $tmp/nope: cannot read" \
  TRAINCTL_COORDINATOR=h:1 TRAINCTL_JOIN_TOKEN_FILE="$tmp/nope"
refused "two join tokens" "are both set" TRAINCTL_COORDINATOR=h:1 \
  TRAINCTL_JOIN_TOKEN=tcjoin_env
