/**
 * `agentrl doctor`'s checklist: runs every check and collects the results. Checks that need the server are skipped,
 * not failed again, when the server does not answer; the template and format checks need only the local folder.
 */
import path from "node:path";
import { loadChatModel, type ChatModel, type ToolSchema } from "../chat/index.js";
import { loadToolRegistry } from "../tools/index.js";
import { checkContext, checkGenerate, checkLora, checkServer, checkTokenizer, checkWeightUpdate, skipped } from "./server-checks.js";
import { checkTemplateAndFormat } from "./template-checks.js";
import type { CheckResult, DoctorOptions, DoctorReport } from "./types.js";

export async function loadToolSchemas(file: string): Promise<ToolSchema[]> {
  // The same rule as rollout and train (src/rollout/setup.ts): tool modules load from the YAML's own folder only.
  const registry = await loadToolRegistry(file, { moduleDirs: [path.dirname(path.resolve(file))] });
  try {
    return registry.schemas();
  } finally {
    await registry.close();
  }
}

export async function runDoctor(options: DoctorOptions, loaded: { model?: ChatModel; tools?: ToolSchema[] } = {}): Promise<DoctorReport> {
  // Bad local inputs (a missing model folder, a broken tool YAML) are the user's to fix: they throw InputError.
  const model = loaded.model ?? (await loadChatModel(options.model));
  const tools = loaded.tools ?? (options.toolsFile ? await loadToolSchemas(options.toolsFile) : []);

  const checks: CheckResult[] = [];
  const server = await checkServer(options);
  checks.push(server.result);
  if (server.facts) {
    checks.push(await checkTokenizer(options, model, server.facts));
    checks.push(await checkGenerate(options, model));
  } else {
    checks.push(skipped("tokenizer", "the server does not answer"), skipped("generate", "the server does not answer"));
  }
  const local = checkTemplateAndFormat(model, tools, options.format, options.templateKwargs ?? {});
  checks.push(local.template, local.format);
  if (server.facts) {
    checks.push(await checkWeightUpdate(options));
    checks.push(checkContext(options, server.facts));
    if (options.loraRank) checks.push(await checkLora(options, server.facts));
  } else {
    checks.push(skipped("weights", "the server does not answer"), skipped("context", "the server does not answer"));
  }
  return { server: options.server, model: options.model, checks, ok: checks.every((check) => check.status !== "fail") };
}
