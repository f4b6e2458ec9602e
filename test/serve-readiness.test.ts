/**
 * `agentrl serve` owns its readiness (issue 15): a port something already listens on is refused before the engine
 * starts, and a /health answer only counts when it comes from the process agentrl started (the child still runs, and
 * the embedded engine echoes its launch id). Each test occupies a port with a plain node http server.
 */
import http from "node:http";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, describe, expect, it } from "vitest";
import { UsageError } from "../src/errors.js";
import { ServerStartError, startInferenceServer, startServerProcess, type ServerProcess, type ServerProcessOptions } from "../src/serve/index.js";
import { runCli } from "./helpers/cli.js";
import { tinyQwenModel } from "./helpers/tiny-model.js";
import { alive } from "./helpers/process.js";
import { tempDir } from "./helpers/tmp.js";

const work = tempDir("serve-readiness");
const servers: http.Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Someone else's server: answers 200 on every path (after `delayMs`), like a stray engine on the port. */
async function occupyPort(delayMs = 0): Promise<number> {
  const server = http.createServer((_req, res) => {
    setTimeout(() => res.writeHead(200, { "content-type": "text/plain" }).end("other server"), delayMs);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

/** A node script run as the managed child; it records its pid so the test can check it is gone. */
function childScript(name: string, source: string): { script: string; pidFile: string } {
  const script = path.join(work, `${name}.cjs`);
  const pidFile = path.join(work, `${name}.pid`);
  writeFileSync(script, `require("node:fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid));\n${source}\n`);
  return { script, pidFile };
}

/** Starts a child expected to fail start-up; one that wrongly comes up is stopped before the test goes on. */
async function startExpectingFailure(options: ServerProcessOptions): Promise<unknown> {
  const outcome = await startServerProcess(options).catch((err: unknown) => err);
  if (!(outcome instanceof Error)) await (outcome as ServerProcess).stop("SIGKILL");
  return outcome;
}


/** True when the child is gone (or was stopped before it even wrote its pid: stop() waits for the whole group). */
async function goneWithin(pidFile: string, ms: number): Promise<boolean> {
  if (!existsSync(pidFile)) return true;
  const pid = Number(readFileSync(pidFile, "utf8"));
  const deadline = Date.now() + ms;
  while (alive(pid) && Date.now() < deadline) await sleep(50);
  if (alive(pid)) process.kill(pid, "SIGKILL");
  return !alive(pid);
}

describe("agentrl serve on a busy port (built CLI)", () => {
  it("exits 2 at once, names the port, and never prints a URL or 'ready'", async () => {
    const model = tinyQwenModel();
    const port = await occupyPort();
    const started = Date.now();
    const result = await runCli(["serve", "--engine", "embedded", "--model", model, "--port", String(port)], { timeoutMs: 60_000 });
    const seconds = (Date.now() - started) / 1000;
    expect(result.stdout).toBe("");
    expect(result.stderr).not.toMatch(/\bready\b/);
    expect(result.stderr).not.toMatch(/Traceback/);
    expect(result.stderr).toContain(`something already listens on port ${port}`);
    expect(result.stderr).toContain(`127.0.0.1:${port}`);
    expect(result.code).toBe(2);
    // No engine was started: no model load to wait for.
    expect(seconds).toBeLessThan(10);
  }, 90_000);

  it("startInferenceServer refuses a busy port for sglang too, before starting anything", async () => {
    const port = await occupyPort();
    const error = await startInferenceServer({ engine: "sglang", model: "m", port, python: path.join(work, "no-such-python") }).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(UsageError);
    expect((error as UsageError).message).toBe(`cannot start sglang on 127.0.0.1:${port}: something already listens on port ${port}`);
  });
});

describe("readiness comes from the process agentrl started", () => {
  it("a 200 without this launch's id is another server's: start-up fails at once and the child is stopped", async () => {
    const port = await occupyPort();
    const { script, pidFile } = childScript("never-listens", "setInterval(() => {}, 1000);");
    const started = Date.now();
    const error = await startExpectingFailure({
      label: "the test engine",
      command: process.execPath,
      args: [script],
      url: `http://127.0.0.1:${port}`,
      echoesLaunchId: true,
      startupTimeoutMs: 20_000,
      graceMs: 500,
    });
    expect(error).toBeInstanceOf(ServerStartError);
    expect((error as ServerStartError).message).toMatch(/answers \/health, but not from the test engine agentrl started/);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await goneWithin(pidFile, 5_000)).toBe(true);
  });

  it("a child that echoes its launch id is ready", async () => {
    const { script, pidFile } = childScript(
      "echoes-id",
      `const server = require("node:http").createServer((req, res) => res.writeHead(200, { "x-agentrl-launch-id": process.env.AGENTRL_LAUNCH_ID }).end());
server.listen(0, "127.0.0.1", () => console.log("listening on " + server.address().port));`,
    );
    let url: string | undefined;
    const engine = await startServerProcess({
      label: "the test engine",
      command: process.execPath,
      args: [script],
      url: () => url,
      onLine: (line) => {
        const match = /listening on (\d+)/.exec(line);
        if (match) url = `http://127.0.0.1:${match[1]}`;
      },
      echoesLaunchId: true,
      startupTimeoutMs: 20_000,
      graceMs: 500,
    });
    expect(engine.url).toBe(url);
    const exit = await engine.stop();
    expect(exit.requested).toBe(true);
    expect(await goneWithin(pidFile, 5_000)).toBe(true);
  });

  it("a child that has exited is not ready, even when something answers on its port", async () => {
    // The other server answers late, so by then the child has exited: its answer must not count as the child's.
    const port = await occupyPort(1_500);
    const { script, pidFile } = childScript("exits", 'console.error("bind failed: address in use"); process.exit(3);');
    const error = await startExpectingFailure({
      label: "the test engine",
      command: process.execPath,
      args: [script],
      url: `http://127.0.0.1:${port}`,
      startupTimeoutMs: 20_000,
      graceMs: 500,
    });
    expect(error).toBeInstanceOf(ServerStartError);
    expect((error as ServerStartError).message).toBe("the test engine exited during start-up (exit code 3)");
    expect((error as ServerStartError).logTail).toContain("bind failed");
    expect(await goneWithin(pidFile, 5_000)).toBe(true);
  });
});
