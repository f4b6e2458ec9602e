/**
 * @huggingface/jinja's Template, loaded so that creating its runtime values is cheap.
 *
 * Why: a render creates a runtime value (`StringValue`, `BooleanValue`, …) for nearly every expression it evaluates,
 * a thousand or more for a multi-turn conversation. The library declares `type`, `value` and `_builtins` as class
 * fields, and all a dozen value classes run the base class's field initializer. On Node 20's V8 that shared
 * initializer goes megamorphic and falls back to the runtime: about 200 ns per value instead of 25 ns, and 80% of a
 * render's CPU (bench/template-render.mjs). The rollout client renders on every trajectory (prompt, drift check), so
 * this was its largest single cost.
 *
 * What: the library's own CommonJS file is read and its runtime-value classes are rewritten before it is imported:
 * the `type` field becomes a property of each class's prototype, and the `value` and `_builtins` declarations are
 * dropped (the constructor assigns `value`; `_builtins` is assigned on first use with `??=`). Nothing else changes.
 * Every rewrite must apply exactly as expected; if the file is not what this expects (another version), the library is
 * imported unchanged, only slower. test/chat-jinja.test.ts checks that the installed version is rewritten and that
 * both render the same text.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { runInThisContext } from "node:vm";
type Jinja = typeof import("@huggingface/jinja");

export interface JinjaLoad {
  Template: Jinja["Template"];
  /** True when the rewritten library is in use, false when the original was kept (and why). */
  rewritten: boolean;
  reason?: string;
}

/** The runtime-value classes as @huggingface/jinja 0.5.x builds them: each declares its `type` field. */
const EXPECTED_TYPE_FIELDS = 13;

/** The rewrite of the library's source; undefined (and why) when the source is not laid out as expected. */
export function rewriteRuntimeValues(source: string): { source: string } | { reason: string } {
  const start = source.indexOf("// src/runtime.ts\n");
  const end = start < 0 ? -1 : source.indexOf("\n// src/", start + 1);
  if (start < 0 || end < 0) return { reason: "no src/runtime.ts section" };
  const lines = source.slice(start, end).split("\n");
  const out: string[] = [];
  let className: string | undefined;
  let pending: string[] = [];
  let types = 0;
  let values = 0;
  for (const line of lines) {
    const classStart = /^var (\w+) = class\b/.exec(line);
    if (classStart) {
      className = classStart[1];
      pending = [];
    }
    const typeField = /^ {2}type = ("\w+");$/.exec(line);
    if (typeField && className) {
      pending.push(`${className}.prototype.type = ${typeField[1]};`);
      types += 1;
      continue;
    }
    if (line === "  value;") {
      values += 1;
      continue;
    }
    if (line === "  _builtins;") continue;
    out.push(line);
    // A class body's closing line: its prototype gets the type it declared.
    if (line === "};" && pending.length > 0) {
      out.push(...pending);
      pending = [];
    }
  }
  if (types !== EXPECTED_TYPE_FIELDS || values !== 1 || pending.length > 0) {
    return { reason: `src/runtime.ts has ${types} type fields and ${values} value fields, not ${EXPECTED_TYPE_FIELDS} and 1` };
  }
  return { source: source.slice(0, start) + out.join("\n") + source.slice(end) };
}

const require = createRequire(import.meta.url);

function unchanged(reason: string): JinjaLoad {
  return { Template: (require("@huggingface/jinja") as Jinja).Template, rewritten: false, reason };
}

/**
 * Evaluates the rewritten CommonJS build the way Node's loader would (the same wrapper, the file's own name), so
 * stack traces and profiles still point at the library's file.
 */
function load(): JinjaLoad {
  let file: string;
  let source: string;
  try {
    file = require.resolve("@huggingface/jinja");
    source = readFileSync(file, "utf8");
  } catch (err) {
    return unchanged(`cannot read the library (${(err as Error).message})`);
  }
  const rewrite = rewriteRuntimeValues(source);
  if ("reason" in rewrite) return unchanged(`${file}: ${rewrite.reason}`);
  try {
    const wrapper = runInThisContext(`(function (exports, require, module, __filename, __dirname) {${rewrite.source}\n})`, {
      filename: file,
    }) as (...args: unknown[]) => void;
    const module = { exports: {} as Jinja };
    wrapper.call(module.exports, module.exports, require, module, file, path.dirname(file));
    return { Template: module.exports.Template, rewritten: true };
  } catch (err) {
    return unchanged(`${file}: the rewrite does not load (${(err as Error).message})`);
  }
}

export const jinja: JinjaLoad = load();
export const Template = jinja.Template;
export type Template = InstanceType<Jinja["Template"]>;
