# shellcheck shell=bash
# Sourced by the test scripts that need a PyPI package: makes (once per
# build tree) a virtual environment at $1 holding exactly the pinned
# requirements $2 (space-separated), or exits 77 (skipped) with the reason when it cannot be
# installed (offline). A venv made for another pin is made anew.
ensure_pinned_venv() {
  local venv="$1" pinned="$2"
  local stamp="$venv/.trainctl-pinned" log
  [ "$(cat "$stamp" 2>/dev/null)" = "$pinned" ] && return 0
  log=$(mktemp)
  rm -rf "$venv"
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
}
