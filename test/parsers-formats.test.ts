/**
 * Per-format behaviour beyond the shared contract of parsers.test.ts: the layouts each format allows, and each place
 * where agentrl deliberately does better than SGLang (docs/parsers.md lists them). Expected values come from the
 * format descriptions in ../shared/reference/sglang.md §4.
 */
import { describe, expect, it } from "vitest";
import { InputError } from "../src/errors.js";
import { detectParserFormat, getParser, PARSER_FORMATS } from "../src/parsers/index.js";
import { CharVocab, DS, HARMONY as H } from "./parsers-spellings.js";

const kinds = (errors: { kind: string }[]): string[] => errors.map((e) => e.kind);

describe("qwen25 / hermes", () => {
  const qwen = getParser("qwen25");
  it("accepts blocks without the newlines Qwen writes (SGLang's qwen25 would not)", () => {
    const r = qwen.parse('<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>');
    expect(r.calls).toEqual([{ name: "f", arguments: { a: 1 }, raw: '{"name": "f", "arguments": {"a": 1}}' }]);
  });

  it("reads a JSON array of calls in one block, and `parameters` in place of `arguments`", () => {
    const r = qwen.parse('<tool_call>\n[{"name": "f", "parameters": {"a": 1}}, {"name": "g"}]\n</tool_call>');
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([
      ["f", { a: 1 }],
      ["g", {}],
    ]);
  });

  it("takes null, \"\" and a missing arguments key as no arguments (SGLang gives the string \"null\")", () => {
    const r = qwen.parse(
      '<tool_call>{"name": "a", "arguments": null}</tool_call><tool_call>{"name": "b", "arguments": ""}</tool_call>' +
        '<tool_call>{"name": "c"}</tool_call>',
    );
    expect(r.errors).toEqual([]);
    expect(r.calls.map((c) => c.arguments)).toEqual([{}, {}, {}]);
  });

  it("survives a deeply nested call inside a JSON array of calls", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const r = qwen.parse(`<tool_call>[{"name": "f", "arguments": {"a": ${deep}}}]</tool_call>`);
    expect(r.calls.map((c) => c.name)).toEqual(["f"]);
  });

  it("reports a call with no name, and a call that is not an object", () => {
    const r = qwen.parse('<tool_call>{"arguments": {}}</tool_call><tool_call>[1]</tool_call><tool_call></tool_call>');
    expect(kinds(r.errors)).toEqual(["missing_name", "invalid_call", "invalid_call"]);
  });

  it("accepts a complete call whose closing tag is missing, unless the engine says the output was cut", () => {
    const text = 'Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}';
    expect(qwen.parse(text).calls).toHaveLength(1);
    const cut = qwen.parse(text, { truncated: true });
    expect(cut.calls).toEqual([]);
    expect(cut.errors).toEqual([{ kind: "truncated", message: expect.any(String), raw: '{"name": "f", "arguments": {"a": 1}}' }]);
    expect(cut.normalText).toBe("Sure.");
  });

  it("reports a bare <tool_call> at the very end as truncated", () => {
    expect(kinds(qwen.parse("Calling now <tool_call>\n").errors)).toEqual(["truncated"]);
  });

  it("reports an unclosed block followed by another block as malformed and still parses the next one", () => {
    const r = getParser("hermes").parse('<tool_call>{"name": "f", "arguments": {<tool_call>{"name": "g"}</tool_call>');
    expect(r.calls.map((c) => c.name)).toEqual(["g"]);
    expect(kinds(r.errors)).toEqual(["malformed_json"]);
  });

  it("reports a call missing its last brace once, even with <tool_call> inside its strings", () => {
    const r = qwen.parse(
      '<tool_call>{"name": "f", "arguments": {"code": "<tool_call>"}</tool_call>\n<tool_call>{"name": "g"}</tool_call>',
    );
    expect(r.calls.map((c) => c.name)).toEqual(["g"]);
    expect(r.errors.map((e) => e.kind)).toEqual(["malformed_json"]);
    expect(r.errors[0]?.raw).toBe('{"name": "f", "arguments": {"code": "<tool_call>"}');
  });

  it("keeps text between blocks", () => {
    const r = qwen.parse('A<tool_call>{"name": "f"}</tool_call>B<tool_call>{"name": "g"}</tool_call>C');
    expect(r.normalText).toBe("A\nB\nC");
  });
});

