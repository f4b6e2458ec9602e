/**
 * src/serve: launch command lines (unit), the supervised server lifecycle against a fake `python` that plays SGLang
 * (health wait, crash and timeout with the log tail, SIGTERM → SIGKILL escalation, no orphans when agentrl itself is
 * SIGKILLed), `agentrl serve` end to end, and one real start of the embedded engine with a tiny model.
 */
import { spawn } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { UsageError } from "../src/errors.js";
import {
  startFleet,
  embeddedLaunchCommand,
  ServerStartError,
  freePort,
  redactArgs,
  routerLaunchCommand,
  sglangLaunchCommand,
  startInferenceServer,
} from "../src/serve/index.js";
import { CLI, REPO_ROOT } from "./helpers/cli.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { alive } from "./helpers/process.js";
import { tempDir } from "./helpers/tmp.js";

const base = { engine: "sglang" as const, model: "/models/Qwen3 8B", host: "127.0.0.1", port: 30001 };

describe("launch command lines", () => {
  it("sglang: model, host, port as separate arguments; tp from the GPU count; no tool-call parser", () => {
    const cmd = sglangLaunchCommand({ ...base, gpus: [2, 3] });
    expect(cmd.args).toEqual(["-m", "sglang.launch_server", "--model-path", "/models/Qwen3 8B", "--host", "127.0.0.1", "--port", "30001", "--tp-size", "2"]);
    expect(cmd.env).toEqual({ CUDA_VISIBLE_DEVICES: "2,3" });
    expect(cmd.args.join(" ")).not.toContain("tool-call-parser");
  });

  it("sglang: dp splits the GPUs, memory saver when colocated, api key, extra flags last", () => {
    const cmd = sglangLaunchCommand({ ...base, gpus: [0, 1, 2, 3], dpSize: 2, colocated: true, apiKey: "k3y", extraArgs: ["--mem-fraction-static", "0.6"] });
    expect(cmd.args.slice(8)).toEqual(["--tp-size", "2", "--dp-size", "2", "--enable-memory-saver", "--api-key", "k3y", "--mem-fraction-static", "0.6"]);
    expect(redactArgs(cmd.args)).not.toContain("k3y");
    expect(redactArgs(["--api-key=abc"])).toEqual(["--api-key=<redacted>"]);
  });

  it("LoRA (a run without lora.merge): --enable-lora, the rank and the target modules, for sglang and the embedded engine", () => {
    const lora = { maxRank: 32, targetModules: ["q_proj", "v_proj"] };
    expect(sglangLaunchCommand({ ...base, lora }).args.slice(8)).toEqual(["--enable-lora", "--max-lora-rank", "32", "--lora-target-modules", "q_proj", "v_proj"]);
    const embedded = embeddedLaunchCommand({ ...base, engine: "embedded", lora: { maxRank: 8, targetModules: "all-linear" } }, "/w");
    expect(embedded.args.slice(-5)).toEqual(["--enable-lora", "--max-lora-rank", "8", "--lora-target-modules", "all-linear"]);
  });

  it("sglang: refuses a tool-call parser, clashing flags and impossible GPU splits", () => {
    expect(() => sglangLaunchCommand({ ...base, extraArgs: ["--tool-call-parser", "qwen25"] })).toThrow(/not allowed/);
    expect(() => sglangLaunchCommand({ ...base, extraArgs: ["--port=1"] })).toThrow(UsageError);
    expect(() => sglangLaunchCommand({ ...base, gpus: [0, 1, 2], dpSize: 2 })).toThrow(/does not divide/);
    expect(() => sglangLaunchCommand({ ...base, gpus: [0, 1], tpSize: 4 })).toThrow(/--gpus lists 2/);
  });

  it("embedded: the worker package on PYTHONPATH, one device only", () => {
    const cmd = embeddedLaunchCommand({ ...base, engine: "embedded", port: 0, gpus: [1] }, "/pkg/worker");
    expect(cmd.args).toEqual(["-m", "agentrl_worker.embedded_server", "--model", "/models/Qwen3 8B", "--host", "127.0.0.1", "--port", "0", "--device", "cuda"]);
    expect(cmd.env.CUDA_VISIBLE_DEVICES).toBe("1");
    expect(cmd.env.PYTHONPATH?.split(path.delimiter)[0]).toBe("/pkg/worker");
    expect(() => embeddedLaunchCommand({ ...base, engine: "embedded", gpus: [0, 1] }, "/w")).toThrow(/one device/);
    expect(() => embeddedLaunchCommand({ ...base, engine: "embedded", colocated: true }, "/w")).toThrow(/--colocated/);
  });

  it("router: every worker URL after --worker-urls", () => {
    const cmd = routerLaunchCommand({ workerUrls: ["http://h:1", "http://h:2"], host: "0.0.0.0", port: 30000 });
    expect(cmd.args).toEqual(["-m", "sglang_router.launch_router", "--worker-urls", "http://h:1", "http://h:2", "--policy", "cache_aware", "--host", "0.0.0.0", "--port", "30000"]);
  });
});

