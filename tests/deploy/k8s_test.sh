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
source "$here/../common/pinned_venv.sh"
venv="$build/k8s-validate-venv"
ensure_pinned_venv "$venv" "kubernetes-validate==1.37.0"
manifests=()
for f in "$repo"/deploy/k8s/*.yaml; do
  # kustomize's own file is no Kubernetes object (check_k8s.py reads it).
  [ "$(basename "$f")" = kustomization.yaml ] && continue
  manifests+=("$f")
done
"$venv/bin/kubernetes-validate" --strict --no-warn "${manifests[@]}"
