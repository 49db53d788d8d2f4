#!/usr/bin/env bash
# `engram conformance` against a live `engram serve` with auth on: every check of the kit, over
# HTTP, as an implementer of another engine would run it. Exits non-zero when a check fails that
# is not in tests/conformance/support.py's PENDING, or when one of those passes (then it is no
# longer pending: empty it there). Needs the project venv. Run from anywhere: `bash tests/conformance/live.sh`.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
# shellcheck source=../../scripts/live-serve.sh
source "$root/scripts/live-serve.sh"

py="$root/.venv/bin/python"
key=$("$py" -c 'import secrets; print("conformance-" + secrets.token_hex(16))')
serve_engram "$key"

pending=$("$py" -c 'from tests.conformance.support import PENDING; print(",".join(PENDING))')
known=()
[[ -n $pending ]] && known=(--known-failures "$pending")
"$root/.venv/bin/engram" conformance "$base" --key "$key" "${known[@]}"
