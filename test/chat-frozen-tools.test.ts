/**
 * A run's tool schemas go into every prompt the template renders, so they are frozen once (freezeTemplateValue) and the
 * `tojson` filter prints a frozen value once: the rendered text is the same as with plain, unfrozen schemas, and
 * nothing that is not plain data (or holds something that is not) is frozen or cached.
 */
import { describe, expect, it } from "vitest";
import { loadChatModel } from "../src/chat/index.js";
import { freezeTemplateValue } from "../src/chat/jinja-values.js";
import { rolloutSchema } from "../src/rollout/config.js";
import { loadRolloutParts } from "../src/rollout/setup.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";
import { GSM8K_TOOLS } from "./helpers/rollout-run.js";

const schema = () => ({
  type: "function",
  function: {
    name: "calc",
    description: "Adds two numbers.",
    parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number", enum: [1, 2] } }, required: ["a", "b"] },
  },
});

describe("freezeTemplateValue", () => {
  it("freezes plain data at every depth and returns the same value", () => {
    const value = schema();
    expect(freezeTemplateValue(value)).toBe(value);
    expect(Object.isFrozen(value)).toBe(true);
    expect(Object.isFrozen(value.function.parameters.properties.b.enum)).toBe(true);
  });

  it("leaves a value that contains itself (as a YAML alias can build) unfrozen instead of recursing forever", () => {
    const value: Record<string, unknown> = { name: "calc", parameters: { type: "object" } };
    (value.parameters as Record<string, unknown>).self = value;
    expect(freezeTemplateValue(value)).toBe(value);
    expect(Object.isFrozen(value)).toBe(false);
    expect(Object.isFrozen(value.parameters)).toBe(false);
  });

  it("leaves alone a value holding something that is not plain data, and the plain parts beside it stay frozen", () => {
    class Custom {
      x = 1;
    }
    const value = { plain: { a: [1, 2] }, custom: new Custom() };
    freezeTemplateValue(value);
    expect(Object.isFrozen(value)).toBe(false);
    expect(Object.isFrozen(value.custom)).toBe(false);
    expect(Object.isFrozen(value.plain)).toBe(true);
  });

  it("renders frozen tool schemas exactly as unfrozen ones, render after render", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const messages = (i: number) => [
      { role: "system", content: "Use the tool." },
      { role: "user", content: `What is ${i} + ${i}?` },
    ];
    const frozen = freezeTemplateValue([schema()]);
    for (let i = 0; i < 5; i++) {
      const plain = model.renderOnce(messages(i), { tools: [schema()], addGenerationPrompt: true });
      expect(model.renderOnce(messages(i), { tools: frozen, addGenerationPrompt: true })).toBe(plain);
    }
    expect(model.renderOnce(messages(0), { tools: frozen })).toContain('"enum": [1, 2]');
  });
});

it("a rollout's tool schemas are frozen once for the run", async () => {
  const rollout = rolloutSchema.parse({ multi_turn: { tool_config_path: GSM8K_TOOLS, format: "qwen25" } });
  const parts = await loadRolloutParts({ modelPath: QWEN3_DIR, rollout, rewardModulePath: null });
  try {
    expect(parts.toolSchemas.length).toBeGreaterThan(0);
    expect(Object.isFrozen(parts.toolSchemas)).toBe(true);
    const first = parts.toolSchemas[0] as { function: { parameters: object } };
    expect(Object.isFrozen(first.function.parameters)).toBe(true);
  } finally {
    await parts.close();
  }
});

describe("the gateway's tool lists", () => {
  it("one frozen list per exact JSON text: equal lists share it, a list in another key order keeps its own", async () => {
    const { frozenToolList } = await import("../src/gateway/session.js");
    const first = frozenToolList([schema()]);
    expect(Object.isFrozen(first[0]!.function)).toBe(true);
    expect(frozenToolList([schema()])).toBe(first);
    const reordered = [{ function: schema().function, type: "function" }];
    const other = frozenToolList(reordered);
    expect(other).not.toBe(first);
    expect(JSON.stringify(other)).toBe(JSON.stringify(reordered));
  });
});
