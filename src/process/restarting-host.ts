/**
 * A Python host that is started again when it dies (until it is closed): a crash in one trajectory's code must not
 * stop the trajectories after it. A restart that fails is not retried; its error stands for every later caller.
 */
import type { PythonHostProcess } from "./python-host-process.js";

export class RestartingHost<H extends PythonHostProcess> {
  private host: Promise<H> | undefined;
  private closed = false;

  /** `start` starts one host, which calls `onDead` once it has died. */
  constructor(
    private readonly label: string,
    private readonly start: (onDead: () => void) => Promise<H>,
  ) {}

  /** The running host, started on first use; rejects with why it cannot start. */
  get(): Promise<H> {
    return (this.host ??= this.start(() => this.restart()));
  }

  private restart(): void {
    if (this.closed) return;
    process.stderr.write(`warning: ${this.label} exited; starting it again\n`);
    this.host = this.start(() => this.restart());
    this.host.catch(() => undefined); // the next caller gets the reason
  }

  async close(): Promise<void> {
    this.closed = true;
    const host = await this.host?.catch(() => undefined);
    await host?.close();
  }
}
