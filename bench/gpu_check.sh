#!/usr/bin/env bash
# The GPU node check, in one call of at most 8 minutes (docs/gpu.md):
#
#   bench/gpu_check.sh OUT [--tests-only]
#                               build against this machine's torch, run the
#                               GPU tests, then the gpt throughput benchmark
#                               against PyTorch DDP on the same GPU
#                               (--tests-only: stop after the tests;
#                               --no-build: use build-gpu-prebuilt/ alone)
#   bench/gpu_check.sh --fetch-debs
#                               (where Debian's archive is reachable) put the
#                               Debian 12 packages the build needs in
#                               build-gpu-debs/ (about 25 MiB, git-ignored)
#   bench/gpu_check.sh --prebuild
#                               (on a Debian 12 build machine, against the
#                               same torch wheel as the node's) put the GPU
#                               tests and the three programs, stripped, in
#                               build-gpu-prebuilt/bin (git-ignored): the node
#                               runs the GPU tests with them while its own
#                               build runs, and uses them if that build fails
#
# For a node without the project's -dev packages: the .debs in
# build-gpu-debs/ are unpacked into build-gpu-prefix/ (never into /; the
# folder carried to a GPU node stays the .debs alone, 25 MiB) and
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
  libsndfile1-dev libsndfile1 libflac12 libmp3lame0 libmpg123-0 libogg0 libopus0
  libvorbis0a libvorbisenc2
  libsentencepiece-dev libsentencepiece0
)

if [ "${1:-}" = "--fetch-debs" ]; then
  mkdir -p "$debs"
  (cd "$debs" && apt-get download "${packages[@]}") || exit 1
  du -sh "$debs"
  exit 0
fi

programs=(gpu_test device_test libstdcxx_binding_test trainctl trainctl-coordinator trainctl-worker)
if [ "${1:-}" = "--prebuild" ]; then
  python="${TORCH_PYTHON:-python3}"
  torch_cmake=$("$python" -W ignore -c 'import torch.utils; print(torch.utils.cmake_prefix_path)') || exit 1
  work="$repo/build-gpu-prebuild"
  # pkg-config shows re2 alone (gRPC's config asks for it): no cairo, and
  # no libcurl, since the node's prefix holds neither. The programs find
  # the prefix's libraries by an RPATH relative to themselves; torch comes
  # from LD_LIBRARY_PATH, which the check sets to the node's own.
  mkdir -p "$work/pkgconfig"
  cp "$(pkg-config --variable pcfiledir re2)/re2.pc" "$work/pkgconfig/" || exit 1
  PKG_CONFIG_LIBDIR="$work/pkgconfig" cmake -S . -B "$work" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRAINCTL_CUDA=ON -DTorch_DIR="$torch_cmake/Torch" -DCMAKE_DISABLE_FIND_PACKAGE_CURL=ON \
    -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags \
    '-DCMAKE_BUILD_RPATH=$ORIGIN/../../build-gpu-prefix/usr/lib/x86_64-linux-gnu' > "$work.configure.log" 2>&1 ||
    { tail -30 "$work.configure.log"; exit 1; }
  cmake --build "$work" -j"$(nproc)" --target "${programs[@]}" || exit 1
  mkdir -p build-gpu-prebuilt/bin
  for program in "${programs[@]}"; do
    strip -o "build-gpu-prebuilt/bin/$program" "$work/bin/$program" || exit 1
  done
  du -sh build-gpu-prebuilt
  exit 0
fi

out="${1:?usage: bench/gpu_check.sh OUT [--tests-only] [--no-build] | --fetch-debs | --prebuild}"
tests_only=; no_build=
for flag in "${@:2}"; do
  case "$flag" in
    --tests-only) tests_only=1 ;;
    --no-build) no_build=1 ;;
    *) echo "bench/gpu_check.sh: unknown option $flag" >&2; exit 2 ;;
  esac
