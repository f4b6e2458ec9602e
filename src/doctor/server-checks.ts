/**
 * The checks that ask the server: it answers; its model is the local tokenizer's; /generate with input_ids returns
 * untrimmed output_ids (EOS included) with aligned logprobs; the weight-update endpoint exists; its context length
 * covers the budgets. Every answer is validated with zod and judged here; nothing is retried.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { z } from "zod";
import { loadChatModel, type ChatModel } from "../chat/index.js";
import { formatIssues } from "../zod-issues.js";
import { request, serverMessage, type HttpAnswer } from "./http.js";
import type { CheckResult, DoctorOptions } from "./types.js";

const modelInfoSchema = z.looseObject({
  model_path: z.string(),
  tokenizer_path: z.string().nullable().optional(),
  weight_version: z.string().nullable().optional(),
});
const serverInfoSchema = z.looseObject({
  context_length: z.number().int().positive().nullable().optional(),
  version: z.string().optional(),
  enable_memory_saver: z.boolean().optional(),
  enable_lora: z.boolean().nullable().optional(),
  max_lora_rank: z.number().int().nullable().optional(),
});
const modelsSchema = z.looseObject({ data: z.array(z.looseObject({ max_model_len: z.number().int().positive().nullable().optional() })) });
const finishSchema = z.union([
  z.looseObject({ type: z.literal("stop"), matched: z.union([z.number(), z.string(), z.null()]) }),
  z.looseObject({ type: z.literal("length"), length: z.number().optional() }),
  z.looseObject({ type: z.literal("abort"), message: z.string().optional() }),
]);
const generateSchema = z.looseObject({
  output_ids: z.array(z.number().int()),
  meta_info: z.looseObject({
    finish_reason: finishSchema,
    output_token_logprobs: z.array(z.tuple([z.number().nullable(), z.number().int()]).rest(z.unknown())).optional(),
  }),
});

/** What the server said about itself, gathered once by checkServer and read by the later checks. */
export interface ServerFacts {
  modelInfo: z.infer<typeof modelInfoSchema>;
  serverInfo: z.infer<typeof serverInfoSchema> | undefined;
  contextLength: number | undefined;
}

const title = {
  server: "server answers (/health, /model_info)",
  tokenizer: "server model matches the local tokenizer",
  generate: "/generate: output_ids keep the EOS, logprobs aligned",
  weights: "weight-update endpoint exists",
  context: "context length covers prompt + response budgets",
  lora: "takes LoRA adapters (/load_lora_adapter, lora_path)",
};

function timeout(options: DoctorOptions): number {
  return options.requestTimeoutMs ?? 60_000;
}

function unreachable(answer: Extract<HttpAnswer, { ok: false }>, server: string): string {
  return `${server} does not answer: ${answer.error}`;
}

export async function checkServer(options: DoctorOptions): Promise<{ result: CheckResult; facts?: ServerFacts }> {
  const http = { apiKey: options.apiKey, timeoutMs: timeout(options) };
  const health = await request(options.server, "GET", "/health", http);
  if (!health.ok) {
    return {
      result: {
        id: "server",
        title: title.server,
        status: "fail",
        detail: unreachable(health, options.server),
        hint: "start one with 'agentrl serve --engine embedded|sglang --model DIR', or check --server",
      },
    };
  }
  if (health.status !== 200) {
    return {
      result: { id: "server", title: title.server, status: "fail", detail: `/health answered ${health.status}: the server is starting, shutting down or unhealthy`, hint: "wait for start-up to finish, then run doctor again" },
    };
  }
  let info = await request(options.server, "GET", "/model_info", http);
  if (info.ok && info.status === 404) info = await request(options.server, "GET", "/get_model_info", http);
  if (!info.ok || info.status !== 200) {
    const why = !info.ok ? info.error : info.status === 401 ? "401 Unauthorized" : `${info.status}: ${serverMessage(info)}`;
    return {
      result: {
        id: "server",
        title: title.server,
        status: "fail",
        detail: `/model_info failed: ${why}`,
        ...(info.ok && info.status === 401 ? { hint: "set SGLANG_API_KEY (or --api-key) to the server's --api-key" } : {}),
      },
    };
  }
  const modelInfo = modelInfoSchema.safeParse(info.json);
  if (!modelInfo.success) {
    return { result: { id: "server", title: title.server, status: "fail", detail: `/model_info is not SGLang's shape at ${formatIssues(modelInfo.error, { only: "first" })}` } };
  }
  const serverAnswer = await request(options.server, "GET", "/server_info", http);
  const serverInfo = serverAnswer.ok && serverAnswer.status === 200 ? serverInfoSchema.safeParse(serverAnswer.json) : undefined;
  let contextLength = serverInfo?.success ? (serverInfo.data.context_length ?? undefined) : undefined;
  if (contextLength === undefined) {
    const models = await request(options.server, "GET", "/v1/models", http);
    const parsed = models.ok && models.status === 200 ? modelsSchema.safeParse(models.json) : undefined;
    contextLength = parsed?.success ? (parsed.data.data[0]?.max_model_len ?? undefined) : undefined;
  }
  const facts: ServerFacts = { modelInfo: modelInfo.data, serverInfo: serverInfo?.success ? serverInfo.data : undefined, contextLength };
  const version = facts.serverInfo?.version ? `, version ${facts.serverInfo.version}` : "";
  return {
    result: {
      id: "server",
      title: title.server,
      status: "pass",
      detail: `serving ${modelInfo.data.model_path} (weight version ${modelInfo.data.weight_version ?? "?"}${version})`,
    },
    facts,
  };
}

