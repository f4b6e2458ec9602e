/**
 * One HTTP attempt (src/engine/http.ts, undici's dispatch with a body-gathering handler): the outcome of an answer, a
 * refused connection and a cut body, and an attempt that waits for a connection behind another: its timeout or its
 * caller's abort settles it at once, and an aborted one never reaches the server. The Agent the client loads on
 * its own (src/engine/undici-agent.ts) is undici's.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Agent } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { sendAttempt } from "../src/engine/http.js";
import { Agent as ClientAgent } from "../src/engine/undici-agent.js";

let server: http.Server | undefined;
let agent: Agent | undefined;
const held: http.ServerResponse[] = [];
const seen: string[] = [];

/** /hold answers only when the test releases it; /ok answers at once; /cut sends half a body and drops the socket. */
async function start(): Promise<string> {
  server = http.createServer((req, res) => {
    seen.push(req.url ?? "");
    req.resume();
    if (req.url === "/hold") held.push(res);
    else if (req.url === "/cut") {
      res.writeHead(200, { "content-type": "application/json", "content-length": "100" });
      res.write('{"text":');
      setTimeout(() => res.socket?.destroy(), 20);
    } else {
      res.writeHead(200, { "content-type": "application/json", "retry-after": "3" });
      res.end('{"ok":true}');
    }
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
}

afterEach(async () => {
  for (const res of held.splice(0)) res.end("{}");
  seen.length = 0;
  await agent?.close();
  const running = server;
  if (running) await new Promise((resolve) => running.close(resolve));
  server = undefined;
  agent = undefined;
});

const attempt = (url: string, extra: { timeoutMs?: number; signal?: AbortSignal } = {}) =>
  sendAttempt({ dispatcher: agent!, url, method: "POST", headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 10_000, ...extra });

describe("sendAttempt", () => {
  it("gives the status, headers and body of an answer", async () => {
    const base = await start();
    agent = new Agent();
    const outcome = await attempt(`${base}/ok`);
    expect(outcome).toMatchObject({ kind: "response", status: 200, bodyText: '{"ok":true}' });
    expect(outcome.kind === "response" && outcome.headers["retry-after"]).toBe("3");
  });

  it("calls a refused connection connect, and a body cut after the headers partial_body", async () => {
    const base = await start();
    agent = new Agent();
    const cut = await attempt(`${base}/cut`);
    expect(cut).toMatchObject({ kind: "failed", failure: "partial_body", responseStarted: true });
    await new Promise((resolve) => server!.close(resolve));
    const refused = await attempt(`${base}/ok`);
    expect(refused).toMatchObject({ kind: "failed", failure: "connect", responseStarted: false });
  });

  it("times out while queued behind a held request, without waiting for it", async () => {
    const base = await start();
    agent = new Agent({ connections: 1 });
    const first = attempt(`${base}/hold`);
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    const queued = await attempt(`${base}/ok`, { timeoutMs: 100 });
    expect(queued).toMatchObject({ kind: "failed", failure: "timeout" });
    expect(held).toHaveLength(1); // the first is still held: the timeout did not wait for it
    held.splice(0).forEach((res) => res.end("{}"));
    expect(await first).toMatchObject({ kind: "response", status: 200 });
  });

  it("a caller's abort settles a queued attempt at once, and it never reaches the server", async () => {
    const base = await start();
    agent = new Agent({ connections: 1 });
    const first = attempt(`${base}/hold`);
    while (held.length === 0) await new Promise((r) => setTimeout(r, 5));
    const controller = new AbortController();
    const queued = attempt(`${base}/ok`, { signal: controller.signal });
    controller.abort();
    expect(await queued).toEqual({ kind: "cancelled" });
    held.splice(0).forEach((res) => res.end("{}"));
    await first;
    // The connection is free now; had the aborted attempt stayed queued, it would go out on it.
    expect(await attempt(`${base}/ok`)).toMatchObject({ kind: "response" });
    expect(seen).toEqual(["/hold", "/ok"]);
  });
});

it("the client's Agent, loaded without the rest of undici, is the package's own Agent class", () => {
  expect(ClientAgent).toBe(Agent);
});