/**
 * A stand-in for `python` with SGLang installed: records its argv and pids, forks a child (as SGLang forks its
 * scheduler), and serves /health and /model_info. FAKE_MODE: crash (exit 3 with a CUDA error), never-ready (never
 * listens), ignore-term (ignores SIGTERM, so only SIGKILL ends it).
 */
const FAKE_PYTHON = `#!${process.execPath}
const http = require("node:http");
const fs = require("node:fs");
const { spawn } = require("node:child_process");
const argv = process.argv.slice(2);
const mode = process.env.FAKE_MODE || "";
const flag = (name) => argv[argv.indexOf(name) + 1];
const sub = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000); process.on('SIGTERM', () => { if (!process.env.FAKE_IGNORE) process.exit(0); });"], { stdio: "ignore", env: { ...process.env, FAKE_IGNORE: mode === "ignore-term" ? "1" : "" } });
const recordTo = process.env.FAKE_RECORD_DIR ? process.env.FAKE_RECORD_DIR + "/" + process.pid + ".json" : process.env.FAKE_RECORD;
fs.writeFileSync(recordTo, JSON.stringify({ argv, pid: process.pid, sub: sub.pid, cuda: process.env.CUDA_VISIBLE_DEVICES ?? null }));
console.log("fake sglang starting");
if (mode === "crash") { console.error("torch.OutOfMemoryError: CUDA out of memory"); process.exit(3); }
process.on("SIGTERM", () => { if (mode !== "ignore-term") { console.log("fake sglang: SIGTERM"); process.exit(0); } });
if (mode !== "never-ready") {
  http.createServer((req, res) => {
    if (req.url === "/health") { res.writeHead(200); return res.end(); }
    if (req.url === "/model_info") { res.writeHead(200, { "content-type": "application/json" }); return res.end(JSON.stringify({ model_path: flag("--model-path"), module: argv[1] })); }
    res.writeHead(404); res.end();
  }).listen(Number(flag("--port")), flag("--host"), () => console.log("fake sglang ready"));
} else setInterval(() => {}, 1000);
`;

const work = tempDir("serve-test");
const fakePython = path.join(work, "python");
writeFileSync(fakePython, FAKE_PYTHON);
chmodSync(fakePython, 0o755);
let records = 0;

function recordFile(): string {
  records += 1;
  return path.join(work, `record-${records}.json`);
}

interface Record {
  argv: string[];
  pid: number;
  sub: number;
  cuda: string | null;
}

async function readRecord(file: string): Promise<Record> {
  for (let i = 0; i < 200 && !existsSync(file); i++) await sleep(50);
  return JSON.parse(readFileSync(file, "utf8")) as Record;
}


async function gone(pids: number[], withinMs = 8_000): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (Date.now() < deadline) {
    if (pids.every((pid) => !alive(pid))) return true;
    await sleep(100);
  }
  return false;
}

const stragglers: number[] = [];
afterAll(() => {
  for (const pid of stragglers) if (alive(pid)) process.kill(pid, "SIGKILL");
});

