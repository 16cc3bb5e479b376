#!/bin/bash
# Starts a real MLflow tracking server (mlflow from PyPI, pinned below,
# installed once per build tree) on loopback for mlflow_test: its store and
# artifacts under $1, its port written to $2 once it answers /health. With
# MLFLOW_AUTH_ADMIN_PASSWORD set it runs MLflow's basic-auth app, whose
# admin user has that password; with MLFLOW_TEST_TLS_DIR set it serves
# https with a self-signed certificate for 127.0.0.1 made there (cert.pem,
# the one MLFLOW_TRACKING_SERVER_CERT_PATH names). Runs until killed. Exits 77 with the reason
# when mlflow cannot be installed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${TRAINCTL_BUILD_DIR:?}"
dir="$1" port_file="$2"

source "$here/../common/pinned_venv.sh"
venv="$build/mlflow-venv"
ensure_pinned_venv "$venv" "mlflow[auth]==3.17.2"
auth=()
if [ -n "${MLFLOW_AUTH_ADMIN_PASSWORD:-}" ]; then
  auth=(--app-name basic-auth)
  export MLFLOW_FLASK_SERVER_SECRET_KEY="trainctl-test-$RANDOM"
fi
scheme=http
tls=()
if [ -n "${MLFLOW_TEST_TLS_DIR:-}" ]; then
  tls_dir="$MLFLOW_TEST_TLS_DIR"
  if [ ! -s "$tls_dir/cert.pem" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
      -addext subjectAltName=IP:127.0.0.1 -keyout "$tls_dir/key.pem" \
      -out "$tls_dir/cert.pem" 2>/dev/null
  fi
  scheme=https
  tls=(--uvicorn-opts "--ssl-keyfile $tls_dir/key.pem --ssl-certfile $tls_dir/cert.pem")
fi
# A free port (mlflow cannot report one it chose itself).
port=$("$venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Its own process group: mlflow runs uvicorn as a child, and both must go.
setsid "$venv/bin/mlflow" server "${auth[@]}" "${tls[@]}" --host 127.0.0.1 --port "$port" --workers 1 \
  --backend-store-uri "sqlite:///$dir/mlflow.db" --artifacts-destination "$dir/artifacts" &
server=$!
trap 'kill -- -$server 2>/dev/null' EXIT TERM
for _ in $(seq 1 120); do
  if "$venv/bin/python" -c "import ssl, sys, urllib.request
context = ssl.create_default_context(cafile=sys.argv[1] or None)
urllib.request.urlopen('$scheme://127.0.0.1:$port/health', timeout=1, context=context)" \
      "${MLFLOW_TRACKING_SERVER_CERT_PATH:-}" 2>/dev/null; then
    echo "$port" > "$port_file.tmp" && mv "$port_file.tmp" "$port_file"
    wait $server
    exit $?
  fi
  kill -0 $server 2>/dev/null || exit 1
  sleep 0.5
done
echo "mlflow server did not answer /health within 60 s"
exit 1
