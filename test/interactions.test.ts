// Interactions: verl's BaseInteraction and Gsm8kInteraction texts and scores, YAML loading and per-sample selection.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { InputError } from "../src/errors.js";
import {
  BaseInteraction,
  defaultInteractionName,
  Gsm8kInteraction,
  GSM8K_CORRECT_TEXT,
  GSM8K_INCORRECT_TEXT,
  loadInteractionRegistry,
} from "../src/interactions/index.js";
import { REPO_ROOT } from "./helpers/cli.js";
import { tempDir } from "./helpers/tmp.js";

const GSM8K_YAML = path.join(REPO_ROOT, "interaction-configs", "gsm8k_interaction_config.yaml");
const MODULES = path.join(REPO_ROOT, "test", "fixtures", "tool-modules");
const dir = tempDir("interactions-test");
let n = 0;
function yamlFile(text: string): string {
  const file = path.join(dir, `interaction-${n++}.yaml`);
  writeFileSync(file, text);
  return file;
}

describe("Gsm8kInteraction", () => {
  const kwargs = { name: "gsm8k", query: "q", ground_truth: "72" };

  it("has verl's exact texts", () => {
    expect(GSM8K_CORRECT_TEXT).toBe("Your response is correct!");
    expect(GSM8K_INCORRECT_TEXT).toBe("Your response is incorrect! You need to reflect on your answer and try again.");
  });

  it("scores the last assistant message with the strict scorer", async () => {
    const interaction = new Gsm8kInteraction({ name: "gsm8k" });
    const id = await interaction.startInteraction("req-1", kwargs);
    expect(id).toBe("req-1");
    const wrong = await interaction.generateResponse(id, [{ role: "user", content: "q" }, { role: "assistant", content: "#### 70" }], kwargs);
    expect(wrong).toEqual({ shouldTerminate: false, text: GSM8K_INCORRECT_TEXT, turnScore: 0.0, extra: {} });
    // strict: the bare number is not an answer, and a later user message does not hide the assistant turn.
    const bare = await interaction.generateResponse(
      id,
      [{ role: "assistant", content: "the answer is 72" }, { role: "user", content: "try again" }],
      kwargs,
    );
    expect(bare).toEqual({ shouldTerminate: false, text: GSM8K_INCORRECT_TEXT, turnScore: 0, extra: {} });
    const right = await interaction.generateResponse(
      id,
      [{ role: "assistant", content: "#### 70" }, { role: "user", content: GSM8K_INCORRECT_TEXT }, { role: "assistant", content: "so #### 72" }],
      kwargs,
    );
    expect(right).toEqual({ shouldTerminate: true, text: GSM8K_CORRECT_TEXT, turnScore: 1.0, extra: {} });
    expect(await interaction.calculateScore(id)).toBe(1.0);
    await interaction.finalizeInteraction(id);
    await expect(interaction.calculateScore(id)).rejects.toThrow(/unknown interaction instance/);
  });

  it("treats an assistant turn without content as empty text", async () => {
    const interaction = new Gsm8kInteraction({});
    const id = await interaction.startInteraction(undefined, kwargs);
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    const turn = await interaction.generateResponse(id, [{ role: "assistant", content: null, tool_calls: [] }], kwargs);
    expect(turn.turnScore).toBe(0);
  });
});

describe("BaseInteraction", () => {
  it("has verl's defaults", async () => {
    const base = new BaseInteraction({});
    expect(base.name).toBe("interaction_agent");
    const id = await base.startInteraction(undefined, {});
    expect(await base.generateResponse(id, [], {})).toEqual({
      shouldTerminate: false,
      text: "Your current result seems acceptable.",
      turnScore: 0.8,
      extra: {},
    });
    expect(await base.calculateScore(id)).toBe(0.0);
  });
});

