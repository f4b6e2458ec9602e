/**
 * Runs one parsed tool call: parse the JSON arguments, then execute on the trajectory's instance (a ToolSession,
 * verl's SGLang rollout) or, without a session, the way verl's agent loop does (`_call_tool`): create a fresh
 * instance with `create_kwargs` from the sample's tools_kwargs, execute, and release in `finally`.
 * Any failure becomes the observation `Error when executing tool: <reason>` with step reward 0.0, as in verl,
 * plus metrics naming the kind of failure. On top of verl: a per-tool timeout and concurrency limit, and checks
 * that the output is text the model can read (valid Unicode, not absurdly large). This function never throws.
 */
import { pyStrRepr } from "./python-repr.js";
import type { ToolRegistry } from "./registry.js";
import { ToolOutputError, type ToolErrorKind } from "./tool-errors.js";
import { truncateToolResponse, type TruncateSide } from "./truncate.js";
import { stepKwargs, type ToolSession, type ToolsKwargs } from "./session.js";
import type { Tool, ToolAgentData, ToolExecuteResult } from "./types.js";

export type { ToolsKwargs } from "./session.js";

export interface ToolCallRequest {
  name: string;
  /** The JSON text the parser extracted, or already-decoded arguments. */
  arguments: string | Record<string, unknown>;
}

export interface RunToolCallOptions {
  /** Wall-clock limit for create + execute when the tool's config sets none. Default 30 s. */
  timeoutMs?: number;
  /** Cancels waiting and running (the trajectory's deadline, Ctrl-C). */
  signal?: AbortSignal;
  /** Output longer than this many characters is refused as too large. Default 1,000,000. */
  maxOutputChars?: number;
  /** verl's max_tool_response_length; when given, the text is truncated like verl does. */
  maxToolResponseLength?: number;
  toolResponseTruncateSide?: TruncateSide;
  /** The trajectory's instances (tool_lifetime: trajectory); absent: a fresh instance for this call. */
  session?: ToolSession;
  /** Passed to the tool as `ctx.agentData`. */
  agentData?: ToolAgentData;
}

export interface ToolCallMetrics {
  /** Milliseconds from the start of create to the end of execute (or the failure). */
  latencyMs: number;
  /** Milliseconds spent waiting for a concurrency slot. */
  queueMs: number;
  errorKind: ToolErrorKind | null;
  errorMessage: string | null;
  /** Whatever the tool returned as metrics. */
  tool: Record<string, unknown>;
  /** Set when release failed; the call's result stands. */
  releaseError?: string;
  /** Characters of text before verl-style truncation, when it truncated. */
  truncatedFromChars?: number;
}

export interface ToolCallOutcome {
  name: string;
  /** The observation text for the model. */
  text: string;
  /** The step reward; null when the tool returns none (verl's None). */
  reward: number | null;
  image?: unknown[];
  video?: unknown[];
  metrics: ToolCallMetrics;
}

export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_OUTPUT_CHARS = 1_000_000;
/** How long release may take before the runner stops waiting for it. */
const RELEASE_TIMEOUT_MS = 5_000;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

class CallFailure extends Error {
  constructor(
    readonly kind: ToolErrorKind,
    message: string,
  ) {
    super(message);
  }
}

function errorMessageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}

function parseArguments(raw: string | Record<string, unknown>): Record<string, unknown> {
  let value: unknown = raw;
  if (typeof raw === "string") {
    try {
      value = JSON.parse(raw);
    } catch (err) {
      throw new CallFailure("bad_arguments", errorMessageOf(err));
    }
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new CallFailure("bad_arguments", "tool arguments must be a JSON object");
  }
  return value as Record<string, unknown>;
}

/** Rejects with a timeout or cancellation failure; never settles otherwise. Cleaned up by `dispose`. */
function deadline(timeoutMs: number, signal: AbortSignal | undefined): { promise: Promise<never>; dispose: () => void } {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new CallFailure("timeout", `timed out after ${timeoutMs} ms`)), timeoutMs);
    onAbort = () => reject(new CallFailure("cancelled", "the call was cancelled"));
    if (signal?.aborted) onAbort();
    else signal?.addEventListener("abort", onAbort, { once: true });
  });
  return {
    promise,
    dispose: () => {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener("abort", onAbort);
    },
  };
}

