/**
 * src/chat/jinja.ts loads @huggingface/jinja with its runtime-value classes rewritten (class fields moved out, so
 * their shared initializer stays fast on Node 20). These tests pin that the installed version is the one rewritten,
 * that the rewrite refuses what it does not recognise, and that it renders exactly what the library renders.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { describe, expect, it } from "vitest";
import { Template as LibraryTemplate } from "@huggingface/jinja";
import { jinja, rewriteRuntimeValues, Template } from "../src/chat/jinja.js";
import { FIXTURE_CONVERSATIONS, FIXTURE_TEMPLATES } from "./fixtures/templates/materialize.js";

const require = createRequire(import.meta.url);
const librarySource = readFileSync(require.resolve("@huggingface/jinja"), "utf8");

const TEMPLATES: Record<string, string> = FIXTURE_TEMPLATES;
const { tools } = FIXTURE_CONVERSATIONS;
const conversations = FIXTURE_CONVERSATIONS.conversations as Record<string, unknown[]>;

describe("the rewritten jinja runtime", () => {
  it("is in use for the installed @huggingface/jinja (a version bump that breaks the rewrite fails here)", () => {
    expect(jinja.reason).toBeUndefined();
    expect(jinja.rewritten).toBe(true);
    expect(Template).not.toBe(LibraryTemplate);
  });

  it("moves every runtime value's type to its prototype and drops the value and _builtins fields", () => {
    const rewrite = rewriteRuntimeValues(librarySource);
    expect("source" in rewrite).toBe(true);
    const source = (rewrite as { source: string }).source;
    const runtime = source.slice(source.indexOf("// src/runtime.ts"), source.indexOf("\n// src/", source.indexOf("// src/runtime.ts") + 1));
    expect(runtime).not.toMatch(/^ {2}(type = "\w+"|value|_builtins);$/m);
    expect(runtime).toContain('StringValue.prototype.type = "StringValue";');
    expect(runtime).toContain('TupleValue.prototype.type = "TupleValue";');
    // Outside the runtime values (the parser's AST classes), nothing changes.
    expect(source.slice(0, source.indexOf("// src/runtime.ts"))).toBe(librarySource.slice(0, librarySource.indexOf("// src/runtime.ts")));
  });

  it("refuses a source it does not recognise, saying why", () => {
    expect(rewriteRuntimeValues("var x = 1;\n")).toEqual({ reason: "no src/runtime.ts section" });
    const fewer = librarySource.replace('  type = "NullValue";\n', "");
    expect(rewriteRuntimeValues(fewer)).toEqual({ reason: expect.stringContaining("12 type fields") });
  });

  for (const [name, source] of Object.entries(TEMPLATES)) {
    it(`renders ${name} exactly as the library does, every fixture conversation, with and without tools`, () => {
      const ours = new Template(source);
      const library = new LibraryTemplate(source);
      let compared = 0;
      for (const messages of Object.values(conversations)) {
        for (const withTools of [true, false]) {
          for (const addGenerationPrompt of [true, false]) {
            const context = { messages, add_generation_prompt: addGenerationPrompt, ...(withTools ? { tools } : {}), eos_token: "<|im_end|>" };
            let expected: string;
            try {
              expected = library.render(context);
            } catch (err) {
              expect(() => ours.render(context)).toThrow((err as Error).message);
              continue;
            }
            expect(ours.render(context)).toBe(expected);
            compared += 1;
          }
        }
      }
      expect(compared).toBeGreaterThan(0);
    });
  }

  it("evaluates every kind of value it builds as the library does: types, tests, filters, methods, JSON, errors", () => {
    const expressions = [
      "{{ 1 is integer }} {{ 'a' is string }} {{ [1] is iterable }} {{ {'k': 1} is mapping }} {{ 1 is odd }}",
      "{{ 1.5 is float }}",
      "{{ none is none }} {{ x is undefined }} {{ (1, 2) | length }} {{ 'AbC'.lower() }} {{ ' s '.strip() }}",
      "{{ {'b': [1, 2.0, true, none]} | tojson }} {{ [3, 1] | sort | join(',') }} {{ 'a,b'.split(',') }}",
      "{% for k, v in {'x': 1}.items() %}{{ k }}={{ v }}{% endfor %} {{ namespace(n=2).n }} {{ -0.0 }} {{ 2 ** 3 }}",
      "{% set ns = namespace(a=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + [i] %}{% endfor %}{{ ns.a | tojson }}",
      "{{ raise_exception('no') }}",
    ];
    const outcome = (T: typeof Template, source: string) => {
      try {
        return { text: new T(source).render({}) };
      } catch (err) {
        return { error: (err as Error).message };
      }
    };
    for (const source of expressions) expect(outcome(Template, source)).toEqual(outcome(LibraryTemplate, source));
    // Not all of them fail: the comparison covers rendered values, not only errors.
    expect(expressions.filter((source) => "text" in outcome(Template, source)).length).toBeGreaterThanOrEqual(4);
  });
});
