#!/bin/bash
# TensorBoard event files as written by rank 0, read back by the real
# `tensorboard` package from PyPI (pinned below), installed once per build
# tree into a virtual environment. Skipped (exit 77) with the reason when
# it cannot be installed (offline).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${TRAINCTL_BUILD_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pinned="tensorboard==2.21.0"
venv="$build/tensorboard-venv"
stamp="$venv/.trainctl-pinned"
if [ "$(cat "$stamp" 2>/dev/null)" != "$pinned" ]; then
  rm -rf "$venv"
  if ! /usr/bin/python3 -m venv "$venv" > "$tmp/venv.log" 2>&1 ||
     ! "$venv/bin/pip" install --quiet --disable-pip-version-check "$pinned" \
         >> "$tmp/venv.log" 2>&1; then
    echo "SKIPPED: cannot install $pinned (offline?):"
    tail -n 5 "$tmp/venv.log"
    rm -rf "$venv"
    exit 77
  fi
  echo "$pinned" > "$stamp"
fi
"$build/bin/tensorboard_sample_writer" "$tmp/run"
"$venv/bin/python" "$here/tensorboard_readback.py" "$tmp/run"
