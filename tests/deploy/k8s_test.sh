#!/bin/bash
# deploy/k8s: the cross-reference checks of check_k8s.py, then every object
# against the Kubernetes OpenAPI schema as compiled by the npm package
# kubernetes-models (pinned with its dependencies in k8s/package-lock.json,
# installed once per build tree with `npm ci`). Skipped (exit 77) with the
# reason when node/npm are missing or the npm registry cannot be reached.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${TRAINCTL_BUILD_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 "$here/check_k8s.py" "$tmp/objects.json"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIPPED schema validation: node and npm are needed (Debian: nodejs npm)"
  exit 77
fi
validator="$build/k8s-validate"
stamp="$validator/node_modules/.trainctl-lock.sha256"
want=$(sha256sum "$here/k8s/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$validator"
  mkdir -p "$validator"
  cp "$here/k8s/package.json" "$here/k8s/package-lock.json" "$validator/"
  if ! (cd "$validator" &&
        npm ci --no-audit --no-fund --loglevel=error > npm.log 2>&1); then
    echo "SKIPPED schema validation: npm ci of kubernetes-models failed" \
         "(offline?); see $validator/npm.log:"
    tail -n 5 "$validator/npm.log"
    exit 77
  fi
  echo "$want" > "$stamp"
fi
cp "$here/k8s/validate.mjs" "$validator/"
node "$validator/validate.mjs" "$tmp/objects.json"
