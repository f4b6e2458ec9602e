/**
 * agentrl doctor against the fake SGLang server (a pass, a tokenizer mismatch by EOS and by vocabulary, a server
 * that is down, broken /generate answers, budgets and formats from a config) and, for real, the embedded engine.
 *
 * The built CLI runs in its own process for a pass (table and --json), a failed check (exit status 1 and its --json
 * report) and bad input (exit status 2); the other command lines run through the CLI's main() in the test process
 * (runCliInProcess: the same flags, config reading, report and exit code, without a Node start-up each). The two
 * embedded engines (without and with LoRA) start side by side.
 */
import http from "node:http";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatDoctorReport, runDoctor, type DoctorOptions, type DoctorReport } from "../src/doctor/index.js";
import { freePort, startInferenceServer, type InferenceServer } from "../src/serve/index.js";
import { startFakeSglang, type FakeSglang } from "./fake-sglang/index.js";
import { materializeFixtureModel } from "./fixtures/templates/materialize.js";
import { runCli, type CliResult } from "./helpers/cli.js";
import { runCliInProcess } from "./helpers/in-process-cli.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { tempDir } from "./helpers/tmp.js";

const GSM8K_TOOLS = "tool-configs/gsm8k_tool_config.yaml";

function statuses(report: DoctorReport): Record<string, string> {
  return Object.fromEntries(report.checks.map((check) => [check.id, check.status]));
}

function detail(report: DoctorReport, id: string): string {
  return report.checks.find((check) => check.id === id)?.detail ?? "";
}

type Runner = (args: string[], options?: { env?: NodeJS.ProcessEnv }) => Promise<CliResult>;

/** `doctor ARGS --json`, in the test process unless `run` is runCli (a process of the built CLI). */
async function doctorJson(args: string[], run: Runner = runCliInProcess): Promise<{ code: number; report: DoctorReport; stderr: string }> {
  const result = await run(["doctor", ...args, "--json"]);
  return { code: result.code, report: JSON.parse(result.stdout) as DoctorReport, stderr: result.stderr };
}

const servers: FakeSglang[] = [];
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
});

async function fake(options: Parameters<typeof startFakeSglang>[0]): Promise<FakeSglang> {
  const server = await startFakeSglang(options);
  servers.push(server);
  return server;
}

