#!/bin/bash
# Runs examples/export_hf_classifier.py "$@" with the Python whose torch
# matches the build's LibTorch ($TRAINCTL_TORCH_PYTHON) and `transformers`
# from PyPI, pinned below with its dependencies (no torch: the build's is
# used), installed once per build tree. Exits 77 with the reason when they
# cannot be installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${TRAINCTL_BUILD_DIR:?}"
python="${TRAINCTL_TORCH_PYTHON:?}"

# transformers 4.46 is the last to support LibTorch 1.13's torch as well
# as 2.x. --no-deps throughout: pip must not bring a torch or a NumPy that
# Debian's torch 1.13 was not built against.
pins="transformers==4.46.3 tokenizers==0.20.3 huggingface_hub==0.26.2
safetensors==0.4.5 regex==2024.11.6 pyyaml==6.0.2 requests==2.32.3
urllib3==2.2.3 idna==3.10 certifi==2024.8.30 charset-normalizer==3.4.0
tqdm==4.67.1 filelock==3.16.1 packaging==24.2 fsspec==2024.10.0
typing_extensions==4.12.2"
"$python" -c 'import numpy' 2>/dev/null || pins="$pins numpy==1.26.4"

source "$here/../common/pinned_venv.sh"
venv="$build/transformers-venv"
PIP_NO_DEPS=1 ensure_pinned_venv "$venv" "$(echo $pins)"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# HF_HUB_OFFLINE: the test's model is built here, never downloaded.
HF_HUB_OFFLINE=1 TRANSFORMERS_NO_ADVISORY_WARNINGS=1 PYTHONPATH="$site" \
  exec "$python" -W ignore "$here/../../examples/export_hf_classifier.py" "$@"
