// MCP tools in verl's config shape, over stdio (a fixture server process) and streamable HTTP (in-process server).
import { writeFileSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { InputError } from "../src/errors.js";
import { loadToolRegistry, runToolCall, type ToolRegistry } from "../src/tools/index.js";
import { REPO_ROOT } from "./helpers/cli.js";
// @ts-expect-error: a plain .mjs fixture without types
import { createEchoServer } from "./fixtures/mcp/echo-server.mjs";
import { tempDir } from "./helpers/tmp.js";

const ECHO_SERVER = path.join(REPO_ROOT, "test", "fixtures", "mcp", "echo-server.mjs");
const dir = tempDir("mcp-test");

function writeConfig(name: string, servers: unknown, extra = "", config = "type: mcp, timeout: 2, connect_attempts: 1"): string {
  writeFileSync(path.join(dir, `${name}.json`), JSON.stringify({ mcpServers: servers }));
  const file = path.join(dir, `${name}.yaml`);
  writeFileSync(
    file,
    `tools:
  - class_name: verl.tools.mcp_base_tool.MCPBaseTool
    config: {${config}}
    mcp:
      mcp_servers_config_path: ${name}.json
${extra}`,
  );
  return file;
}

describe("MCP over stdio", () => {
  let registry: ToolRegistry;
  beforeAll(async () => {
    registry = await loadToolRegistry(writeConfig("stdio", { echo: { command: process.execPath, args: [ECHO_SERVER] } }));
  });
  afterAll(async () => registry.close());

  it("makes one tool per server tool, with OpenAI schemas from the input schemas", async () => {
    expect(registry.names().sort()).toEqual(["add", "echo", "fail", "slow"]);
    const add = registry.schemas().find((s) => (s["function"] as { name: string }).name === "add");
    expect(add).toEqual({
      type: "function",
      function: {
        name: "add",
        description: "Add two numbers",
        parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] },
      },
    });
  });

  it("joins text parts with spaces and gives step reward 0.0", async () => {
    const echo = await runToolCall(registry, { name: "echo", arguments: '{"text": "hi there"}' });
    expect(echo).toMatchObject({ text: "echo: hi there", reward: 0.0, metrics: { errorKind: null, tool: { server: "echo", isError: false } } });
    expect((await runToolCall(registry, { name: "add", arguments: { a: 2, b: 40 } })).text).toBe("42");
  });

  it("passes a tool's own error result through as text", async () => {
    const outcome = await runToolCall(registry, { name: "fail", arguments: "{}" });
    expect(outcome.text).toContain("fixture failure");
    expect(outcome.metrics.tool["isError"]).toBe(true);
  });

  it("answers verl's JSON failure text when the call itself fails (timeout)", async () => {
    const outcome = await runToolCall(registry, { name: "slow", arguments: "{}" });
    expect(outcome.text).toMatch(/^\{"result": "Tool execution failed: .*timed out.*"\}$/i);
    expect(outcome.reward).toBe(0.0);
    expect(outcome.metrics.tool["error"]).toMatch(/timed out/i);
  });
});

describe("MCP over streamable HTTP", () => {
  let httpServer: http.Server;
  let url = "";
  let registry: ToolRegistry;
  let sawAuth: string | undefined;

  beforeAll(async () => {
    httpServer = http.createServer(async (req, res) => {
      sawAuth = req.headers.authorization;
      // Stateless: a fresh server and transport per request, as the SDK recommends.
      const server = createEchoServer();
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
      res.on("close", () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((resolve) => httpServer.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(httpServer.address() as { port: number }).port}/mcp`;
    registry = await loadToolRegistry(writeConfig("http", { remote: { url, auth_token: "s3cret" } }, "      tool_selected_list: [echo]\n"));
  });
  afterAll(async () => {
    await registry.close();
    await new Promise<void>((resolve) => httpServer.close(() => resolve()));
  });

  it("keeps only the selected tools and sends the auth token", async () => {
    expect(registry.names()).toEqual(["echo"]);
    const outcome = await runToolCall(registry, { name: "echo", arguments: '{"text": "over http"}' });
    expect(outcome.text).toBe("echo: over http");
    expect(sawAuth).toBe("Bearer s3cret");
  });
});

describe("MCP config errors", () => {
  it("names a selected tool no server offers", async () => {
    const file = writeConfig("missing-tool", { echo: { command: process.execPath, args: [ECHO_SERVER] } }, "      tool_selected_list: [nope]\n");
    await expect(loadToolRegistry(file)).rejects.toThrow(/tool_selected_list: no MCP server offers nope/);
  });

  it("names a server that cannot be reached", async () => {
    const file = writeConfig("unreachable", { dead: { url: "http://127.0.0.1:9/mcp" } });
    const error = await loadToolRegistry(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as Error).message).toMatch(/cannot connect to MCP server "dead"/);
  });

  it("validates the servers file", async () => {
    const file = writeConfig("bad-servers", { broken: { args: ["x"] } });
    await expect(loadToolRegistry(file)).rejects.toThrow(/bad-servers\.json: mcpServers\.broken/);
  });

  it("refuses a non-MCP class with type mcp", async () => {
    const file = writeConfig("wrong-class", { echo: { command: process.execPath, args: [ECHO_SERVER] } });
    writeFileSync(file, (await import("node:fs")).readFileSync(file, "utf8").replace("verl.tools.mcp_base_tool.MCPBaseTool", "verl.tools.gsm8k_tool.Gsm8kTool"));
    await expect(loadToolRegistry(file)).rejects.toThrow(/is not an MCP tool class/);
  });
});

