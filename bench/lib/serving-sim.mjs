/**
 * A discrete-event simulation of one inference server doing continuous batching, and of three ways to drive a
 * batch of multi-turn trajectories through it. Time is simulated (milliseconds), not measured, so results are exact
 * and reproducible from a seed, and a whole run takes milliseconds of real time.
 *
 * Server model: at most `capacity` sequences decode together; every decode step takes `stepMs` and emits one token
 * for each running sequence. A request that arrives while a step runs joins at the next step boundary; a finished
 * sequence frees its slot at the end of its last step. Prefill, KV-cache limits and batch-size-dependent step time
 * are left out on purpose: they move all three schedules alike and would hide the effect being measured.
 */

// The PRNG of src/data/random.ts, so every schedule can replay the same workload (`npx tsc -p tsconfig.json` first).
import { seededRandom } from "../../dist/data/random.js";

export function lognormal(random, median, sigma) {
  // Box-Muller; 1 - u keeps the log argument away from 0.
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return median * Math.exp(sigma * z);
}

export function pareto(random, scale, alpha) {
  return scale / Math.pow(1 - random(), 1 / alpha);
}

/** A binary min-heap of timers ordered by (time, insertion order), so equal times fire first-in first-out. */
export class TimerHeap {
  items = [];
  seq = 0;
  get size() {
    return this.items.length;
  }
  peek() {
    return this.items[0];
  }
  push(time, fn) {
    const item = { time, seq: this.seq++, fn };
    const a = this.items;
    a.push(item);
    let i = a.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!before(a[i], a[p])) break;
      [a[i], a[p]] = [a[p], a[i]];
      i = p;
    }
  }
  pop() {
    const a = this.items;
    const top = a[0];
    const last = a.pop();
    if (a.length > 0) {
      a[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < a.length && before(a[l], a[m])) m = l;
        if (r < a.length && before(a[r], a[m])) m = r;
        if (m === i) break;
        [a[i], a[m]] = [a[m], a[i]];
        i = m;
      }
    }
    return top;
  }
}

const before = (x, y) => x.time < y.time || (x.time === y.time && x.seq < y.seq);

export class ServingSimulation {
  now = 0;
  /** Sequence-steps spent decoding: one per token emitted, so it also counts every decoded token. */
  busySlotSteps = 0;
  timers = new TimerHeap();
  waiting = [];
  waitHead = 0;
  active = [];
  stopped = false;

  constructor({ capacity, stepMs }) {
    this.capacity = capacity;
    this.stepMs = stepMs;
  }

  /** Queues a generation of `tokens` tokens; `onDone` runs at the end of its last decode step. */
  submit(tokens, onDone) {
    if (!(tokens >= 1)) throw new Error(`a generation needs at least one token, got ${tokens}`);
    this.waiting.push({ remaining: tokens, onDone });
  }

  /** Runs `fn` after `ms` of simulated time (a tool call, a barrier). */
  after(ms, fn) {
    this.timers.push(this.now + ms, fn);
  }

  /** Ends the run at the current time; everything still queued or decoding is abandoned (aborted). */
  stop() {
    this.stopped = true;
  }

  /** Runs until stopped or until nothing is left to do; returns the end time. */
  run() {
    const { capacity, stepMs } = this;
    while (!this.stopped) {
      while (this.timers.size > 0 && this.timers.peek().time <= this.now) {
        this.timers.pop().fn();
        if (this.stopped) return this.now;
      }
      while (this.active.length < capacity && this.waitHead < this.waiting.length) {
        this.active.push(this.waiting[this.waitHead++]);
      }
      if (this.waitHead > 4096 && this.waitHead * 2 > this.waiting.length) {
        this.waiting = this.waiting.slice(this.waitHead);
        this.waitHead = 0;
      }
      if (this.active.length === 0) {
        if (this.timers.size === 0) return this.now;
        this.now = this.timers.peek().time;
        continue;
      }
      // Nothing changes until the first running sequence ends or the next timer is due (at a step boundary),
      // so jump straight there.
      let steps = Infinity;
      for (const seq of this.active) if (seq.remaining < steps) steps = seq.remaining;
      if (this.timers.size > 0) {
        const untilTimer = Math.max(1, Math.ceil((this.timers.peek().time - this.now) / stepMs - 1e-9));
        if (untilTimer < steps) steps = untilTimer;
      }
      this.now += steps * stepMs;
      this.busySlotSteps += steps * this.active.length;
      const finished = [];
      const still = [];
      for (const seq of this.active) {
        seq.remaining -= steps;
        (seq.remaining === 0 ? finished : still).push(seq);
      }
      this.active = still;
      for (const seq of finished) {
        seq.onDone();
        if (this.stopped) return this.now;
      }
    }
    return this.now;
  }

