#!/bin/bash
# cpack builds the .deb; dpkg-deb inspects it:
#   * control: package, version, the Depends/Recommends, maintainer scripts;
#   * contents: the three programs and trainctl-tokenizer, units, examples
#     and docs under /usr;
#   * every shared library the programs link directly (readelf NEEDED) is
#     owned (dpkg -S) by a package the Depends line names, so the .deb
#     cannot install without what the programs need;
#   * `apt-get --simulate install` of the .deb resolves its dependencies;
#   * the programs extracted with `dpkg-deb -x` run (--version, --help), and
#     the units in it run /usr/bin/...
# Nothing is installed on the machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=tests/deploy/lib.sh
source "$here/lib.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build="${TRAINCTL_BUILD_DIR:?}"

for p in trainctl trainctl-coordinator trainctl-worker trainctl-tokenizer; do
  [ -x "${TRAINCTL_BIN_DIR:?}/$p" ] || {
    echo "FAIL: $TRAINCTL_BIN_DIR/$p is not built" >&2; exit 1; }
done
start=$(date +%s)
if ! cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/pkg" \
     > "$tmp/cpack.log" 2>&1; then
  cat "$tmp/cpack.log" >&2; echo "FAIL: cpack" >&2; exit 1
fi
deb=$(ls "$tmp"/pkg/trainctl_*.deb)
echo "ok: cpack built $(basename "$deb") ($(du -h "$deb" | cut -f1)) in $(( $(date +%s) - start )) s"

info=$(dpkg-deb -I "$deb")
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = trainctl ] || { echo "FAIL: Package $(field Package)" >&2; exit 1; }
[ "$(field Version)" = "${TRAINCTL_VERSION:?}" ] || {
  echo "FAIL: Version $(field Version)" >&2; exit 1; }
depends=$(field Depends)
for script in postinst postrm; do
  grep -q " $script" <<< "$info" || { echo "FAIL: no $script" >&2; exit 1; }
done
if field Description | grep -q ' ;'; then
  echo "FAIL: Description has a CMake list separator: $(field Description)" >&2
  exit 1
fi
echo "ok: control: Depends: $depends"
echo "    Recommends: $(field Recommends)"

contents=$(dpkg-deb -c "$deb" | awk '{print $NF}')
for f in ./usr/bin/trainctl ./usr/bin/trainctl-coordinator \
    ./usr/bin/trainctl-worker ./usr/bin/trainctl-tokenizer \
    ./usr/lib/systemd/system/trainctl-coordinator.service \
    ./usr/lib/systemd/system/trainctl-worker.service \
    ./usr/lib/systemd/system/trainctl-worker-join.service \
    ./usr/share/trainctl/examples/fashion-mnist-mlp.yaml \
    ./usr/share/doc/trainctl/deploy.md; do
  grep -qx -- "$f" <<< "$contents" || { echo "FAIL: .deb lacks $f" >&2; exit 1; }
done
echo "ok: contents under /usr ($(wc -l <<< "$contents") entries)"

dpkg-deb -x "$deb" "$tmp/root"
# Package names in Depends, without versions or alternatives' bars.
declared=$(tr ',|' '\n' <<< "$depends" | sed 's/(.*//; s/ //g' | sort -u)
# Each program's direct libraries (readelf NEEDED), resolved by ldd.
declare -A needed_by=()   # resolved path -> "program: soname"
for p in trainctl trainctl-coordinator trainctl-worker trainctl-tokenizer; do
  bin="$tmp/root/usr/bin/$p"
  resolved=$(ldd "$bin")
  for lib in $(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=$(awk -v l="$lib" '$1 == l {print $3}' <<< "$resolved")
    [ -n "$path" ] || { echo "FAIL: $p needs $lib, which is not found" >&2; exit 1; }
    needed_by[$path]="$p: $lib"
  done
done
# One dpkg -S for all of them (each call reads the whole database). On a
# merged-/usr system ldd may say /lib/... for a file a package ships in
# /usr/lib/..., so both spellings are asked.
declare -A owner=()
while IFS= read -r line; do
  owner[${line#*: }]=${line%%:*}
done < <(for path in "${!needed_by[@]}"; do echo "$path"; echo "/usr$path"; done |
         xargs dpkg -S 2>/dev/null || true)
for path in "${!needed_by[@]}"; do
  pkg=${owner[$path]:-${owner[/usr$path]:-}}
  [ -n "$pkg" ] || {
    echo "FAIL: ${needed_by[$path]} ($path): no package owns it" >&2; exit 1; }
  grep -qx "$pkg" <<< "$declared" || {
    echo "FAIL: ${needed_by[$path]} comes from $pkg, which Depends does not name" >&2
    exit 1; }
done
echo "ok: every library the programs link comes from a package in Depends"

if out=$(apt-get --simulate install "$deb" 2>&1); then
  grep -q "^Inst trainctl " <<< "$out" || { echo "$out" >&2; exit 1; }
  echo "ok: apt-get --simulate install resolves the dependencies"
else
  echo "FAIL: apt-get --simulate install $deb:" >&2; echo "$out" >&2; exit 1
fi

cd "$tmp"
root="$tmp/root/usr/bin"
check_version trainctl-coordinator "$("$root/trainctl-coordinator" --version)"
check_version trainctl-worker "$("$root/trainctl-worker" --version)"
for p in trainctl trainctl-coordinator trainctl-worker trainctl-tokenizer; do
  "$root/$p" --help > /dev/null || { echo "FAIL: $p --help" >&2; exit 1; }
done
for unit in trainctl-coordinator trainctl-worker; do
  grep -q "^ExecStart=/usr/bin/$unit " \
    "$tmp/root/usr/lib/systemd/system/$unit.service" || {
    echo "FAIL: the packaged $unit unit does not run /usr/bin/$unit" >&2
    exit 1; }
done
echo "ok: extracted programs run; packaged units run /usr/bin"
