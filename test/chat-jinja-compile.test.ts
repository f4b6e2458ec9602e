/**
 * src/chat/jinja-compile.ts compiles chat templates to closures that must render byte for byte what
 * @huggingface/jinja renders (as published, not only the rewritten copy), and throw where it throws. These tests
 * compare the two on the real templates and conversations, and on small templates for each construct compiled; they
 * pin what does not compile, and that the run-time checks switch a template to the library on a difference.
 */
import { describe, expect, it, vi } from "vitest";
import { Template as LibraryTemplate } from "@huggingface/jinja";
import { compileTemplate, compileUnchecked } from "../src/chat/jinja-compile.js";
import { normalizeForTemplate, type ChatMessage } from "../src/chat/messages.js";
import { FIXTURE_CONVERSATIONS, FIXTURE_TEMPLATES } from "./fixtures/templates/materialize.js";

const TEMPLATES: Record<string, string> = FIXTURE_TEMPLATES;
const { tools } = FIXTURE_CONVERSATIONS;
const conversations = FIXTURE_CONVERSATIONS.conversations as Record<string, ChatMessage[]>;

type Outcome = { text: string } | { error: true };
function outcome(render: () => string): Outcome {
  try {
    return { text: render() };
  } catch {
    return { error: true };
  }
}

/** The compiled render gives the library's text, or throws where the library throws. */
function expectSame(source: string, context: Record<string, unknown>): Outcome {
  const compiled = compileUnchecked(source);
  if (typeof compiled !== "function") throw new Error(`does not compile: ${compiled.reason}`);
  // Both get their own copy, so neither can see what the other did to it.
  const expected = outcome(() => new LibraryTemplate(source).render(structuredClone(context)));
  const actual = outcome(() => compiled(structuredClone(context)));
  expect(actual, source).toEqual(expected);
  return expected;
}

const toolConversation: ChatMessage[] = [
  { role: "system", content: "You are a math expert. Use the tool before you answer." },
  { role: "user", content: "  What is 17 + 1?\n" },
  {
    role: "assistant",
    content: "<think>\nadd them\n</think>\n\nLet me check 17.",
    tool_calls: [{ type: "function", function: { name: "calc", arguments: { answer: "17", x: 1.5, y: 2, z: [1, 2.25, { "é\"q": "a\nb</think>" }] } } }],
  },
  { role: "tool", content: "Current parsed answer='17' reward=0.0" },
  { role: "tool", content: "<tool_response>second</tool_response>" },
  { role: "user", content: "<tool_response>x</tool_response>" },
  { role: "assistant", content: "\n\nIt is 18.\n#### 18", reasoning_content: "  thought  " },
  { role: "assistant", content: "plain </think> tail", tool_calls: [{ type: "function", function: { name: "calc", arguments: '{"answer": "18"}' } }] },
];

describe("compiled chat templates render what the library renders", () => {
  for (const [name, source] of Object.entries(TEMPLATES)) {
    it(`${name}: compiles`, () => {
      expect(compileTemplate(source)).toMatchObject({ compiled: true });
    });
    for (const [conversationName, messages] of Object.entries({ ...conversations, toolConversation })) {
      for (const withTools of [false, true]) {
        for (const addGenerationPrompt of [false, true]) {
          for (const thinking of [undefined, true, false]) {
            it(`${name}, ${conversationName}, tools ${withTools}, add_generation_prompt ${addGenerationPrompt}, enable_thinking ${thinking}`, () => {
              const context: Record<string, unknown> = {
                messages: normalizeForTemplate(messages),
                add_generation_prompt: addGenerationPrompt,
                bos_token: "<|begin_of_text|>",
                eos_token: "<|im_end|>",
              };
              if (withTools) context.tools = tools;
              if (thinking !== undefined) context.enable_thinking = thinking;
              const result = expectSame(source, context);
              expect(result).toHaveProperty("text");
            });
          }
        }
      }
    }
    it(`${name}: every prefix of the conversations`, () => {
      for (const messages of [...Object.values(conversations), toolConversation]) {
        for (let n = 1; n <= messages.length; n++) {
          expectSame(source, { messages: normalizeForTemplate(messages.slice(0, n)), tools, add_generation_prompt: n % 2 === 0 });
        }
      }
    });
    it(`${name}: odd inputs (no messages, a null content, a non-string content) throw or render as the library does`, () => {
      expectSame(source, { messages: [] });
      expectSame(source, { messages: [{ role: "user", content: null }] });
      expectSame(source, { messages: [{ role: "user", content: [{ type: "text", text: "hi" }, null, 1.5] }] });
      expectSame(source, { messages: [{ role: "user", content: { a: 1 } }] });
      expectSame(source, { messages: [{ role: "tool", content: { a: 1 } }] });
      expectSame(source, { messages: [{ role: "assistant" }] });
    });
  }
});