describe("interaction YAML", () => {
  it("loads verl's gsm8k config unchanged and selects by interaction_kwargs.name", async () => {
    const registry = await loadInteractionRegistry(GSM8K_YAML);
    expect(registry.names()).toEqual(["gsm8k"]);
    const selected = registry.select({ name: "gsm8k", ground_truth: "1" });
    expect(selected).toBeInstanceOf(Gsm8kInteraction);
    expect(selected.name).toBe("gsm8k");
    expect(selected.config).toEqual({ name: "gsm8k" });
  });

  it("derives a missing name from the class name and injects it into config", async () => {
    expect(defaultInteractionName("verl.interactions.gsm8k_interaction.Gsm8kInteraction")).toBe("gsm8k");
    expect(defaultInteractionName("verl.interactions.base.BaseInteraction")).toBe("base");
    expect(defaultInteractionName("pkg.MyJudge")).toBe("myjudge");
    const registry = await loadInteractionRegistry(
      yamlFile(`interaction:
  - class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction
    config: {extra: 1}
  - class_name: verl.interactions.base.BaseInteraction
`),
    );
    expect(registry.names()).toEqual(["gsm8k", "base"]);
    expect(registry.get("gsm8k")?.config).toEqual({ extra: 1, name: "gsm8k" });
    expect(registry.get("base")?.name).toBe("base");
  });

  it("refuses selection without a name or with an unknown one, naming the row", async () => {
    const registry = await loadInteractionRegistry(GSM8K_YAML);
    expect(() => registry.select({ ground_truth: "1" }, "train.parquet row 3")).toThrow(InputError);
    expect(() => registry.select({ ground_truth: "1" }, "train.parquet row 3")).toThrow(
      /train\.parquet row 3: extra_info\.interaction_kwargs\.name is required/,
    );
    expect(() => registry.select(undefined)).toThrow(/interaction_kwargs\.name is required/);
    expect(() => registry.select({ name: "math" }, "row 9")).toThrow(/row 9: interaction "math" not found; available: gsm8k/);
  });

  const bad: Array<[string, string, RegExp]> = [
    [
      "duplicate names",
      `interaction:
  - {name: a, class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction}
  - {name: a, class_name: verl.interactions.base.BaseInteraction}
`,
      /interaction\.1: duplicate interaction name "a"/,
    ],
    [
      "duplicate derived names",
      `interaction:
  - {class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction}
  - {name: gsm8k, class_name: verl.interactions.gsm8k_interaction.Gsm8kInteraction}
`,
      /duplicate interaction name "gsm8k"/,
    ],
    ["unknown class_name", "interaction:\n  - {class_name: my.pkg.JudgeInteraction}\n", /interaction\.0\.class_name: unknown interaction class "my\.pkg\.JudgeInteraction"/],
    ["missing class_name", "interaction:\n  - {name: x}\n", /interaction\.0\.class_name: /],
    ["wrong name type", "interaction:\n  - {name: [1], class_name: verl.interactions.base.BaseInteraction}\n", /interaction\.0\.name: /],
    ["wrong config type", "interaction:\n  - {class_name: verl.interactions.base.BaseInteraction, config: 3}\n", /interaction\.0\.config: /],
    ["missing interaction key", "interactions: []\n", /interaction: /],
    ["module path without module dir", `interaction:\n  - {class_name: "${MODULES}/echo-interaction.mjs#EchoInteraction"}\n`, /no module directory is allowed/],
  ];
  it.each(bad)("names file and path for %s", async (_label, text, message) => {
    const file = yamlFile(text);
    const error = await loadInteractionRegistry(file).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputError);
    expect((error as Error).message).toContain(file);
    expect((error as Error).message).toMatch(message);
  });

  it("loads a user interaction from an allowed module directory", async () => {
    const registry = await loadInteractionRegistry(yamlFile(`interaction:\n  - {class_name: "${MODULES}/echo-interaction.mjs#EchoInteraction"}\n`), {
      moduleDirs: [MODULES],
    });
    expect(registry.names()).toEqual(["echo"]);
    const echo = registry.select({ name: "echo" });
    const id = await echo.startInteraction("r", {});
    expect(await echo.generateResponse(id, [{ role: "assistant", content: "hi" }], {})).toEqual({
      shouldTerminate: false,
      text: "you said: hi",
      turnScore: 0.1,
      extra: {},
    });
    expect((await echo.generateResponse(id, [{ role: "assistant", content: "bye" }], {})).shouldTerminate).toBe(true);
  });
});

