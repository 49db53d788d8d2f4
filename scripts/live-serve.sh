# Sourced by the CI scripts that need a live `engram serve` (clients/e2e.sh, tests/reliability/fuzz.sh).
# Needs `root` (the repository) set. Gives: `work` (a scratch directory), an EXIT trap that stops the
# service (SIGTERM) and any embedded PostgreSQL it left, prints the service's log on failure and
# removes `work`; and `serve_engram KEY`, which starts the service on a free loopback port with
# its own data directory and API key, waits until it is healthy and sets `base`.

work=$(mktemp -d)
server_pid=""
base=""

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

serve_engram() {
    local key=$1 py="$root/.venv/bin/python" port
    port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    base="http://127.0.0.1:$port"
    env -u ENGRAM_DATABASE_URL ENGRAM_DATA_DIR="$work/data" ENGRAM_API_KEYS="$key" \
        "$root/.venv/bin/engram" serve --host 127.0.0.1 --port "$port" >"$work/serve.log" 2>&1 &
    server_pid=$!
    "$py" - "$base" "$server_pid" <<'PY'
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
sys.exit("engram serve did not become healthy in 120 s")
PY
}
