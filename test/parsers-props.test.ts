/**
 * Properties of every parser, over generated inputs: parsing never throws, whatever the model wrote (the rollout
 * must turn any output into data), and calls spelled in a format come back exactly, arguments included, from both
 * the text path and the token path.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { getParser, type ParseResult } from "../src/parsers/index.js";
import { CharVocab, SPELLINGS } from "./parsers-spellings.js";

function wellFormed(result: ParseResult): void {
  expect(typeof result.normalText).toBe("string");
  expect(typeof result.hasCallMarker).toBe("boolean");
  for (const call of result.calls) {
    expect(typeof call.name).toBe("string");
    expect(call.arguments !== null && typeof call.arguments === "object" && !Array.isArray(call.arguments)).toBe(true);
  }
  for (const error of result.errors) expect(typeof error.message).toBe("string");
}

/** Fragments that drive every parser into its corners: delimiters, brackets, quotes, separators, keywords. */
const FRAGMENTS = [
  ...new Set(SPELLINGS.flatMap((s) => s.delimiters)),
  "{", "}", "[", "]", "(", ")", '"', "'", "\\", ",", ";", ":", "=", " ", "\n", "```json", "```", "function",
  '"name"', '"arguments"', '"parameters"', "f", "x", "1", "-2.5e3", "True", "None", "null", "\\u00e9", "é", "🙂",
  "<|im_end|>", '{"name": "f", "arguments": ', "[f(a=", "<｜end▁of▁sentence｜>",
];

const modelOutput = fc.oneof(
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 40 }).map((parts) => parts.join("")),
);

const identifier = fc.stringMatching(/^[a-z_][a-z0-9_]{0,10}$/);
/** String values that often hold delimiters and brackets: the case that separates token-level from text parsing. */
const trickyString = fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 8 }).map((parts) => parts.join(""));
const argValue = fc.oneof(fc.jsonValue({ maxDepth: 3 }), trickyString, fc.array(trickyString, { maxLength: 3 }));
const argsObject = fc
  .dictionary(identifier, argValue, { maxKeys: 4 })
  .map((args) => JSON.parse(JSON.stringify(args)) as Record<string, unknown>);
const callSpecs = fc.array(fc.record({ name: identifier, args: argsObject }), { minLength: 1, maxLength: 3 });

/** Formats whose text path reads each call's JSON to its end, so delimiters inside strings cannot cut it. */
const TEXT_ROBUST = new Set(["qwen25", "hermes", "llama3", "mistral", "gpt-oss"]);

describe.each(SPELLINGS)("$format properties", (spelling) => {
  const parser = getParser(spelling.format);
  const vocab = new CharVocab(spelling.delimiters);

  it("parse never throws, on any text, with or without tools and truncation", () => {
    fc.assert(
      fc.property(modelOutput, fc.boolean(), fc.boolean(), (text, withTools, truncated) => {
        wellFormed(parser.parse(text, { tools: withTools ? ["f", "x"] : undefined, truncated }));
      }),
      { numRuns: 400 },
    );
  });

  it("parseTokens never throws, on any ids", () => {
    const id = fc.oneof(fc.integer({ min: 0, max: spelling.delimiters.length + 2 }), fc.integer({ min: 10_032, max: 10_126 }));
    fc.assert(
      fc.property(fc.array(id, { maxLength: 120 }), (ids) => wellFormed(parser.parseTokens(ids, vocab))),
      { numRuns: 300 },
    );
  });

  /** One call with its argument part wrapped as plain (ordinary-token) text, as a model would sample it. */
  function spellWithPlainArgs(name: string, args: Record<string, unknown>): string {
    const argsJson = JSON.stringify(args);
    const call = spelling.call(name, argsJson);
    const start = spelling.format === "pythonic" ? call.indexOf("(") + 1 : call.indexOf(argsJson);
    const end = spelling.format === "pythonic" ? call.lastIndexOf(")") : start + argsJson.length;
    return call.slice(0, start) + CharVocab.plain(call.slice(start, end)) + call.slice(end);
  }

  it("calls spelled in the format round-trip through the token path, delimiters inside strings included", () => {
    fc.assert(
      fc.property(callSpecs, (spec) => {
        const text = spelling.wrap(spec.map((c) => spellWithPlainArgs(c.name, c.args)));
        const result = parser.parseTokens(vocab.encode(CharVocab.plain("Before.\n") + text), vocab);
        expect(result.errors).toEqual([]);
        expect(result.calls.map((c) => ({ name: c.name, args: c.arguments }))).toEqual(spec);
        expect(result.normalText).toBe("Before.");
      }),
      { numRuns: 200 },
    );
  });

  it.runIf(TEXT_ROBUST.has(spelling.format))("round-trips through the text path too", () => {
    fc.assert(
      fc.property(callSpecs, (spec) => {
        const text = spelling.wrap(spec.map((c) => spelling.call(c.name, JSON.stringify(c.args))));
        const result = parser.parse(text);
        expect(result.errors).toEqual([]);
        expect(result.calls.map((c) => ({ name: c.name, args: c.arguments }))).toEqual(spec);
      }),
      { numRuns: 200 },
    );
  });
});
