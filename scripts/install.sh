#!/usr/bin/env bash
# Installs everything agentrl needs on a fresh machine: the Node packages, then a Python virtual environment (.venv)
# with the worker's dependencies. Safe to run again; it only adds what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "==> npm ci"
  npm ci --no-audit --no-fund --loglevel=error
fi
echo "==> build"
npm run --silent build

# The python code tool runs model-written code only inside bubblewrap (docs/security.md).
if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "==> bubblewrap (apt-get)"
    SUDO=(); [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && SUDO=(sudo)
    if ! { "${SUDO[@]}" apt-get install -y -q bubblewrap >/dev/null 2>&1 || { "${SUDO[@]}" apt-get update -q >/dev/null 2>&1 && "${SUDO[@]}" apt-get install -y -q bubblewrap >/dev/null 2>&1; }; }; then
      echo "warning: could not install bubblewrap; the python code tool will refuse to run code (set sandbox: none to opt into the weaker mode)" >&2
    fi
  else
    echo "warning: bwrap not found and no apt-get; install bubblewrap for the python code tool (docs/security.md)" >&2
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> python venv (.venv)"
  "$PY" -m venv .venv
fi
# Without a GPU, ask for the CPU build of torch explicitly: an unpinned torch resolves to a multi-GB CUDA build.
# --retries 0 keeps pip from waiting minutes on an index it cannot reach when wheels are served locally.
PIP=(.venv/bin/python -m pip install --retries 0 --disable-pip-version-check -q)
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "==> torch (CUDA)"; "${PIP[@]}" "torch>=2.4"
  else
    echo "==> torch (CPU)"; "${PIP[@]}" "torch==2.13.0"
  fi
fi
# worker/requirements.txt, included by requirements-dev.txt: torch, transformers, safetensors, peft (LoRA), and jsonschema for the
# protocol checks (agentrl_worker/protocol.py).
echo "==> worker dependencies"
"${PIP[@]}" -r worker/requirements-dev.txt
# wandb without its dependency resolution: two of its dependencies do not resolve from the local index
# (worker/requirements-wandb.txt says which and why that is safe); requirements-dev.txt lists the ones it needs.
echo "==> wandb (--no-deps)"
"${PIP[@]}" --no-deps -r worker/requirements-wandb.txt
echo "==> ready: node $(node --version), $(.venv/bin/python -c 'import torch, transformers, jsonschema; print("torch", torch.__version__, "transformers", transformers.__version__)')"