  /** Busy decode slots over capacity, averaged over [0, now]. */
  utilisation() {
    return this.now === 0 ? 0 : (this.busySlotSteps * this.stepMs) / (this.capacity * this.now);
  }
}

/**
 * One trajectory's draws: the tokens of each assistant turn and the latency of the tool call after every turn but
 * the last. Drawn once per seed and replayed by every schedule.
 *
 * workload: { turns: [min, max], response: (random) => tokens, tool: (random) => ms, maxResponse }
 */
export function drawTrajectories(count, workload, seed) {
  const random = seededRandom(seed);
  const out = [];
  for (let i = 0; i < count; i++) {
    const [lo, hi] = workload.turns;
    const turns = lo + Math.floor(random() * (hi - lo + 1));
    const gen = [];
    const tool = [];
    let budget = workload.maxResponse;
    for (let j = 0; j < turns && budget > 0; j++) {
      const tokens = Math.min(budget, Math.max(1, Math.round(workload.response(random))));
      gen.push(tokens);
      budget -= tokens;
      const latency = workload.tool(random);
      if (j < turns - 1 && budget > 0) tool.push(latency);
    }
    tool.length = gen.length - 1;
    out.push({ gen, tool, tokens: gen.reduce((s, x) => s + x, 0) });
  }
  return out;
}

function summary(sim, trajectories, finishedIds) {
  const keptTokens = finishedIds.reduce((s, i) => s + trajectories[i].tokens, 0);
  return {
    wallMs: sim.now,
    utilisation: sim.utilisation(),
    decodedTokens: sim.busySlotSteps,
    keptTokens,
    finished: finishedIds.length,
    finishedIds,
  };
}

/**
 * (a) Request-level async, as src/rollout/run-rollout.ts does it: `concurrency` workers, each pulling the next
 * sample and running its whole turn loop (generate, tool, generate, ...) alone; a worker whose trajectory ends pulls
 * the next sample at once. With `target` below the number of trajectories this is (c), over-sampling with early
 * abort: the run stops the moment `target` trajectories have finished and the rest are aborted.
 */
export function runRequestLevel(trajectories, server, { concurrency, target = trajectories.length }) {
  const sim = new ServingSimulation(server);
  const finishedIds = [];
  let next = 0;
  const runTurn = (i, j) => {
    const t = trajectories[i];
    sim.submit(t.gen[j], () => {
      if (j === t.gen.length - 1) {
        finishedIds.push(i);
        if (finishedIds.length >= target) sim.stop();
        else pull();
      } else {
        sim.after(t.tool[j], () => runTurn(i, j + 1));
      }
    });
  };
  const pull = () => {
    if (next < trajectories.length) runTurn(next++, 0);
  };
  for (let w = 0; w < Math.max(1, concurrency); w++) pull();
  sim.run();
  if (finishedIds.length < Math.min(target, trajectories.length)) throw new Error("request-level run ended early");
  return summary(sim, trajectories, finishedIds);
}

/**
 * (b) Turn-synchronous batching, as a batch-level rollout does it: turn j of every trajectory still going is sent
 * together; the batch waits for the last generation of the turn, then runs every tool call in parallel and waits for
 * the slowest, then starts turn j + 1.
 */
export function runTurnSynchronous(trajectories, server) {
  const sim = new ServingSimulation(server);
  const finishedIds = [];
  const startTurn = (j) => {
    const going = [];
    for (let i = 0; i < trajectories.length; i++) if (trajectories[i].gen.length > j) going.push(i);
    if (going.length === 0) return;
    let pending = going.length;
    for (const i of going) {
      sim.submit(trajectories[i].gen[j], () => {
        if (j === trajectories[i].gen.length - 1) finishedIds.push(i);
        if (--pending > 0) return;
        const withTool = going.filter((k) => trajectories[k].gen.length > j + 1);
        if (withTool.length === 0) return;
        const barrier = Math.max(...withTool.map((k) => trajectories[k].tool[j]));
        sim.after(barrier, () => startTurn(j + 1));
      });
    }
  };
  startTurn(0);
  sim.run();
  if (finishedIds.length !== trajectories.length) throw new Error("turn-synchronous run lost trajectories");
  return summary(sim, trajectories, finishedIds);
}
