#!/usr/bin/env bash
# Installs the Debian 12 packages trainctl builds and runs with, and nothing
# when they are all present. Runs apt-get update only when something is
# missing. Needs root, or sudo.
set -euo pipefail

packages=(
  cmake g++ make ccache pkg-config
  libtorch-dev libgloo-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libyaml-cpp-dev libcli11-dev zlib1g-dev
  # JPEG and PNG images of WebDataset tar shards (data.format webdataset).
  libjpeg62-turbo-dev libpng-dev
  # Sound files of data.format audio (WAV, FLAC, Ogg); espeak-ng speaks the
  # words of the audio example and its test (examples/make_spoken_words.sh).
  libsndfile1-dev espeak-ng
  # SentencePiece subwords of data.tokenizer (trainctl-tokenizer links it).
  libsentencepiece-dev
  # TLS on every port and the cluster CA (common/pki.cc), OpenSSL 3.
  libssl-dev
  # PNG charts of `trainctl plot` (cairo, text in DejaVu Sans).
  libcairo2-dev fonts-dejavu-core
  # HTTP to an MLflow tracking server (tracking.mlflow, rank 0).
  libcurl4-openssl-dev
  libgtest-dev libgmock-dev
  # The spec fuzzer (tests/fuzz, the spec_fuzz test): libFuzzer is clang's.
  clang libclang-rt-14-dev
  # Debian's LibTorch calls whatever libblas.so.3 is installed; the reference
  # BLAS made the same MLP 5-8x slower than OpenBLAS on a 2-core machine.
  libopenblas0-pthread
  dataset-fashion-mnist
  # fortunes: text for the character-GPT example; python3-torch: the
  # TorchScript export example and the DDP peer of the benchmarks;
  # python3-numpy: .npy files written by NumPy in the data tests.
  fortunes python3-torch python3-numpy
  # The deploy tests (tests/deploy, label deploy): YAML and the gRPC health
  # check from Python, the Slurm script's lint, systemd-analyze for the units,
  # `ip netns` for the network-namespace test.
  python3-yaml python3-grpcio shellcheck systemd iproute2
  # The Kubernetes manifest test installs a pinned PyPI validator in a venv.
  python3-venv
  # The coordinator's HTTP port tests: /metrics parsed by the Prometheus
  # client's own parser, and the dashboard rendered by headless Chromium.
  python3-prometheus-client chromium
  # `trainctl completion zsh` run by zsh in the CLI tests.
  zsh
)


missing=()
for p in "${packages[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "trainctl: installing missing packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo="sudo"
  else
    echo "trainctl: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
