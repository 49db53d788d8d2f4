#!/usr/bin/env bash
# Schemathesis against a live `engram serve` with auth on: every operation of the committed
# openapi.json (plus the store -> get/forget links of fuzz_schema.py for the stateful phase),
# a fixed seed, positive and negative cases. Checks: no 5xx, only documented status codes,
# bodies and content types as documented. Any failure exits non-zero.
# Needs the project venv with the dev extra. Run from anywhere: `bash tests/reliability/fuzz.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
SEED=${FUZZ_SEED:-20261130}
EXAMPLES=${FUZZ_MAX_EXAMPLES:-100}
# shellcheck source=../../scripts/live-serve.sh
source "$root/scripts/live-serve.sh"

py="$root/.venv/bin/python"
key=$("$py" -c 'import secrets; print("fuzz-" + secrets.token_hex(16))')
serve_engram "$key"

# Auth really is on: the fuzzer's key is what gets it in.
status=$("$py" -c "import sys, urllib.request, urllib.error
try: urllib.request.urlopen('$base/v1/engine')
except urllib.error.HTTPError as e: print(e.code)")
[[ $status == 401 ]] || { echo "expected 401 without a key, got $status"; exit 1; }

"$py" tests/reliability/fuzz_schema.py openapi.json >"$work/openapi-linked.json"

cd "$work"  # schemathesis writes nothing into the source tree
# NDJSON bodies and answers (import, export): fuzz_hooks.py draws and reads them.
PYTHONPATH="$root/tests/reliability" SCHEMATHESIS_HOOKS=fuzz_hooks "$root/.venv/bin/schemathesis" run "$work/openapi-linked.json" \
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