function sameSet(a: Iterable<number | string>, b: Iterable<number | string>): boolean {
  const left = new Set(a);
  const right = new Set(b);
  return left.size === right.size && [...left].every((x) => right.has(x));
}

function describeIds(model: ChatModel, ids: readonly number[]): string {
  return ids.map((id) => `${JSON.stringify(model.idToToken(id) ?? "?")} (${id})`).join(", ");
}

/**
 * Compares the server's tokenizer files with the local ones when the server's tokenizer path can be read here (the
 * usual single-node case), and always probes /generate with the local tokenizer's largest id, which a server with a
 * smaller vocabulary rejects.
 */
export async function checkTokenizer(options: DoctorOptions, local: ChatModel, facts: ServerFacts): Promise<CheckResult> {
  const base = { id: "tokenizer", title: title.tokenizer };
  const serverPath = facts.modelInfo.tokenizer_path ?? facts.modelInfo.model_path;
  const problems: string[] = [];
  let compared = false;
  if (path.resolve(serverPath) === path.resolve(local.dir)) {
    compared = true;
  } else if (existsSync(path.join(serverPath, "tokenizer.json"))) {
    compared = true;
    try {
      const remote = await loadChatModel(serverPath);
      if (remote.vocabSize !== local.vocabSize) problems.push(`vocabulary size ${remote.vocabSize} on the server vs ${local.vocabSize} here`);
      if (!sameSet(remote.eosTokenIds, local.eosTokenIds)) {
        problems.push(`EOS ids ${describeIds(remote, remote.eosTokenIds)} on the server vs ${describeIds(local, local.eosTokenIds)} here`);
      }
      const remoteAdded = remote.addedTokens();
      const localAdded = local.addedTokens();
      if (!sameSet(remoteAdded, localAdded)) {
        const onlyRemote = remoteAdded.filter((t) => !localAdded.includes(t)).slice(0, 5);
        const onlyLocal = localAdded.filter((t) => !remoteAdded.includes(t)).slice(0, 5);
        problems.push(`special tokens differ (server only: ${JSON.stringify(onlyRemote)}, local only: ${JSON.stringify(onlyLocal)})`);
      } else {
        const moved = localAdded.filter((t) => remote.tokenToId(t) !== local.tokenToId(t)).slice(0, 5);
        if (moved.length > 0) problems.push(`special tokens have other ids on the server: ${JSON.stringify(moved)}`);
      }
    } catch (err) {
      problems.push(`the server's tokenizer at ${serverPath} cannot be loaded here: ${(err as Error).message}`);
    }
  }

  // A prompt of the local tokenizer's largest id: SGLang (and the embedded engine) refuse ids outside the vocabulary.
  const probe = await request(options.server, "POST", "/generate", {
    apiKey: options.apiKey,
    timeoutMs: timeout(options),
    body: { input_ids: [local.vocabSize - 1], sampling_params: { max_new_tokens: 1, temperature: 0 } },
  });
  if (probe.ok && probe.status === 400) {
    problems.push(`the server rejects token id ${local.vocabSize - 1}, the local tokenizer's largest: ${serverMessage(probe)}`);
  }

  if (problems.length > 0) {
    return {
      ...base,
      status: "fail",
      detail: `the server's model (${serverPath}) does not match the local tokenizer (${local.dir}): ${problems.join("; ")}`,
      hint: "pass --model with the folder the server was started from; rollouts would train on wrong tokens",
    };
  }
  if (!compared) {
    return {
      ...base,
      status: "warn",
      detail: `the server's tokenizer (${serverPath}) is not a folder readable here, so only the vocabulary size was probed; the EOS is checked by /generate below`,
      hint: "run doctor on the server's machine to compare the tokenizer files",
    };
  }
  return {
    ...base,
    status: "pass",
    detail: `vocabulary ${local.vocabSize}, EOS ${describeIds(local, local.eosTokenIds)}, ${local.addedTokens().length} special tokens agree`,
  };
}

