#!/usr/bin/env bash
# The worker's pytest suite, in a private temp folder that is removed afterwards: pytest's tmp_path, tempfile, and the
# torchrun launcher (torchelastic_*) all follow TMPDIR, so the run leaves nothing in the machine's temp folder.
set -euo pipefail
cd "$(dirname "$0")/../worker"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/agentrl-pytest-XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# malloc as agentrl sets it for the worker and the engine (src/torch-threads.ts, MALLOC_SETTINGS, and its rule: one of
# the three set by the caller leaves all three to the caller): most of these tests run the trainer's math in this
# process, on tiny models with Qwen's 151,936-token vocabulary, and with glibc's defaults a third of their CPU time
# went to mapping and unmapping the logits' memory.
if [ -z "${MALLOC_MMAP_THRESHOLD_:-}${MALLOC_TRIM_THRESHOLD_:-}${MALLOC_TOP_PAD_:-}" ]; then
  export MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 MALLOC_TOP_PAD_=268435456
fi
TMPDIR="$scratch" ../.venv/bin/python -m pytest -q -p no:cacheprovider --basetemp "$scratch/pytest" "$@"
