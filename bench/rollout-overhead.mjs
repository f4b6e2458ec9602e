#!/usr/bin/env node
/**
 * Rollout client overhead: the whole runRollout (dist/rollout/run-rollout.js: conversation, template deltas,
 * tokenizer, function-call parser, the calc_gsm8k_reward tool, reward, drift check, stats, and the trajectories
 * written to a parquet file as `agentrl rollout` writes them) against the fake SGLang server at zero latency, next to
 * the ceiling: a bare undici loop sending the same /generate bodies to the same server at the same concurrency, in
 * the same run. The fake runs in a child process, so this process's CPU time is the client's alone. Also measured:
 * the CPU from process start to the first request (a child process, bench/lib/startup-probe.mjs) and where a turn's
 * CPU goes, stage by stage (bench/lib/cpu-stages.mjs). It runs under the V8 flags `agentrl` runs with (the
 * launcher in bin/agentrl.js; bench/lib/relaunch-as-cli.mjs). Prints one markdown section.
 *
 *   npx tsc -p tsconfig.json && node bench/rollout-overhead.mjs
 *   BENCH_QUICK=1 node bench/rollout-overhead.mjs     # smaller runs, no 4096
 *   BENCH_THREADS=0 node bench/rollout-overhead.mjs   # without the --threads section
 *   BENCH_CLI_FLAGS=0 node bench/rollout-overhead.mjs  # V8's default heap, as `node bin/agentrl.js` runs
 *   BENCH_DISTINCT_ONLY=1 node bench/rollout-overhead.mjs  # only the distinct-conversations cell and its stages
 */
import "./lib/relaunch-as-cli.mjs";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Agent, request } from "undici";
import { profileStages } from "./lib/cpu-stages.mjs";
import { startFakeSglangProcess } from "./lib/fake-sglang-process.mjs";
import { contextFor, distinctTurns, gsm8kPrompts, loadDist, parts, promptCursor, root, story, threadSetupFor, toolRollout } from "./lib/gsm8k-tool-workload.mjs";

const quick = process.env.BENCH_QUICK === "1";
const distinctOnly = process.env.BENCH_DISTINCT_ONLY === "1";
const N_PER_PROMPT = 4;
const { runRollout } = await loadDist("rollout/run-rollout.js");
const { makeClient } = await loadDist("rollout/setup.js");
const { generateBody } = await loadDist("engine/wire.js");
const { openTrajectoryWriter } = await loadDist("data/trajectory-store.js");
const { RolloutThreads } = await loadDist("rollout/threads/rollout-threads.js");
const outDir = mkdtempSync(path.join(os.tmpdir(), "agentrl-bench-rollout-"));
let runs = 0;

/**
 * Trajectories per cell: at least one per slot (at high concurrency a cell is one or two waves, like a train step's
 * batch), few enough that the whole script stays near 3 minutes on a busy 2-core machine.
 * BENCH_CELLS=64:400,512:1024 picks other cells (concurrency:trajectories, trajectories a multiple of 4).
 */
const cells = process.env.BENCH_CELLS
  ? process.env.BENCH_CELLS.split(",").map((cell) => {
      const [concurrency, trajectories] = cell.split(":").map(Number);
      return { concurrency, trajectories };
    })
  : quick
  ? [
      { concurrency: 1, trajectories: 200 },
      { concurrency: 64, trajectories: 2048 },
      { concurrency: 512, trajectories: 2048 },
      { concurrency: 2048, trajectories: 2048 },
    ]
  : [
      { concurrency: 1, trajectories: 400 },
      { concurrency: 64, trajectories: 4096 },
      { concurrency: 512, trajectories: 4096 },
      { concurrency: 2048, trajectories: 4096 },
      { concurrency: 4096, trajectories: 4096 },
    ];