type GenerateOutcome =
  | { kind: "answer"; outputIds: number[]; logprobs: (number | null)[] | undefined; finish: z.infer<typeof finishSchema> }
  | { kind: "problem"; detail: string };

async function generateOnce(options: DoctorOptions, inputIds: number[], sampling: Record<string, unknown>): Promise<GenerateOutcome> {
  const answer = await request(options.server, "POST", "/generate", {
    apiKey: options.apiKey,
    timeoutMs: timeout(options),
    body: {
      input_ids: inputIds,
      sampling_params: { temperature: 0, skip_special_tokens: false, ...sampling },
      return_logprob: true,
    },
  });
  if (!answer.ok) return { kind: "problem", detail: `/generate did not answer: ${answer.error}` };
  if (answer.status !== 200) return { kind: "problem", detail: `/generate answered ${answer.status}: ${serverMessage(answer)}` };
  const parsed = generateSchema.safeParse(answer.json);
  if (!parsed.success) {
    return { kind: "problem", detail: `/generate's answer is not SGLang's shape at ${formatIssues(parsed.error, { only: "first" })}` };
  }
  const meta = parsed.data.meta_info;
  return {
    kind: "answer",
    outputIds: parsed.data.output_ids,
    logprobs: meta.output_token_logprobs?.map((entry) => entry[0]),
    finish: meta.finish_reason,
  };
}

function logprobProblem(outcome: Extract<GenerateOutcome, { kind: "answer" }>): string | undefined {
  if (outcome.logprobs === undefined) return "meta_info has no output_token_logprobs although return_logprob was true";
  if (outcome.logprobs.length !== outcome.outputIds.length) {
    return `${outcome.logprobs.length} logprobs for ${outcome.outputIds.length} output_ids`;
  }
  const bad = outcome.logprobs.findIndex((lp) => typeof lp !== "number" || !Number.isFinite(lp) || lp > 1e-6);
  return bad >= 0 ? `logprob ${bad} is ${outcome.logprobs[bad]}, not a log-probability` : undefined;
}

export async function checkGenerate(options: DoctorOptions, local: ChatModel): Promise<CheckResult> {
  const base = { id: "generate", title: title.generate };
  const maxNew = options.probeTokens ?? 32;
  const prompt = local.encode(
    local.render([{ role: "user", content: "Say hello in one word." }], { addGenerationPrompt: true, templateKwargs: options.templateKwargs ?? {} }),
  );
  const first = await generateOnce(options, prompt, { max_new_tokens: maxNew });
  if (first.kind === "problem") return { ...base, status: "fail", detail: first.detail };
  const lp = logprobProblem(first);
  if (lp) return { ...base, status: "fail", detail: lp, hint: "RL needs the sampling logprobs; the server must honour return_logprob" };
  const beyond = first.outputIds.filter((id) => id >= local.vocabSize);
  const beyondNote = beyond.length > 0 ? `; ${beyond.length} sampled ids are beyond the local vocabulary (embedding padding: an untrained model?)` : "";

  if (first.finish.type === "stop") {
    const matched = first.finish.matched;
    const last = first.outputIds.at(-1);
    if (typeof matched === "number") {
      if (last !== matched) {
        return {
          ...base,
          status: "fail",
          detail: `finished on stop token ${matched} but output_ids end with ${last}: the server trims the EOS, so the loss mask would miss it`,
        };
      }
      if (!local.endsTurn(matched)) {
        return {
          ...base,
          status: "fail",
          detail:
            `the server stopped on token ${JSON.stringify(local.idToToken(matched) ?? "?")} (${matched}), which the local tokenizer does not ` +
            `end a turn with (EOS ${describeIds(local, local.eosTokenIds)}): the server runs another model or generation_config`,
          hint: "pass --model with the folder the server was started from",
        };
      }
      return {
        ...base,
        status: "pass",
        detail: `${first.outputIds.length} tokens ending with ${JSON.stringify(local.idToToken(matched))} (${matched}), kept in output_ids; ${first.outputIds.length} logprobs${beyondNote}`,
      };
    }
    return { ...base, status: "warn", detail: `finished on a stop string ${JSON.stringify(matched)} the doctor did not send${beyondNote}` };
  }
  if (first.finish.type === "abort") {
    return { ...base, status: "fail", detail: `the request was aborted: ${first.finish.message ?? "(no message)"}` };
  }

  // No EOS within the budget (a random or base model): check with an explicit stop token that it stays in output_ids.
  const stopId = first.outputIds[0];
  if (stopId === undefined) return { ...base, status: "fail", detail: "finished with 'length' but returned no output_ids" };
  const second = await generateOnce(options, prompt, { max_new_tokens: 4, stop_token_ids: [stopId] });
  if (second.kind === "problem") return { ...base, status: "fail", detail: `with stop_token_ids: ${second.detail}` };
  if (second.finish.type !== "stop" || second.outputIds.at(-1) !== stopId) {
    return {
      ...base,
      status: "fail",
      detail: `stop_token_ids [${stopId}] gave finish ${JSON.stringify(second.finish)} and output_ids ${JSON.stringify(second.outputIds)}: the stop token must be the last output id`,
    };
  }
  return {
    ...base,
    status: "warn",
    detail:
      `no EOS within ${maxNew} tokens (finish 'length'), so the server's EOS was not seen; a stop token is kept at the end of ` +
      `output_ids and ${first.outputIds.length} logprobs are aligned${beyondNote}`,
    hint: "expected for an untrained model; with a real model the output should end with its EOS",
  };
}

