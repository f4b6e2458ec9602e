/**
 * Runs the fake SGLang server of test/fake-sglang in a child process, so the bench process's CPU time is the
 * client's alone. The fake is TypeScript that imports only Node built-ins: it is transpiled (types stripped,
 * nothing checked) into a temp dir, as vitest is not there at bench time.
 *
 * The scripted "model" answers `turn1` to a prompt holding no `markerId` token and `turn2` to one that does (for a
 * tool-calling story: the first turn calls a tool, the second, which sees the <tool_response>, answers).
 * With `turn2Variants` (and `turn1Variants`), a request with a sampling_seed (a rollout with a seed) gets one of them as
 * its answer, picked by the seed.
 * With `latency: { medianMs, sigma }` each generation waits a lognormal time fixed by its sampling_seed.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import ts from "typescript";

const SERVE = `import { readFileSync } from "node:fs";
import { startFakeSglang, seededRandom } from "./index.js";
const { markerId, turn1, turn2, turn1Variants, turn2Variants, latency } = JSON.parse(readFileSync(new URL("./script.json", import.meta.url), "utf8"));
// Optional per-request latency, lognormal, drawn from the request's sampling_seed: the same trajectory turn waits the
// same time in every run, whatever the schedule.
const delayOf = (params) => {
  const random = seededRandom(params.sampling_seed ?? 0);
  const u = Math.max(random(), 1e-12), v = random();
  return latency.medianMs * Math.exp(latency.sigma * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
};
const fake = await startFakeSglang({
  respond: async (inputIds, params) => {
    if (latency) await new Promise((r) => setTimeout(r, delayOf(params)));
    // Distinct answers (drawn by the request's sampling seed) make every trajectory's text new, as in a real run.
    if (!inputIds.includes(markerId)) return turn1Variants && params.sampling_seed !== undefined ? turn1Variants[params.sampling_seed % turn1Variants.length] : turn1;
    return turn2Variants && params.sampling_seed !== undefined ? turn2Variants[params.sampling_seed % turn2Variants.length] : turn2;
  },
  // Keep only a few log entries: the bench sends hundreds of thousands of requests.
  maxLogEntries: 100,
});
process.stdout.write(fake.url + "\\n");
process.stdin.on("data", (chunk) => {
  if (String(chunk).includes("cpu")) {
    const cpu = process.cpuUsage();
    process.stdout.write(JSON.stringify({ cpuUs: cpu.user + cpu.system, samples: fake.stats.samples }) + "\\n");
  }
});
process.stdin.on("end", () => fake.close().then(() => process.exit(0)));
`;

/**
 * Starts the child and resolves once it listens. `cpu()` asks the child for its own CPU time (µs) and the number of
 * samples it has answered; `stop()` ends it and removes the temp dir.
 */
export async function startFakeSglangProcess(root, script) {
  const dir = mkdtempSync(path.join(tmpdir(), "agentrl-bench-fake-"));
  writeFileSync(path.join(dir, "package.json"), '{"type":"module"}');
  for (const name of ["index", "faults", "generation"]) {
    const source = readFileSync(path.join(root, "test/fake-sglang", `${name}.ts`), "utf8");
    const out = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    });
    writeFileSync(path.join(dir, `${name}.js`), out.outputText);
  }
  writeFileSync(path.join(dir, "script.json"), JSON.stringify(script));
  writeFileSync(path.join(dir, "serve.js"), SERVE);
  const child = spawn(process.execPath, [path.join(dir, "serve.js")], { stdio: ["pipe", "pipe", "inherit"] });
  const lines = [];
  let waiting;
  let buffered = "";
  child.stdout.on("data", (chunk) => {
    buffered += chunk;
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      lines.push(buffered.slice(0, nl));
      buffered = buffered.slice(nl + 1);
    }
    if (waiting && lines.length > 0) waiting(lines.shift());
  });
  let exitCode;
  let failWaiting;
  child.once("exit", (code) => {
    exitCode = code;
    failWaiting?.(new Error(`fake SGLang exited with code ${code}`));
  });
  const nextLine = () =>
    new Promise((resolve, reject) => {
      if (lines.length > 0) return resolve(lines.shift());
      if (exitCode !== undefined) return reject(new Error(`fake SGLang exited with code ${exitCode}`));
      failWaiting = reject;
      waiting = (line) => {
        waiting = undefined;
        failWaiting = undefined;
        resolve(line);
      };
    });
  const url = await nextLine();
  return {
    url,
    pid: child.pid,
    async cpu() {
      child.stdin.write("cpu\n");
      return JSON.parse(await nextLine());
    },
    async stop() {
      if (exitCode === undefined) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.stdin.end();
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
