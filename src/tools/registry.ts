/**
 * Builds the tools of a YAML file: built-ins by class_name, user classes from allowed module directories, and
 * MCP tools from their servers. The registry owns per-tool call settings (timeout, concurrency) and the MCP
 * connections it must close.
 */
import { InputError } from "../errors.js";
import { CalculatorTool } from "./calculator.js";
import { readToolsFile, yamlDirOf, type ToolEntry } from "./config.js";
import { formatIssues } from "../zod-issues.js";
import { Gsm8kTool } from "./gsm8k-tool.js";
import { McpConnection, McpTool, connectServer, mcpConfigSchema, mcpToolToSchema, readServersFile, resolveServersPath } from "./mcp.js";
import { isModulePath, loadModuleExport } from "./module-loader.js";
import { PythonCodeTool, pythonSandboxProblem, pythonToolConfigSchema } from "./python-tool.js";
import { buildPythonHostTool, pythonClassPath } from "./python-host-tool.js";
import { schemaForTemplate, type OpenAIFunctionToolSchema } from "./schema.js";
import { Semaphore } from "./semaphore.js";
import { VaultTool } from "./vault-tool.js";
import type { Tool, ToolClass } from "./types.js";

type NativeBuiltin = "gsm8k" | "calculator" | "python" | "vault";

/** class_name → built-in. verl's own names map to the equivalent built-in so verl YAML works unchanged. */
export const BUILTIN_TOOL_CLASSES: Record<string, NativeBuiltin | "mcp"> = {
  "verl.tools.gsm8k_tool.Gsm8kTool": "gsm8k",
  "agentrl.tools.Gsm8kTool": "gsm8k",
  "agentrl.tools.CalculatorTool": "calculator",
  "agentrl.tools.PythonCodeTool": "python",
  "agentrl.tools.VaultTool": "vault",
  "verl.tools.mcp_base_tool.MCPBaseTool": "mcp",
  // verl's search tool reformats search results; here it gets the generic MCP text (parts joined by spaces).
  "verl.tools.mcp_search_tool.MCPSearchTool": "mcp",
  "agentrl.tools.MCPTool": "mcp",
};

/** verl classes with no local equivalent, and what to use instead. */
const UNSUPPORTED_VERL_CLASSES: Record<string, string> = {
  "verl.tools.sandbox_fusion_tools.SandboxFusionTool":
    "it calls a remote SandboxFusion service; use agentrl.tools.PythonCodeTool to run code locally under limits",
  "verl.tools.search_tool.SearchTool": "write a JS tool module or expose the retriever as an MCP server",
  "verl.tools.geo3k_tool.Geo3kTool": "no built-in; write a JS tool module",
  "verl.tools.image_zoom_in_tool.ImageZoomInTool": "multimodal tools are not supported",
};

export interface ToolCallSettings {
  /** Per-call wall-clock limit; undefined means the runner's default. */
  timeoutMs: number | undefined;
  /** Calls of this tool allowed in flight at once (verl's `rate_limit`). */
  maxConcurrency: number;
}

export const DEFAULT_TOOL_CONCURRENCY = 64;

export interface LoadToolsOptions {
  /** Directories JS tool modules may be loaded from (empty: module paths are refused). */
  moduleDirs?: readonly string[];
  /** Where relative MCP server files are looked up first (verl: the working directory). */
  cwd?: string;
}

export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();
  private readonly settings = new Map<string, ToolCallSettings>();
  private readonly semaphores = new Map<string, Semaphore>();

  constructor(private readonly connections: McpConnection[] = []) {}

  add(tool: Tool, settings: Partial<ToolCallSettings> = {}, where = "tools"): void {
    if (this.tools.has(tool.name)) {
      throw new InputError(`${where}: duplicate tool name ${JSON.stringify(tool.name)}`, { hint: "every tool_schema.function.name must be unique" });
    }
    const full: ToolCallSettings = { timeoutMs: settings.timeoutMs, maxConcurrency: settings.maxConcurrency ?? DEFAULT_TOOL_CONCURRENCY };
    this.tools.set(tool.name, tool);
    this.settings.set(tool.name, full);
    this.semaphores.set(tool.name, new Semaphore(full.maxConcurrency));
  }

  get(name: string): Tool | undefined {
    return this.tools.get(name);
  }

  names(): string[] {
    return [...this.tools.keys()];
  }

  settingsOf(name: string): ToolCallSettings | undefined {
    return this.settings.get(name);
  }

  semaphoreOf(name: string): Semaphore | undefined {
    return this.semaphores.get(name);
  }

  /** Every tool's schema as the chat template receives it (verl's agent loop passes all tools, unset keys dropped). */
  schemas(): Record<string, unknown>[] {
    return [...this.tools.values()].map((tool) => schemaForTemplate(tool.schema));
  }

  async close(): Promise<void> {
    await Promise.all([...this.tools.values()].map((tool) => tool.close?.().catch(() => undefined)));
    await Promise.all(this.connections.map((c) => c.close()));
  }
}

