#!/usr/bin/env bash
# Schemathesis against a live `engram serve` with auth on: every operation of the committed
# openapi.json (plus the store -> get/forget links of fuzz_schema.py for the stateful phase),
# a fixed seed, positive and negative cases. Checks: no 5xx, only documented status codes,
# bodies and content types as documented. Any failure exits non-zero.
# Needs the project venv with the dev extra. Run from anywhere: `bash tests/reliability/fuzz.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
work=$(mktemp -d)
server_pid=""
SEED=${FUZZ_SEED:-20261130}
EXAMPLES=${FUZZ_MAX_EXAMPLES:-100}

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
    # Should the service have died without stopping its embedded PostgreSQL, stop that too.
    local postmaster="$work/data/pg/postmaster.pid"
    if [[ -f $postmaster ]]; then
        kill -INT "$(head -n 1 "$postmaster")" 2>/dev/null || true
        for _ in $(seq 1 60); do [[ -f $postmaster ]] || break; sleep 0.5; done
    fi
    rm -rf "$work"
}
trap stop_server EXIT

py="$root/.venv/bin/python"
port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
key=$("$py" -c 'import secrets; print("fuzz-" + secrets.token_hex(16))')
base="http://127.0.0.1:$port"

env -u ENGRAM_DATABASE_URL ENGRAM_DATA_DIR="$work/data" ENGRAM_API_KEYS="$key" \
    "$root/.venv/bin/engram" serve --host 127.0.0.1 --port "$port" >"$work/serve.log" 2>&1 &
server_pid=$!

"$py" - "$base" "$server_pid" <<'EOF'
import os, sys, time, urllib.request
base, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        sys.exit("engram serve exited before it was healthy")
    try:
        with urllib.request.urlopen(f"{base}/v1/health", timeout=2) as response:
            if response.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.3)
sys.exit("engram serve did not become healthy")
EOF

# Auth really is on: the fuzzer's key is what gets it in.
status=$("$py" -c "import sys, urllib.request, urllib.error
try: urllib.request.urlopen('$base/v1/engine')
except urllib.error.HTTPError as e: print(e.code)")
[[ $status == 401 ]] || { echo "expected 401 without a key, got $status"; exit 1; }

"$py" tests/reliability/fuzz_schema.py openapi.json >"$work/openapi-linked.json"

cd "$work"  # schemathesis writes nothing into the source tree
"$root/.venv/bin/schemathesis" run "$work/openapi-linked.json" \
    --url "$base" \
    --header "Authorization: Bearer $key" \
    --checks not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance \
    --phases examples,coverage,fuzzing,stateful \
    --max-examples "$EXAMPLES" \
    --seed "$SEED" \
    --workers 1 \
    --request-timeout 30 \
    --generation-database none \
    --no-color
