#!/usr/bin/env bash
# The worker's pytest suite, in a private temp folder that is removed afterwards: pytest's tmp_path, tempfile, and the
# torchrun launcher (torchelastic_*) all follow TMPDIR, so the run leaves nothing in the machine's temp folder.
set -euo pipefail
cd "$(dirname "$0")/../worker"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/agentrl-pytest-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
TMPDIR="$scratch" ../.venv/bin/python -m pytest -q -p no:cacheprovider --basetemp "$scratch/pytest" "$@"
