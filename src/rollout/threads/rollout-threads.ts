/**
 * The worker threads of one rollout, seen from the main thread: starts them (their clients balancing on one shared
 * ServerLoads, so the servers see one pool), hands each sample to the thread with the
 * most room in its share of max_concurrency, relays the run's abort to all of them, and turns a thread that throws or
 * dies into a run failure that names the thread and the samples it held. runRollout stays the one scheduler (sample order, max_concurrency across all
 * threads, resume, over-sampling, cancellation) and the one recorder (stats, the writer): this class is only its
 * TrajectoryExecutor.
 */
import path from "node:path";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { REPO_ROOT } from "../../repo-paths.js";
import type { Trajectory } from "../../data/trajectory.js";
import { ServerLoads, type EngineStats } from "../../engine/index.js";
import { OverSampleAbort } from "../over-sample.js";
import type { TrajectoryExecutor } from "../run-rollout.js";
import type { Sample } from "../sample.js";
import type { FromWorker, StopReason, ToWorker, WorkerSetup } from "./protocol.js";
import { mergeEngineStats } from "./engine-stats.js";
import { errorFromThread, RolloutThreadError } from "./thread-errors.js";

// tsc's file, also when this module runs inside the CLI's bundle (scripts/bundle.mjs), which sits elsewhere in dist/.
const WORKER_ENTRY = pathToFileURL(path.join(REPO_ROOT, "dist", "rollout", "threads", "worker.js"));
/** How long a thread may take to close its client, tools and reward processes before it is terminated. */
const CLOSE_GRACE_MS = 30_000;

interface Task {
  sample: Sample;
  resolve: (trajectory: Trajectory) => void;
  reject: (err: Error) => void;
}

/** One worker thread and the samples it is running. */
class RolloutThread {
  readonly tasks = new Map<number, Task>();
  /** Set once the thread is gone (exited, crashed or terminated): nothing more can run on it. */
  gone = false;
  /** It has loaded its parts and made its client. */
  ready = false;
  /** close() asked it to end: its exit is no failure. */
  closing = false;
  engineStats: EngineStats | undefined;

  constructor(
    readonly worker: Worker,
    readonly name: string,
    /** Its part of max_concurrency: never more samples in flight here, so its client never queues a request. */
    readonly share: number,
  ) {}

  send(message: ToWorker): void {
    if (!this.gone) this.worker.postMessage(message);
  }
}

export type ThreadSetup = Omit<WorkerSetup, "threadIndex" | "threads" | "concurrency" | "serverLoads">;

export class RolloutThreads {
  private nextTask = 0;
  /** The first thread failure; every later sample is refused with it, so the run stops. */
  private failure: RolloutThreadError | undefined;

  private constructor(private readonly threads: RolloutThread[]) {}

  /**
   * Starts `threads` threads (at most one per trajectory slot) that share `totalConcurrency` between them (their shares add up to it), and resolves once
   * every one has loaded its parts and made its client. A thread that cannot start fails the whole start, with its
   * error (and exit code), after the others are ended.
   */
  static async start(threads: number, totalConcurrency: number, setup: ThreadSetup): Promise<RolloutThreads> {
    // A thread without a share would load its parts and never run a trajectory.
    const count = Math.min(threads, totalConcurrency);
    const ready: Promise<void>[] = [];
    // One server pool for the run: every thread's client balances on the same loads and cool-downs.
    const loads = ServerLoads.shared(setup.rollout.server.urls.length);
    const started = Array.from({ length: count }, (_, threadIndex) => {
      const share = Math.floor(totalConcurrency / count) + (threadIndex < totalConcurrency % count ? 1 : 0);
      const workerData: WorkerSetup = { ...setup, threadIndex, threads: count, concurrency: Math.max(1, share), serverLoads: loads.buffer as SharedArrayBuffer };
      const worker = new Worker(WORKER_ENTRY, { workerData });
      const thread = new RolloutThread(worker, `rollout thread ${threadIndex + 1} of ${count}`, share);
      ready.push(startedOrFailed(thread));
      return thread;
    });
    const pool = new RolloutThreads(started);
    for (const thread of started) pool.watch(thread);
    try {
      await Promise.all(ready);
    } catch (err) {
      await pool.close();
      throw err;
    }
    return pool;
  }

  /** runRollout's executor: each sample runs on the thread with the most room; the run's abort reaches every thread. */
  readonly executor: TrajectoryExecutor = (runSignal) => {
    const relay = () => this.abort(runSignal.reason);
    if (runSignal.aborted) relay();
    else runSignal.addEventListener("abort", relay, { once: true });
    return (sample) => this.run(sample);
  };

  /** The engine counters of all threads together; final once close() has resolved. */
  engineStats(): EngineStats {
    return mergeEngineStats(this.threads.flatMap((t) => (t.engineStats ? [t.engineStats] : [])));
  }