describe("each construct, compiled and compared with the library", () => {
  const cases: [string, Record<string, unknown>][] = [
    // numbers: integer and float printing, arithmetic, division
    ["{{ 1 }}|{{ 1.0 }}|{{ 1.5 }}|{{ -0.0 }}|{{ 2 * 3 }}|{{ 2 * 3.0 }}|{{ 7 / 2 }}|{{ 4 / 2 }}|{{ 7 // 2 }}|{{ 7.0 // 2 }}|{{ 7 % 3 }}|{{ 2 ** 10 }}|{{ 2 ** -1 }}", {}],
    ["{{ x }}|{{ y }}|{{ x + 1 }}|{{ y + 1 }}|{{ x / 1 }}|{{ -x }}|{{ -y }}|{{ +z }}|{{ n }}", { x: 3, y: 2.5, z: true, n: 1e21 }],
    ["{{ x is integer }}{{ y is integer }}{{ x is number }}{{ z is number }}{{ (x / 1) is integer }}{{ x is odd }}{{ x is even }}", { x: 3, y: 2.5, z: true }],
    ["{{ 1 < 2 }}{{ 2.0 >= 2 }}{{ x <= 1 }}{{ x > 1 }}", { x: 1 }],
    ["{{ 'a' < 'b' }}", {}],
    ["{{ 1 // 0 }}", {}],
    ["{{ 1 / 0 }}", {}],
    ["{{ 0 ** -1 }}", {}],
    // strings and concatenation
    ["{{ 'a' + 'b' }}|{{ 'a' ~ 1 }}|{{ 'a' ~ 1.0 }}|{{ 1 ~ 2 }}|{{ 'x' + 2 }}|{{ true ~ 'y' }}|{{ 'q' ~ x }}", { x: 1.25 }],
    ["{{ 'a' + none }}", {}],
    ["{% set ns = namespace(a=1) %}{{ 'n' ~ ns }}|{{ 'n' + [1.0, ns] }}", {}],
    ["{{ 'a' + xs }}|{{ 'a' ~ xs }}|{{ xs ~ 1 }}|{{ 'a' + d }}|{{ d ~ 'b' }}", { xs: [1, 1.5, null, [2.0], { a: "b" }, "s", true], d: { a: 1 } }],
    ["{{ 'a' ~ missing }}", {}],
    ["{{ 1 + 'a' }}", {}],
    ["{{ 1 + true }}", {}],
    // truthiness, and/or returning operands, not, ternary, select
    ["{{ '' or 'b' }}|{{ 'a' and 'b' }}|{{ [] or 0 }}|{{ {} or 'e' }}|{{ x and y }}|{{ none or none }}|{{ not [] }}|{{ not 'a' }}|{{ 0.0 or 'f' }}", { x: [1], y: { a: 1 } }],
    ["{{ 'y' if x else 'n' }}|{{ 'y' if [] else 'n' }}|[{{ 'y' if false }}]|{{ ns_like and 1 }}", { x: "s", ns_like: {} }],
    // in / not in
    ["{{ 'a' in 'cat' }}{{ 'z' not in 'cat' }}{{ 1 in [1, 2] }}{{ 1.0 in [1] }}{{ 'a' in {'a': 1} }}{{ 'b' in d }}{{ 'a' in ('a', 'b') }}{{ 'x' in missing }}{{ 'x' not in missing }}", { d: { b: null } }],
    ["{{ 1 in 'abc' }}", {}],
    ["{{ missing in [1] }}", {}],
    ["{{ none in [1] }}", {}],
    // equality
    ["{{ 1 == 1.0 }}{{ '1' == 1 }}{{ none == missing }}{{ none == none }}{{ true == 1 }}{{ 'a' != 'b' }}{{ x == none }}{{ x != none }}", { x: { a: 1 } }],
    // members, indexes, slices
    ["{{ xs[0] }}|{{ xs[-1] }}|{{ xs[5] }}|{{ xs[1:] }}|{{ xs[::-1] }}|{{ xs[:-1] }}|{{ xs[::2] }}|{{ s[1:3] }}|{{ s[::-1] }}|{{ s[-1] }}|{{ s[9] }}|{{ xs.length }}|{{ s.length }}|{{ xs.0 }}", { xs: [1, 2, 3], s: "héllo😀" }],
    ["{{ d.a }}|{{ d['b'] }}|{{ d.missing }}|{{ missing.x }}|{{ none.x }}|{{ d.a.b }}|{{ d.n }}|{{ d.u is defined }}", { d: { a: 1, b: "two", n: null } }],
    ["{{ missing[0] }}", {}],
    ["{{ d[0] }}", { d: { a: 1 } }],
    ["{{ xs['0'] }}", { xs: [1] }],
    ["{{ xs[1.0] }}", { xs: [1] }],
    ["{{ xs[none:] }}", { xs: [1] }],
    ["{{ n[1:] }}", { n: 5 }],
    ["{{ d.constructor }}|{{ d.toString }}|{{ d.__proto__ }}|{{ d.length }}", { d: { a: 1 } }],
    // printing arrays, objects, none, booleans
    ["{{ xs }}|{{ d }}|{{ none }}|{{ true }}|{{ missing }}|{{ [1.0, 'a', none, true] }}|{{ e }}", { xs: [1, [2]], d: { a: { b: 1.5 } }, e: [] }],
    // tojson
    ["{{ d | tojson }}", { d: { a: 1, b: 1.5, c: "quote\" back\\ nl\n tab\t é 😀 </think>", n: null, t: true, l: [1, { x: [] }, {}], u: 0.1 } }],
    ["{{ d | tojson(indent=2) }}|{{ d | tojson(indent=0) }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson(indent=2) }}", { d: { a: [1, 2, { b: null }], c: {} } }],
    ["{{ d | tojson(ensure_ascii=true) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ d | tojson(4) }}", { d: { "é": "ü😀", b: 1, a: [1, 2] } }],
    ["{{ 1.0 | tojson }}|{{ x | tojson }}|{{ 'a' | tojson }}|{{ missing | tojson }}|{{ none | tojson }}|{{ [missing] | tojson }}", { x: 2.5 }],
    ["{{ d | tojson(indent='2') }}", { d: {} }],
    ["{{ d | tojson(indent=missing) }}", { d: {} }],
    ["{{ d | string }}|{{ [1, 'a'] | string }}|{{ 1.0 | string }}|{{ true | string }}|{{ 'x' | string }}", { d: [1, { a: 2 }] }],
    // filters
    ["{{ s | length }}|{{ xs | length }}|{{ d | length }}|{{ s | trim }}|{{ s | upper }}|{{ s | lower }}|{{ s | title }}|{{ s | capitalize }}", { s: "  héllo wörld's x\n", xs: [1, 2], d: { a: 1 } }],
    ["{{ xs | first }}|{{ xs | last }}|{{ xs | reverse }}|{{ xs | join }}|{{ xs | join(', ') }}|{{ s | join('-') }}|{{ xs | list }}|{{ ws | join(',') }}", { xs: ["a", "b", "c"], s: "abc", ws: [1, 2.5, none(), true] }],
    ["{{ d | items }}|{{ d | keys }}|{{ d | values }}|{{ d.items() }}|{{ d.keys() }}|{{ d.values() }}", { d: { b: 1, a: [2] } }],
    ["{{ missing | default('dflt') }}|{{ '' | default('e', true) }}|{{ '' | default('e') }}|{{ 0 | default('z', boolean=true) }}|{{ x | default('no') }}|{{ none | default('n') }}", { x: "yes" }],
    ["{{ '12' | int }}|{{ 'x' | int }}|{{ '1.5' | float }}|{{ 3 | float }}|{{ 3.7 | int }}|{{ true | int }}|{{ -3 | abs }}|{{ -2.5 | abs }}|{{ 'x' | int(7) }}|{{ 2.5 | int(0) }}", {}],
    ["{{ [] | first }}", {}],
    ["{{ 'abc' | first }}", {}],
    ["{{ 5 | length }}", {}],
    ["{{ missing | length }}", {}],
    ["{{ xs | trim }}", { xs: [] }],
    ["{{ true | bool }}|{{ 'x' | safe }}", {}],
    // tests
    ["{% for v in vals %}{{ v is defined }}{{ v is undefined }}{{ v is none }}{{ v is string }}{{ v is number }}{{ v is integer }}{{ v is boolean }}{{ v is true }}{{ v is false }}{{ v is iterable }}{{ v is mapping }}{{ v is sequence }}{{ v is callable }}{{ v is lower }}{{ v is upper }}{{ v is not none }};{% endfor %}{{ missing is defined }}", { vals: ["a", "A", "", 1, 1.5, true, false, null, [], {}, [1]] }],
    ["{{ 1.5 is odd }}", {}],
    // string methods
    ["[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ s.strip('\\n') }}][{{ s.lstrip('x') }}][{{ s.upper() }}][{{ s.lower() }}][{{ s.title() }}][{{ s.capitalize() }}]", { s: " \n x</think>y \t" }],
    ["{{ s.split() }}|{{ s.split(' ') }}|{{ s.split('</think>') }}|{{ s.split('</think>')[-1] }}|{{ s.split(none, 1) }}|{{ s.split('a', 1) }}|{{ s.split('zz') }}", { s: "  a b  </think>c a d " }],
    ["{{ s.split('') }}", { s: "ab" }],
    ["{{ s.split(missing) }}", { s: "ab" }],
    ["{{ s.startswith('<t') }}{{ s.endswith('>') }}{{ s.startswith(('x', '<')) }}{{ s.endswith(('a', 'b')) }}", { s: "<tool_response>" }],
    ["{{ s.startswith() }}", { s: "a" }],
    ["{{ s.startswith(1) }}", { s: "a" }],
    ["{{ s.replace('a', 'b') }}|{{ s.replace('a', 'b', 1) }}|{{ s.replace('', '-') }}|{{ s.replace('.', '!') }}", { s: "a.a.a" }],
    ["{{ d.get('a') }}|{{ d.get('z') }}|{{ d.get('z', 'dflt') }}|{{ d.get('n', 1) }}", { d: { a: 1, n: null } }],
    ["{{ d.get(1) }}", { d: {} }],
    ["{{ d.items() }}", { d: { items: 1 } }],
    ["{{ s.items() }}", { s: "x" }],
    ["{{ xs.upper() }}", { xs: [] }],
    ["{{ missing.upper() }}", {}],
    // loops
    ["{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}", { xs: ["a", "b", "c"] }],
    ["{% for x in xs if x != 'b' %}{{ x }}{{ loop.index }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", { xs: ["a", "b", "c"] }],
    ["{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", { d: { b: 1, a: 2 } }],
    ["{% for a, b in xs %}{{ a }}{{ b }}{% endfor %}", { xs: [[1, 2], [3]] }],
    ["{% for x in 'abc' %}{{ x }}{% endfor %}", {}],
    ["{% for x in xs %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% if x == 3 %}{% break %}{% endif %}{% endfor %}", { xs: [1, 2, 3, 4] }],
    ["{% for x in xs %}a{% if x %}{% continue %}{% endif %}b{% else %}E{% endfor %}", { xs: [1, 1] }],
    ["{% break %}", {}],
    ["{% for x in xs %}{% for y in x %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }}|{% endfor %}", { xs: [[1, 2], [3]] }],
    ["{% for x in xs if loop is defined %}{{ x }}{% endfor %}", { xs: [1] }],
    ["{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}{% for i in range(3, 0, -1) %}{{ i }}{% endfor %}", {}],
    ["{% for m in messages[::-1] %}{{ m.role }}{% endfor %}", { messages: [{ role: "a" }, { role: "b" }] }],
    // set scoping
    ["{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }};{% endfor %}{{ x }}", {}],
    ["{% for i in [1, 2] %}{% if i == 2 %}{{ y }}{% endif %}{% set y = i %}{% endfor %}[{{ y }}]", {}],
    ["{% set x = 'outer' %}{% for i in [1] %}{% for j in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %}{{ x }}{% endfor %}{{ x }}", {}],
    ["{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set c %}block {{ a }}{% endset %}[{{ c }}]", {}],
    ["{% set a, b = [1] %}", {}],
    ["{% set messages = messages[1:] %}{{ messages | length }}", { messages: [1, 2, 3] }],
    ["{% for x in xs %}{% set x = x * 2 %}{{ x }}{% endfor %}", { xs: [1, 2] }],
    // namespace
    ["{% set ns = namespace(a=1, b='x') %}{% for i in [1, 2, 3] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }}{{ ns.b }}{{ ns.c }}|{{ ns }}|{{ ns | tojson }}|{{ ns is mapping }}|{{ namespace() }}", {}],
    ["{% set d = {} %}{% set d.a = 1 %}", {}],
    // raise_exception
    ["{% if x %}{{ raise_exception('bad input') }}{% endif %}ok", { x: true }],
    ["{% if x %}{{ raise_exception('bad input') }}{% endif %}ok", { x: false }],
    // object and array literals
    ["{{ {'b': 1, 'a': [1, 2.0]} }}|{{ [1, 'a'] + [none] }}|{{ {'a': 1}.a }}", {}],
    // context values that bail or stay with the library
    ["{{ f }}", { f: new Map([["a", 1]]) }],
    ["{{ true }}", { true: 1 }],
    ["{{ x }}", { x: [1, undefined, 2] }],
    ["{{ xs == ys }}", { xs: [1], ys: [1] }],
    ["{{ ns }}", { ns: { loop: 1 } }],
  ];
  /** Renders the compiled template hands to the library on purpose (values it does not mirror). */
  const EXPECTED_BAILS = ["{{ 1 // 0 }}", "{{ [] | first }}", "{{ xs == ys }}"];
  for (const [source, context] of cases) {
    it(source, () => {
      const compiled = compileUnchecked(source);
      if (typeof compiled !== "function") throw new Error(`does not compile: ${compiled.reason}`);
      // A Map or a reserved name in the context never reaches the compiled render (the checks route it to the library).
      if (Object.values(context).some((v) => v instanceof Map) || "true" in context) return;
      const expected = outcome(() => new LibraryTemplate(source).render(structuredClone(context)));
      const guarded = compileTemplate(source, { onMismatch: (m) => expect.fail(m) });
      expect(outcome(() => guarded.render(structuredClone(context))), "guarded render").toEqual(expected);
      let raw: Outcome;
      try {
        raw = { text: compiled(structuredClone(context)) };
      } catch (err) {
        // A deliberate bail (the render goes to the library) is fine; any other throw must be where the library throws.
        if ((err as Error).constructor.name === "Bail") {
          expect(EXPECTED_BAILS, `unexpected bail: ${(err as Error).message}`).toContain(source);
          return;
        }
        raw = { error: true };
      }
      expect(raw, "compiled render").toEqual(expected);
    });
  }

  it("the library's raise_exception message is what the guarded render throws", () => {
    const renderer = compileTemplate("{{ raise_exception('Conversation roles must alternate') }}");
    expect(() => renderer.render({})).toThrow("Conversation roles must alternate");
  });
});