export async function checkWeightUpdate(options: DoctorOptions): Promise<CheckResult> {
  const base = { id: "weights", title: title.weights };
  // A body without model_path is refused before any weights are touched: SGLang's request validation answers 400.
  const answer = await request(options.server, "POST", "/update_weights_from_disk", {
    apiKey: options.apiKey,
    timeoutMs: timeout(options),
    body: {},
  });
  if (!answer.ok) return { ...base, status: "fail", detail: `/update_weights_from_disk did not answer: ${answer.error}` };
  if (answer.status === 404 || answer.status === 405) {
    return {
      ...base,
      status: "fail",
      detail: `/update_weights_from_disk answered ${answer.status}: training could not push new weights to this server`,
      hint: "the sglang router does not route it: give doctor (and train) a worker URL",
    };
  }
  if (answer.status === 401) return { ...base, status: "fail", detail: "401 Unauthorized", hint: "set SGLANG_API_KEY to the server's --api-key" };
  if (answer.status === 400 || answer.status === 422) {
    return { ...base, status: "pass", detail: `a probe without model_path was refused with ${answer.status} (nothing reloaded): the endpoint exists` };
  }
  return { ...base, status: "warn", detail: `a probe without model_path answered ${answer.status}: ${serverMessage(answer)}` };
}

/**
 * A LoRA run without lora.merge loads each step's adapter: the server must run with --enable-lora, allow the rank, and
 * serve /load_lora_adapter (a GET answers 405 where the POST route exists, 404 where it does not).
 */
export async function checkLora(options: DoctorOptions, facts: ServerFacts): Promise<CheckResult> {
  const base = { id: "lora", title: title.lora };
  const rank = options.loraRank!;
  const hint = `start the server with --enable-lora --max-lora-rank ${rank} (agentrl serve --lora-rank ${rank}), or set actor_rollout_ref.model.lora.merge=true`;
  if (facts.serverInfo?.enable_lora !== true) {
    return { ...base, status: "fail", detail: "the server does not report enable_lora in /server_info: it cannot load the adapter each step syncs", hint };
  }
  const maxRank = facts.serverInfo.max_lora_rank;
  if (typeof maxRank === "number" && maxRank < rank) {
    return { ...base, status: "fail", detail: `the server's max_lora_rank ${maxRank} < lora_rank ${rank}`, hint };
  }
  const answer = await request(options.server, "GET", "/load_lora_adapter", { apiKey: options.apiKey, timeoutMs: timeout(options) });
  if (!answer.ok || answer.status === 404) {
    return { ...base, status: "fail", detail: `/load_lora_adapter is not served (${answer.ok ? answer.status : answer.error})`, hint };
  }
  return { ...base, status: "pass", detail: `enable_lora, max_lora_rank ${maxRank ?? "unreported"} ≥ ${rank}, /load_lora_adapter served` };
}

export function checkContext(options: DoctorOptions, facts: ServerFacts): CheckResult {
  const base = { id: "context", title: title.context };
  const need = options.maxPromptLength + options.maxResponseLength;
  const budgets = `${options.maxPromptLength} prompt + ${options.maxResponseLength} response = ${need} tokens (${options.budgetSource})`;
  if (facts.contextLength === undefined) {
    return { ...base, status: "warn", detail: `the server reports no context_length (/server_info, /v1/models); budgets ${budgets}` };
  }
  if (facts.contextLength < need) {
    return {
      ...base,
      status: "fail",
      detail: `context length ${facts.contextLength} < ${budgets}: long trajectories would fail with a 400 mid-rollout`,
      hint: "lower data.max_prompt_length / data.max_response_length, or start the server with a larger --context-length",
    };
  }
  return { ...base, status: "pass", detail: `context length ${facts.contextLength} ≥ ${budgets}` };
}

export function skipped(id: keyof typeof title, why: string): CheckResult {
  return { id, title: title[id], status: "skip", detail: why };
}