  /**
   * Asks every thread to close its client, tools and reward processes (they send their engine counters), then ends
   * them; one that does not finish within CLOSE_GRACE_MS is terminated. Never leaves a thread running.
   */
  async close(): Promise<void> {
    await Promise.all(
      this.threads.map(async (thread) => {
        if (thread.gone) return;
        thread.closing = true;
        // A thread that never became ready has nothing to close (and does not answer): it is ended at once.
        if (thread.ready) {
          const closed = new Promise<void>((resolve) => {
            thread.worker.on("message", (message: FromWorker) => message.type === "closed" && resolve());
            thread.worker.once("exit", () => resolve());
          });
          thread.send({ type: "close" });
          let timer: NodeJS.Timeout | undefined;
          await Promise.race([closed, new Promise<void>((resolve) => (timer = setTimeout(resolve, CLOSE_GRACE_MS)))]);
          clearTimeout(timer);
        }
        await thread.worker.terminate();
      }),
    );
  }

  private run(sample: Sample): Promise<Trajectory> {
    if (this.failure) return Promise.reject(this.failure);
    const thread = this.withMostRoom();
    const task = this.nextTask++;
    return new Promise<Trajectory>((resolve, reject) => {
      thread.tasks.set(task, { sample, resolve, reject });
      thread.send({ type: "run", task, sample });
    });
  }

  /**
   * The thread with the most room left in its share; ties go to the lowest thread. runRollout never has more than
   * max_concurrency samples in flight and the shares add up to it, so some thread always has room.
   */
  private withMostRoom(): RolloutThread {
    let best = this.threads[0]!;
    for (const thread of this.threads) if (thread.share - thread.tasks.size > best.share - best.tasks.size) best = thread;
    return best;
  }

  private abort(reason: unknown): void {
    const stop: StopReason = reason instanceof OverSampleAbort
      ? { kind: "over_sample", finished: reason.finished, total: reason.total }
      : { kind: "cancel" };
    for (const thread of this.threads) thread.send({ type: "abort", reason: stop });
  }

  /** Settles the thread's tasks from its messages; its crash or exit fails the samples it held, and the run. */
  private watch(thread: RolloutThread): void {
    thread.worker.on("message", (message: FromWorker) => {
      if (message.type === "done") this.settle(thread, message.task, (task) => task.resolve(message.trajectory));
      else if (message.type === "failed") {
        this.settle(thread, message.task, (task) => task.reject(errorFromThread(message.error, `${thread.name} failed on ${sampleName(task.sample)}`)));
      } else if (message.type === "closed") thread.engineStats = message.engine;
    });
    // An uncaught exception in the thread: the 'exit' that follows reports it, with this error's message.
    let crash: Error | undefined;
    thread.worker.on("error", (err: unknown) => (crash = err instanceof Error ? err : new Error(String(err))));
    thread.worker.once("exit", (code) => {
      thread.gone = true;
      if (thread.closing && crash === undefined) return;
      const how = crash ? `crashed (${crash.message})` : `exited with code ${code}`;
      const held = [...thread.tasks.values()].map((task) => sampleName(task.sample));
      const failure = new RolloutThreadError(
        `${thread.name} ${how}${held.length > 0 ? ` while running ${held.join(", ")}` : ""}`,
        { hint: "the run stops here; run again with --resume to continue the file (add --threads 1 to run without worker threads)" },
      );
      this.failure ??= failure;
      for (const task of thread.tasks.values()) task.reject(failure);
      thread.tasks.clear();
    });
  }

  private settle(thread: RolloutThread, taskId: number, settle: (task: Task) => void): void {
    const task = thread.tasks.get(taskId);
    if (!task) return;
    thread.tasks.delete(taskId);
    settle(task);
  }
}

function sampleName(sample: Sample): string {
  return `row ${sample.dataIndex}, sample ${sample.sampleIndex}`;
}

/** Resolves when the thread says it is ready; rejects with its start-up error, or when it dies first. */
function startedOrFailed(thread: RolloutThread): Promise<void> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: FromWorker) => {
      if (message.type === "ready") {
        thread.ready = true;
        done(resolve);
      }
      else if (message.type === "start-failed") done(() => reject(errorFromThread(message.error, `${thread.name} could not start`)));
    };
    const onError = (err: Error) => done(() => reject(new RolloutThreadError(`${thread.name} could not start: ${err.message}`)));
    const onExit = (code: number) => done(() => reject(new RolloutThreadError(`${thread.name} exited with code ${code} while starting`)));
    const done = (settle: () => void) => {
      thread.worker.off("message", onMessage).off("error", onError).off("exit", onExit);
      settle();
    };
    thread.worker.on("message", onMessage).on("error", onError).on("exit", onExit);
  });
}