describe("llama3", () => {
  const llama = getParser("llama3");
  it("parses calls with no <|python_tag|> when the output opens with {\"name\", leading whitespace allowed", () => {
    const r = llama.parse('  {"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {}}');
    expect(r.calls.map((c) => c.name)).toEqual(["f", "g"]);
    expect(r.hasCallMarker).toBe(true);
  });

  it("leaves a JSON answer that is not a call as text", () => {
    const r = llama.parse('{"answer": 42}');
    expect(r).toEqual({ normalText: '{"answer": 42}', calls: [], errors: [], hasCallMarker: false });
  });

  it("reports a tag followed by something other than JSON", () => {
    const r = llama.parse("<|python_tag|>print(1)");
    expect(kinds(r.errors)).toEqual(["invalid_call"]);
    expect(r.errors[0]?.raw).toBe("print(1)");
  });

  it("keeps an invalid call's neighbours (SGLang keeps the valid one too)", () => {
    const r = llama.parse('<|python_tag|>{"name": "f", "parameters": {"a": }}; {"name": "g", "parameters": {"b": 2}}');
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["g", { b: 2 }]]);
    expect(kinds(r.errors)).toEqual(["malformed_json"]);
  });
});

describe("mistral", () => {
  const mistral = getParser("mistral");
  it("parses the compact name[ARGS]{...} layout, repeated", () => {
    const r = mistral.parse('Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}');
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([
      ["get_weather", { city: "Paris" }],
      ["get_time", {}],
    ]);
    expect(r.normalText).toBe("Checking.");
  });

  it("parses the array with no space after [TOOL_CALLS] (SGLang drops it)", () => {
    const r = mistral.parse('[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}] done');
    expect(r.calls.map((c) => c.name)).toEqual(["f"]);
    expect(r.normalText).toBe("done");
  });

  it("accepts a single object after [TOOL_CALLS]", () => {
    const r = mistral.parse('[TOOL_CALLS] {"name": "f", "arguments": {"a": [1, {"b": "]"}]}}');
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["f", { a: [1, { b: "]" }] }]]);
  });

  it("reports an array that is not JSON", () => {
    const r = mistral.parse("[TOOL_CALLS] [not valid json]");
    expect(r.calls).toEqual([]);
    expect(kinds(r.errors)).toEqual(["malformed_json"]);
  });

  it("reports a compact call cut off in its arguments as truncated, with its name", () => {
    const r = mistral.parse('[TOOL_CALLS]get_weather[ARGS]{"city": "Pa');
    expect(r.errors).toEqual([{ kind: "truncated", name: "get_weather", message: expect.any(String), raw: expect.any(String) }]);
  });
});

describe("deepseekv3", () => {
  const ds = getParser("deepseekv3");
  const call = (name: string, args: string) =>
    `${DS.callBegin}function${DS.sep}${name}\n\`\`\`json\n${args}\n\`\`\`${DS.callEnd}`;

  it("keeps the text after the calls and drops <｜end▁of▁sentence｜>", () => {
    const r = ds.parse(`Hi${DS.callsBegin}${call("f", '{"a": 1}')}${DS.callsEnd}Waiting.<｜end▁of▁sentence｜>`);
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["f", { a: 1 }]]);
    expect(r.normalText).toBe("Hi\nWaiting.");
  });

  it("accepts arguments without the ```json fence", () => {
    const r = ds.parse(`${DS.callsBegin}${DS.callBegin}function${DS.sep}f\n{"a": 1}${DS.callEnd}${DS.callsEnd}`);
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["f", { a: 1 }]]);
  });

  it("also reads DeepSeek V3.1's NAME<｜tool▁sep｜>ARGS layout", () => {
    const r = ds.parse(`${DS.callsBegin}${DS.callBegin}get_time${DS.sep}{"tz": "CET"}${DS.callEnd}${DS.callsEnd}`);
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["get_time", { tz: "CET" }]]);
  });

  it("reports a call without <｜tool▁sep｜>, and an unclosed call before the next one, and keeps the good ones", () => {
    const text = `${DS.callsBegin}${DS.callBegin}oops${DS.callEnd}${DS.callBegin}function${DS.sep}g\n\`\`\`json\n{"b"${call("h", "{}")}${DS.callsEnd}`;
    const r = ds.parse(text);
    expect(r.calls.map((c) => c.name)).toEqual(["h"]);
    expect(r.errors.map((e) => [e.kind, e.name])).toEqual([
      ["invalid_call", undefined],
      ["malformed_json", "g"],
    ]);
  });
});

