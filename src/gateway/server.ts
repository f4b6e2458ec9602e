/**
 * The OpenAI-compatible HTTP server on loopback that agents of kind `openai` talk to while a rollout runs. Each
 * trajectory gets its own key: its base URL is `http://127.0.0.1:PORT/t/KEY/v1`, and the same key as a bearer token
 * on `/v1/...` reaches it too, so episodes running at once never mix. Routes: `POST .../chat/completions` (JSON or
 * SSE), `POST .../responses` (the Responses API, JSON or SSE: responses-api.ts), `GET .../models` and
 * `GET .../models/ID`. Every refusal is a 4xx/5xx with OpenAI's error body; nothing an agent sends can crash
 * the run.
 */
import { randomBytes } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { formatIssues } from "../zod-issues.js";
import { LruMap } from "../lru-map.js";
import { GatewayError, parseChatCompletionRequest } from "./openai-schema.js";
import { sendError, sendEventStream, sendJson } from "./http-reply.js";
import { chatRequestOf, ignoredResponsesFields, parseResponsesRequest, responseOf, streamResponse } from "./responses-api.js";
import type { Completion, GatewaySession, TokenLogprob } from "./session.js";

/** Largest request body read: a long agent history is megabytes, not more. */
const MAX_BODY_BYTES = 32 * 1024 * 1024;
/** How many ended trajectories' keys are remembered, to tell "ended" from "unknown" in the error. */
const REMEMBERED_ENDED = 4096;

export class Gateway {
  private readonly sessions = new Map<string, GatewaySession>();
  private readonly ended = new LruMap<string, string>(REMEMBERED_ENDED);
  private readonly sockets = new Set<import("node:net").Socket>();

  private constructor(
    private readonly server: http.Server,
    readonly port: number,
    readonly modelName: string,
  ) {
    server.on("connection", (socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
  }

  /** Listens on 127.0.0.1 at a free port. */
  static async start(modelName: string): Promise<Gateway> {
    let gateway: Gateway | undefined;
    const server = http.createServer((req, res) => void gateway!.handle(req, res));
    // Agents keep connections alive between turns; a long generation must not be cut by Node's default timeouts.
    server.requestTimeout = 0;
    server.headersTimeout = 60_000;
    // Idle kept-alive connections are left for the client to close: Node's default 5 s equals httpx's keepalive_expiry
    // (the Python SDK's), a tie in which a request can go out on a socket the gateway is closing (httpx's check before
    // reuse narrows the window, does not shut it), and with max_retries 0 that turn fails. The SDKs expire theirs first.
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    gateway = new Gateway(server, (server.address() as AddressInfo).port, modelName);
    return gateway;
  }

  /** A new trajectory's key: unguessable, so one agent cannot reach another's trajectory by accident. */
  static newKey(): string {
    return `agentrl-${randomBytes(18).toString("hex")}`;
  }

  baseUrl(key: string): string {
    return `http://127.0.0.1:${this.port}/t/${key}/v1`;
  }

  open(session: GatewaySession): void {
    this.sessions.set(session.key, session);
  }

  /** The trajectory is recorded: later requests with its key are a 404 that says so. */
  close(session: GatewaySession): void {
    this.sessions.delete(session.key);
    this.ended.set(session.key, session.trajectoryId);
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const socket of this.sockets) socket.destroy();
    });
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    try {
      const { key, route } = this.route(req);
      if (route === "/models" && req.method === "GET") {
        this.session(key);
        return sendJson(res, 200, { object: "list", data: [this.model()] });
      }
      if (route.startsWith("/models/") && req.method === "GET") {
        this.session(key);
        const id = percentDecoded(route.slice("/models/".length));
        if (id !== this.modelName) throw new GatewayError(404, `the model ${JSON.stringify(id)} does not exist: the gateway serves ${JSON.stringify(this.modelName)} (any name in a request samples it)`, "model_not_found", "model");
        return sendJson(res, 200, this.model());
      }
      if (route === "/chat/completions" && req.method === "POST") return await this.chatCompletion(key, req, res);
      if (route === "/responses" && req.method === "POST") return await this.response(key, req, res);
      if (route === "/models" || route === "/chat/completions" || route === "/responses") throw new GatewayError(405, `${req.method} is not allowed on ${route}`, "method_not_allowed");
      throw new GatewayError(404, `no route ${req.method} ${route}: the gateway serves POST /v1/chat/completions, POST /v1/responses and GET /v1/models`, "unknown_url");
    } catch (err) {
      const error = err instanceof GatewayError ? err : new GatewayError(500, `gateway error: ${(err as Error).message}`, "internal_error");
      if (res.headersSent) {
        // A stream already started: say it in the stream, as OpenAI does, and end it.
        res.end(`data: ${JSON.stringify(error.body())}\n\n`);
      } else {
        sendError(res, error.status, error.body());
      }
    }
  }

  /** The one model, as `GET /v1/models` lists it. */
  private model(): Record<string, unknown> {
    return { id: this.modelName, object: "model", created: 0, owned_by: "agentrl" };
  }

  /** The trajectory key (from the path, else the bearer token) and the route under /v1. */
  private route(req: http.IncomingMessage): { key: string | undefined; route: string } {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const scoped = /^\/t\/([^/]+)\/v1(\/.*)$/.exec(url.pathname);
    if (scoped) return { key: percentDecoded(scoped[1]!), route: scoped[2]!.replace(/\/$/, "") };
    const plain = /^\/v1(\/.*)$/.exec(url.pathname);
    if (!plain) throw new GatewayError(404, `no route ${url.pathname}: use the base URL the agent was given (OPENAI_BASE_URL)`, "unknown_url");
    const auth = req.headers.authorization;
    const bearer = auth?.startsWith("Bearer ") ? auth.slice("Bearer ".length).trim() : undefined;
    return { key: bearer, route: plain[1]!.replace(/\/$/, "") };
  }

  private session(key: string | undefined): GatewaySession {
    if (!key) throw new GatewayError(401, "no trajectory key: use the base URL the agent was given (OPENAI_BASE_URL), or its key (OPENAI_API_KEY) as the bearer token", "invalid_api_key", null, "authentication_error");
    const session = this.sessions.get(key);
    if (session) return session;
    const endedId = this.ended.get(key);
    if (endedId !== undefined) throw new GatewayError(404, `trajectory ${endedId} is finished and recorded; it takes no more requests`, "trajectory_finished");
    throw new GatewayError(404, "no trajectory has this key: it is unknown, or from another run", "trajectory_not_found");
  }

  private async chatCompletion(key: string | undefined, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const session = this.session(key);
    const body = await readJsonBody(req);
    const parsed = parseChatCompletionRequest(body);
    if (!parsed.success) {
      const param = parsed.error.issues[0]?.path.join(".") || null;
      throw new GatewayError(400, `invalid request: ${formatIssues(parsed.error, { only: "first" })}`, "invalid_request", param);
    }
    const completion = await session.complete(parsed.data, body);
    const created = Math.floor(Date.now() / 1000);
    if (parsed.data.stream) return streamCompletion(res, completion, this.modelName, created, parsed.data.stream_options?.include_usage === true);
    sendJson(res, 200, {
      id: completion.id,
      object: "chat.completion",
      created,
      model: this.modelName,
      choices: [{ index: 0, message: assistantMessage(completion), logprobs: logprobsOf(completion), finish_reason: completion.finishReason }],
      usage: completion.usage,
    });
  }

  /** The Responses API: the same session and turn as a chat completion, in and out of its shapes (responses-api.ts). */
  private async response(key: string | undefined, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const session = this.session(key);
    const body = await readJsonBody(req);
    const request = parseResponsesRequest(body);
    const conversation = session.responses.conversationOf(request);
    const chatRequest = chatRequestOf(request, conversation);
    session.noteIgnored(ignoredResponsesFields(body));
    const completion = await session.complete(chatRequest, {});
    const response = responseOf(completion, request, this.modelName, Math.floor(Date.now() / 1000));
    session.responses.remember(request, conversation, completion);
    if (request.stream) return streamResponse(res, response);
    sendJson(res, 200, response);
  }
}