describe("startInferenceServer with a fake sglang", () => {
  it("passes the command line through, waits for /health, and stop() takes the whole group down", async () => {
    const record = recordFile();
    const port = await freePort();
    const engine = await startInferenceServer({
      engine: "sglang",
      model: "/models/my model",
      port,
      gpus: [0, 1],
      apiKey: "s3cret",
      extraArgs: ["--mem-fraction-static", "0.5"],
      python: fakePython,
      startupTimeoutMs: 20_000,
      env: { FAKE_RECORD: record },
    });
    const seen = await readRecord(record);
    stragglers.push(seen.pid, seen.sub);
    expect(engine.url).toBe(`http://127.0.0.1:${port}`);
    expect(seen.argv).toEqual(["-m", "sglang.launch_server", "--model-path", "/models/my model", "--host", "127.0.0.1", "--port", String(port), "--tp-size", "2", "--api-key", "s3cret", "--mem-fraction-static", "0.5"]);
    expect(seen.cuda).toBe("0,1");
    expect(engine.commandLine).not.toContain("s3cret");
    const info = (await (await fetch(`${engine.url}/model_info`)).json()) as { model_path: string };
    expect(info.model_path).toBe("/models/my model");
    expect(alive(seen.pid) && alive(seen.sub)).toBe(true);

    const exit = await engine.stop();
    expect(exit.requested).toBe(true);
    expect(engine.logTail()).toContain("fake sglang: SIGTERM");
    expect(await gone([seen.pid, seen.sub])).toBe(true);
  });

  it("a crash during start-up rejects with the engine's last lines", async () => {
    const record = recordFile();
    const error = await startInferenceServer({ engine: "sglang", model: "m", port: await freePort(), python: fakePython, env: { FAKE_RECORD: record, FAKE_MODE: "crash" } }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ServerStartError);
    expect((error as ServerStartError).message).toMatch(/sglang exited during start-up \(exit code 3\)/);
    expect((error as ServerStartError).logTail).toContain("CUDA out of memory");
    const seen = await readRecord(record);
    stragglers.push(seen.sub);
    expect(await gone([seen.pid, seen.sub])).toBe(true);
  });

  it("a start-up timeout kills the group; SIGKILL follows a SIGTERM that is ignored", async () => {
    const record = recordFile();
    const error = await startInferenceServer({
      engine: "sglang",
      model: "m",
      port: await freePort(),
      python: fakePython,
      // Long enough for the fake (a node process) to start and print under a loaded CI machine: at 1.5 s it once had
      // not printed yet, and the log tail was empty.
      startupTimeoutMs: 5_000,
      graceMs: 300,
      env: { FAKE_RECORD: record, FAKE_MODE: "never-ready" },
    }).catch((err: unknown) => err);
    expect((error as Error).message).toContain("did not answer /health within 5 s");
    expect((error as ServerStartError).logTail).toContain("fake sglang starting");
    const seen = await readRecord(record);
    stragglers.push(seen.pid, seen.sub);
    expect(await gone([seen.pid, seen.sub])).toBe(true);

    const stubborn = recordFile();
    const engine = await startInferenceServer({ engine: "sglang", model: "m", port: await freePort(), python: fakePython, graceMs: 300, env: { FAKE_RECORD: stubborn, FAKE_MODE: "ignore-term" } });
    const pids = await readRecord(stubborn);
    stragglers.push(pids.pid, pids.sub);
    const exit = await engine.stop();
    expect(exit.requested).toBe(true);
    expect(exit.signal ?? exit.code).not.toBe(0);
    expect(await gone([pids.pid, pids.sub])).toBe(true);
  });
});

/** A base port p below the ephemeral range with p, p+1, ... p+count-1 all free (outgoing sockets never take them). */
async function freePortRun(count: number): Promise<number> {
  const net = await import("node:net");
  const free = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = net.createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 8_000);
    let ok = true;
    for (let i = 0; i < count && ok; i++) ok = await free(base + i);
    if (ok) return base;
  }
  throw new Error("no run of free ports");
}

