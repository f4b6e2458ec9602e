/**
 * The tool instances of one trajectory, as verl's SGLang rollout keeps them: `create` once per tool when the
 * trajectory starts (for every tool the row's tools_kwargs names; a tool called without an entry is created at its
 * first call), `execute` on that instance for every call, `calc_reward` at the end, and `release` exactly once per
 * created instance on every exit path. Each step gets its own kwargs from tools_kwargs: create_kwargs,
 * execute_kwargs, calc_reward_kwargs, release_kwargs. Failures never throw out of start, scores or release.
 */
import type { ToolRegistry } from "./registry.js";
import type { Tool } from "./types.js";

/** One tool's entry in a sample's tools_kwargs (verl's names). */
export interface ToolKwargsEntry {
  create_kwargs?: Record<string, unknown>;
  execute_kwargs?: Record<string, unknown>;
  calc_reward_kwargs?: Record<string, unknown>;
  release_kwargs?: Record<string, unknown>;
}

/** A sample's `tools_kwargs`: `{tool_name: {create_kwargs: {...}, execute_kwargs: {...}, ...}}`. */
export type ToolsKwargs = Record<string, ToolKwargsEntry | undefined>;

/** `tool_lifetime`: one instance per trajectory (verl's SGLang rollout) or a fresh one per call (verl's agent loop). */
export type ToolLifetime = "trajectory" | "call";

export const TOOL_LIFETIMES = ["trajectory", "call"] as const satisfies readonly ToolLifetime[];

/** How long release and calc_reward may take before the session stops waiting. */
const END_STEP_TIMEOUT_MS = 5_000;

/** The kwargs of one step for one tool; `{}` when the row sets none (or sets something that is not an object). */
export function stepKwargs(toolsKwargs: ToolsKwargs, name: string, step: keyof ToolKwargsEntry): Record<string, unknown> {
  const value = toolsKwargs[name]?.[step];
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value : {};
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Resolves like `work`, or rejects after `timeoutMs` or when `signal` aborts; `onLate` gets a value that came too late. */
export function withLimit<T>(work: Promise<T>, timeoutMs: number, signal?: AbortSignal, onLate?: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const finish = (settle: () => void) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      settle();
    };
    const timer = setTimeout(() => finish(() => reject(new Error(`timed out after ${timeoutMs} ms`))), timeoutMs);
    const onAbort = () => finish(() => reject(new Error("cancelled")));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => (done ? onLate?.(value) : finish(() => resolve(value))),
      (err) => finish(() => reject(err)),
    );
  });
}

export interface ToolSessionOptions {
  /** Limit of one create when the tool's config sets none. */
  timeoutMs: number;
  /** The trajectory's deadline: cancels creates in flight. */
  signal?: AbortSignal;
  /** Where calc_reward and release failures are reported. */
  warn?: (message: string) => void;
}

export class ToolSession {
  private readonly instances = new Map<string, Promise<string>>();
  /** Instances created and not yet released, by tool name. */
  private readonly live = new Map<string, string>();
  private closed = false;

  constructor(
    private readonly registry: ToolRegistry,
    readonly toolsKwargs: ToolsKwargs,
    private readonly options: ToolSessionOptions,
  ) {}

  /** Creates an instance of every tool the row's tools_kwargs names (verl ignores the others until called). */
  async start(): Promise<void> {
    const names = Object.keys(this.toolsKwargs).filter((name) => this.registry.get(name) !== undefined);
    // A failed create is retried at the tool's first call, where its error becomes the observation.
    await Promise.all(names.map((name) => this.instanceOf(name).catch(() => undefined)));
  }

  /** The trajectory's instance of `name`, created on first use. Rejects with create's error (or timeout). */
  instanceOf(name: string): Promise<string> {
    const existing = this.instances.get(name);
    if (existing) return existing;
    const tool = this.registry.get(name);
    if (!tool) return Promise.reject(new Error(`no tool named ${name}`));
    if (this.closed) return Promise.reject(new Error("the trajectory's tools were already released"));
    const pending = this.create(name, tool);
    this.instances.set(name, pending);
    // Let a later call try again after a failed create.
    pending.catch(() => this.instances.delete(name));
    return pending;
  }

  private async create(name: string, tool: Tool): Promise<string> {
    const timeoutMs = this.registry.settingsOf(name)?.timeoutMs ?? this.options.timeoutMs;
    // verl's SGLang rollout, whose per-trajectory lifetime this is, spreads them: create(request_id, **create_kwargs).
    const work = tool.create(undefined, stepKwargs(this.toolsKwargs, name, "create_kwargs"));
    // An instance created after the limit (or after the session closed) is released here; nobody else knows it.
    const created = await withLimit(work, timeoutMs, this.options.signal, (late) => void this.releaseOne(name, tool, late.instanceId));
    if (this.closed) {
      await this.releaseOne(name, tool, created.instanceId);
      throw new Error("the trajectory's tools were already released");
    }
    this.live.set(name, created.instanceId);
    return created.instanceId;
  }

  /** calc_reward of every live instance with its calc_reward_kwargs: `{tool_name: score}`; failures are left out. */
  async scores(): Promise<Record<string, number>> {
    const out: Record<string, number> = {};
    await Promise.all(
      [...this.live].map(async ([name, instanceId]) => {
        const tool = this.registry.get(name)!;
        try {
          const score = await withLimit(Promise.resolve(tool.calcReward(instanceId, stepKwargs(this.toolsKwargs, name, "calc_reward_kwargs"))), END_STEP_TIMEOUT_MS);
          if (typeof score === "number" && Number.isFinite(score)) out[name] = score;
          else this.options.warn?.(`tool ${name}: calc_reward returned ${String(score)}, not a number; ignored`);
        } catch (err) {
          this.options.warn?.(`tool ${name}: calc_reward failed: ${messageOf(err)}`);
        }
      }),
    );
    return Object.fromEntries(Object.keys(out).sort().map((k) => [k, out[k]!]));
  }

  /** Releases every instance once; later calls (and late creates) find the session closed. Never throws. */
  async release(): Promise<void> {
    this.closed = true;
    const live = [...this.live];
    this.live.clear();
    await Promise.all(live.map(([name, instanceId]) => this.releaseOne(name, this.registry.get(name)!, instanceId)));
  }

  private async releaseOne(name: string, tool: Tool, instanceId: string): Promise<void> {
    try {
      await withLimit(Promise.resolve(tool.release(instanceId, stepKwargs(this.toolsKwargs, name, "release_kwargs"))), END_STEP_TIMEOUT_MS);
    } catch (err) {
      this.options.warn?.(`tool ${name}: release failed: ${messageOf(err)}`);
    }
  }
}