done
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
  c++ --version | head -1; command -v "$python"; nproc; ls /dev/nvidia* 2>&1
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
build_env=()      # what the build alone runs with (protoc needs the prefix)
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
  build_env=(env "LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  # The programs find the prefix's libraries through an RPATH (not RUNPATH,
  # which would not reach the libraries' own dependencies), so nothing else
  # that runs here (Python, torch) sees Debian's libssl or libsqlite.
  prefix_args=(-DCMAKE_PREFIX_PATH="$prefix/usr"
               -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc"
               -DOPENSSL_ROOT_DIR="$prefix/usr"
               -DCMAKE_BUILD_RPATH="$lib"
               -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags)
  echo "unpacked $(find "$debs" -maxdepth 1 -name "*.deb" | wc -l) packages into $prefix" > "$out/01-deps.txt"
else
  echo "no .debs in $debs: using the system's packages" > "$out/01-deps.txt"
fi
stage 01-deps ok

# The torch that python imports, for the programs (and nothing new for Python).
torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$torch_lib:$torch_lib/../../nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

debugger=$(command -v gdb || command -v cuda-gdb || true)
run_gpu_tests() {  # run_gpu_tests BIN NAME
  # GPU_TEST_REPEAT runs the suite that many times (a crash that comes and
  # goes shows itself); unbuffered, so a crash keeps the lines before it.
  local rc=0
  timeout "$(left)" stdbuf -o0 -e0 "$1/gpu_test" --gtest_repeat="${GPU_TEST_REPEAT:-1}" \
    --gtest_output="xml:$out/$2.xml" > "$out/$2.txt" 2>&1 || rc=$?
  local passed skipped
  passed=$(grep -c '^\[       OK \] .* ([0-9]* ms)$' "$out/$2.txt")
  skipped=$(grep -c '^\[  SKIPPED \] .* ([0-9]* ms)$' "$out/$2.txt")
  if [ "$rc" = 0 ]; then
    stage "$2" "ok ($passed passed, $skipped skipped, ${GPU_TEST_REPEAT:-1} round(s))"
  else
    grep -E '^\[  FAILED  \]|Failure|error' "$out/$2.txt" | head -20
    stage "$2" "FAIL: exit $rc after $passed passed (see $2.txt)"
    # Killed by a signal: once more under a debugger, for every thread's stack.
    if [ "$rc" -gt 128 ] && [ "$rc" != 137 ] && [ -n "$debugger" ] && [ "$(left)" -gt 150 ]; then
      # A jump to address 0 leaves no frames to unwind: the return address
      # on top of the stack names the caller.
      timeout 120 "$debugger" -batch -ex run -ex 'x/8a $sp' -ex 'info symbol *(void**)$sp' \
        -ex "thread apply all bt 30" \
        --args "$1/gpu_test" > "$out/$2-backtrace.txt" 2>&1
      stage "$2-backtrace" "$(basename "$debugger") wrote $2-backtrace.txt"
    fi
  fi
  "$1/device_test" > "$out/$2-device-test.txt" 2>&1 ||
    stage "$2-device-test" "FAIL (see $2-device-test.txt)"
  # Whether our libstdc++ calls reach the system's library, not the wheel's
  # exported copy (tests/unit/libstdcxx_binding_test.cc).
  "$1/libstdcxx_binding_test" > "$out/$2-libstdcxx.txt" 2>&1 ||
    stage "$2-libstdcxx" "FAIL (see $2-libstdcxx.txt)"
}

# --- 02: configure and build what the checks run, in the background while
# the programs built elsewhere (build-gpu-prebuilt/, if carried) run the GPU
# tests: the GPU's results come whatever the build does.
build="$repo/build-gpu"
generator=(); command -v ninja > /dev/null && generator=(-G Ninja)
build_seconds=$(( $(left) > 560 ? 280 : $(left) / 2 ))
prebuilt="$repo/build-gpu-prebuilt/bin"
if [ -n "$no_build" ] && [ ! -x "$prebuilt/gpu_test" ]; then
  stage 02-build "FAIL: --no-build without build-gpu-prebuilt/bin (bench/gpu_check.sh --prebuild)"; exit 1
fi
[ -n "$no_build" ] || (
  # -include cstdint: Debian 12's abseil, protobuf and gRPC headers predate
  # GCC 13, which no longer includes it for them. The policy minimum lets
  # CMake 4 read their older package files.
  "${build_env[@]}" cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
     -DTorch_DIR="$torch_cmake/Torch" -DTRAINCTL_CUDA=ON -DTORCH_CUDA_ARCH_LIST=9.0 \
     -DCMAKE_CXX_FLAGS="-include cstdint" -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
     "${prefix_args[@]}" > "$out/02-configure.txt" 2>&1 &&
  timeout "$build_seconds" "${build_env[@]}" cmake --build "$build" -j"$(nproc)" --target "${programs[@]}" \
     > "$out/02-build.txt" 2>&1
) &
build_pid=$!
if [ -x "$prebuilt/gpu_test" ]; then
  ldd "$prebuilt/trainctl-worker" > "$out/02p-ldd.txt" 2>&1
  run_gpu_tests "$prebuilt" 02p-prebuilt-gpu-tests
fi
if [ -n "$no_build" ]; then
  stage 02-build "not run (--no-build): the rest uses build-gpu-prebuilt/"
  bin="$prebuilt"
elif wait "$build_pid"; then
  bin="$build/bin"
  ldd "$bin/trainctl-worker" > "$out/02-ldd.txt" 2>&1
  # The link order decides whose libstdc++ symbols the programs use.
  { readelf -d "$bin/gpu_test" | grep -E 'NEEDED|PATH' | head -8
    [ -f "$build/build.ninja" ] && ninja -C "$build" -t commands bin/gpu_test | tail -1
  } > "$out/02-link.txt" 2>&1
  stage 02-build "ok ($("$bin/trainctl-worker" --version 2>&1 | tr '\n' ' '))"
  # --- 03: the GPU tests, built here (the throughput comes first when the
  # carried programs have run them and time is short)
  if [ -n "$tests_only" ] || [ ! -x "$prebuilt/gpu_test" ] || [ "$(left)" -gt 300 ]; then
    run_gpu_tests "$bin" 03-gpu-tests
  else
    stage 03-gpu-tests "not run: $(left) s left, the carried build's ran"
  fi
elif [ -x "$prebuilt/gpu_test" ]; then
  tail -30 "$out/02-configure.txt" "$out/02-build.txt" 2>/dev/null | tail -40
  stage 02-build "FAIL (see 02-configure.txt, 02-build.txt); the rest uses build-gpu-prebuilt/"
  bin="$prebuilt"
else
  tail -40 "$out/02-configure.txt" "$out/02-build.txt" 2>/dev/null | tail -60
  stage 02-build "FAIL (see 02-configure.txt, 02-build.txt)"; exit 1
fi

# --- 04: throughput, trainctl against DDP on the same GPU
if [ -n "$tests_only" ]; then
  cat "$summary"; exit 0
fi
if [ "$(left)" -lt 90 ]; then
  stage 04-throughput "not run: $(left) s left"; exit 1
fi
if timeout "$(left)" "$python" bench/gpu_throughput.py --bin "$bin" --out "$out" --runs 3 --steps 100 \
     --timeout $(( $(left) / 2 - 10 )) --budget $(( $(left) - 10 )) --profile > "$out/04-throughput.txt" 2>&1; then
  stage 04-throughput "ok ($("$python" -c 'import json,sys; s=json.load(open(sys.argv[1]))["stages"]["summary"]; print(json.dumps(s))' "$out/gpu_throughput.json"))"
else
  tail -30 "$out/04-throughput.txt"
  stage 04-throughput "FAIL (see 04-throughput.txt, gpu_throughput.json)"
fi
cat "$summary"