describe("startFleet: several sglang servers behind the router", () => {
  it("splits the GPUs, puts the router in front of every server, and stops them all", async () => {
    const dir = path.join(work, "fleet");
    mkdirSync(dir);
    const port = await freePortRun(3);
    const fleet = await startFleet({ engine: "sglang", model: "m", replicas: 2, gpus: [0, 1, 2, 3], port, python: fakePython, env: { FAKE_RECORD_DIR: dir } });
    const seen = readdirSync(dir).map((file) => JSON.parse(readFileSync(path.join(dir, file), "utf8")) as Record);
    stragglers.push(...seen.flatMap((r) => [r.pid, r.sub]));
    expect(fleet.url).toBe(`http://127.0.0.1:${port}`);
    expect(fleet.workerUrls).toEqual([`http://127.0.0.1:${port + 1}`, `http://127.0.0.1:${port + 2}`]);
    const servers = seen.filter((r) => r.argv[1] === "sglang.launch_server").sort((a, b) => (a.cuda ?? "").localeCompare(b.cuda ?? ""));
    expect(servers.map((r) => [r.cuda, r.argv.slice(-2)])).toEqual([["0,1", ["--tp-size", "2"]], ["2,3", ["--tp-size", "2"]]]);
    const router = seen.find((r) => r.argv[1] === "sglang_router.launch_router");
    expect(router?.argv.slice(2, 5)).toEqual(["--worker-urls", ...fleet.workerUrls]);
    const info = (await (await fetch(`${fleet.url}/model_info`)).json()) as { module: string };
    expect(info.module).toBe("sglang_router.launch_router");
    await fleet.stop();
    expect(await gone(seen.flatMap((r) => [r.pid, r.sub]))).toBe(true);
  });
});

/** Starts `agentrl serve` with the fake python; resolves with the child and the URL it printed. */
async function startServeCli(record: string, extraEnv: NodeJS.ProcessEnv = {}) {
  const port = await freePort();
  const child = spawn(process.execPath, [CLI, "serve", "--engine", "sglang", "--model", "m", "--port", String(port), "--python", fakePython, "--", "--random-seed", "7"], {
    cwd: REPO_ROOT,
    env: { ...process.env, NO_COLOR: "1", FAKE_RECORD: record, ...extraEnv },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)));
  for (let i = 0; i < 400 && !stdout.includes("\n"); i++) await sleep(50);
  return { child, port, closed, out: () => stdout, err: () => stderr };
}

describe("agentrl serve (built CLI)", () => {
  it("prints the URL, forwards Ctrl-C, exits 0 and leaves nothing behind", async () => {
    const record = recordFile();
    const serve = await startServeCli(record);
    expect(serve.out()).toBe(`http://127.0.0.1:${serve.port}\n`);
    const seen = await readRecord(record);
    stragglers.push(seen.pid, seen.sub);
    expect(seen.argv.slice(-2)).toEqual(["--random-seed", "7"]);
    expect(serve.err()).toContain("fake sglang ready");
    serve.child.kill("SIGINT");
    expect(await serve.closed).toBe(0);
    expect(serve.err()).toContain("the engine stopped");
    expect(await gone([seen.pid, seen.sub])).toBe(true);
  });

  it("a SIGKILLed agentrl leaves no orphan: the guardian takes the group down", async () => {
    const record = recordFile();
    const serve = await startServeCli(record);
    expect(serve.out()).toContain(`:${serve.port}`);
    const seen = await readRecord(record);
    stragglers.push(seen.pid, seen.sub);
    serve.child.kill("SIGKILL");
    await serve.closed;
    expect(await gone([seen.pid, seen.sub])).toBe(true);
  });

  it("bad flags and a missing model folder exit 2", async () => {
    const { runCli } = await import("./helpers/cli.js");
    const result = await runCli(["serve", "--engine", "vllm", "--model", "m"]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--engine must be embedded or sglang");
    const clash = await runCli(["serve", "--engine", "sglang", "--model", "m", "--", "--tool-call-parser", "qwen25"]);
    expect(clash.code).toBe(2);
    expect(clash.stderr).toContain("--tool-call-parser");
    const missing = await runCli(["serve", "--engine", "embedded", "--model", "/nonexistent/model"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("/nonexistent/model: not a model folder");
  });
});

describe("the embedded engine, for real", () => {
  it("starts a tiny model on a free port, generates, and stops cleanly", async () => {
    const model = tinyQwenModel();
    const engine = await startInferenceServer({ engine: "embedded", model, port: 0, startupTimeoutMs: 120_000 });
    try {
      expect(engine.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const response = await fetch(`${engine.url}/generate`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input_ids: [1, 2, 3], sampling_params: { max_new_tokens: 3, temperature: 0 }, return_logprob: true }),
      });
      const body = (await response.json()) as { output_ids: number[]; meta_info: { output_token_logprobs: unknown[] } };
      expect(body.output_ids).toHaveLength(3);
      expect(body.meta_info.output_token_logprobs).toHaveLength(3);
    } finally {
      const exit = await engine.stop();
      expect(exit).toMatchObject({ requested: true, code: 0 });
    }
  }, 180_000);
});
