#!/bin/bash
# deploy/slurm/trainctl-workers.sbatch: valid bash (bash -n), clean for the
# ShellCheck linter when installed, and, run against stand-ins for srun,
# hostname and trainctl-worker, starts one worker per node with the right
# flags. No Slurm is needed.
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
# task once per fake node, as Slurm would on each node.
cat > "$tmp/bin/srun" <<'SRUN'
#!/bin/bash
[[ " $* " == *" --ntasks-per-node=1 "* ]] || { echo "srun: no --ntasks-per-node=1: $*" >&2; exit 90; }
while [ $# -gt 0 ] && [[ "$1" == -* ]]; do shift; done
for node in node1 node2; do
  FAKE_HOST=$node SLURM_CPUS_ON_NODE=8 "$@" || exit $?
done
SRUN
# shellcheck disable=SC2016  # $FAKE_HOST expands when the stand-in runs
printf '#!/bin/bash\necho "$FAKE_HOST"\n' > "$tmp/bin/hostname"
printf '#!/bin/bash\necho "$*" >> "%s/calls"\n' "$tmp" > "$tmp/bin/fake-worker"
chmod +x "$tmp/bin/"*

run() {
  env -u TRAINCTL_COORDINATOR -u TRAINCTL_SLOTS -u TRAINCTL_WORKER_ARGS \
    PATH="$tmp/bin:$PATH" SLURM_JOB_ID=42 SLURM_JOB_NUM_NODES=2 \
    SLURM_JOB_NODELIST='node[1-2]' TRAINCTL_WORKER=fake-worker "$@"
}

run SLURM_GPUS_ON_NODE=4 TRAINCTL_WORKER_ARGS="--kill-grace-ms 500" \
  bash "$script" head:7070 > "$tmp/out"
expected="--coordinator head:7070 --name slurm-42-node1 --slots 4 --cpus 8 --collective-host node1 --kill-grace-ms 500
--coordinator head:7070 --name slurm-42-node2 --slots 4 --cpus 8 --collective-host node2 --kill-grace-ms 500"
if [ "$(cat "$tmp/calls")" != "$expected" ]; then
  echo "FAIL: worker command lines differ; got:" >&2
  cat "$tmp/calls" >&2
  exit 1
fi
echo "ok: one worker per node, flags from the allocation"

rm -f "$tmp/calls"
run TRAINCTL_COORDINATOR=c:1 TRAINCTL_SLOTS=2 bash "$script" > /dev/null
grep -q -- "--coordinator c:1 --name slurm-42-node1 --slots 2 " "$tmp/calls" || {
  echo "FAIL: TRAINCTL_COORDINATOR / TRAINCTL_SLOTS ignored:" >&2
  cat "$tmp/calls" >&2; exit 1; }
echo "ok: coordinator and slots from the environment"

if run bash "$script" > /dev/null 2> "$tmp/err"; then
  echo "FAIL: started without a coordinator" >&2; exit 1
fi
grep -q "give the coordinator" "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
echo "ok: a missing coordinator is an error that says what to give"
