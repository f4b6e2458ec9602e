#!/usr/bin/env bash
# The whole suite (npm test): vitest and the worker's pytest side by side, not one after the other. The vitest files
# leave a core idle at times (a CLI waiting on a server, a deadline running out), which pytest fills, so the suite
# takes about the longer of the two instead of their sum. pytest's output is printed after vitest's, whole; the exit
# code is vitest's if it failed, else pytest's.
set -uo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp "${TMPDIR:-/tmp}/agentrl-pytest-log-XXXXXX")
bash scripts/test-worker.sh > "$log" 2>&1 &
worker=$!
npx vitest run
ts=$?
wait "$worker"
py=$?
echo
echo "── worker tests (pytest) ──"
cat "$log"
rm -f "$log"
if [ "$ts" -ne 0 ]; then exit "$ts"; fi
exit "$py"
