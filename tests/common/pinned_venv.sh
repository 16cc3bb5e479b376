# shellcheck shell=bash
# Sourced by the test scripts that need a PyPI package: makes sure that $1
# (a path in the build tree) names a virtual environment holding exactly the
# pinned requirements $2 (space-separated), or exits 77 (skipped) with the
# reason when they cannot be installed (offline).
#
# The environment itself lies in build-venvs/ at the checkout's root, named
# by $1's name and the pins, and $1 is a link to it: the two build flavours
# (make test, make test-torch2) share one install instead of downloading
# the same packages twice. Other pins make another environment.
ensure_pinned_venv() {
  local link="$1" pinned="$2"
  local store key venv stamp log
  store="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build-venvs"
  key="$(basename "$link")-$(printf '%s' "$pinned" | sha256sum | cut -c1-12)"
  venv="$store/$key"
  stamp="$venv/.trainctl-pinned"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$pinned" ]; then
    log=$(mktemp)
    rm -rf "$venv"
    mkdir -p "$store"
    # $pinned unquoted: one word per requirement.
    # shellcheck disable=SC2086
    if ! /usr/bin/python3 -m venv "$venv" > "$log" 2>&1 ||
       ! "$venv/bin/pip" install --quiet --disable-pip-version-check $pinned \
           >> "$log" 2>&1; then
      echo "SKIPPED: cannot install $pinned (offline?):"
      tail -n 5 "$log"
      rm -rf "$venv" "$log"
      exit 77
    fi
    rm -f "$log"
    echo "$pinned" > "$stamp"
  fi
  # A build tree of before the store held a real environment here.
  [ -L "$link" ] || rm -rf "$link"
  ln -sfn "$venv" "$link"
}
