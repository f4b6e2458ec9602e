/**
 * MCP tools in verl's config shape: a YAML entry with `config: {type: mcp}` and
 * `mcp: {mcp_servers_config_path, tool_selected_list?}` expands to one tool per schema the servers list.
 * The servers file is `{"mcpServers": {"<name>": {"url", "auth_token"?} | {"command", "args"?, "env"?}}}`:
 * `url` servers speak streamable HTTP (set `"transport": "sse"` for the older SSE protocol), `command` servers stdio.
 * Like verl's MCPBaseTool, the text is the result's text parts joined with spaces, the step reward is 0.0,
 * and a failed call answers `{"result": "Tool execution failed: <error>"}` instead of throwing.
 */
import { existsSync } from "node:fs";
import path from "node:path";
// Types only: the SDK (and the JSON-schema validator it loads) is imported when a server is connected, so a run
// without MCP tools does not pay its start-up (bench/rollout-overhead.mjs measures start-up CPU).
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { z } from "zod";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { readJsonFile } from "../data/json-file.js";
import { BaseTool } from "./base-tool.js";
import { pyJsonDumps } from "./python-repr.js";
import type { OpenAIFunctionToolSchema } from "./schema.js";
import type { ToolContext, ToolExecuteResult } from "./types.js";

const httpServerSchema = z.object({
  url: z.url(),
  auth_token: z.string().optional(),
  transport: z.enum(["streamable-http", "sse"]).default("streamable-http"),
});
const stdioServerSchema = z.object({
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  env: z.record(z.string(), z.string()).optional(),
  cwd: z.string().optional(),
});
export const mcpServersFileSchema = z.object({
  mcpServers: z.record(z.string(), z.union([httpServerSchema, stdioServerSchema])),
});

/** The `mcp:` block of a YAML tool entry. */
export const mcpBlockSchema = z.object({
  mcp_servers_config_path: z.string().min(1),
  tool_selected_list: z.array(z.string()).optional(),
});

/** MCP keys inside `config` (verl: `timeout` seconds per call; our connection retry knobs). */
export const mcpConfigSchema = z.looseObject({
  timeout: z.number().positive().default(30),
  connect_attempts: z.number().int().positive().default(10),
  connect_retry_delay_s: z.number().nonnegative().default(2),
});

/** One live connection per server, shared by every tool it serves. */
export class McpConnection {
  constructor(
    readonly serverName: string,
    readonly client: Client,
  ) {}

  async close(): Promise<void> {
    await this.client.close().catch(() => undefined);
  }
}

export class McpTool extends BaseTool {
  constructor(
    config: Record<string, unknown>,
    schema: OpenAIFunctionToolSchema,
    private readonly connection: McpConnection,
    private readonly timeoutS: number,
  ) {
    super(config, schema);
  }

  override async execute(_instanceId: string, parameters: Record<string, unknown>, ctx: ToolContext): Promise<ToolExecuteResult> {
    try {
      const result = await this.connection.client.callTool({ name: this.name, arguments: parameters }, undefined, {
        timeout: this.timeoutS * 1000,
        signal: ctx.signal,
      });
      const content = Array.isArray(result.content) ? (result.content as Array<{ type?: unknown; text?: unknown }>) : [];
      const text = content
        .filter((part) => part.type === "text" && typeof part.text === "string")
        .map((part) => part.text as string)
        .join(" ");
      return { response: { text }, reward: 0.0, metrics: { server: this.connection.serverName, isError: result.isError === true } };
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return {
        response: { text: pyJsonDumps({ result: `Tool execution failed: ${message}` }) },
        reward: 0.0,
        metrics: { server: this.connection.serverName, error: message },
      };
    }
  }
}

/** Resolves the servers file like verl (relative to the working directory), falling back to the YAML's folder. */
export function resolveServersPath(configured: string, yamlDir: string, cwd = process.cwd()): string {
  if (path.isAbsolute(configured)) return configured;
  const fromCwd = path.resolve(cwd, configured);
  return existsSync(fromCwd) ? fromCwd : path.resolve(yamlDir, configured);
}