/** A stand-in for `none` in the case table (JSON has null, but the table is plain JS). */
function none(): null {
  return null;
}

describe("what does not compile renders with the library", () => {
  const unsupported: [string, string][] = [
    ["{% macro m(a, b=2) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}", "Macro"],
    ["{% filter upper %}x{% endfilter %}", "FilterStatement"],
    ["{{ xs | map(attribute='a') | join }}", "filter map()"],
    ["{{ xs | selectattr('a') | list }}", "filter selectattr()"],
    ["{{ xs | sort }}", "filter sort"],
    ["{{ x is float }}", "test float"],
    ["{{ x | default }}", "filter default"],
    ["{{ (1, 2) }}", "tuple"],
    ["{{ foo() }}", "call of foo"],
    ["{{ range }}", "range as a value"],
    ["{% set true = 1 %}", "assignment to true"],
    ["{{ d.dictsort() }}", "method dictsort"],
    ["{{ s.format(1) }}", "method format"],
    ["{{ {1: 2} }}", "computed key"],
    ["{{ f(*xs) }}", "SpreadExpression"],
    ["{{ namespace(d) }}", "positional"],
  ];
  for (const [source, reason] of unsupported) {
    it(`${source}: compiled false (${reason})`, () => {
      const renderer = compileTemplate(source);
      expect(renderer.compiled).toBe(false);
      expect(renderer.reason).toContain(reason);
      const context = { xs: [{ a: "1" }], x: 1.5, d: { a: 1 }, s: "{}" };
      expect(outcome(() => renderer.render(structuredClone(context)))).toEqual(outcome(() => new LibraryTemplate(source).render(structuredClone(context))));
    });
  }
  it("a template that does not parse throws, as the library's Template does", () => {
    expect(() => compileTemplate("{% if %}")).toThrow();
  });
});

