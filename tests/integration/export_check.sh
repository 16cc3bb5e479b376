#!/bin/bash
# Runs export_check.py with the Python whose torch matches the build's
# LibTorch ($TRAINCTL_TORCH_PYTHON: Debian's for 1.13, the wheel's venv for
# 2.x) and the `safetensors` package from PyPI (pinned below), installed
# once per build tree. Exits 77 with the reason when it cannot be installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${TRAINCTL_BUILD_DIR:?}"
python="${TRAINCTL_TORCH_PYTHON:?}"

source "$here/../common/pinned_venv.sh"
venv="$build/safetensors-venv"
ensure_pinned_venv "$venv" "safetensors==0.8.0 packaging==25.0"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
PYTHONPATH="$site:$here/../../examples" exec "$python" -W ignore \
  "$here/export_check.py" "$@"
