/**
 * A Python host that runs one thing per trajectory (an agent function, a command agent): each run is a request with an
 * id that gets exactly one reply, the trajectory's deadline sends the host `cancel`, and a host that dies answers the
 * runs it had with why, so no trajectory waits on a process that is gone.
 */
import type { z } from "zod";
import { PythonHostProcess, type Launch } from "../process/index.js";

/** The host died (or was not running): why, for the trajectory's error. */
export interface HostLost {
  lost: string;
}

export abstract class RunHostProcess<Reply extends { id: number }> extends PythonHostProcess {
  private readonly waiting = new Map<number, (reply: Reply | HostLost) => void>();
  private nextId = 1;

  /** `what` names the host in errors: "the agent launcher". */
  constructor(
    launch: Launch,
    names: { label: string; stderrPrefix: string },
    onDead: () => void,
    private readonly what: string,
    private readonly replySchema: z.ZodType<Reply>,
  ) {
    super(launch, names, onDead);
  }

  /** Sends `{id, op: "run", ...body}`; resolves with its reply, or with HostLost when the host is gone. */
  protected runRequest(body: Record<string, unknown>, signal: AbortSignal): Promise<Reply | HostLost> {
    if (!this.alive) return Promise.resolve({ lost: `${this.what} is not running` });
    const id = this.nextId++;
    return new Promise((resolve) => {
      const onAbort = () => this.process.send({ op: "cancel", target: id });
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.set(id, (reply) => {
        signal.removeEventListener("abort", onAbort);
        resolve(reply);
      });
      this.process.send({ id, op: "run", ...body });
    });
  }

  protected received(raw: unknown): void {
    const parsed = this.replySchema.safeParse(raw);
    if (!parsed.success) return; // not a reply of this protocol: nothing waits on it
    const settle = this.waiting.get(parsed.data.id);
    if (!settle) return;
    this.waiting.delete(parsed.data.id);
    settle(parsed.data);
  }

  protected died(): void {
    const last = this.lastStderr();
    const lost = { lost: `${this.what} exited (${this.process.exitText})${last ? `: ${last}` : ""}; it is restarted for later trajectories` };
    for (const settle of this.waiting.values()) settle(lost);
    this.waiting.clear();
  }
}