describe("the run-time checks", () => {
  const source = "{% for m in messages %}{{ m.content }}{% endfor %}";
  const context = () => ({ messages: [{ role: "user", content: "hi" }] });

  it("switch a template to the library for good on a different render, and say so once", () => {
    const onMismatch = vi.fn();
    let calls = 0;
    const renderer = compileTemplate(source, {
      onMismatch,
      compiledRenderForTest: () => {
        calls++;
        return calls === 3 ? "wrong" : "hi";
      },
    });
    expect(renderer.render(context())).toBe("hi");
    expect(renderer.render(context())).toBe("hi");
    expect(renderer.compiled).toBe(true);
    expect(renderer.render(context())).toBe("hi");
    expect(renderer.compiled).toBe(false);
    expect(renderer.reason).toContain("different text");
    for (let i = 0; i < 10; i++) expect(renderer.render(context())).toBe("hi");
    expect(calls).toBe(3);
    expect(onMismatch).toHaveBeenCalledTimes(1);
    expect(onMismatch.mock.calls[0]![0]).toContain('compiled "wrong"');
  });

  it("switch on a compiled render that throws where the library renders", () => {
    const onMismatch = vi.fn();
    const renderer = compileTemplate(source, {
      onMismatch,
      compiledRenderForTest: () => {
        throw new TypeError("oops");
      },
    });
    expect(renderer.render(context())).toBe("hi");
    expect(renderer.render(context())).toBe("hi");
    expect(renderer.compiled).toBe(false);
    expect(onMismatch).toHaveBeenCalledTimes(1);
    expect(onMismatch.mock.calls[0]![0]).toContain("oops");
  });

  it("switch on a compiled render that succeeds where the library throws, and throw the library's error", () => {
    const onMismatch = vi.fn();
    const renderer = compileTemplate("{{ raise_exception('no') }}", { onMismatch, compiledRenderForTest: () => "fine" });
    expect(() => renderer.render({})).toThrow("no");
    expect(renderer.compiled).toBe(false);
    expect(onMismatch).toHaveBeenCalledTimes(1);
  });

  it("check the first 64 renders, then one in 256", () => {
    const onMismatch = vi.fn();
    let n = 0;
    // Wrong on every render the checks do not cover: after the first 64, only render 256 is checked.
    const renderer = compileTemplate(source, { onMismatch, compiledRenderForTest: () => (++n <= 64 || n === 256 ? "hi" : "unchecked") });
    for (let i = 1; i <= 64; i++) expect(renderer.render(context())).toBe("hi");
    expect(renderer.render(context())).toBe("unchecked");
    for (let i = 66; i <= 255; i++) renderer.render(context());
    expect(renderer.render(context())).toBe("hi");
    expect(onMismatch).not.toHaveBeenCalled();
    expect(renderer.compiled).toBe(true);
  });

  it("a render the compiled template bails on goes to the library without switching", () => {
    const onMismatch = vi.fn();
    const renderer = compileTemplate("{{ xs == ys }}", { onMismatch });
    expect(renderer.render({ xs: [1], ys: [1] })).toBe(new LibraryTemplate("{{ xs == ys }}").render({ xs: [1], ys: [1] }));
    expect(renderer.compiled).toBe(true);
    expect(onMismatch).not.toHaveBeenCalled();
  });

  it("a context the compiled template does not take (a reserved name, a class instance) goes to the library", () => {
    const renderer = compileTemplate("{{ x }}", { compiledRenderForTest: () => "compiled" });
    expect(() => renderer.render({ x: 1, namespace: 1 })).toThrow();
    expect(renderer.render({ x: new Date(0) })).toBe(new LibraryTemplate("{{ x }}").render({ x: new Date(0) }));
    expect(renderer.compiled).toBe(true);
  });
});

