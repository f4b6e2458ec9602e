/**
 * What a Python host process of agentrl (the tool host, the agent loop host) is around its own protocol: a
 * JsonLinesHost started from a Launch, its start-up line, its scratch folder removed when it is gone, and `onDead`
 * only for a host that had started (a start-up failure is the starter's to report, not a restart's).
 */
import { rmSync } from "node:fs";
import { JsonLinesHost, type HostHello } from "./json-lines-host.js";

/** How a host process is started: command and argv (bubblewrap's or the interpreter's) and its scratch folder. */
export interface Launch {
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  scratch: string | undefined;
}

export abstract class PythonHostProcess {
  readonly hello: Promise<HostHello>;
  protected readonly process: JsonLinesHost;
  private started = false;

  constructor(launch: Launch, names: { label: string; stderrPrefix: string }, onDead: () => void) {
    this.process = new JsonLinesHost({
      ...launch,
      ...names,
      onMessage: (message) => this.received(message),
      onClose: () => {
        this.died();
        if (launch.scratch) rmSync(launch.scratch, { recursive: true, force: true });
        if (this.started) onDead();
      },
    });
    this.hello = this.process.hello.then((hello) => {
      this.started = hello.ready === true;
      return hello;
    });
  }

  /** A JSON line from the host, after its start-up line. */
  protected abstract received(message: unknown): void;
  /** The process is gone: fail what waits on it. */
  protected abstract died(): void;

  get alive(): boolean {
    return !this.process.closed;
  }

  lastStderr(): string {
    return this.process.lastStderr();
  }

  kill(): void {
    this.process.kill();
  }

  /** Asks the host to shut down (no restart follows), then ends it. */
  close(): Promise<void> {
    this.started = false;
    return this.process.close({ id: 0, op: "shutdown" });
  }
}
