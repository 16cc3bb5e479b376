#!/usr/bin/env bash
# A 2.x build that would mix in Debian's LibTorch 1.13 stops at configure
# and names what came from where (cmake/torch_flavour.cmake,
# torch_header_check.cmake). Two ways in, both seen for real: TorchConfig's
# own search taking /usr/lib's libtorch.so, and a header reaching 1.13's
# /usr/include through an include path ahead of the wheel's.
#   torch_mixing_test.sh SOURCE_DIR TORCH_DIR
set -u
src=$1 torch_dir=$2
debian_lib=/usr/lib/x86_64-linux-gnu/libtorch.so
debian_header=/usr/include/torch/csrc/api/include/torch/torch.h
if [ ! -e "$debian_lib" ] || [ ! -e "$debian_header" ]; then
  echo "skipped: Debian's libtorch-dev is not installed, nothing to mix in"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail=0

configure() {  # configure NAME EXTRA-ARGS...: output in $tmp/NAME.log
  local name=$1; shift
  cmake -S "$src" -B "$tmp/$name" -DTRAINCTL_BUILD_TESTS=OFF \
        -DTorch_DIR="$torch_dir" "$@" > "$tmp/$name.log" 2>&1
}
expect_refused() {  # expect_refused NAME TEXT EXTRA-ARGS...
  local name=$1 text=$2; shift 2
  if configure "$name" "$@"; then
    echo "FAIL: $name: configured"; fail=1
  # CMake wraps a message's lines where the paths in it make it long.
  elif ! tr -s ' \n' '  ' < "$tmp/$name.log" | grep -q -- "$text"; then
    echo "FAIL: $name: no '$text' in:"; tail -20 "$tmp/$name.log"; fail=1
  else
    echo "ok: $name refused: ... $text ..."
  fi
}

expect_refused library "picked $debian_lib from outside it" -DTORCH_LIBRARY="$debian_lib"
expect_refused header "torch header(s) resolve outside it" \
  -DCMAKE_CXX_FLAGS="-I/usr/include/torch/csrc/api/include"
if configure plain; then
  echo "ok: the same LibTorch alone configures"
else
  echo "FAIL: plain configure:"; tail -20 "$tmp/plain.log"; fail=1
fi
exit $fail