function checkOutput(result: unknown, maxOutputChars: number): ToolExecuteResult {
  const r = result as Partial<ToolExecuteResult> | null;
  if (!r || typeof r !== "object" || !r.response || typeof r.response !== "object") {
    throw new CallFailure("invalid_output", "the tool returned no response");
  }
  const text = r.response.text;
  if (text !== undefined && text !== null && typeof text !== "string") {
    throw new CallFailure("invalid_output", "the tool returned a non-text response");
  }
  if (typeof text === "string") {
    if (text.length > maxOutputChars) {
      throw new CallFailure("output_too_large", `output of ${text.length} characters exceeds the limit of ${maxOutputChars}`);
    }
    if (LONE_SURROGATE.test(text)) throw new CallFailure("invalid_output", "output is not valid UTF-8");
  }
  // verl's ToolResponse refuses media that are not lists.
  for (const key of ["image", "video"] as const) {
    const media = r.response[key];
    if (media !== undefined && media !== null && !Array.isArray(media)) {
      throw new CallFailure("invalid_output", `response.${key} must be a list`);
    }
  }
  const reward = typeof r.reward === "number" && Number.isFinite(r.reward) ? r.reward : null;
  const metrics = r.metrics && typeof r.metrics === "object" ? r.metrics : {};
  return { response: r.response, reward, metrics };
}

async function releaseQuietly(tool: Tool, instanceId: string, kwargs: Record<string, unknown>): Promise<string | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      tool.release(instanceId, kwargs),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`release timed out after ${RELEASE_TIMEOUT_MS} ms`)), RELEASE_TIMEOUT_MS);
      }),
    ]);
    return undefined;
  } catch (err) {
    return errorMessageOf(err);
  } finally {
    clearTimeout(timer);
  }
}

export async function runToolCall(
  registry: ToolRegistry,
  call: ToolCallRequest,
  toolsKwargs: ToolsKwargs = {},
  options: RunToolCallOptions = {},
): Promise<ToolCallOutcome> {
  const metrics: ToolCallMetrics = { latencyMs: 0, queueMs: 0, errorKind: null, errorMessage: null, tool: {} };
  const fail = (kind: ToolErrorKind, message: string): ToolCallOutcome => {
    metrics.errorKind = kind;
    metrics.errorMessage = message;
    return { name: call.name, text: `Error when executing tool: ${message}`, reward: 0.0, metrics };
  };

  let parameters: Record<string, unknown>;
  try {
    parameters = parseArguments(call.arguments);
  } catch (err) {
    return fail("bad_arguments", errorMessageOf(err));
  }
  const tool = registry.get(call.name);
  // verl looks the tool up in a dict, so an unknown name reads as Python's KeyError: 'name'.
  if (!tool) return fail("unknown_tool", pyStrRepr(call.name));

  const queued = performance.now();
  let releaseSlot: (() => void) | undefined;
  try {
    releaseSlot = await registry.semaphoreOf(call.name)?.acquire(options.signal);
  } catch {
    return fail("cancelled", "the call was cancelled");
  }
  metrics.queueMs = performance.now() - queued;

  const limits: CallLimits = {
    timeoutMs: registry.settingsOf(call.name)?.timeoutMs ?? options.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
    maxOutputChars: options.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS,
    signal: options.signal,
  };
  const kwargs = options.session?.toolsKwargs ?? toolsKwargs;
  const lifetime: InstanceLifetime = options.session
    ? { session: options.session }
    : { createKwargs: stepKwargs(kwargs, call.name, "create_kwargs"), releaseKwargs: stepKwargs(kwargs, call.name, "release_kwargs") };
  const execution: Execution = { parameters, kwargs: stepKwargs(kwargs, call.name, "execute_kwargs"), agentData: options.agentData };
  try {
    const result = await createExecuteRelease(tool, lifetime, execution, limits, metrics, releaseSlot);
    return outcomeOf(call.name, result, metrics, options);
  } catch (err) {
    if (err instanceof CallFailure || err instanceof ToolOutputError) return fail(err.kind, err.message);
    return fail("exception", errorMessageOf(err));
  }
}

interface CallLimits {
  timeoutMs: number;
  maxOutputChars: number;
  signal: AbortSignal | undefined;
}

/** Where the call's instance comes from: the trajectory's session, or a fresh one created and released for it. */
type InstanceLifetime =
  | { session: ToolSession }
  | { session?: undefined; createKwargs: Record<string, unknown>; releaseKwargs: Record<string, unknown> };