function numberOrUndefined(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? value : undefined;
}

/** `call_timeout_s` and `rate_limit` from an entry's config, with defaults that suit the tool kind. */
function callSettings(config: Record<string, unknown>, defaults: { timeoutS?: number; concurrency?: number }): Partial<ToolCallSettings> {
  const timeoutS = numberOrUndefined(config["call_timeout_s"]) ?? defaults.timeoutS;
  const concurrency = numberOrUndefined(config["rate_limit"]) ?? defaults.concurrency;
  return {
    timeoutMs: timeoutS === undefined ? undefined : timeoutS * 1000,
    ...(concurrency === undefined ? {} : { maxConcurrency: Math.max(1, Math.floor(concurrency)) }),
  };
}

function validateToolInstance(candidate: unknown, where: string): Tool {
  const t = candidate as Partial<Tool> | null;
  const missing = ["create", "execute", "calcReward", "release"].filter((m) => typeof (t as Record<string, unknown> | null)?.[m] !== "function");
  if (!t || typeof t !== "object" || missing.length > 0 || typeof t.name !== "string") {
    throw new InputError(`${where}: the module's class does not implement the tool lifecycle (missing: ${missing.join(", ") || "name"})`, {
      hint: "extend BaseTool from agentrl's src/tools or implement name, create, execute, calcReward, release",
    });
  }
  return t as Tool;
}

async function buildNative(entry: ToolEntry, where: string, yamlDir: string, options: LoadToolsOptions): Promise<{ tool: Tool; settings: Partial<ToolCallSettings> }> {
  const schema = entry.tool_schema as OpenAIFunctionToolSchema;
  const config = entry.config as Record<string, unknown>;
  const builtin = BUILTIN_TOOL_CLASSES[entry.class_name];
  if (builtin === "mcp") throw new InputError(`${where}.config.type: ${entry.class_name} is an MCP tool; set type: mcp`);
  if (builtin === "gsm8k") return { tool: new Gsm8kTool(config, schema), settings: callSettings(config, {}) };
  if (builtin === "vault") return { tool: new VaultTool(config, schema), settings: callSettings(config, {}) };
  if (builtin === "calculator") return { tool: new CalculatorTool(config, schema), settings: callSettings(config, {}) };
  if (builtin === "python") {
    const parsed = pythonToolConfigSchema.safeParse(config);
    if (!parsed.success) throw new InputError(`${where}: ${formatIssues(parsed.error, { only: "first", at: "config" })}`);
    const problem = await pythonSandboxProblem(parsed.data);
    if (problem !== null) throw new InputError(`${where}.config.sandbox: ${problem}`);
    return {
      tool: new PythonCodeTool(config, schema, parsed.data),
      // The runner's limit sits above the tool's own timeout so the tool can report its timeout itself.
      settings: callSettings(config, { timeoutS: parsed.data.timeout_s + 5, concurrency: 4 }),
    };
  }
  const unsupported = UNSUPPORTED_VERL_CLASSES[entry.class_name];
  if (unsupported === undefined && pythonClassPath(entry.class_name) !== null) {
    const settings = callSettings(config, {});
    const tool = await buildPythonHostTool({ class_name: entry.class_name, config, tool_schema: schema }, where, yamlDir, options.moduleDirs ?? [], settings.timeoutMs);
    return { tool, settings };
  }
  if (isModulePath(entry.class_name)) {
    const exported = await loadModuleExport(entry.class_name, yamlDir, options.moduleDirs ?? [], `${where}.class_name`);
    if (typeof exported !== "function") throw new InputError(`${where}.class_name: the export is not a class`);
    let instance: unknown;
    try {
      instance = new (exported as ToolClass)(config, schema);
    } catch (err) {
      throw new InputError(`${where}: constructing ${entry.class_name} failed: ${(err as Error).message}`, { cause: err });
    }
    return { tool: validateToolInstance(instance, where), settings: callSettings(config, {}) };
  }
  throw new InputError(`${where}.class_name: unknown tool class ${JSON.stringify(entry.class_name)}`, {
    hint: unsupported ?? `built-ins: ${Object.keys(BUILTIN_TOOL_CLASSES).join(", ")}; or a .js module path, a .py file (file.py#Class) or a Python dotted path module.Class in this YAML's folder`,
  });
}

