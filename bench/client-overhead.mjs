#!/usr/bin/env node
/**
 * Client overhead (first version): requests/s and client CPU per request of SglangClient.generate next to a bare
 * undici request loop, against the same fake SGLang server (zero latency) in the same run, at several
 * concurrencies. The fake runs in a child process so its CPU is not charged to the client.
 *
 *   npx tsc -p tsconfig.json && node bench/client-overhead.mjs [--seconds 1.5] [--rounds 3] [--concurrency 1,64,512]
 *
 * Prints one line per concurrency; `ratio` is client req/s over bare req/s (1.0 = no overhead) and
 * `cpu/req` is this process's user+system CPU per request.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import ts from "typescript";
import { Agent, request } from "undici";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const seconds = Number(flag("seconds", "1.5"));
const rounds = Number(flag("rounds", "3"));
const concurrencies = flag("concurrency", "1,64,512").split(",").map(Number);

const { SglangClient } = await import(pathToFileURL(path.join(root, "dist/engine/index.js")).href).catch(() => {
  console.error("dist/engine is missing: run `npx tsc -p tsconfig.json` first");
  process.exit(2);
});

/** The fake is TypeScript under test/; transpile it (types stripped, nothing checked) into a temp dir. */
function transpileFake() {
  const dir = mkdtempSync(path.join(tmpdir(), "agentrl-bench-fake-"));
  writeFileSync(path.join(dir, "package.json"), '{"type":"module"}');
  for (const name of ["index", "faults", "generation"]) {
    const source = readFileSync(path.join(root, "test/fake-sglang", `${name}.ts`), "utf8");
    const out = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
    });
    writeFileSync(path.join(dir, `${name}.js`), out.outputText);
  }
  writeFileSync(
    path.join(dir, "serve.js"),
    `import { startFakeSglang } from "./index.js";
const fake = await startFakeSglang();
console.log(fake.url);
process.stdin.on("end", () => fake.close().then(() => process.exit(0)));
process.stdin.resume();`,
  );
  return dir;
}

function startFakeProcess(dir) {
  const child = spawn(process.execPath, [path.join(dir, "serve.js")], { stdio: ["pipe", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.stdout.once("data", (chunk) => resolve({ url: chunk.toString().trim(), stop: () => child.stdin.end() }));
  });
}

const inputIds = Array.from({ length: 64 }, (_, i) => 1000 + i);
const maxNewTokens = 8;

/** Runs `concurrency` loops of `once()` for `seconds`; returns completed requests, wall seconds and CPU µs. */
async function measure(concurrency, once) {
  const deadline = Date.now() + seconds * 1000;
  let done = 0;
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        await once();
        done++;
      }
    }),
  );
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  return { done, rate: done / wall, cpuPerReqUs: (cpu.user + cpu.system) / done };
}

async function bare(url, concurrency) {
  const agent = new Agent({ connections: concurrency });
  const body = JSON.stringify({
    input_ids: inputIds,
    sampling_params: { max_new_tokens: maxNewTokens, skip_special_tokens: false },
    return_logprob: true,
  });
  const result = await measure(concurrency, async () => {
    const res = await request(`${url}/generate`, {
      dispatcher: agent,
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const json = await res.body.json();
    if (res.statusCode !== 200 || !Array.isArray(json.output_ids)) throw new Error(`bare loop got HTTP ${res.statusCode}`);
  });
  await agent.close();
  return result;
}

async function viaClient(url, concurrency) {
  const client = new SglangClient({ servers: [url], concurrency });
  let traj = 0;
  const result = await measure(concurrency, async () => {
    const r = await client.generate({ inputIds, samplingParams: { maxNewTokens }, stickyKey: `t${traj++ % 4096}` });
    if (r.outputIds.length === 0) throw new Error("client got no tokens");
  });
  await client.close();
  return result;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const dir = transpileFake();
const fake = await startFakeProcess(dir);
try {
  // Warm both paths (JIT, connections) before measuring.
  await bare(fake.url, 8);
  await viaClient(fake.url, 8);
  console.log(
    `client overhead vs bare undici, fake SGLang at zero latency in a child process, ${rounds} alternating rounds of ` +
      `${seconds}s per cell (medians), node ${process.version}`,
  );
  for (const c of concurrencies) {
    const b = [];
    const k = [];
    // Alternate which goes first, so drift on a shared machine does not favour one side.
    for (let r = 0; r < rounds; r++) {
      if (r % 2 === 0) {
        b.push(await bare(fake.url, c));
        k.push(await viaClient(fake.url, c));
      } else {
        k.push(await viaClient(fake.url, c));
        b.push(await bare(fake.url, c));
      }
    }
    const bRate = median(b.map((x) => x.rate));
    const kRate = median(k.map((x) => x.rate));
    const bCpu = median(b.map((x) => x.cpuPerReqUs));
    const kCpu = median(k.map((x) => x.cpuPerReqUs));
    console.log(
      `concurrency ${String(c).padStart(4)}  bare ${bRate.toFixed(0).padStart(6)} req/s (cpu/req ${bCpu.toFixed(0)} µs)` +
        `  client ${kRate.toFixed(0).padStart(6)} req/s (cpu/req ${kCpu.toFixed(0)} µs)` +
        `  ratio ${(kRate / bRate).toFixed(2)}  cpu ratio ${(kCpu / bCpu).toFixed(2)}`,
    );
  }
} finally {
  fake.stop();
  rmSync(dir, { recursive: true, force: true });
}
