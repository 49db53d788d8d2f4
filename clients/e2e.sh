#!/usr/bin/env bash
# Generates the TypeScript and Python clients from the committed openapi.json, type-checks
# both end-to-end scripts, and runs them against a live `engram serve` on a free loopback
# port with its own data directory and API key. A generator warning about the document
# fails the run. Needs the project venv (.venv, `pip install -e '.[dev]'`), node >= 20, npm.
# Run from anywhere: `bash clients/e2e.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# shellcheck source=../scripts/live-serve.sh
source "$root/scripts/live-serve.sh"

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
key=$(.venv/bin/python -c 'import secrets; print(secrets.token_hex(16))')
serve_engram "$key"
export ENGRAM_URL="$base" ENGRAM_API_KEY="$key"

# Both scripts run even when the first fails, so one run shows every failed check.
status=0
echo "-- TypeScript end-to-end"
node clients/typescript/dist/e2e.js || status=1
echo "-- Python end-to-end"
PYTHONPATH=clients/python/generated clients/python/.venv/bin/python clients/python/e2e.py || status=1
exit $status
