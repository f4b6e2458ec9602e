/**
 * The reward of the CPU demo's vault task (data_source `agentrl/vault`, docs/cpu-demo.md). By default it is
 * correctness only: 1 when the final answer (the text after the last tool response) is exactly the vault's code, else 0,
 * so no reward is paid for format alone (a policy cannot farm it). With `shaped`
 * (custom_reward_function.reward_kwargs.shaped: true) it is the shaped reward below, in [0, 1]:
 *   0.5  a real `open_vault` call ran (the tool's step reward proves it: text alone cannot fake one) and the first
 *        turn was exactly that call (0.2 + the format credit when it ran amid other text), or else
 *        up to 0.24 of format credit for the pieces of a call in a short first turn (see vaultFormatCredit);
 * + 0.5  the final answer (the text after the last tool response) is exactly the vault's code.
 * The format credit is what lets a random-init policy find the call at all: a clean call is four specific tokens
 * (`<tool_call>`, body, `</tool_call>`, `<|im_end|>`) out of 64, too rare to stumble on, while its pieces are not.
 */
export const VAULT_CALL_CREDIT = 0.5;
/**
 * A call that ran amid junk (the parser accepts `<tool_call>` body `<tool_call>` and reports the rest as errors, whose
 * long observations eat the response budget before the answer turn) pays this plus the format credit, at most 0.42:
 * less than a clean call, and still steering toward one (the closing tag, a short turn).
 */
export const VAULT_MESSY_CALL_CREDIT = 0.2;
export const VAULT_FORMAT_STEP_CREDIT = 0.04;
/** The format credit shrinks linearly to 0 at this many tokens of first turn. */
export const VAULT_LENGTH_SCALE = 32;
export const VAULT_ANSWER_CREDIT = 0.5;

const CALL_OPEN = "<tool_call>";
const CALL_CLOSE = "</tool_call>";
const RESPONSE_OPEN = "<tool_response>";
const RESPONSE_CLOSE = "</tool_response>";

export interface VaultScore {
  /** Correctness only by default (1 or 0); the shaped reward with `shaped`. */
  score: number;
  calledTool: boolean;
  /** 0..0.24 (see vaultFormatCredit); it replaces the call credit only while no call ran. */
  formatCredit: number;
  answer: string;
  /** The final answer is the code: what the scorer reports as `acc`, in both modes. */
  correct: boolean;
}

export interface VaultScoreOptions {
  /** The shaped reward (call credit, format credit, answer credit) instead of correctness only. */
  shaped?: boolean;
  toolName?: string;
}

/**
 * Format credit of the first turn, 0..0.24: 0.04 for each of `<tool_call>`, the call body naming `toolName` and
 * `</tool_call>` that it contains, plus 0.04 per token of the longest run of the three in the right order and adjacent,
 * all scaled by how short the turn is (1 - tokens / 32).
 * Why this shape (each tried on the demo): a random policy almost never writes two of the pieces in a row (1 in 64 per
 * position) but often writes each somewhere, so the pieces pay separately; without the length factor the policy
 * fills the turn with pieces and never ends it, so no call is ever parsed; a call that actually runs pays more.
 */
export function vaultFormatCredit(firstTurn: string, toolName: string): number {
  const bodyText = `{"name": "${toolName}", "arguments": {}}`;
  const present = [CALL_OPEN, bodyText, CALL_CLOSE].filter((piece) => firstTurn.includes(piece)).length;
  const shortness = Math.max(0, 1 - demoTokenCount(firstTurn, bodyText) / VAULT_LENGTH_SCALE);
  return VAULT_FORMAT_STEP_CREDIT * (present + orderedCallRun(firstTurn, bodyText)) * shortness;
}

/** The longest run of `<tool_call>`, body, `</tool_call>` in this order and adjacent (whitespace allowed): 0..3. */
function orderedCallRun(text: string, bodyText: string): number {
  const body = new RegExp(`^\\s*${bodyText.replace(/[{}]/g, "\\$&")}\\s*`);
  let run = 0;
  for (let at = text.indexOf(CALL_OPEN); at >= 0 && run < 3; at = text.indexOf(CALL_OPEN, at + 1)) {
    const rest = text.slice(at + CALL_OPEN.length);
    const match = body.exec(rest);
    run = Math.max(run, !match ? 1 : rest.slice(match[0].length).startsWith(CALL_CLOSE) ? 3 : 2);
  }
  return run;
}

/** Tokens of `text` in the demo tokenizer: the call pieces are one token each, every other character one. */
function demoTokenCount(text: string, bodyText: string): number {
  let rest = text;
  let pieces = 0;
  for (const piece of [`\n${bodyText}\n`, CALL_OPEN, CALL_CLOSE, RESPONSE_OPEN, RESPONSE_CLOSE]) {
    const parts = rest.split(piece);
    pieces += parts.length - 1;
    rest = parts.join("");
  }
  return pieces + Array.from(rest).length;
}

/** Whether the first turn is exactly one well-formed call and nothing else (its observation then fits the budget). */
function isCleanCall(firstTurn: string, toolName: string): boolean {
  return firstTurn.trim() === `${CALL_OPEN}\n{"name": "${toolName}", "arguments": {}}\n${CALL_CLOSE}`;
}

/** The model's final answer: what follows the last tool response, without the template's `assistant` role line. */
export function vaultAnswer(responseText: string): string {
  const at = responseText.lastIndexOf(RESPONSE_CLOSE);
  const tail = at < 0 ? responseText : responseText.slice(at + RESPONSE_CLOSE.length).replace(/^\s*assistant\n/, "");
  return tail.trim();
}

/**
 * `responseText` is the decoded response with control tokens skipped (verl's solution_str), so `<tool_call>` and
 * `<tool_response>` (added, not special) are in it; `toolRewards` are the step rewards of the calls that ran.
 */
export function scoreVault(
  responseText: string,
  groundTruth: string,
  toolRewards: readonly number[],
  options: VaultScoreOptions = {},
): VaultScore {
  const toolName = options.toolName ?? "open_vault";
  const calledTool = toolRewards.some((r) => r > 0);
  // The first turn ends where the first tool response starts, less the template's `user` role line before it.
  const firstResponse = responseText.indexOf(RESPONSE_OPEN);
  const firstTurn = firstResponse < 0 ? responseText : responseText.slice(0, firstResponse).replace(/\s*user\s*$/, "");
  const formatCredit = vaultFormatCredit(firstTurn, toolName);
  const answer = vaultAnswer(responseText);
  const correct = answer === groundTruth.trim();
  const callPart = !calledTool
    ? formatCredit
    : isCleanCall(firstTurn, toolName) ? VAULT_CALL_CREDIT : VAULT_MESSY_CALL_CREDIT + formatCredit;
  const score = options.shaped ? callPart + (correct ? VAULT_ANSWER_CREDIT : 0) : correct ? 1 : 0;
  return { score, calledTool, formatCredit, answer, correct };
}
