#!/bin/bash
# `cmake --install` into a temporary prefix: the programs, units, examples
# and docs land where docs/deploy.md says; the installed programs run
# (--version, --help, `trainctl version`) without the build tree, and the
# units name the installed binaries.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/deploy/lib.sh
source "$here/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/usr"

start=$(date +%s%N)
install_tree "$prefix"
echo "ok: cmake --install in $(( ($(date +%s%N) - start) / 1000000 )) ms"

for f in bin/trainctl bin/trainctl-coordinator bin/trainctl-worker \
    lib/systemd/system/trainctl-coordinator.service \
    lib/systemd/system/trainctl-worker.service \
    lib/systemd/system/trainctl-worker-join.service \
    share/trainctl/examples/fashion-mnist-mlp.yaml \
    share/trainctl/examples/trainctl-workers.sbatch \
    share/trainctl/examples/trainctl-worker.env \
    share/doc/trainctl/deploy.md share/doc/trainctl/README.md; do
  [ -e "$prefix/$f" ] || { echo "FAIL: not installed: $f" >&2; exit 1; }
done
echo "ok: programs, units, examples and docs installed"

for unit in trainctl-coordinator trainctl-worker; do
  line=$(grep '^ExecStart=' "$prefix/lib/systemd/system/$unit.service")
  if [[ "$line" != "ExecStart=$prefix/bin/$unit "* ]]; then
    echo "FAIL: $unit.service: $line does not run $prefix/bin/$unit" >&2
    exit 1
  fi
done
join_line=$(grep '^ExecStart=' \
  "$prefix/lib/systemd/system/trainctl-worker-join.service")
if [[ "$join_line" != "ExecStart=$prefix/bin/trainctl-worker --join-only "* ]]; then
  echo "FAIL: trainctl-worker-join.service: $join_line is not a --join-only run" >&2
  exit 1
fi
# The join token is the join unit's alone: the agent and its jobs never
# hold it (security review C1).
if grep -qE '^LoadCredential=join|--join-token' \
    "$prefix/lib/systemd/system/trainctl-worker.service"; then
  echo "FAIL: trainctl-worker.service loads or passes the join token" >&2
  exit 1
fi
grep -q '^Requires=trainctl-worker-join.service$' \
    "$prefix/lib/systemd/system/trainctl-worker.service" || {
  echo "FAIL: trainctl-worker.service does not require its join unit" >&2
  exit 1; }
echo "ok: units run the installed binaries; only the join unit has the token"

# Run what was installed, from a directory far from the build tree; a
# RUNPATH into the build tree would make it work here and fail elsewhere.
cd "$tmp"
for p in trainctl trainctl-coordinator trainctl-worker trainctl-tokenizer; do
  if readelf -d "$prefix/bin/$p" | grep -E 'R(UN)?PATH' | grep -q "${TRAINCTL_BUILD_DIR:?}/"; then
    echo "FAIL: installed $p has an RPATH into the build tree" >&2; exit 1
  fi
  "$prefix/bin/$p" --help > "$tmp/help" || { echo "FAIL: $p --help" >&2; exit 1; }
  grep -q -i "usage" "$tmp/help" || { echo "FAIL: $p --help has no usage" >&2; exit 1; }
done
echo "ok: installed programs answer --help"

check_version trainctl-coordinator "$("$prefix/bin/trainctl-coordinator" --version)"
check_version trainctl-worker "$("$prefix/bin/trainctl-worker" --version)"
if ! out=$("$prefix/bin/trainctl" version 2>&1); then
  echo "FAIL: \`trainctl version\` failed; is AddVersionCommand" \
       "(client/version_command.h) registered in RunCli?" >&2
  echo "$out" >&2; exit 1
fi
check_version trainctl "$out"
echo "ok: --version / version report:"
"$prefix/bin/trainctl-worker" --version | sed 's/^/    /'
