/**
 * Models named by a Hugging Face Hub id (issue 31, item 2), offline: a cache folder laid out as huggingface_hub lays
 * it out (refs/<branch> holding a commit, snapshots/<commit>/ of symlinks into blobs/) holds the CPU demo's model;
 * `rollout --model ID`, `sft` with model.partial_pretrain = ID and `train` with actor_rollout_ref.model.path = ID@rev
 * all resolve it to that snapshot with HF_HUB_OFFLINE=1, and the tokenizer, the worker and the engine read it there.
 * An id the cache lacks exits 2 naming the id and the cache folder, before anything starts.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cachedSnapshot, hubCacheDir, parseHubModelId, resolveModel } from "../src/config/hub-model.js";
import { InputError } from "../src/errors.js";
import { REPO_ROOT, runCli } from "./helpers/cli.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { DEMO_CONFIG, readMetrics } from "./helpers/train.js";
import { tempDir } from "./helpers/tmp.js";

const scratch = tempDir("hub-model");
const cache = path.join(scratch, "hub");
const COMMIT = "0123456789abcdef0123456789abcdef01234567";
const ID = "agentrl/vault-demo";
const SNAPSHOT = path.join(cache, "models--agentrl--vault-demo", "snapshots", COMMIT);
const offline = { HF_HUB_OFFLINE: "1", HF_HUB_CACHE: cache };

/** huggingface_hub's layout: every file a blob named by its hash, the snapshot a folder of relative symlinks. */
function cacheModel(from: string): void {
  const repo = path.join(cache, "models--agentrl--vault-demo");
  mkdirSync(path.join(repo, "blobs"), { recursive: true });
  mkdirSync(path.join(repo, "refs"), { recursive: true });
  mkdirSync(SNAPSHOT, { recursive: true });
  writeFileSync(path.join(repo, "refs", "main"), COMMIT);
  readdirSync(from).forEach((name, i) => {
    const blob = `blob${i}`;
    copyFileSync(path.join(from, name), path.join(repo, "blobs", blob));
    symlinkSync(path.join("..", "..", "blobs", blob), path.join(SNAPSHOT, name));
  });
}

beforeAll(() => cacheModel(path.join(REPO_ROOT, "examples", "cpu-demo", "model")));

describe("Hub ids", () => {
  it("are org/name with an optional @revision, unless the spec is an existing path", () => {
    expect(parseHubModelId("Qwen/Qwen2.5-3B-Instruct")).toEqual({ repo: "Qwen/Qwen2.5-3B-Instruct", revision: "main" });
    expect(parseHubModelId("Qwen/Qwen3-8B@v1.0")).toEqual({ repo: "Qwen/Qwen3-8B", revision: "v1.0" });
    expect(parseHubModelId("runs/cpu-demo-sft/model")).toBeNull(); // three parts: a path
    expect(parseHubModelId("./org/name")).toBeNull();
    expect(parseHubModelId(path.relative(process.cwd(), path.join(REPO_ROOT, "examples")) || "examples")).toBeNull();
  });

  it("resolve through the cache of HF_HUB_CACHE, else HF_HOME/hub, by branch or by commit", async () => {
    expect(hubCacheDir({ HF_HOME: "/x" })).toBe("/x/hub");
    expect(hubCacheDir({ HF_HOME: "/x", HF_HUB_CACHE: "/y" })).toBe("/y");
    expect(cachedSnapshot({ repo: ID, revision: "main" }, cache)).toBe(SNAPSHOT);
    expect(cachedSnapshot({ repo: ID, revision: COMMIT }, cache)).toBe(SNAPSHOT);
    expect(cachedSnapshot({ repo: ID, revision: "dev" }, cache)).toBeNull();
    expect(await resolveModel(`${ID}@main`, "--model", offline)).toEqual({ dir: SNAPSHOT, hub: { repo: ID, revision: "main" } });
    const local = path.join(REPO_ROOT, "examples", "cpu-demo", "model");
    expect(await resolveModel(local, "--model", offline)).toEqual({ dir: local });
  });

  it("that the cache lacks are an input error naming the id and the cache folder when offline", async () => {
    const error = await resolveModel("agentrl/missing@dev", "actor_rollout_ref.model.path", offline).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as Error).message).toContain("actor_rollout_ref.model.path: agentrl/missing@dev");
    expect((error as Error).message).toContain(cache);
  });
});

describe("commands resolve a Hub id to its cached snapshot, offline", () => {
  let fake: FakeSglang;
  beforeAll(async () => {
    fake = await startFakeSglang({ respond: () => [53] }); // the demo tokenizer's <|im_end|>: each turn ends at once
  });
  afterAll(async () => fake?.close());

  it("rollout --model ID reads the tokenizer and template there; a missing id exits 2 before any output", async () => {
    const data = path.join(REPO_ROOT, "examples", "cpu-demo", "data", "test.parquet");
    const out = path.join(scratch, "rollout.jsonl");
    const args = ["rollout", "--data", data, "--server", fake.url, "--limit", "2", "--out", out];
    const ok = await runCli([...args, "--model", ID], { env: offline });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toContain(`note: model ${ID}@main: ${SNAPSHOT}`);
    expect(readFileSync(out, "utf8").trim().split("\n")).toHaveLength(2);

    const missing = path.join(scratch, "missing.jsonl");
    const bad = await runCli([...args.slice(0, -1), missing, "--model", "agentrl/missing"], { env: offline });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--model: agentrl/missing");
    expect(bad.stderr).toContain(cache);
    expect(existsSync(missing)).toBe(false);
  });

  it("sft trains from model.partial_pretrain = ID, and train validates actor_rollout_ref.model.path = ID@commit", async () => {
    const sftDir = path.join(scratch, "sft");
    const sft = await runCli(
      ["sft", "--config", path.join(REPO_ROOT, "examples", "cpu-demo-sft.yaml"), "--quiet", "--steps", "2",
        "--set", `model.partial_pretrain=${ID}`, "--set", `trainer.default_local_dir=${sftDir}`],
      { env: offline, timeoutMs: 120_000 },
    );
    expect(sft.code, sft.stderr).toBe(0);
    // The run's config.yaml pins the snapshot it read, so --resume reads the same one.
    expect(readFileSync(path.join(sftDir, "config.yaml"), "utf8")).toContain(`partial_pretrain: ${SNAPSHOT}`);
    expect(existsSync(path.join(sftDir, "model", "model.safetensors"))).toBe(true);

    const runDir = path.join(scratch, "train");
    const train = await runCli(
      ["train", "--config", DEMO_CONFIG, "--quiet", "--set", `actor_rollout_ref.model.path=${ID}@${COMMIT}`,
        "--set", `trainer.default_local_dir=${runDir}`, "--set", "trainer.val_only=true",
        "--set", "trainer.total_training_steps=null", "--set", "data.val_max_samples=4"],
      { env: offline, timeoutMs: 120_000 },
    );
    expect(train.code, train.stderr).toBe(0);
    expect(readMetrics(runDir).map((m) => m.step)).toEqual([0]);
    expect(readFileSync(path.join(runDir, "logs", "engine.log"), "utf8")).toContain(`serving ${SNAPSHOT}`);
  }, 240_000);
});
