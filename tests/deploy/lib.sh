# shellcheck shell=bash
# Shared by the deploy tests (sourced): install the build tree into a
# temporary prefix, and check a program's --version output.

# install_tree PREFIX: `cmake --install` of the build tree into PREFIX.
install_tree() {
  local prefix="$1" log
  log=$(mktemp)
  for p in trainctl trainctl-coordinator trainctl-worker trainctl-tokenizer; do
    if [ ! -x "${TRAINCTL_BIN_DIR:?}/$p" ]; then
      echo "FAIL: $TRAINCTL_BIN_DIR/$p is not built; build it first:" \
           "cmake --build ${TRAINCTL_BUILD_DIR:?} --target trainctl" \
           "trainctl-coordinator trainctl-worker trainctl-tokenizer" >&2
      exit 1
    fi
  done
  if ! cmake --install "${TRAINCTL_BUILD_DIR:?}" --prefix "$prefix" > "$log" 2>&1; then
    cat "$log" >&2
    echo "FAIL: cmake --install into $prefix" >&2
    exit 1
  fi
  rm -f "$log"
}

# check_version PROGRAM OUTPUT: the first line is "PROGRAM VERSION" and the
# library lines carry the versions CMake found.
check_version() {
  local program="$1" out="$2"
  local first
  first=$(head -n 1 <<< "$out")
  if [ "$first" != "$program ${TRAINCTL_VERSION:?}" ]; then
    echo "FAIL: $program version line is '$first'" >&2; exit 1
  fi
  if ! grep -qx "  gRPC ${TRAINCTL_GRPC_VERSION:?}" <<< "$out"; then
    echo "FAIL: $program does not report gRPC $TRAINCTL_GRPC_VERSION:" >&2
    echo "$out" >&2; exit 1
  fi
  if [ "$program" = trainctl-worker ]; then
    if ! grep -qx "  LibTorch ${TRAINCTL_TORCH_VERSION:?}" <<< "$out" ||
       ! grep -qE "^  (CPU only|CUDA [0-9.]+, NCCL )" <<< "$out"; then
      echo "FAIL: $program does not report LibTorch and CUDA/CPU:" >&2
      echo "$out" >&2; exit 1
    fi
  else
    grep -q "^  LibTorch, CUDA, NCCL: not linked" <<< "$out" || {
      echo "FAIL: $program does not say it links no LibTorch:" >&2
      echo "$out" >&2; exit 1; }
  fi
}