/** With `distinct`, a seed is set, so the fake answers each trajectory with its own GSM8K-derived turns (see below). */
const rollout = (concurrency, sanityCheck = "strict", distinct = false, n = N_PER_PROMPT) =>
  toolRollout(concurrency, { sanityCheck, n, ...(distinct ? { seed: 7 } : {}) });

/**
 * One runRollout of `trajectories` samples at `concurrency`, its trajectories written to a fresh parquet file (the
 * writer's close, which finishes the file, is inside the measurement). `onRequest` sees every generate request
 * (used once to record the wire bodies for the bare loop). With `threads` (a started RolloutThreads, as
 * `agentrl rollout --threads N` runs) the trajectories run in its worker threads, each with its own client.
 */
async function agentrlRun(url, concurrency, trajectories, { onRequest, sanityCheck = "strict", threads, distinct = false, n = N_PER_PROMPT, prompts } = {}) {
  const config = rollout(concurrency, sanityCheck, distinct, n);
  config.server.urls = [url];
  const client = threads ? undefined : makeClient(config, undefined);
  // The recording view forwards everything to the client (bound, as it has private fields) and taps generate.
  const seen = onRequest
    ? new Proxy(client, {
        get(target, key) {
          const value = Reflect.get(target, key, target);
          if (typeof value !== "function") return value;
          if (key !== "generate") return value.bind(target);
          return (req) => {
            onRequest(req);
            return value.call(target, req);
          };
        },
      })
    : client;
  let turns = 0;
  let bad = 0;
  const driftStatuses = {};
  // The responses are kept and joined after the clock stops: joining every trajectory's ids is the bench's own
  // bookkeeping (about 1% of the cell's CPU), not the client's.
  const finishedResponses = [];
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const writer = await openTrajectoryWriter(path.join(outDir, `run-${runs++}.parquet`));
  let seconds;
  let cpu;
  try {
    await runRollout({
      prompts: prompts ?? gsm8kPrompts(trajectories / n),
      n,
      concurrency,
      ...(threads ? { executor: threads.executor } : { context: contextFor(seen, config) }),
      writer,
      onTrajectory: (t) => {
        turns += t.assistant_turns;
        // The story must play out in full, or the bench would be timing failures.
        if (t.status !== "completed" || t.tool_calls !== 1 || t.assistant_turns !== 2) bad++;
        finishedResponses.push(t.response_ids);
        driftStatuses[t.drift] = (driftStatuses[t.drift] ?? 0) + 1;
      },
    });
    await writer.close();
    seconds = (performance.now() - t0) / 1000;
    cpu = process.cpuUsage(cpu0);
  } finally {
    await client?.close();
    rmSync(writer.file, { force: true });
  }
  if (bad > 0) throw new Error(`${bad} of ${trajectories} trajectories did not complete the scripted tool story`);
  const responses = new Set(finishedResponses.map((ids) => ids.join(",")));
  return { turns, rate: turns / seconds, cpuPerTurnUs: (cpu.user + cpu.system) / turns, seconds, driftStatuses, responses: responses.size };
}

/**
 * The ceiling: `total` requests from `concurrency` loops, each POSTing a recorded agentrl body (with a fresh rid, as
 * the fake refuses duplicate rids in flight) and parsing the JSON answer, nothing else.
 */
