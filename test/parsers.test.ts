/**
 * Contract of the function-call parsers, checked for every format: all calls come back in order with their arguments
 * as objects, the text around them is kept, and every problem (malformed JSON, unknown tool, truncated output) is a
 * ParseError next to the calls that did parse, never a silent drop. The rollout feeds those errors back to the model;
 * a dropped call would instead look like a model that chose not to call a tool.
 */
import { describe, expect, it } from "vitest";
import { getParser, type ParseResult } from "../src/parsers/index.js";
import { CharVocab, SPELLINGS, unplain } from "./parsers-spellings.js";

const BEFORE = "Let me look that up.";
const AFTER = "I will wait for the results.";

function names(result: ParseResult): string[] {
  return result.calls.map((c) => c.name);
}

describe.each(SPELLINGS)("$format parser", (spelling) => {
  const parser = getParser(spelling.format);
  const weather = spelling.call("get_weather", '{"city": "Paris", "unit": "celsius"}');
  const time = spelling.call("get_time", '{"tz": "CET"}');

  it("parses several calls in order with the text before and after kept", () => {
    const text = `${BEFORE}\n${spelling.wrap([weather, time])}\n${AFTER}`;
    const result = parser.parse(text);
    expect(result.errors).toEqual([]);
    expect(result.calls).toEqual([
      { name: "get_weather", arguments: { city: "Paris", unit: "celsius" }, raw: expect.any(String) },
      { name: "get_time", arguments: { tz: "CET" }, raw: expect.any(String) },
    ]);
    expect(result.normalText).toBe(`${BEFORE}\n${AFTER}`);
    expect(result.hasCallMarker).toBe(true);
  });

  it("leaves text without calls alone", () => {
    const result = parser.parse(`  ${BEFORE}\nThe answer is 42.  `);
    expect(result).toEqual({ normalText: `${BEFORE}\nThe answer is 42.`, calls: [], errors: [], hasCallMarker: false });
  });

  it("reports a malformed call and keeps the calls around it", () => {
    const text = `${BEFORE}\n${spelling.wrap([weather, spelling.malformed("broken"), time])}`;
    const result = parser.parse(text);
    expect(names(result)).toEqual(["get_weather", "get_time"]);
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]?.kind).toBe("malformed_json");
    expect(result.errors[0]?.raw).toContain("broken");
    expect(result.normalText).toBe(BEFORE);
  });

  it("reports a call to a tool not offered, with its name, and keeps the known ones", () => {
    const text = spelling.wrap([spelling.call("rm_rf", '{"path": "/"}'), weather]);
    const result = parser.parse(text, { tools: ["get_weather", "get_time"] });
    expect(names(result)).toEqual(["get_weather"]);
    expect(result.errors).toEqual([
      { kind: "unknown_tool", name: "rm_rf", message: expect.stringContaining("rm_rf"), raw: expect.any(String) },
    ]);
    // Without a tool list every name is accepted.
    expect(names(parser.parse(text))).toEqual(["rm_rf", "get_weather"]);
  });

  it.skipIf(spelling.format === "pythonic")("decodes arguments given as a JSON string", () => {
    const asString = JSON.stringify(JSON.stringify({ city: "Paris", days: [1, 2] }));
    const result = parser.parse(spelling.wrap([spelling.call("get_weather", asString)]));
    expect(result.errors).toEqual([]);
    expect(result.calls[0]?.arguments).toEqual({ city: "Paris", days: [1, 2] });
  });

  it.skipIf(spelling.format === "pythonic")("reports arguments that are not an object", () => {
    const result = parser.parse(spelling.wrap([spelling.call("f", "[1, 2]"), spelling.call("g", '"not json"')]));
    expect(result.calls).toEqual([]);
    expect(result.errors.map((e) => [e.kind, e.name])).toEqual([
      ["invalid_arguments", "f"],
      ["malformed_json", "g"],
    ]);
  });

  it("keeps nested JSON and unicode intact", () => {
    const args = {
      query: { filters: [{ field: "city", in: ["Zürich", "東京", "Москва"] }], nested: { deep: { deeper: [[1], [2, { x: null }]] } } },
      note: "emoji 🙂, quotes \" and braces {[()]} and a backslash \\",
      flag: false,
      ratio: 0.25,
    };
    const result = parser.parse(`${BEFORE} ☕\n${spelling.wrap([spelling.call("search", JSON.stringify(args))])}`);
    expect(result.errors).toEqual([]);
    expect(result.calls).toHaveLength(1);
    expect(result.calls[0]?.arguments).toEqual(args);
    expect(result.normalText).toBe(`${BEFORE} ☕`);
  });

  it("survives arguments nested 100,000 levels deep (no stack overflow)", () => {
    const n = 100_000;
    const deep = `${"[".repeat(n)}${"]".repeat(n)}`;
    const text =
      spelling.format === "pythonic"
        ? `[f(a=${deep}), g(b=1)]`
        : spelling.wrap([spelling.call("f", `{"a": ${deep}}`), spelling.call("g", '{"b": 1}')]);
    const result = parser.parse(text);
    expect(result.calls.map((c) => c.name)).toContain("g");
    expect(result.calls.length + result.errors.length).toBe(2);
  });

  it("reports an output cut off inside the last call as truncated and keeps the earlier ones", () => {
    const last = spelling.call("get_weather", '{"city": "Reykjavik", "unit": "kelvin"}');
    const full = `${BEFORE}\n${spelling.wrap([time, last])}`;
    const text = full.slice(0, full.indexOf("Reykjavik") + 4);
    const result = parser.parse(text, { truncated: true });
    expect(names(result)).toEqual(["get_time"]);
    expect(result.errors).toHaveLength(1);
    expect(result.errors[0]?.kind).toBe("truncated");
    expect(result.errors[0]?.raw).toContain("Reyk");
    expect(result.normalText).toBe(BEFORE);
    // The cut is recognised from the text alone too.
    expect(parser.parse(text).errors.map((e) => e.kind)).toEqual(["truncated"]);
  });

  it("takes a literal <tool_call> and </tool_call> inside an argument string as text", () => {
    const code = 'print("<tool_call>{\\"name\\": \\"x\\"}</tool_call>")';
    const result = parser.parse(spelling.wrap([spelling.call("run_python", JSON.stringify({ code })), time]));
    expect(result.errors).toEqual([]);
    expect(result.calls.map((c) => c.arguments)).toEqual([{ code }, { tz: "CET" }]);
  });

  it("at token level, its own delimiters spelled inside an argument string are not delimiters", () => {
    const vocab = new CharVocab(spelling.delimiters);
    // Placeholders survive JSON and Python quoting; they become plain (non-special) spellings afterwards.
    const inside = spelling.delimiters.map((_, i) => `@@${i}@@`).join(" and ");
    let spelled = spelling.wrap([spelling.call("echo", JSON.stringify({ text: `see ${inside}` })), time]);
    spelling.delimiters.forEach((d, i) => (spelled = spelled.replace(`@@${i}@@`, CharVocab.plain(d))));
    const ids = vocab.encode(`${BEFORE}\n${spelled}\n${AFTER}`);
    const result = parser.parseTokens(ids, vocab);
    expect(result.errors).toEqual([]);
    const expectedText = `see ${spelling.delimiters.join(" and ")}`;
    expect(result.calls.map((c) => c.arguments)).toEqual([{ text: expectedText }, { tz: "CET" }]);
    expect(result.normalText).toBe(`${BEFORE}\n${AFTER}`);
  });

  it("at token level, the same ordinary output parses as it does from text", () => {
    const vocab = new CharVocab(spelling.delimiters);
    const text = `${BEFORE}\n${spelling.wrap([weather, spelling.malformed("bad"), time])}\n${AFTER}`;
    expect(parser.parseTokens(vocab.encode(text), vocab)).toEqual(parser.parse(text));
  });

  it("at token level, delimiters that exist only as plain text are not calls", () => {
    const vocab = new CharVocab(spelling.delimiters);
    const text = CharVocab.plain(`${BEFORE}\n${spelling.wrap([weather])}`);
    const result = parser.parseTokens(vocab.encode(text), vocab);
    if (spelling.format === "pythonic" || spelling.format === "llama3") {
      // These formats are also recognised without any special token (a bare call list / a bare {"name" object
      // at the start); the call parses the same.
      expect(names(result)).toEqual(spelling.format === "pythonic" ? ["get_weather"] : []);
    } else {
      expect(result.calls).toEqual([]);
      expect(result.hasCallMarker).toBe(false);
      expect(result.normalText).toBe(unplain(text));
    }
  });
});

describe("pythonic: an argument named __proto__", () => {
  it("is kept as an argument, not taken as the object's prototype (found by fast-check)", async () => {
    const { getParser } = await import("../src/parsers/index.js");
    const result = getParser("pythonic").parse('[a(__proto__="")]');
    expect(result.errors).toEqual([]);
    expect(Object.keys(result.calls[0]!.arguments)).toEqual(["__proto__"]);
    expect(Object.getOwnPropertyDescriptor(result.calls[0]!.arguments, "__proto__")?.value).toBe("");
  });
});
