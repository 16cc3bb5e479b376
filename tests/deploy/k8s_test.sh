#!/bin/bash
# deploy/k8s: the cross-reference checks of check_k8s.py, then every object
# against the Kubernetes OpenAPI schema with the PyPI package
# kubernetes-validate (pinned below; its schemas ship in the package),
# strictly: an unknown field is an error too. Installed once per build tree
# into a virtual environment. Skipped (exit 77) with the reason when the
# package cannot be installed (offline).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${TRAINCTL_BUILD_DIR:?}"
repo="$(cd "$here/../.." && pwd)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 "$here/check_k8s.py" "$tmp/objects.json"

# Its schemas are those of Kubernetes 1.37 (the version it defaults to).
pinned="kubernetes-validate==1.37.0"
venv="$build/k8s-validate-venv"
stamp="$venv/.trainctl-pinned"
if [ "$(cat "$stamp" 2>/dev/null)" != "$pinned" ]; then
  rm -rf "$venv"
  if ! /usr/bin/python3 -m venv "$venv" > "$tmp/venv.log" 2>&1 ||
     ! "$venv/bin/pip" install --quiet --disable-pip-version-check "$pinned" \
         >> "$tmp/venv.log" 2>&1; then
    echo "SKIPPED schema validation: cannot install $pinned (offline?):"
    tail -n 5 "$tmp/venv.log"
    rm -rf "$venv"
    exit 77
  fi
  echo "$pinned" > "$stamp"
fi
manifests=()
for f in "$repo"/deploy/k8s/*.yaml; do
  # kustomize's own file is no Kubernetes object (check_k8s.py reads it).
  [ "$(basename "$f")" = kustomization.yaml ] && continue
  manifests+=("$f")
done
"$venv/bin/kubernetes-validate" --strict --no-warn "${manifests[@]}"