async function bareRun(url, concurrency, total, bodies) {
  const agent = new Agent({ connections: concurrency, keepAliveTimeout: 30_000 });
  const templates = bodies.map((body) => {
    const at = body.indexOf('"rid":"') + 7;
    return [body.slice(0, at), body.slice(body.indexOf('"', at))];
  });
  let left = total;
  let sent = 0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (left > 0) {
        left--;
        const k = sent++;
        const [head, tail] = templates[k % templates.length];
        const res = await request(`${url}/generate`, {
          dispatcher: agent,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: `${head}bare-${k}${tail}`,
        });
        const json = await res.body.json();
        if (res.statusCode !== 200 || !Array.isArray(json.output_ids)) throw new Error(`bare loop got HTTP ${res.statusCode}`);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await agent.close();
  return { rate: total / seconds, cpuPerReqUs: (cpu.user + cpu.system) / total, seconds };
}

/**
 * `--threads`: the same cell with the trajectories in this thread (threads 1, the default), in one worker thread (what
 * the thread hop alone costs) and in two, against the same server process, side by side: each mode's pool is started
 * and warmed first (start-up is reported apart), then the modes take turns, twice, and each row is the mean of its two
 * runs. CPU per turn is the whole process's (process.cpuUsage counts every thread).
 */
async function measureThreads(url) {
  const concurrency = 512;
  const trajectories = quick ? 2048 : 4096;
  const setup = threadSetupFor({ ...rollout(concurrency), server: { ...rollout(concurrency).server, urls: [url] } });
  const modes = [{ label: "1 (main thread)", threads: undefined }];
  try {
    for (const count of [1, 2]) {
      const t0 = performance.now();
      const pool = await RolloutThreads.start(count, concurrency, setup);
      const startSeconds = (performance.now() - t0) / 1000;
      modes.push({ label: count === 1 ? "1 worker thread" : `${count} worker threads`, threads: pool, startSeconds });
      for (let i = 0; i < 2; i++) await agentrlRun(url, concurrency, 1024, { threads: pool });
    }
    const runs = new Map(modes.map((mode) => [mode, []]));
    for (let round = 0; round < 2; round++) {
      for (const mode of modes) {
        const serverBefore = await fake.cpu();
        const run = await agentrlRun(url, concurrency, trajectories, { threads: mode.threads });
        const serverAfter = await fake.cpu();
        runs.get(mode).push({ ...run, serverCpuPerTurnUs: (serverAfter.cpuUs - serverBefore.cpuUs) / run.turns });
      }
    }
    const mean = (list, key) => list.reduce((sum, r) => sum + r[key], 0) / list.length;
    return {
      concurrency,
      trajectories,
      rows: modes.map((mode) => {
        const list = runs.get(mode);
        return { label: mode.label, startSeconds: mode.startSeconds, rate: mean(list, "rate"), cpuPerTurnUs: mean(list, "cpuPerTurnUs"), serverCpuPerTurnUs: mean(list, "serverCpuPerTurnUs") };
      }),
    };
  } finally {
    for (const mode of modes) await mode.threads?.close();
  }
}

/**
 * Distinct conversations, as users run them: n = 1 over 1,024 GSM8K questions (every prompt differs, and none was
 * asked before in this process: `fresh`, a promptCursor, so no run finds the last one's renders in the chat caches),
 * each trajectory's turns and tool answer new text (distinctTurns), at concurrency 256 (rollout.max_concurrency's
 * default), strict drift check, parquet, reward. Three runs, each between two bare-loop runs (replaying `bodies`, the
 * cell's own recorded requests); the median run's CPU per turn, and the marginal CPU per turn (agentrl's minus the
 * bare loop's per request).
 */
async function distinctCell(url, bodies) {
  const concurrency = 256;
  const trajectories = 1024;
  const runs = [];
  for (let i = 0; i < 3; i++) {
    const before = await bareRun(url, concurrency, 2 * trajectories, bodies);
    const run = await agentrlRun(url, concurrency, trajectories, { distinct: true, n: 1, prompts: fresh.next(trajectories) });
    const after = await bareRun(url, concurrency, 2 * trajectories, bodies);
    runs.push({ ...run, bareCpuPerReqUs: (before.cpuPerReqUs + after.cpuPerReqUs) / 2 });
  }
  runs.sort((a, b) => a.cpuPerTurnUs - b.cpuPerTurnUs);
  const median = runs[1];
  return { concurrency, trajectories, ...median, marginalUs: median.cpuPerTurnUs - median.bareCpuPerReqUs, range: [runs[0].cpuPerTurnUs, runs[2].cpuPerTurnUs] };
}

const started = performance.now();
// The scripted story's text is the same for every trajectory, so the chat caches hit more than in a real run. A
// rollout with a seed gets distinct turns instead (distinctTurns: one of 7,473 GSM8K solutions, its answer sent to the
// tool), picked by its sampling seed: every response and tool answer is new text for the drift check to render and
// encode, and with n = 1 every prompt is another GSM8K question.
const fake = await startFakeSglangProcess(root, { ...story, ...distinctTurns() });
/** The distinct cell's questions: new ones for every run (promptCursor). */
const fresh = promptCursor();
const results = [];
let noDriftCheck;
let distinctAnswers;
let stages;
let startup;
let threadResults;
try {
  // Record the exact bodies agentrl sends (both turns of 128 trajectories), and warm up JIT, tokenizer and sockets:
  // a cold process spends its first few thousand turns compiling, which is start-up, not the cost of a turn.
  const bodies = [];
  await agentrlRun(fake.url, 16, 128, {
    onRequest: (req) => {
      if (bodies.length < 256) bodies.push(generateBody(req, { rid: "x" }));
    },
  });
  for (let i = 0; i < 3; i++) await agentrlRun(fake.url, 64, 1024);
  // The distinct cell's bare loop replays that cell's own bodies: with their sampling seeds the fake answers them with
  // the same GSM8K-length turns, so the floor parses answers as long as the ones agentrl parses (the scripted story's
  // answers are a fifth as long, and flattered the floor).
  const distinctBodies = [];
  await agentrlRun(fake.url, 256, 1024, {
    distinct: true,
    n: 1,
    prompts: fresh.next(1024),
    onRequest: (req) => {
      if (distinctBodies.length < 2048) distinctBodies.push(generateBody(req, { rid: "x" }));
    },
  });
  // Two more distinct runs before the cell measures: the word memo (a word's ids, which a real run keeps for good) fills
  // over the first few thousand questions, and the CPU per turn falls with it (runs of 1,024 new questions in one
  // process: about 1.4, 0.8, 0.6, 0.5 ms a turn, then level).
  for (let i = 0; i < 2; i++) await agentrlRun(fake.url, 256, 1024, { distinct: true, n: 1, prompts: fresh.next(1024) });
  await bareRun(fake.url, 16, 2048, bodies);
  if (distinctOnly) cells.length = 0;
  for (const { concurrency, trajectories } of cells) {
    // Bare loop on both sides of the agentrl run, so drift on a shared machine shows and is averaged out.
    const turnsPlanned = trajectories * 2;
    const bareBefore = await bareRun(fake.url, concurrency, turnsPlanned, bodies);
    const serverBefore = await fake.cpu();
    const agentrl = await agentrlRun(fake.url, concurrency, trajectories);
    const serverAfter = await fake.cpu();
    const bareAfter = await bareRun(fake.url, concurrency, turnsPlanned, bodies);
    const bare = {
      rate: (bareBefore.rate + bareAfter.rate) / 2,
      cpuPerReqUs: (bareBefore.cpuPerReqUs + bareAfter.cpuPerReqUs) / 2,
      spread: Math.abs(bareBefore.rate - bareAfter.rate) / ((bareBefore.rate + bareAfter.rate) / 2),
    };
    const serverCpuPerTurnUs = (serverAfter.cpuUs - serverBefore.cpuUs) / agentrl.turns;
    results.push({ concurrency, trajectories, agentrl, bare, serverCpuPerTurnUs });
    process.stderr.write(
      `rollout-overhead: c=${concurrency} agentrl ${agentrl.rate.toFixed(0)} turns/s, bare ${bare.rate.toFixed(0)} req/s\n`,
    );
  }
  distinctAnswers = await distinctCell(fake.url, distinctBodies);
  if (distinctOnly) {
    const { concurrency, trajectories } = distinctAnswers;
    const run = () => agentrlRun(fake.url, concurrency, trajectories, { distinct: true, n: 1, prompts: fresh.next(trajectories) });
    stages = { concurrency, cpuPerTurnUs: distinctAnswers.cpuPerTurnUs, ...(await profileStages(run)) };
  } else await otherSections(bodies);
} finally {
  await parts.close();
  await fake.stop();
  rmSync(outDir, { recursive: true, force: true });
}

/** The drift check's cost, the stage profile, start-up and threads, after the cells. */
async function otherSections(bodies) {
  // What the end-of-trajectory drift check (a full re-render and re-tokenize) costs: both modes back to back.
  const drift = results.find((r) => r.concurrency === 64) ?? results.at(-1);
  noDriftCheck = {
    concurrency: drift.concurrency,
    off: await agentrlRun(fake.url, drift.concurrency, drift.trajectories, { sanityCheck: "disable" }),
    strict: await agentrlRun(fake.url, drift.concurrency, drift.trajectories),
  };
  stages = { concurrency: drift.concurrency, cpuPerTurnUs: drift.agentrl.cpuPerTurnUs, ...(await profileStages(() => agentrlRun(fake.url, drift.concurrency, drift.trajectories))) };
  startup = JSON.parse(
    execFileSync(process.execPath, [...process.execArgv, path.join(path.dirname(fileURLToPath(import.meta.url)), "lib/startup-probe.mjs"), fake.url], { encoding: "utf8" }),
  );
  if (process.env.BENCH_THREADS !== "0") threadResults = await measureThreads(fake.url);
}

const distinctText = () =>
  `Distinct conversations (n = 1 over ${distinctAnswers.trajectories} GSM8K questions, so every prompt differs, each run's ` +
    "new to the process after 3,072 others warmed it; each " +
    "trajectory's turn 1, its tool call's answer and so the tool's answer, and its turn 2 one of 7,473 GSM8K-derived " +
    "texts, bench/lib/gsm8k-tool-workload.mjs's distinctTurns; the drift check renders and encodes new text, as in a " +
    `real run) at concurrency ${distinctAnswers.concurrency}, default config: ` +
    `**${(distinctAnswers.cpuPerTurnUs / 1000).toFixed(3)} ms CPU/turn** (median of 3 runs; ` +
    `${(distinctAnswers.range[0] / 1000).toFixed(3)}–${(distinctAnswers.range[1] / 1000).toFixed(3)}), ` +
    `**marginal ${(distinctAnswers.marginalUs / 1000).toFixed(3)} ms** over the bare loop's ` +
    `${(distinctAnswers.bareCpuPerReqUs / 1000).toFixed(3)} ms per request (the cell's own request bodies, replayed, ` +
    `so the fake answers it the same turns); ${distinctAnswers.responses} distinct ` +
    `responses of ${distinctAnswers.trajectories} (drift: ` +
    `${Object.entries(distinctAnswers.driftStatuses).map(([k, v]) => `${k} ${v}`).join(", ")}).`;

/** Where a turn's CPU goes (the stage profile), as markdown lines. */
function stageLines() {
  const lines = [
    `Where a turn's CPU goes at concurrency ${stages.concurrency} (V8's sampling profiler over one more run, each ` +
      "sample filed under the innermost stage on its stack, bench/lib/cpu-stages.mjs; µs are the shares times the " +
      `cell's ${stages.cpuPerTurnUs.toFixed(0)} µs per turn):`,
    "",
    "| stage | share | µs per turn |",
    "|---|---|---|",
  ];
  for (const [name, share] of [...stages.shares].sort((a, b) => b[1] - a[1])) {
    lines.push(`| ${name} | ${(100 * share).toFixed(1)}% | ${(share * stages.cpuPerTurnUs).toFixed(0)} |`);
  }
  return lines;
}

if (distinctOnly) {
  process.stdout.write(`${[distinctText(), "", ...stageLines()].join("\n")}\n`);
  process.exit(0);
}

const best = results.reduce((a, b) => (b.agentrl.rate > a.agentrl.rate ? b : a));
const lowest = results.reduce((a, b) => (b.agentrl.cpuPerTurnUs < a.agentrl.cpuPerTurnUs ? b : a));
const highest = results.reduce((a, b) => (b.agentrl.cpuPerTurnUs > a.agentrl.cpuPerTurnUs ? b : a));
const bestRatio = results.reduce((a, b) => (b.agentrl.rate / b.bare.rate > a.agentrl.rate / a.bare.rate ? b : a));
const driftCounts = {};
for (const r of results) for (const [k, v] of Object.entries(r.agentrl.driftStatuses)) driftCounts[k] = (driftCounts[k] ?? 0) + v;
const driftSummary = Object.entries(driftCounts).map(([k, v]) => `${k} ${v}`).join(", ");
const out = [];
out.push("## Rollout client overhead (whole runRollout vs bare HTTP loop)");
out.push("");
out.push(
  "`runRollout` end to end (Qwen3 tokenizer and chat template, `tool-configs/gsm8k_tool_config.yaml`, qwen25 parser, " +
    "GSM8K test prompts, n = 4) against the fake SGLang server (test/fake-sglang) at zero latency, **in a child " +
    "process**, so the CPU column is the client's alone. Every trajectory plays the same scripted story: a " +
    "`calc_gsm8k_reward` call with a wrong answer, the tool result, a final answer (2 generate turns, 1 tool call, " +
    `reward, drift check: ${driftSummary}; trajectories written to a parquet file, finished by the writer's close ` +
    "inside the measurement, as with `agentrl rollout`'s default output). Each cell starts warm (JIT, caches, " +
    "sockets: 3,200 trajectories run first). " +
    "The ceiling is a bare undici loop POSTing the same " +
    "recorded /generate bodies to the same server at the same concurrency and parsing the JSON answer; it runs just " +
    "before and just after each agentrl run (mean of the two; `bare drift` is how far they differ). `ratio` is " +
    "agentrl turns/s ÷ bare requests/s; `CPU ratio` is bare CPU per request ÷ agentrl CPU per turn, which other load " +
    "on the machine moves less; `marginal` is agentrl CPU per turn − bare CPU per request, what the client adds to " +
    "the HTTP request itself. " +
    `Node flags: ${process.execArgv.join(" ") || "none (V8's defaults)"}, as ` +
    `${process.execArgv.length ? "`agentrl` runs (bin/agentrl.js's launcher)" : "`node bin/agentrl.js` runs"}. ` +
    `${os.cpus().length}-core machine shared with the fake server; load average ${os.loadavg()[0].toFixed(1)} at the ` +
    "start (other work on the machine moves turns/s; CPU per turn moves less).",
);
out.push("");
out.push(
  "| concurrency | trajectories | agentrl turns/s | bare req/s | ratio | agentrl CPU/turn | bare CPU/req | marginal CPU/turn | CPU ratio | server CPU/turn | bare drift |",
);
out.push("|---|---|---|---|---|---|---|---|---|---|---|");
for (const r of results) {
  out.push(
    `| ${r.concurrency} | ${r.trajectories} | ${r.agentrl.rate.toFixed(0)} | ${r.bare.rate.toFixed(0)} | ` +
      `${(r.agentrl.rate / r.bare.rate).toFixed(2)} | ${(r.agentrl.cpuPerTurnUs / 1000).toFixed(2)} ms | ` +
      `${(r.bare.cpuPerReqUs / 1000).toFixed(2)} ms | ${(r.agentrl.cpuPerTurnUs - r.bare.cpuPerReqUs).toFixed(0)} µs | ` +
      `${(r.bare.cpuPerReqUs / r.agentrl.cpuPerTurnUs).toFixed(2)} | ` +
      `${(r.serverCpuPerTurnUs / 1000).toFixed(2)} ms | ${(100 * r.bare.spread).toFixed(0)}% |`,
  );
}
out.push("");
out.push(
  `agentrl peaks at concurrency ${best.concurrency} (${best.agentrl.rate.toFixed(0)} turns/s); the ratio to the bare ` +
    `loop peaks at concurrency ${bestRatio.concurrency} (${(bestRatio.agentrl.rate / bestRatio.bare.rate).toFixed(2)}). ` +
    `A real server decodes one turn in seconds, so ${best.agentrl.rate.toFixed(0)} turns/s from one client core ` +
    `feeds about ${Math.round(best.agentrl.rate * 5)} concurrent 5-second generations. Wall-clock rates move with ` +
    `the machine's other load; by CPU time alone, one core sustains ${Math.round(1e6 / lowest.agentrl.cpuPerTurnUs)} ` +
    `turns/s (concurrency ${lowest.concurrency}, ${lowest.agentrl.cpuPerTurnUs.toFixed(0)} µs per turn) to ` +
    `${Math.round(1e6 / highest.agentrl.cpuPerTurnUs)} (concurrency ${highest.concurrency}).`,
);
out.push("");
out.push(
  `With \`tokenization_sanity_check_mode: disable\` (no end-of-trajectory re-render and re-tokenize) at concurrency ` +
    `${noDriftCheck.concurrency}: ${noDriftCheck.off.rate.toFixed(0)} turns/s and ` +
    `${(noDriftCheck.off.cpuPerTurnUs / 1000).toFixed(2)} ms CPU/turn, against ${noDriftCheck.strict.rate.toFixed(0)} ` +
    `turns/s and ${(noDriftCheck.strict.cpuPerTurnUs / 1000).toFixed(2)} ms with \`strict\` (the default) run right after it.`,
);
out.push("");
out.push(distinctText());
out.push("");
out.push(
  `Start-up: ${(startup.firstRequestCpuUs / 1e6).toFixed(2)} s of CPU from process start to the first /generate ` +
    "request (a separate process: Node, modules, Qwen3 tokenizer and template, tool config, parser, trajectory writer).",
);
out.push("");
out.push(...stageLines());
if (threadResults) {
  const { concurrency, trajectories, rows } = threadResults;
  out.push("");
  out.push("## Rollout threads (`agentrl rollout --threads N`)");
  out.push("");
  out.push(
    `The same workload at concurrency ${concurrency}, ${trajectories} trajectories a run, against the same fake server ` +
      "process: trajectories in the main thread (threads 1, the default), in one worker thread (what the hop between " +
      "threads costs: the sample out, the trajectory back as a structured clone) and in two; the main thread keeps the " +
      "one scheduler and the one parquet writer in every mode. Each pool is started and warmed (2,048 trajectories) " +
      "first; then the modes take turns, twice, and a row is the mean of its two runs. CPU per turn counts every " +
      `thread of the client. ${os.cpus().length}-core machine shared with the fake server.`,
  );
  out.push("");
  out.push("| threads | turns/s | client CPU/turn | server CPU/turn | thread start-up |");
  out.push("|---|---|---|---|---|");
  for (const r of rows) {
    out.push(
      `| ${r.label} | ${r.rate.toFixed(0)} | ${(r.cpuPerTurnUs / 1000).toFixed(2)} ms | ${(r.serverCpuPerTurnUs / 1000).toFixed(2)} ms | ` +
        `${r.startSeconds === undefined ? "-" : `${r.startSeconds.toFixed(2)} s`} |`,
    );
  }
}
process.stdout.write(`${out.join("\n")}\n`);
process.stderr.write(`rollout-overhead: ${((performance.now() - started) / 1000).toFixed(1)} s real time\n`);
