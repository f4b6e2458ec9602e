/**
 * A rollout worker thread's entry: builds its own parts (tokenizer and template, parser, tools, interactions, reward,
 * agent loops) and its own SGLang client from the setup the main thread gave it, then runs each sample it is handed
 * with runTrajectory and posts the finished trajectory back. It schedules nothing, writes nothing and counts nothing:
 * the main thread does (threads/rollout-threads.ts).
 */
import { parentPort, workerData } from "node:worker_threads";
import { ServerLoads, type SglangClient } from "../../engine/index.js";
import { OverSampleAbort } from "../over-sample.js";
import { runTrajectory, type TrajectoryContext } from "../run-trajectory.js";
import type { Sample } from "../sample.js";
import { loadRolloutParts, makeClient, trajectoryContext, type RolloutParts } from "../setup.js";
import type { FromWorker, StopReason, ToWorker, WorkerSetup } from "./protocol.js";
import { sendableError } from "./thread-errors.js";

const port = parentPort!;
const setup = workerData as WorkerSetup;
const post = (message: FromWorker) => port.postMessage(message);

/** The thread's share of the run: its own parts and client, and the run's signal as the main thread relays it. */
class WorkerRollout {
  private readonly controller = new AbortController();
  private readonly context: TrajectoryContext;

  constructor(
    private readonly parts: RolloutParts,
    private readonly client: SglangClient,
  ) {
    this.context = { ...trajectoryContext(parts, client, setup.rollout, setup.lengths, setup.step), signal: this.controller.signal };
  }

  run(task: number, sample: Sample): void {
    runTrajectory(sample, this.context).then(
      (trajectory) => {
        try {
          post({ type: "done", task, trajectory });
        } catch (err) {
          // A trajectory the structured clone refuses is a bug here, not in the sample: say so, do not hang the slot.
          post({ type: "failed", task, error: sendableError(err) });
        }
      },
      (err: unknown) => post({ type: "failed", task, error: sendableError(err) }),
    );
  }

  /** The same reason the main thread's runRollout aborted with, so aborted trajectories get the same finish reason. */
  abort(reason: StopReason): void {
    this.controller.abort(reason.kind === "over_sample" ? new OverSampleAbort(reason.finished, reason.total) : new Error("cancelled"));
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.client.close(), this.parts.close()]);
    post({ type: "closed", engine: this.client.stats() });
  }
}

async function start(): Promise<WorkerRollout> {
  const parts = await loadRolloutParts(setup.parts);
  try {
    const loads = new ServerLoads(setup.rollout.server.urls.length, setup.serverLoads);
    return new WorkerRollout(parts, makeClient(setup.rollout, setup.apiKey, setup.concurrency, loads));
  } catch (err) {
    await parts.close();
    throw err;
  }
}

// Messages can arrive while the parts load (an abort, a close after a failed start elsewhere): they wait for it.
const started = start();
started.then(
  () => post({ type: "ready" }),
  (err: unknown) => post({ type: "start-failed", error: sendableError(err) }),
);
port.on("message", (message: ToWorker) => {
  void started.then(
    (rollout) => {
      if (message.type === "run") rollout.run(message.task, message.sample);
      else if (message.type === "abort") rollout.abort(message.reason);
      else void rollout.close();
    },
    // Nothing to run or close: the main thread already has the start-up error and ends the thread.
    () => undefined,
  );
});
