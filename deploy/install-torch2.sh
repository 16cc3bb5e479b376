#!/usr/bin/env bash
# Installs the pinned PyTorch 2.x wheel the second build flavour compiles
# against (make build-torch2, make test-torch2), in a venv of its own, and
# nothing when it is there already. The wheel carries a CUDA LibTorch:
# headers, libraries, CMake config and, through its nvidia-* dependencies,
# the CUDA runtime and the NCCL it was built with. No GPU is needed to build
# or to run the CPU tests.
#
#   deploy/install-torch2.sh VENV VERSION
set -euo pipefail
venv="${1:-build-torch2-venv}"
version="${2:-2.11.0}"

python="${venv}/bin/python"
if [ -x "$python" ] &&
   [ "$("$python" -W ignore -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$version" ]; then
  exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  echo "trainctl: python3-venv is missing; run deploy/install-deps.sh first" >&2
  exit 1
fi
echo "trainctl: installing torch==${version} into ${venv} (a few GB with its CUDA libraries)"
rm -rf "$venv"
python3 -m venv "$venv"
"$python" -m pip install --quiet --disable-pip-version-check "torch==${version}"
"$python" -W ignore -c 'import torch; print("trainctl: torch", torch.__version__, "CUDA", torch.version.cuda)'