describe("doctor against the fake SGLang server", () => {
  it("passes a server that serves the local model (built CLI, table and --json)", async () => {
    const server = await fake({ modelPath: QWEN3_DIR, defaultLength: 5 });
    const { code, report } = await doctorJson(["--model", QWEN3_DIR, "--server", server.url, "--tools", GSM8K_TOOLS], runCli);
    expect(code).toBe(0);
    // Qwen3's template drops the empty <think> of an earlier assistant turn: a warning, not a failure.
    expect(statuses(report)).toEqual({ server: "pass", tokenizer: "pass", generate: "pass", template: "warn", format: "pass", weights: "pass", context: "pass" });
    expect(detail(report, "generate")).toContain('"<|im_end|>" (151645)');
    expect(detail(report, "format")).toContain('calc_gsm8k_reward({"answer":"42"})');
    expect(detail(report, "context")).toContain("40960 ≥ 1024 prompt + 1024 response");
    // The weight-update probe reloaded nothing.
    expect(server.weightVersion()).toBe("default");

    const table = await runCli(["doctor", "--model", QWEN3_DIR, "--server", server.url]);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/weight-update endpoint exists\s*│ pass/);
    expect(table.stdout).toContain("doctor: 6 pass, 1 warn, 0 fail, 0 skipped: ready, with warnings");
  });

  it("fails a server whose model stops on another EOS, with a clear message", async () => {
    const server = await fake({ modelPath: "meta-llama/Llama-3.1-8B-Instruct", eosTokenIds: [128009], defaultLength: 5 });
    const { code, report } = await doctorJson(["--model", QWEN3_DIR, "--server", server.url]);
    expect(code).toBe(1);
    expect(statuses(report)).toMatchObject({ server: "pass", tokenizer: "warn", generate: "fail" });
    expect(detail(report, "generate")).toMatch(
      /the server stopped on token .* \(128009\), which the local tokenizer does not end a turn with \(EOS "<\|im_end\|>" \(151645\)\): the server runs another model/,
    );
  });

  it("fails a server whose tokenizer files differ (vocabulary, EOS, special tokens)", async () => {
    const llama = materializeFixtureModel("llama3-style");
    const server = await fake({ modelPath: llama, defaultLength: 5 });
    // One run of the built CLI: its exit status, and its report as --json.
    const { code, report } = await doctorJson(["--model", QWEN3_DIR, "--server", server.url], runCli);
    expect(code).toBe(1);
    expect(report.ok).toBe(false);
    expect(statuses(report).tokenizer).toBe("fail");
    expect(detail(report, "tokenizer")).toMatch(/does not match the local tokenizer .*vocabulary size \d+ on the server vs 151669 here/);
    expect(detail(report, "tokenizer")).toMatch(/EOS ids .* on the server vs "<\|im_end\|>" \(151645\) here/);
    // Without --json the CLI prints this report as formatDoctorReport's table (that path runs in the first test).
    expect(formatDoctorReport(report, false)).toContain("not ready");
  });

  it("fails when the server is down, and still checks the template", async () => {
    const port = await freePort();
    const { code, report } = await doctorJson(["--model", QWEN3_DIR, "--server", `http://127.0.0.1:${port}`]);
    expect(code).toBe(1);
    expect(statuses(report)).toEqual({ server: "fail", tokenizer: "skip", generate: "skip", template: "warn", format: "pass", weights: "skip", context: "skip" });
    expect(detail(report, "server")).toMatch(/does not answer: ECONNREFUSED/);
  });

  it("reads budgets, format and tools from a config; a context too small and a wrong format fail", async () => {
    const server = await fake({ modelPath: QWEN3_DIR, defaultLength: 5, contextLength: 8192 });
    const dir = tempDir("doctor");
    const config = path.join(dir, "rollout.yaml");
    writeFileSync(
      config,
      [
        "data: {max_prompt_length: 2048, max_response_length: 8192}",
        "actor_rollout_ref:",
        `  model: {path: ${JSON.stringify(QWEN3_DIR)}}`,
        "  rollout:",
        `    server: {urls: [${JSON.stringify(server.url)}]}`,
        `    multi_turn: {format: llama3, tool_config_path: ${GSM8K_TOOLS}}`,
      ].join("\n"),
    );
    const { code, report } = await doctorJson(["--config", config]);
    expect(code).toBe(1);
    expect(statuses(report)).toMatchObject({ context: "fail", format: "fail", generate: "pass" });
    expect(detail(report, "context")).toContain(`context length 8192 < 2048 prompt + 8192 response = 10240 tokens (from ${config})`);
    expect(detail(report, "format")).toContain("calc_gsm8k_reward");
    // Flags win over the config.
    const fixed = await doctorJson(["--config", config, "--format", "hermes", "--max-response-length", "4096"]);
    expect(fixed.code).toBe(0);
    expect(statuses(fixed.report)).toMatchObject({ context: "pass", format: "pass" });
  });

  it("uses the API key from SGLANG_API_KEY, and says so when it is missing", async () => {
    const server = await fake({ modelPath: QWEN3_DIR, defaultLength: 5, apiKey: "sekret" });
    const without = await doctorJson(["--model", QWEN3_DIR, "--server", server.url]);
    expect(without.code).toBe(1);
    expect(detail(without.report, "server")).toContain("401 Unauthorized");
    expect(without.report.checks[0]?.hint).toContain("SGLANG_API_KEY");
    const result = await runCliInProcess(["doctor", "--model", QWEN3_DIR, "--server", server.url, "--json"], { env: { SGLANG_API_KEY: "sekret" } });
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain("sekret");
  });

  it("bad input exits 2", async () => {
    const noServer = await runCli(["doctor", "--model", QWEN3_DIR]);
    expect(noServer.code).toBe(2);
    expect(noServer.stderr).toContain("--server");
    const badModel = await runCliInProcess(["doctor", "--model", "/nonexistent/model", "--server", "http://127.0.0.1:1"]);
    expect(badModel.code).toBe(2);
  });
});