describe("pythonic", () => {
  const py = getParser("pythonic");
  it("reads negative numbers, tuples, dicts, None/True/False and escapes (SGLang rejects negatives)", () => {
    const r = py.parse(
      `[move(dx=-3, dy=+2.5e1, path=(1, -2), opts={'fast': True, "limit": None}, off=False, s='it\\'s\\n\\u00e9')]`,
    );
    expect(r.errors).toEqual([]);
    expect(r.calls[0]?.arguments).toEqual({
      dx: -3,
      dy: 25,
      path: [1, -2],
      opts: { fast: true, limit: null },
      off: false,
      s: "it's\né",
    });
  });

  it("reports positional arguments and bare names per call and keeps the other calls", () => {
    const r = py.parse("[f(1, b=2), g(x=y), h(z=3)]");
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["h", { z: 3 }]]);
    expect(r.errors.map((e) => [e.kind, e.name])).toEqual([
      ["invalid_arguments", "f"],
      ["invalid_arguments", "g"],
    ]);
  });

  it("refuses literals nested past 256 levels for that call only", () => {
    const r = py.parse(`[f(a=${"[".repeat(300)}${"]".repeat(300)}), g(b=${"[".repeat(200)}${"]".repeat(200)})]`);
    expect(r.calls.map((c) => c.name)).toEqual(["g"]);
    expect(r.errors.map((e) => [e.kind, e.name])).toEqual([["malformed_json", "f"]]);
  });

  it("strips <|python_start|> / <|python_end|> and keeps text on both sides", () => {
    const r = py.parse("Let me see. <|python_start|>[f(a=1)]<|python_end|> Done.");
    expect(r.calls.map((c) => c.name)).toEqual(["f"]);
    expect(r.normalText).toBe("Let me see.\nDone.");
  });

  it("does not take a list of plain values for calls", () => {
    expect(py.parse("The primes are [2, 3, 5].").calls).toEqual([]);
  });
});