describe("random conversations", () => {
  /** A small seeded generator (mulberry32), so a failure reproduces. */
  function rng(seed: number): () => number {
    return () => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const PIECES = ["", " ", "\n", "\n\n", "  x  ", "<think>", "</think>", "<think>\nr\n</think>\n\n", "<tool_response>", "</tool_response>", "é", "😀", '"q"', "\\", "\t", "#### 18", "{}", "</think>\n"];
  it("render as the library does on every template", () => {
    const random = rng(20240611);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const text = () => Array.from({ length: Math.floor(random() * 5) }, () => pick(PIECES)).join("");
    const value = (depth: number): unknown => {
      const r = random();
      if (r < 0.15) return Math.floor(random() * 100) - 50;
      if (r < 0.3) return Math.round(random() * 1000) / 8;
      if (r < 0.4) return random() < 0.5;
      if (r < 0.45) return null;
      if (r < 0.7 || depth > 2) return text();
      if (r < 0.85) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: Math.floor(random() * 3) }, () => [pick(["a", "b", "é", "0", "arguments", "items"]), value(depth + 1)]));
    };
    let rendered = 0;
    for (let i = 0; i < 300; i++) {
      const messages: ChatMessage[] = [];
      const n = 1 + Math.floor(random() * 6);
      for (let j = 0; j < n; j++) {
        const role = pick(["system", "user", "assistant", "assistant", "tool"] as const);
        const message: Record<string, unknown> = { role, content: random() < 0.08 ? value(1) : text() };
        if (role === "assistant" && random() < 0.4) {
          message.tool_calls = Array.from({ length: 1 + Math.floor(random() * 2) }, () => ({
            type: "function",
            function: { name: pick(["calc", "lookup"]), arguments: random() < 0.2 ? JSON.stringify(value(1)) : (value(2) as Record<string, unknown>) },
          }));
          if (typeof (message.tool_calls as { function: { arguments: unknown } }[])[0]!.function.arguments !== "string" && random() < 0.5) {
            for (const call of message.tool_calls as { function: { arguments: unknown } }[]) call.function.arguments = { answer: value(2) };
          }
        }
        if (role === "assistant" && random() < 0.3) message.reasoning_content = random() < 0.2 ? null : text();
        messages.push(message as unknown as ChatMessage);
      }
      const context: Record<string, unknown> = {
        messages: normalizeForTemplate(messages.map((m) => (m.tool_calls && m.tool_calls.some((c) => typeof c.function.arguments !== "string" && (typeof c.function.arguments !== "object" || c.function.arguments === null || Array.isArray(c.function.arguments))) ? { ...m, tool_calls: undefined } : m))),
        add_generation_prompt: random() < 0.5,
        bos_token: "<s>",
      };
      if (random() < 0.5) context.tools = [{ type: "function", function: { name: "x", description: text(), parameters: value(0) } }, ...tools];
      if (random() < 0.5) context.enable_thinking = random() < 0.5;
      for (const source of Object.values(TEMPLATES)) if ("text" in expectSame(source, context)) rendered++;
    }
    // Most render (the rest throw in both, e.g. a number content on a template that concatenates it to a string).
    expect(rendered).toBeGreaterThan(600);
  });
});