/** A server that answers /generate with whatever the test says, to break one protocol rule at a time. */
async function brokenGenerateServer(body: unknown): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const json = (status: number, value: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(value));
    };
    if (req.url === "/health") return json(200, {});
    if (req.url === "/model_info") return json(200, { model_path: QWEN3_DIR, tokenizer_path: QWEN3_DIR });
    if (req.url === "/server_info") return json(200, { context_length: 32768 });
    if (req.url === "/generate") {
      let raw = "";
      req.on("data", (chunk) => (raw += chunk));
      req.on("end", () => {
        const request = JSON.parse(raw) as { input_ids: number[] };
        // The vocabulary probe sends one token; answer it like a healthy server.
        if (request.input_ids.length === 1) return json(200, { output_ids: [9], meta_info: { finish_reason: { type: "length", length: 1 }, output_token_logprobs: [[-1, 9, null]] } });
        json(200, body);
      });
      return;
    }
    json(404, { detail: "Not Found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe("doctor's /generate check", () => {
  const options = (url: string): DoctorOptions => ({
    model: QWEN3_DIR,
    server: url,
    format: "auto",
    maxPromptLength: 1024,
    maxResponseLength: 1024,
    budgetSource: "defaults",
  });

  it("fails missing logprobs, a trimmed EOS, and a missing weight-update endpoint", async () => {
    const noLogprobs = await brokenGenerateServer({ output_ids: [5, 151645], meta_info: { finish_reason: { type: "stop", matched: 151645 } } });
    const trimmed = await brokenGenerateServer({
      output_ids: [5, 6],
      meta_info: { finish_reason: { type: "stop", matched: 151645 }, output_token_logprobs: [[-1, 5, null], [-2, 6, null]] },
    });
    try {
      const a = await runDoctor(options(noLogprobs.url));
      expect(statuses(a)).toMatchObject({ server: "pass", tokenizer: "pass", generate: "fail", weights: "fail" });
      expect(detail(a, "generate")).toContain("no output_token_logprobs");
      expect(detail(a, "weights")).toContain("answered 404");
      const b = await runDoctor(options(trimmed.url));
      expect(detail(b, "generate")).toContain("output_ids end with 6: the server trims the EOS");
    } finally {
      await noLogprobs.close();
      await trimmed.close();
    }
  });
});

describe("doctor against the embedded engine", () => {
  let engine: InferenceServer;
  let lora: InferenceServer;
  let model: string;
  beforeAll(async () => {
    model = tinyQwenModel();
    // The plain engine and one with --enable-lora, started at once.
    const started = await Promise.allSettled([
      startInferenceServer({ engine: "embedded", model, port: 0, startupTimeoutMs: 120_000 }),
      startInferenceServer({ engine: "embedded", model, port: 0, startupTimeoutMs: 120_000, lora: { maxRank: 16, targetModules: "all-linear" } }),
    ]);
    if (started[0].status === "fulfilled") engine = started[0].value;
    if (started[1].status === "fulfilled") lora = started[1].value;
    for (const result of started) if (result.status === "rejected") throw result.reason;
  }, 180_000);
  afterAll(async () => {
    await Promise.all([engine?.stop(), lora?.stop()]);
  });

  it("passes (warnings only: an untrained model stops on no EOS, Qwen3 drops an empty <think>)", async () => {
    const { code, report } = await doctorJson(["--model", model, "--server", engine.url, "--tools", GSM8K_TOOLS]);
    expect(code).toBe(0);
    expect(statuses(report)).toEqual({ server: "pass", tokenizer: "pass", generate: "warn", template: "warn", format: "pass", weights: "pass", context: "pass" });
    expect(detail(report, "generate")).toContain("a stop token is kept at the end of output_ids");
  }, 120_000);

  it("--lora-rank: a server without --enable-lora fails the LoRA check; one with it passes up to its max rank", async () => {
    const plain = await doctorJson(["--model", model, "--server", engine.url, "--lora-rank", "8"]);
    expect(plain.code).toBe(1);
    expect(statuses(plain.report).lora).toBe("fail");
    const ok = await doctorJson(["--model", model, "--server", lora.url, "--lora-rank", "8"]);
    expect(statuses(ok.report).lora, detail(ok.report, "lora")).toBe("pass");
    const tooBig = await doctorJson(["--model", model, "--server", lora.url, "--lora-rank", "32"]);
    expect(detail(tooBig.report, "lora")).toContain("max_lora_rank 16 < lora_rank 32");
  }, 240_000);
});