/**
 * A path segment (a trajectory key, a model id): percent-decoded, or as written when it is not valid percent-encoding
 * (then no key or model matches).
 */
function percentDecoded(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

/** A choice's `logprobs`: null unless the request asked for them. */
function logprobsOf(completion: Completion): { content: TokenLogprob[]; refusal: null } | null {
  return completion.logprobs ? { content: completion.logprobs, refusal: null } : null;
}

function assistantMessage(completion: Completion): Record<string, unknown> {
  return {
    role: "assistant",
    content: completion.content,
    ...(completion.reasoning !== undefined ? { reasoning_content: completion.reasoning } : {}),
    refusal: null,
    ...(completion.toolCalls.length > 0 ? { tool_calls: completion.toolCalls } : {}),
  };
}

/**
 * The turn as the SSE chunks the official SDKs assemble: the role, the content, each call (id, name and arguments in
 * one delta, with its index), the finish reason, the usage when asked for, then `[DONE]`.
 */
function streamCompletion(res: http.ServerResponse, completion: Completion, model: string, created: number, includeUsage: boolean): void {
  const events: string[] = [];
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    events.push(`data: ${JSON.stringify({ id: completion.id, object: "chat.completion.chunk", created, model, choices, ...extra })}\n\n`);
  const delta = (value: Record<string, unknown>, finishReason: string | null = null, logprobs: unknown = null) =>
    chunk([{ index: 0, delta: value, logprobs, finish_reason: finishReason }], includeUsage ? { usage: null } : {});
  delta({ role: "assistant", content: "" });
  if (completion.reasoning !== undefined) delta({ reasoning_content: completion.reasoning });
  // The turn's log-probs ride on its text's chunk, or on the last one when it has no text.
  if (completion.content) delta({ content: completion.content }, null, logprobsOf(completion));
  completion.toolCalls.forEach((call, index) => delta({ tool_calls: [{ index, ...call }] }));
  delta({}, completion.finishReason, completion.content ? null : logprobsOf(completion));
  if (includeUsage) chunk([], { usage: completion.usage });
  events.push("data: [DONE]\n\n");
  sendEventStream(res, events);
}

async function readJsonBody(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  const text = await readBody(req);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (err) {
    throw new GatewayError(400, `the request body is not JSON: ${(err as Error).message}`, "invalid_json");
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw new GatewayError(400, "the request body must be a JSON object", "invalid_json");
  return body as Record<string, unknown>;
}

/**
 * The body as text: 'data' and 'end' listeners, not `for await` over the request, whose async iterator cost a visible
 * share of the gateway's CPU per request (bench/gateway-overhead.mjs); a body of one chunk is decoded without a copy.
 */
function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const fail = (err: Error) => {
      req.off("data", onData);
      req.resume();
      reject(err);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) return fail(new GatewayError(413, `the request body is over ${MAX_BODY_BYTES} bytes`, "request_too_large"));
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("error", fail);
    req.once("end", () => resolve(chunks.length === 1 ? chunks[0]!.toString("utf8") : Buffer.concat(chunks).toString("utf8")));
  });
}
