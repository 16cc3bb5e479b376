#!/usr/bin/env bash
# The GPU node check, in one call of at most 8 minutes (docs/gpu.md):
#
#   bench/gpu_check.sh OUT      build against this machine's torch, run the
#                               GPU tests, then the gpt throughput benchmark
#                               against PyTorch DDP on the same GPU
#   bench/gpu_check.sh --fetch-debs
#                               (where Debian's archive is reachable) put the
#                               Debian 12 packages the build needs in
#                               build-gpu-debs/ (about 21 MiB, git-ignored)
#
# For a node without the project's -dev packages: the .debs in
# build-gpu-debs/ are unpacked into build-gpu-prefix/ (never into /; the
# folder carried to a GPU node stays the .debs alone, 22 MiB) and
# the build finds them there. The torch is the one `python3` (or
# $TORCH_PYTHON) imports. Every stage writes OUT/NN-*.txt before the next
# starts, and OUT/summary.txt says which passed, so a failure late leaves
# the earlier results.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
debs="$repo/build-gpu-debs"

packages=(
  libgrpc++-dev libgrpc-dev libgrpc++1.51 libgrpc29 protobuf-compiler-grpc
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 libprotoc32 protobuf-compiler
  libabsl-dev libabsl20220623 libre2-dev libre2-9 libc-ares-dev libc-ares2
  libssl-dev libssl3 zlib1g-dev zlib1g libyaml-cpp-dev libyaml-cpp0.7
  libsqlite3-dev libsqlite3-0 libcli11-dev libgtest-dev libgmock-dev libgloo-dev
  libjpeg62-turbo-dev libjpeg62-turbo libpng-dev libpng16-16
)

if [ "${1:-}" = "--fetch-debs" ]; then
  mkdir -p "$debs"
  (cd "$debs" && apt-get download "${packages[@]}") || exit 1
  du -sh "$debs"
  exit 0
fi

out="${1:?usage: bench/gpu_check.sh OUT | --fetch-debs}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary="$out/summary.txt"
: > "$summary"
stage() {  # stage NAME STATUS
  echo "$1: $2" | tee -a "$summary"
}
deadline=$(( $(date +%s) + ${GPU_CHECK_SECONDS:-470} ))
left() { echo $(( deadline - $(date +%s) )); }

# --- 00: what this machine is
python="${TORCH_PYTHON:-python3}"
{
  date -u; uname -a; head -2 /etc/os-release 2>/dev/null
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | head -3
  nvcc --version 2>&1 | tail -2; cmake --version | head -1; ninja --version
  "$python" -c 'import torch, torch.utils; print("torch", torch.__version__,
    "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(),
    "gpus", torch.cuda.device_count()); print(torch.utils.cmake_prefix_path)'
} > "$out/00-env.txt" 2>&1
torch_cmake=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
if [ -z "$torch_cmake" ]; then
  stage 00-env "FAIL: $python cannot import torch (set TORCH_PYTHON)"; exit 1
fi
stage 00-env ok

# --- 01: the build's dependencies, from the carried .debs when there are any
prefix_args=()
if compgen -G "$debs/*.deb" > /dev/null; then
  prefix="$repo/build-gpu-prefix"
  rm -rf "$prefix"; mkdir -p "$prefix"
  for deb in "$debs"/*.deb; do
    if command -v dpkg-deb > /dev/null; then
      dpkg-deb -x "$deb" "$prefix"
    else  # ar + tar, for a machine without dpkg (Debian 12's are xz)
      ar p "$deb" data.tar.xz | tar -x -J -C "$prefix"
    fi
  done
  lib="$prefix/usr/lib/x86_64-linux-gnu"
  # gRPC's CMake config looks for re2 by pkg-config or a config file;
  # Debian's re2 has only the .pc file.
  mkdir -p "$lib/cmake/re2"
  cat > "$lib/cmake/re2/re2Config.cmake" <<EOF
add_library(re2::re2 SHARED IMPORTED)
set_target_properties(re2::re2 PROPERTIES IMPORTED_LOCATION "$lib/libre2.so"
  INTERFACE_INCLUDE_DIRECTORIES "$prefix/usr/include")
EOF
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  prefix_args=(-DCMAKE_PREFIX_PATH="$prefix/usr"
               -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc"
               -DOPENSSL_ROOT_DIR="$prefix/usr"
               -DCMAKE_BUILD_RPATH="$lib")
  echo "unpacked $(find "$debs" -maxdepth 1 -name "*.deb" | wc -l) packages into $prefix" > "$out/01-deps.txt"
else
  echo "no .debs in $debs: using the system's packages" > "$out/01-deps.txt"
fi
stage 01-deps ok

# --- 02: configure and build what the checks run
build="$repo/build-gpu"
generator=(); command -v ninja > /dev/null && generator=(-G Ninja)
if cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DTorch_DIR="$torch_cmake/Torch" -DTRAINCTL_CUDA=ON \
     -DTORCH_CUDA_ARCH_LIST=9.0 "${prefix_args[@]}" > "$out/02-configure.txt" 2>&1 &&
   timeout "$(left)" cmake --build "$build" -j"$(nproc)" --target gpu_test \
     device_test trainctl trainctl-coordinator trainctl-worker \
     > "$out/02-build.txt" 2>&1; then
  stage 02-build "ok ($("$build/bin/trainctl-worker" --version 2>&1 | tr '\n' ' '))"
else
  tail -40 "$out/02-configure.txt" "$out/02-build.txt" 2>/dev/null | tail -60
  stage 02-build "FAIL (see 02-configure.txt, 02-build.txt)"; exit 1
fi

# --- 03: the GPU tests
if timeout "$(left)" "$build/bin/gpu_test" --gtest_output="xml:$out/03-gpu-tests.xml" \
     > "$out/03-gpu-tests.txt" 2>&1; then
  stage 03-gpu-tests "ok ($(grep -c '^\[       OK \] .* ([0-9]* ms)$' "$out/03-gpu-tests.txt") passed, $(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$out/03-gpu-tests.txt") skipped)"
else
  grep -E '^\[  FAILED  \]|Failure|error' "$out/03-gpu-tests.txt" | head -20
  stage 03-gpu-tests "FAIL (see 03-gpu-tests.txt)"
fi
"$build/bin/device_test" > "$out/03-device-test.txt" 2>&1 ||
  stage 03-device-test "FAIL (see 03-device-test.txt)"

# --- 04: throughput, trainctl against DDP on the same GPU
if [ "$(left)" -lt 90 ]; then
  stage 04-throughput "not run: $(left) s left"; exit 1
fi
if timeout "$(left)" "$python" bench/gpu_throughput.py --bin "$build/bin" --out "$out" --runs 3 --steps 100 \
     --timeout $(( $(left) / 2 - 10 )) > "$out/04-throughput.txt" 2>&1; then
  stage 04-throughput "ok ($("$python" -c 'import json,sys; s=json.load(open(sys.argv[1]))["stages"]["summary"]; print(json.dumps(s))' "$out/gpu_throughput.json"))"
else
  tail -30 "$out/04-throughput.txt"
  stage 04-throughput "FAIL (see 04-throughput.txt, gpu_throughput.json)"
fi
cat "$summary"