export async function readServersFile(file: string, where: string): Promise<z.infer<typeof mcpServersFileSchema>> {
  let raw: unknown;
  try {
    raw = await readJsonFile(file);
  } catch (err) {
    throw new InputError(`${where}: cannot read MCP servers file ${file}: ${(err as Error).message}`, { cause: err });
  }
  const parsed = mcpServersFileSchema.safeParse(raw);
  if (!parsed.success) {
    throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "first" })}`);
  }
  return parsed.data;
}

type ServerSpec = z.infer<typeof mcpServersFileSchema>["mcpServers"][string];

async function connectOnce(name: string, spec: ServerSpec, baseDir: string): Promise<McpConnection> {
  const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
  const client = new Client({ name: "agentrl", version: "0.1.0" });
  try {
    await connectClient(client, spec, baseDir);
  } catch (err) {
    // A failed handshake can leave a spawned server process or an open stream behind.
    await client.close().catch(() => undefined);
    throw err;
  }
  return new McpConnection(name, client);
}

async function connectClient(client: Client, spec: ServerSpec, baseDir: string): Promise<void> {
  if ("command" in spec) {
    const { StdioClientTransport, getDefaultEnvironment } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    await client.connect(
      new StdioClientTransport({
        command: spec.command,
        args: spec.args,
        env: { ...getDefaultEnvironment(), ...(spec.env ?? {}) },
        cwd: spec.cwd ? path.resolve(baseDir, spec.cwd) : baseDir,
        stderr: "ignore",
      }),
    );
  } else {
    const headers: Record<string, string> = spec.auth_token ? { Authorization: `Bearer ${spec.auth_token}` } : {};
    const url = new URL(spec.url);
    const { SSEClientTransport } = await import("@modelcontextprotocol/sdk/client/sse.js");
    const { StreamableHTTPClientTransport } = await import("@modelcontextprotocol/sdk/client/streamableHttp.js");
    const transport =
      spec.transport === "sse"
        ? new SSEClientTransport(url, { requestInit: { headers } })
        : new StreamableHTTPClientTransport(url, { requestInit: { headers } });
    await client.connect(transport);
  }
}

/** Connects to one server, trying `attempts` times `delayS` apart as verl does while servers start. */
export async function connectServer(name: string, spec: ServerSpec, baseDir: string, attempts: number, delayS: number): Promise<McpConnection> {
  let lastError: unknown;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      return await connectOnce(name, spec, baseDir);
    } catch (err) {
      lastError = err;
      if (attempt < attempts) await new Promise((r) => setTimeout(r, delayS * 1000));
    }
  }
  throw lastError;
}

/** An MCP tool's input schema as verl's OpenAI function schema (properties without a string `type` become "object"). */
export function mcpToolToSchema(tool: { name: string; description?: string; inputSchema: Record<string, unknown> }): OpenAIFunctionToolSchema {
  const rawProps = (tool.inputSchema["properties"] ?? {}) as Record<string, Record<string, unknown>>;
  const properties: NonNullable<OpenAIFunctionToolSchema["function"]["parameters"]>["properties"] = {};
  for (const [key, prop] of Object.entries(rawProps)) {
    properties[key] = {
      type: typeof prop?.["type"] === "string" ? (prop["type"] as string) : "object",
      ...(typeof prop?.["description"] === "string" ? { description: prop["description"] as string } : {}),
      ...(Array.isArray(prop?.["enum"]) ? { enum: (prop["enum"] as unknown[]).map(String) } : {}),
    };
  }
  const required = Array.isArray(tool.inputSchema["required"]) ? (tool.inputSchema["required"] as unknown[]).map(String) : [];
  return {
    type: "function",
    function: { name: tool.name, description: tool.description ?? "", parameters: { type: "object", properties, required } },
  };
}
