/**
 * Tool YAML in verl's format (verl/tools/utils/tool_registry.py):
 *   tools:
 *     - class_name: "verl.tools.gsm8k_tool.Gsm8kTool"      # a built-in, or a JS module path (module dirs only)
 *       config: {type: native}                            # whole block goes to the tool; type native | mcp
 *       tool_schema: {type: function, function: {...}}    # native tools
 *       mcp: {mcp_servers_config_path, tool_selected_list} # mcp tools; schemas come from the servers
 * Every entry is validated; errors name the file and the key path (`tools.0.tool_schema.function.name`).
 */
import path from "node:path";
import { z } from "zod";
import { InputError } from "../errors.js";
import { formatIssues } from "../zod-issues.js";
import { readYamlFile } from "../data/yaml-file.js";
import { openAIFunctionToolSchema } from "./schema.js";
import { mcpBlockSchema } from "./mcp.js";

export const toolEntrySchema = z.object({
  class_name: z.string().min(1),
  config: z.looseObject({ type: z.enum(["native", "mcp"]) }),
  tool_schema: openAIFunctionToolSchema.nullish(),
  mcp: mcpBlockSchema.optional(),
});
export const toolsFileSchema = z.object({ tools: z.array(toolEntrySchema) });

export type ToolEntry = z.infer<typeof toolEntrySchema>;

export interface ToolsFile {
  file: string;
  entries: ToolEntry[];
}

export function parseToolsFile(raw: unknown, file: string): ToolsFile {
  const parsed = toolsFileSchema.safeParse(raw);
  if (!parsed.success) throw new InputError(`${file}: ${formatIssues(parsed.error, { only: "first" })}`);
  parsed.data.tools.forEach((entry, i) => {
    if (entry.config.type === "native" && !entry.tool_schema) {
      throw new InputError(`${file}: tools.${i}.tool_schema: required for a native tool`);
    }
    if (entry.config.type === "mcp" && !entry.mcp) {
      throw new InputError(`${file}: tools.${i}.mcp: required for an mcp tool (mcp_servers_config_path)`);
    }
  });
  return { file, entries: parsed.data.tools };
}

export async function readToolsFile(file: string): Promise<ToolsFile> {
  return parseToolsFile(await readYamlFile(file), file);
}

export const yamlDirOf = (file: string) => path.dirname(path.resolve(file));