async function buildMcp(entry: ToolEntry, where: string, file: string, options: LoadToolsOptions, connections: McpConnection[]): Promise<Array<{ tool: Tool; settings: Partial<ToolCallSettings> }>> {
  if (BUILTIN_TOOL_CLASSES[entry.class_name] !== "mcp") {
    throw new InputError(`${where}.class_name: ${JSON.stringify(entry.class_name)} is not an MCP tool class`, {
      hint: "use verl.tools.mcp_base_tool.MCPBaseTool (or agentrl.tools.MCPTool) with type: mcp",
    });
  }
  const config = mcpConfigSchema.safeParse(entry.config);
  if (!config.success) throw new InputError(`${file}: ${formatIssues(config.error, { only: "first", at: `${where}.config` })}`);
  const block = entry.mcp!;
  const yamlDir = yamlDirOf(file);
  const serversPath = resolveServersPath(block.mcp_servers_config_path, yamlDir, options.cwd);
  const servers = await readServersFile(serversPath, `${file}: ${where}.mcp.mcp_servers_config_path`);
  const selected = block.tool_selected_list ? new Set(block.tool_selected_list) : undefined;
  const built: Array<{ tool: Tool; settings: Partial<ToolCallSettings> }> = [];
  for (const [serverName, spec] of Object.entries(servers.mcpServers)) {
    let connection: McpConnection;
    try {
      connection = await connectServer(serverName, spec, yamlDir, config.data.connect_attempts, config.data.connect_retry_delay_s);
    } catch (err) {
      throw new InputError(`${file}: ${where}: cannot connect to MCP server ${JSON.stringify(serverName)}: ${(err as Error).message}`, { cause: err });
    }
    connections.push(connection);
    const listed = await connection.client.listTools();
    for (const mcpTool of listed.tools) {
      if (selected && !selected.has(mcpTool.name)) continue;
      const schema = mcpToolToSchema(mcpTool as { name: string; description?: string; inputSchema: Record<string, unknown> });
      built.push({
        tool: new McpTool(entry.config as Record<string, unknown>, schema, connection, config.data.timeout),
        settings: callSettings(entry.config as Record<string, unknown>, { timeoutS: config.data.timeout + 5 }),
      });
    }
  }
  if (selected) {
    const found = new Set(built.map((b) => b.tool.name));
    const missing = [...selected].filter((name) => !found.has(name));
    if (missing.length > 0) throw new InputError(`${file}: ${where}.mcp.tool_selected_list: no MCP server offers ${missing.join(", ")}`);
  }
  return built;
}

/** Reads a tool YAML and builds every tool it names. Closes any MCP connection it opened if loading fails. */
export async function loadToolRegistry(file: string, options: LoadToolsOptions = {}): Promise<ToolRegistry> {
  const { entries } = await readToolsFile(file);
  const connections: McpConnection[] = [];
  const registry = new ToolRegistry(connections);
  try {
    for (const [i, entry] of entries.entries()) {
      const where = `tools.${i}`;
      const built =
        entry.config.type === "mcp"
          ? await buildMcp(entry, where, file, options, connections)
          : [await buildNative(entry, `${file}: ${where}`, yamlDirOf(file), options)];
      for (const { tool, settings } of built) registry.add(tool, settings, `${file}: ${where}`);
    }
  } catch (err) {
    await registry.close();
    throw err;
  }
  return registry;
}
