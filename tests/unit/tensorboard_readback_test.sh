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

source "$here/../common/pinned_venv.sh"
venv="$build/tensorboard-venv"
ensure_pinned_venv "$venv" "tensorboard==2.21.0"
"$build/bin/tensorboard_sample_writer" "$tmp/run"
"$venv/bin/python" "$here/tensorboard_readback.py" "$tmp/run"