describe("gpt-oss (harmony)", () => {
  const oss = getParser("gpt-oss");
  const analysis = `${H.channel}analysis${H.message}The user wants the weather.${H.end}`;
  const call = (name: string, args: string) =>
    `${H.start}assistant${H.channel}commentary to=functions.${name} ${H.constrain}json${H.message}${args}${H.call}`;

  it("keeps final and commentary (preamble) text, drops the analysis channel", () => {
    const r = oss.parse(
      `${analysis}${H.start}assistant${H.channel}commentary${H.message}Checking now.${H.end}` +
        `${call("get_weather", '{"city": "Paris"}')}${H.start}assistant${H.channel}final${H.message}It is sunny.${H.return}`,
    );
    expect(r.errors).toEqual([]);
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["get_weather", { city: "Paris" }]]);
    expect(r.normalText).toBe("Checking now.\nIt is sunny.");
    expect(r.hasCallMarker).toBe(true);
  });

  it("reads the recipient from the role header too, with or without <|constrain|>, and keeps the name's last part", () => {
    const r = oss.parse(
      `${H.start}assistant to=functions.lookup${H.channel}commentary json${H.message}{"q": 1}${H.call}` +
        `${H.start}assistant${H.channel}commentary to=browser.search${H.message}{"query": "x"}${H.call}`,
    );
    expect(r.errors).toEqual([]);
    expect(r.calls.map((c) => [c.name, c.arguments])).toEqual([["lookup", { q: 1 }], ["search", { query: "x" }]]);
  });

  it("takes an empty body as no arguments and a reply addressed to=assistant as text", () => {
    const r = oss.parse(`${call("now", "")}${H.start}functions.now to=assistant${H.channel}commentary${H.message}12:00${H.end}`);
    expect(r.calls).toEqual([{ name: "now", arguments: {}, raw: expect.any(String) }]);
    expect(r.normalText).toBe("12:00");
  });

  it("accepts a complete call whose <|call|> is missing, unless the engine says the output was cut", () => {
    const text = `${analysis}${call("f", '{"a": 1}').slice(0, -H.call.length)}`;
    expect(oss.parse(text).calls.map((c) => c.arguments)).toEqual([{ a: 1 }]);
    expect(oss.parse(text, { truncated: true }).errors.map((e) => [e.kind, e.name])).toEqual([["truncated", "f"]]);
  });

  it("reports a call cut off in its header as truncated, and one whose header never reaches <|message|> as invalid", () => {
    const cut = oss.parse(`${analysis}${H.start}assistant${H.channel}commentary to=functions.get_wea`);
    expect(cut.errors.map((e) => [e.kind, e.name])).toEqual([["truncated", "get_wea"]]);
    const broken = oss.parse(`${H.channel}commentary to=functions.f${H.end}${call("g", "{}")}`);
    expect(broken.errors.map((e) => [e.kind, e.name])).toEqual([["invalid_call", "f"]]);
    expect(broken.calls.map((c) => c.name)).toEqual(["g"]);
  });

  it("reports text after the arguments and a body that is not JSON as malformed_json", () => {
    const r = oss.parse(`${call("f", '{"a": 1} trailing')}${call("g", "print(1)")}${call("h", "{}")}`);
    expect(r.errors.map((e) => [e.kind, e.name])).toEqual([["malformed_json", "f"], ["malformed_json", "g"]]);
    expect(r.calls.map((c) => c.name)).toEqual(["h"]);
  });

  it("at token level, drops a trailing <|return|> and reads a call that ends the output at <|call|>", () => {
    const vocab = new CharVocab(Object.values(H));
    const final = oss.parseTokens(vocab.encode(`${analysis}${H.start}assistant${H.channel}final${H.message}Done.${H.return}`), vocab);
    expect(final).toEqual({ normalText: "Done.", calls: [], errors: [], hasCallMarker: false });
    const called = oss.parseTokens(vocab.encode(`${analysis}${call("f", `{"a": "${CharVocab.plain(H.call)}"}`)}`), vocab);
    expect(called.calls.map((c) => c.arguments)).toEqual([{ a: "<|call|>" }]);
  });
});

describe("getParser and detectParserFormat", () => {
  it("lists the valid formats when the name is unknown", () => {
    expect(() => getParser("qwen3_coder")).toThrow(InputError);
    try {
      getParser("nope");
    } catch (err) {
      expect((err as InputError).hint).toContain("qwen25, hermes, llama3, mistral, deepseekv3, pythonic, gpt-oss, auto");
    }
    expect(PARSER_FORMATS).toContain("qwen");
    expect(getParser("qwen").format).toBe("qwen25");
  });

  it("auto needs the model's template or tokens", () => {
    expect(() => getParser("auto")).toThrow(InputError);
    expect(getParser("auto", { specialTokens: ["[TOOL_CALLS]"] }).format).toBe("mistral");
  });

  it.each([
    ["qwen25", '{% if tools %}<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>', []],
    ["hermes", "<tool_call>{'arguments': <args-dict>, 'name': <function-name>}</tool_call>", []],
    ["llama3", 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}', ["<|python_tag|>", "<|eot_id|>"]],
    ["pythonic", "[func_name1(params_name1=params_value1, params_name2=params_value2...), func_name2(params)]", ["<|python_start|>"]],
    ["mistral", "{{ '[TOOL_CALLS]' }}", ["[TOOL_CALLS]", "[ARGS]"]],
    ["deepseekv3", "{{'<｜tool▁calls▁begin｜>'}}", ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>"]],
    ["gpt-oss", "{{- '<|start|>assistant<|channel|>commentary to=functions.' + tool_call.name }}", ["<|start|>", "<|channel|>", "<|constrain|>"]],
  ])("detects %s", (format, template, tokens) => {
    expect(detectParserFormat(template, tokens)).toBe(format);
  });

  it("refuses to guess when nothing matches", () => {
    expect(() => detectParserFormat("{{ messages }}", ["<s>", "</s>"])).toThrow(/could not tell/);
  });
});