interface Execution {
  parameters: Record<string, unknown>;
  /** execute_kwargs */
  kwargs: Record<string, unknown>;
  agentData: ToolAgentData | undefined;
}

/**
 * One call on its instance: with a session, execute on the trajectory's instance (created at its first use);
 * otherwise verl's agent-loop lifecycle: create with the sample's create_kwargs, execute, then release. Create +
 * execute run under the call's deadline. Resolves to the checked output, or rejects with why it failed; sets
 * `latencyMs` (and `releaseError`) on `metrics`. `releaseSlot` runs as soon as the call is over, before the release,
 * which may take a while.
 */
async function createExecuteRelease(
  tool: Tool,
  lifetime: InstanceLifetime,
  execution: Execution,
  limits: CallLimits,
  metrics: ToolCallMetrics,
  releaseSlot: (() => void) | undefined,
): Promise<ToolExecuteResult> {
  // The call's signal is made when the tool first reads it: most tools never do (the built-in ones), and an
  // AbortController was about 1% of a rollout's CPU (bench/rollout-overhead.mjs's stage profile), one per call.
  let controller: AbortController | undefined;
  let abortAsked = false;
  const abort = () => {
    abortAsked = true;
    controller?.abort();
  };
  const callSignal = (): AbortSignal => {
    if (!controller) {
      controller = new AbortController();
      if (abortAsked) controller.abort();
    }
    return controller.signal;
  };
  limits.signal?.addEventListener("abort", abort, { once: true });
  const limit = deadline(limits.timeoutMs, limits.signal);
  const started = performance.now();
  let instanceId: string | undefined;
  let settled = false;
  let workDone = false;
  try {
    const work = (async () => {
      const ctx = {
        get signal() {
          return callSignal();
        },
        kwargs: execution.kwargs,
        ...(execution.agentData ? { agentData: execution.agentData } : {}),
      };
      if (lifetime.session) return tool.execute(await lifetime.session.instanceOf(tool.name), execution.parameters, ctx);
      const created = await tool.create(undefined, { create_kwargs: lifetime.createKwargs });
      if (settled) {
        // The call already timed out while create was running: nobody will release this instance but us.
        void releaseQuietly(tool, created.instanceId, lifetime.releaseKwargs);
        throw new CallFailure("timeout", "create finished after the call timed out");
      }
      instanceId = created.instanceId;
      return tool.execute(created.instanceId, execution.parameters, ctx);
    })();
    // A tool that ignores the signal keeps running in the background; its late rejection must not go unhandled.
    work.then(
      () => (workDone = true),
      () => (workDone = true),
    );
    const result = checkOutput(await Promise.race([work, limit.promise]), limits.maxOutputChars);
    metrics.latencyMs = performance.now() - started;
    return result;
  } catch (err) {
    metrics.latencyMs = performance.now() - started;
    throw err;
  } finally {
    settled = true;
    limit.dispose();
    // Tells a still-running tool to stop. A tool that has returned needs no telling, and an abort costs an error
    // object with its stack on every call.
    if (!workDone) abort();
    limits.signal?.removeEventListener("abort", abort);
    releaseSlot?.();
    if (instanceId !== undefined && !lifetime.session) {
      const releaseError = await releaseQuietly(tool, instanceId, lifetime.releaseKwargs);
      if (releaseError !== undefined) metrics.releaseError = releaseError;
    }
  }
}

/** The observation of a call that returned: its text (truncated as verl does, when asked), reward and media. */
function outcomeOf(name: string, result: ToolExecuteResult, metrics: ToolCallMetrics, options: RunToolCallOptions): ToolCallOutcome {
  metrics.tool = result.metrics;
  let text = result.response.text ?? "";
  if (options.maxToolResponseLength !== undefined && text.length > options.maxToolResponseLength) {
    const truncated = truncateToolResponse(text, options.maxToolResponseLength, options.toolResponseTruncateSide);
    if (truncated !== text) metrics.truncatedFromChars = Array.from(text).length;
    text = truncated;
  }
  const outcome: ToolCallOutcome = { name, text, reward: result.reward, metrics };
  if (result.response.image) outcome.image = result.response.image;
  if (result.response.video) outcome.video = result.response.video;
  return outcome;
}
