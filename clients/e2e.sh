#!/usr/bin/env bash
# Generates the TypeScript and Python clients from the committed openapi.json, type-checks
# both end-to-end scripts, and runs them against a live `engram serve` on a free loopback
# port with its own data directory and API key. A generator warning about the document
# fails the run. Needs the project venv (.venv, `pip install -e '.[dev]'`), node >= 20, npm.
# Run from anywhere: `bash clients/e2e.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
server_pid=""

stop_server() {
    local status=$?
    if [[ $status -ne 0 && -f $work/serve.log ]]; then
        echo "-- the service's log"
        tail -n 50 "$work/serve.log"
    fi
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid"
        wait "$server_pid" || true
    fi
    # Should the service have died without stopping its embedded PostgreSQL (a crash), stop that too.
    local postmaster="$work/data/pg/postmaster.pid"
    if [[ -f $postmaster ]]; then
        kill -INT "$(head -n 1 "$postmaster")" 2>/dev/null || true
        for _ in $(seq 1 60); do [[ -f $postmaster ]] || break; sleep 0.5; done
    fi
    rm -rf "$work"
}
trap stop_server EXIT

# Any warning or error a generator prints about openapi.json fails the run.
refuse_warnings() {
    local name=$1 log=$2
    if grep -Eiq 'warn|error|⚠|✘' "$log"; then
        echo "$name complained about openapi.json:"
        cat "$log"
        exit 1
    fi
}

echo "-- TypeScript client: install, generate with openapi-typescript, type-check"
cd "$root/clients/typescript"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent generate >"$work/ts-generate.log" 2>&1 || { cat "$work/ts-generate.log"; exit 1; }
cat "$work/ts-generate.log"
refuse_warnings openapi-typescript "$work/ts-generate.log"
npx tsc --noEmit
npx tsc

echo "-- Python client: install, generate with openapi-python-client, type-check"
cd "$root/clients/python"
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
rm -rf generated
# The generator formats its output with ruff from the same venv (its post hooks).
PATH="$PWD/.venv/bin:$PATH" .venv/bin/openapi-python-client generate --path ../../openapi.json --meta none \
    --config generator.yaml --output-path generated/engram_client --fail-on-warning >"$work/py-generate.log" 2>&1 \
    || { cat "$work/py-generate.log"; exit 1; }
cat "$work/py-generate.log"
refuse_warnings openapi-python-client "$work/py-generate.log"
MYPYPATH=generated .venv/bin/mypy --strict --no-error-summary e2e.py

echo "-- a live service"
cd "$root"
port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key=$(.venv/bin/python -c 'import secrets; print(secrets.token_hex(16))')
ENGRAM_DATA_DIR="$work/data" ENGRAM_API_KEYS="$key" .venv/bin/engram serve --host 127.0.0.1 --port "$port" \
    >"$work/serve.log" 2>&1 &
server_pid=$!
healthy() {
    .venv/bin/python -c 'import sys, urllib.request
try:
    sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)
except OSError:
    sys.exit(1)' "http://127.0.0.1:$port/v1/health"
}
for _ in $(seq 1 240); do
    kill -0 "$server_pid" 2>/dev/null || { echo "engram serve exited before it was healthy"; exit 1; }
    healthy && break
    sleep 0.5
done
healthy || { echo "engram serve was not healthy after 120 s"; exit 1; }
export ENGRAM_URL="http://127.0.0.1:$port" ENGRAM_API_KEY="$key"

# Both scripts run even when the first fails, so one run shows every failed check.
status=0
echo "-- TypeScript end-to-end"
node clients/typescript/dist/e2e.js || status=1
echo "-- Python end-to-end"
PYTHONPATH=clients/python/generated clients/python/.venv/bin/python clients/python/e2e.py || status=1
exit $status
