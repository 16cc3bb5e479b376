#!/bin/bash
# The systemd units as `cmake --install` writes them (ExecStart resolved to
# the installed binaries, which verify requires to exist):
#   * `systemd-analyze verify` prints nothing about them (it only warns about
#     unknown keys and bad values, so any line about our units fails);
#   * `systemd-analyze security --offline` scores their exposure at most 2.0
#     (coordinator) and 4.0 (worker, which needs /dev/nvidia* and W+X memory);
#   * both restart on failure.
# Skipped (77) without systemd-analyze.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/deploy/lib.sh
source "$here/lib.sh"
if ! command -v systemd-analyze >/dev/null; then
  echo "SKIPPED: systemd-analyze not found (Debian package systemd)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
install_tree "$tmp/usr"
units="$tmp/usr/lib/systemd/system"

cd "$units"
out=$(systemd-analyze verify ./trainctl-coordinator.service \
        ./trainctl-worker.service ./trainctl-worker-join.service 2>&1) || true
if grep -q "trainctl" <<< "$out"; then
  echo "FAIL: systemd-analyze verify:" >&2
  echo "$out" >&2
  exit 1
fi
echo "ok: systemd-analyze verify (systemd $(systemd-analyze --version | head -n 1 | cut -d' ' -f2))"

# --threshold is in tenths: 20 is an exposure of 2.0.
for spec in trainctl-coordinator:20 trainctl-worker:40 trainctl-worker-join:20; do
  unit="${spec%%:*}.service" limit="${spec##*:}"
  if ! systemd-analyze security --help 2>&1 | grep -q -- --offline; then
    echo "note: this systemd-analyze has no security --offline; exposure not scored"
    break
  fi
  if ! out=$(systemd-analyze security --offline=true --threshold="$limit" \
               "./$unit" 2>&1); then
    echo "FAIL: $unit exposure above $limit tenths:" >&2
    echo "$out" >&2
    exit 1
  fi
  echo "ok: $unit: $(grep -o 'Overall exposure level.*' <<< "$out")"
done

for unit in trainctl-coordinator trainctl-worker; do
  grep -qE '^Restart=(on-failure|always)$' "$unit.service" || {
    echo "FAIL: $unit.service has no Restart= policy" >&2; exit 1; }
done
echo "ok: both units restart on failure"
