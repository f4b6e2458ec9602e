/**
 * Chat templates compiled to JS closures over plain values, rendering the same text as @huggingface/jinja.
 *
 * Why: the library's interpreter walks the AST and allocates a runtime value for nearly every expression; the rollout
 * client renders on every trajectory (prompt, tool-result delta, drift check), and rendering was ~20% of its CPU.
 * The closures here read the context's plain values directly (bench/template-render.mjs measures the difference).
 *
 * Exactness comes first: a record's tokens are the template's text. So
 * - only the constructs this file mirrors compile (jinja-values.ts has the value semantics); a template with any other
 *   node, filter, test, method or call does not compile at all and renders with the library;
 * - a render whose inputs or intermediate values fall outside what is mirrored (a context that is not plain data, an
 *   `==` between objects, …) bails to the library for that render;
 * - a compiled render that throws is rendered again by the library, so errors are always the library's own;
 * - the first 64 renders of each template, then one in 256, are rendered by both and compared; on any difference the
 *   template switches to the library for good and `onMismatch` is told once.
 *
 * Scoping follows the library, not Python's Jinja: `if` shares its scope; each `for` has one scope for all its
 * iterations (a `set` in the body is visible to later iterations, not after the loop); the loop's `if` filter sees
 * the loop variables and the enclosing scopes. Macros are not compiled (the library scopes them dynamically).
 */
import { Template } from "./jinja.js";
import {
  affix,
  Bail,
  BREAK,
  bail,
  CONTINUE,
  contains,
  getAttr,
  getItem,
  getSlice,
  hasKey,
  isFloat,
  isInt,
  isNumber,
  isObject,
  isPlainData,
  items,
  JFloat,
  joinItem,
  looseEqual,
  mkFloat,
  mkInt,
  Namespace,
  num,
  output,
  range,
  rawString,
  replaceString,
  splitString,
  strftime,
  titleCase,
  toJSON,
  truthy,
  typeName,
  type JsonOptions,
} from "./jinja-values.js";

// The library's AST (dist/ast.d.ts), read structurally; every field used is checked where it is read.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Node = any;
/** S[0] is the global scope (a null-prototype object); S[k] the slots of the `for` scope at nesting depth k. */
type Frames = unknown[];
type Expr = (S: Frames) => unknown;
type Block = (S: Frames) => string;

/** A template (or a part of one) this compiler does not mirror. */
class NotCompilable extends Error {}
function refuse(why: string): never {
  throw new NotCompilable(why);
}

/** A `for` slot not (yet) set in this scope: the lookup goes on outward, as the library's Environment.resolve does. */
const ABSENT: unique symbol = Symbol("absent");

const CONSTANTS = new Map<string, unknown>([
  ["true", true],
  ["false", false],
  ["none", null],
  ["True", true],
  ["False", false],
  ["None", null],
]);
const GLOBAL_FUNCTIONS = new Set(["raise_exception", "range", "strftime_now", "namespace"]);
/** Names setupGlobals (and every Environment, for `namespace`) declares: a context key among them makes the library throw. */
const RESERVED = new Set([...CONSTANTS.keys(), ...GLOBAL_FUNCTIONS]);

interface Scope {
  /** 0 for the global scope. */
  depth: number;
  /** Slot of each name this `for` scope may hold; null for the global scope. */
  names: Map<string, number> | null;
  parent: Scope | null;
}

/** Names a `set` in these statements declares in their scope (not inside a nested `for`, which has its own). */
function collectSets(statements: Node[], names: string[]): void {
  for (const s of statements) {
    if (s.type === "Set") {
      for (const name of assigneeNames(s.assignee)) names.push(name);
      if (!s.value) collectSets(s.body, names);
    } else if (s.type === "If") {
      collectSets(s.body, names);
      collectSets(s.alternate, names);
    }
  }
}

/**
 * What a `for` iterates, as the library's evaluateFor takes it: an object's keys, an array as is (anything else
 * throws); with `unpack`, each item checked to be an array of that many; with `kept`, only the items its `if` keeps.
 */
function loopItems(iterated: unknown, unpack: number | undefined, kept: ((current: unknown) => boolean) | undefined): unknown[] {
  const list = isObject(iterated) ? Object.keys(iterated) : iterated;
  if (!Array.isArray(list)) throw new Error(`Expected iterable or object type in for loop: got ${typeName(list)}`);
  if (unpack === undefined && !kept) return list;
  const out: unknown[] = [];
  for (const current of list) {
    if (unpack !== undefined) {
      if (!Array.isArray(current)) throw new Error(`Cannot unpack non-iterable type: ${typeName(current)}`);
      if (current.length !== unpack) throw new Error(`Too ${unpack > current.length ? "few" : "many"} items to unpack`);
    }
    if (kept && !kept(current)) continue;
    out.push(current);
  }
  return out;
}

/** The `loop` variable of iteration i over `list`. */
function loopVariable(list: readonly unknown[], i: number): Record<string, unknown> {
  const length = list.length;
  return {
    index: i + 1,
    index0: i,
    revindex: length - i,
    revindex0: length - i - 1,
    first: i === 0,
    last: i === length - 1,
    length,
    previtem: i > 0 ? list[i - 1] : undefined,
    nextitem: i < length - 1 ? list[i + 1] : undefined,
  };
}

function assigneeNames(target: Node): string[] {
  if (target.type === "Identifier") return [checkAssignable(target.value)];
  if (target.type === "TupleLiteral") {
    return (target.value as Node[]).map((x) => (x.type === "Identifier" ? checkAssignable(x.value) : refuse(`unpacking into ${x.type}`)));
  }
  return [];
}

function checkAssignable(name: string): string {
  if (RESERVED.has(name)) refuse(`assignment to ${name}`);
  return name;
}

interface Args {
  positional: Expr[];
  keywords: [string, Expr][];
}

type Call = (S: Frames) => [unknown[], Map<string, unknown>];

function evalArgs(args: Args): Call {
  const { positional, keywords } = args;
  return (S) => {
    const pos = positional.map((e) => e(S));
    const kw = new Map<string, unknown>();
    for (const [k, e] of keywords) kw.set(k, e(S));
    return [pos, kw];
  };
}

const TESTS = new Map<string, (v: unknown) => boolean>([
  ["boolean", (v) => typeof v === "boolean"],
  // No value this file produces is a function (methods read as values bail).
  ["callable", () => false],
  ["odd", (v) => (isInt(v) ? v % 2 !== 0 : fail(`cannot odd on ${typeName(v)}`))],
  ["even", (v) => (isInt(v) ? v % 2 === 0 : fail(`cannot even on ${typeName(v)}`))],
  ["false", (v) => v === false],
  ["true", (v) => v === true],
  ["none", (v) => v === null],
  ["string", (v) => typeof v === "string"],
  ["number", (v) => isNumber(v)],
  ["integer", (v) => isInt(v)],
  ["iterable", (v) => Array.isArray(v) || typeof v === "string"],
  ["mapping", (v) => isObject(v)],
  ["sequence", (v) => Array.isArray(v) || isObject(v) || typeof v === "string"],
  ["lower", (v) => typeof v === "string" && v === v.toLowerCase()],
  ["upper", (v) => typeof v === "string" && v === v.toUpperCase()],
  ["defined", (v) => v !== undefined],
  ["undefined", (v) => v === undefined],
]);

function fail(message: string): never {
  throw new Error(message);
}

function notFunction(v: unknown): never {
  throw new Error(`Cannot call something that is not a function: got ${typeName(v)}`);
}

const STRING_METHODS = new Set(["upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip", "startswith", "endswith", "split", "replace"]);
const OBJECT_METHODS = new Set(["get", "items", "keys", "values"]);

class Compiler {
  maxDepth = 0;

  block(statements: Node[], scope: Scope): Block {
    const parts = statements.map((s) => this.statement(s, scope));
    if (parts.length === 0) return () => "";
    if (parts.length === 1) return parts[0]!;
    if (parts.length === 2) {
      const [a, b] = parts as [Block, Block];
      return (S) => a(S) + b(S);
    }
    return (S) => {
      let out = "";
      for (let i = 0; i < parts.length; i++) out += parts[i]!(S);
      return out;
    };
  }

  statement(node: Node, scope: Scope): Block {
    switch (node.type) {
      case "Program":
        return this.block(node.body, scope);
      case "Comment":
        return () => "";
      case "If": {
        const test = this.expr(node.test, scope);
        const body = this.block(node.body, scope);
        const alternate = this.block(node.alternate, scope);
        return (S) => (truthy(test(S)) ? body(S) : alternate(S));
      }
      case "For":
        return this.forLoop(node, scope);
      case "Set":
        return this.set(node, scope);
      case "Break":
        return () => {
          throw BREAK;
        };
      case "Continue":
        return () => {
          throw CONTINUE;
        };
      case "Macro":
      case "CallStatement":
      case "FilterStatement":
        return refuse(node.type);
      default: {
        if (!isExpression(node)) refuse(`statement ${node.type}`);
        if (node.type === "StringLiteral") {
          const text = node.value as string;
          return () => text;
        }
        const e = this.expr(node, scope);
        return (S) => output(e(S));
      }
    }
  }

  assign(name: string, scope: Scope): (S: Frames, v: unknown) => void {
    if (scope.names === null) {
      return (S, v) => {
        (S[0] as Record<string, unknown>)[name] = v;
      };
    }
    const depth = scope.depth;
    const slot = scope.names.get(name);
    if (slot === undefined) refuse(`internal: ${name} not collected`);
    return (S, v) => {
      (S[depth] as unknown[])[slot] = v;
    };
  }

  set(node: Node, scope: Scope): Block {
    const value: Expr = node.value ? this.expr(node.value, scope) : blockValue(this.block(node.body, scope));
    const target = node.assignee;
    if (target.type === "Identifier") {
      const assign = this.assign(checkAssignable(target.value), scope);
      return (S) => {
        assign(S, value(S));
        return "";
      };
    }
    if (target.type === "TupleLiteral") {
      const assigns = assigneeNames(target).map((name) => this.assign(name, scope));
      return (S) => {
        const rhs = value(S);
        if (!Array.isArray(rhs)) throw new Error(`Cannot unpack non-iterable type in set: ${typeName(rhs)}`);
        if (rhs.length !== assigns.length) throw new Error(`Too ${assigns.length > rhs.length ? "few" : "many"} items to unpack in set`);
        for (let i = 0; i < assigns.length; i++) assigns[i]!(S, rhs[i]);
        return "";
      };
    }
    if (target.type === "MemberExpression") {
      if (target.computed || target.property.type !== "Identifier") refuse("set of a computed member");
      const object = this.expr(target.object, scope);
      const name = target.property.value as string;
      return (S) => {
        const rhs = value(S);
        const o = object(S);
        if (!(o instanceof Namespace)) throw new Error("cannot assign attribute on non-namespace object");
        o.v[name] = rhs;
        return "";
      };
    }
    return refuse(`set of ${target.type}`);
  }

  forLoop(node: Node, scope: Scope): Block {
    const depth = scope.depth + 1;
    this.maxDepth = Math.max(this.maxDepth, depth);
    let vars: string[];
    const tuple = node.loopvar.type === "TupleLiteral";
    if (node.loopvar.type === "Identifier") vars = [checkAssignable(node.loopvar.value)];
    else if (tuple) vars = assigneeNames(node.loopvar);
    else return refuse(`loop variable ${node.loopvar.type}`);
    const select = node.iterable.type === "SelectExpression";
    const iterable = this.expr(select ? node.iterable.lhs : node.iterable, scope);
    const testNames = new Map<string, number>();
    for (const v of vars) if (!testNames.has(v)) testNames.set(v, testNames.size);
    const test = select ? this.expr(node.iterable.test, { depth, names: testNames, parent: scope }) : undefined;
    const declared: string[] = [...vars, "loop"];
    collectSets(node.body, declared);
    collectSets(node.defaultBlock, declared);
    const names = new Map<string, number>();
    for (const v of declared) if (!names.has(v)) names.set(v, names.size);
    const bodyScope: Scope = { depth, names, parent: scope };
    const body = this.block(node.body, bodyScope);
    const otherwise = this.block(node.defaultBlock, bodyScope);
    const varSlots = vars.map((v) => names.get(v)!);
    const testSlots = vars.map((v) => testNames.get(v)!);
    const loopSlot = names.get("loop")!;
    const size = names.size;
    const n = vars.length;
    const bind = (frame: unknown[], slots: number[], current: unknown) => {
      if (!tuple) frame[slots[0]!] = current;
      else for (let j = 0; j < n; j++) frame[slots[j]!] = (current as unknown[])[j];
    };
    return (S) => {
      let kept: ((current: unknown) => boolean) | undefined;
      if (test) {
        // One frame for the filter's every item: it sees the loop variables only.
        const testFrame: unknown[] = new Array(testNames.size);
        kept = (current) => {
          bind(testFrame, testSlots, current);
          S[depth] = testFrame;
          return truthy(test(S));
        };
      }
      const list = loopItems(iterable(S), tuple ? n : undefined, kept);
      const frame: unknown[] = new Array(size).fill(ABSENT);
      S[depth] = frame;
      let result = "";
      let noIteration = true;
      for (let i = 0; i < list.length; i++) {
        frame[loopSlot] = loopVariable(list, i);
        bind(frame, varSlots, list[i]);
        try {
          result += body(S);
        } catch (err) {
          if (err === CONTINUE) continue;
          if (err === BREAK) break;
          throw err;
        }
        noIteration = false;
      }
      if (noIteration) result += otherwise(S);
      return result;
    };
  }

  lookup(name: string, scope: Scope): Expr {
    const found: [number, number][] = [];
    for (let s: Scope | null = scope; s !== null && s.names !== null; s = s.parent) {
      const slot = s.names.get(name);
      if (slot !== undefined) found.push([s.depth, slot]);
    }
    const global = (S: Frames) => (S[0] as Record<string, unknown>)[name];
    if (found.length === 0) return global;
    if (found.length === 1) {
      const [d, i] = found[0]!;
      return (S) => {
        const v = (S[d] as unknown[])[i];
        return v === ABSENT ? (S[0] as Record<string, unknown>)[name] : v;
      };
    }
    return (S) => {
      for (const [d, i] of found) {
        const v = (S[d] as unknown[])[i];
        if (v !== ABSENT) return v;
      }
      return (S[0] as Record<string, unknown>)[name];
    };
  }

  args(nodes: Node[], scope: Scope, allowTuple = false): Args {
    const positional: Expr[] = [];
    const keywords: [string, Expr][] = [];
    const seen = new Set<string>();
    for (const a of nodes) {
      if (a.type === "SpreadExpression" || a.type === "KeywordSpreadExpression") refuse(a.type);
      if (a.type === "KeywordArgumentExpression") {
        const key = a.key.value as string;
        if (seen.has(key)) refuse(`keyword argument ${key} given twice`);
        seen.add(key);
        keywords.push([key, this.expr(a.value, scope, allowTuple)]);
      } else positional.push(this.expr(a, scope, allowTuple));
    }
    return { positional, keywords };
  }

  expr(node: Node, scope: Scope, allowTuple = false): Expr {
    switch (node.type) {
      case "IntegerLiteral": {
        const v = node.value as number;
        if (!Number.isInteger(v)) refuse(`integer literal ${v}`);
        return () => v;
      }
      case "FloatLiteral": {
        const v = mkFloat(node.value as number);
        return () => v;
      }
      case "StringLiteral": {
        const v = node.value as string;
        return () => v;
      }
      case "ArrayLiteral":
      case "TupleLiteral": {
        if (node.type === "TupleLiteral" && !allowTuple) refuse("tuple outside `in`, startswith/endswith or tojson's separators");
        const elements = (node.value as Node[]).map((x) => this.expr(x, scope));
        return (S) => elements.map((e) => e(S));
      }
      case "ObjectLiteral": {
        const entries: [string, Expr][] = [];
        for (const [key, value] of node.value as Map<Node, Node>) {
          if (key.type !== "StringLiteral") refuse("object literal with a computed key");
          const k = key.value as string;
          // A plain object would move integer-like keys first; the library's Map keeps insertion order.
          if (/^\d+$/.test(k) || k === "__proto__") refuse(`object literal key ${JSON.stringify(k)}`);
          entries.push([k, this.expr(value, scope)]);
        }
        return (S) => {
          const o: Record<string, unknown> = {};
          for (const [k, e] of entries) o[k] = e(S);
          return o;
        };
      }
      case "Identifier": {
        const name = node.value as string;
        if (CONSTANTS.has(name)) {
          const v = CONSTANTS.get(name);
          return () => v;
        }
        if (GLOBAL_FUNCTIONS.has(name)) refuse(`${name} as a value`);
        return this.lookup(name, scope);
      }
      case "MemberExpression":
        return this.member(node, scope);
      case "CallExpression":
        return this.call(node, scope);
      case "UnaryExpression":
        return this.unary(node, scope);
      case "BinaryExpression":
        return this.binary(node, scope);
      case "FilterExpression":
        return this.filter(node, scope);
      case "TestExpression": {
        const test = TESTS.get(node.test.value);
        if (!test) refuse(`test ${node.test.value}`);
        const operand = this.expr(node.operand, scope);
        return node.negate ? (S) => !test(operand(S)) : (S) => test(operand(S));
      }
      case "SelectExpression": {
        const test = this.expr(node.test, scope);
        const lhs = this.expr(node.lhs, scope);
        return (S) => (truthy(test(S)) ? lhs(S) : undefined);
      }
      case "Ternary": {
        const condition = this.expr(node.condition, scope);
        const a = this.expr(node.trueExpr, scope);
        const b = this.expr(node.falseExpr, scope);
        return (S) => (truthy(condition(S)) ? a(S) : b(S));
      }
      default:
        return refuse(`expression ${node.type}`);
    }
  }

  member(node: Node, scope: Scope): Expr {
    const object = this.expr(node.object, scope);
    const property = node.property;
    if (node.computed) {
      if (property.type === "SliceExpression") {
        const part = (x: Node | undefined): Expr => (x ? this.expr(x, scope) : () => undefined);
        const start = part(property.start);
        const stop = part(property.stop);
        const step = part(property.step);
        return (S) => {
          const o = object(S);
          if (!(Array.isArray(o) || typeof o === "string")) throw new Error("Slice object must be an array or string");
          return getSlice(o, start(S), stop(S), step(S));
        };
      }
      const key = this.expr(property, scope);
      return (S) => {
        const o = object(S);
        return getItem(o, key(S));
      };
    }
    if (property.type === "Identifier") {
      const name = property.value as string;
      return (S) => getAttr(object(S), name);
    }
    if (property.type === "IntegerLiteral") {
      const index = property.value as number;
      return (S) => getItem(object(S), index);
    }
    return refuse(`member ${property.type}`);
  }

  call(node: Node, scope: Scope): Expr {
    const callee = node.callee;
    if (callee.type === "Identifier") return this.globalCall(callee.value, node.args, scope);
    if (callee.type !== "MemberExpression" || callee.computed || callee.property.type !== "Identifier") refuse("call of a computed callee");
    const name = callee.property.value as string;
    if (!STRING_METHODS.has(name) && !OBJECT_METHODS.has(name)) refuse(`method ${name}`);
    const tupleArg = name === "startswith" || name === "endswith";
    const { positional, keywords } = this.args(node.args, scope, tupleArg);
    if (keywords.length > 0) refuse(`keyword arguments to ${name}`);
    const object = this.expr(callee.object, scope);
    const method = stringMethod(name);
    return (S) => {
      const args = positional.map((e) => e(S));
      const o = object(S);
      if (typeof o === "string") return method ? method(o, args) : notFunction(undefined);
      if (isObject(o)) {
        if (hasKey(o, name)) notFunction(o[name]);
        return objectMethod(name, o, args);
      }
      return notFunction(undefined);
    };
  }

  globalCall(name: string, argNodes: Node[], scope: Scope): Expr {
    const args = this.args(argNodes, scope);
    const { positional, keywords } = args;
    switch (name) {
      case "raise_exception": {
        const all = evalArgs(args);
        return (S) => {
          const [pos] = all(S);
          throw new Error(pos.map((x) => output(x)).join(","));
        };
      }
      case "namespace": {
        if (positional.length > 0) refuse("namespace() with a positional argument");
        return (S) => {
          const entries: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
          for (const [k, e] of keywords) entries[k] = e(S);
          return new Namespace(entries);
        };
      }
      case "range": {
        if (keywords.length > 0 || positional.length < 1 || positional.length > 3) refuse("range() arguments");
        return (S) => {
          const values = positional.map((e) => e(S));
          if (!values.every(isInt)) bail("range() of non-integers");
          return range(...(values as [number, number?, number?]));
        };
      }
      case "strftime_now": {
        if (keywords.length > 0 || positional.length !== 1) refuse("strftime_now() arguments");
        const format = positional[0]!;
        return (S) => {
          const f = format(S);
          return typeof f === "string" ? strftime(new Date(), f) : bail("strftime_now() of a non-string");
        };
      }
      default:
        return refuse(`call of ${name}`);
    }
  }

  unary(node: Node, scope: Scope): Expr {
    const argument = this.expr(node.argument, scope);
    const op = node.operator.value as string;
    if (op === "not") return (S) => !truthy(argument(S));
    if (op !== "-" && op !== "+") refuse(`unary ${op}`);
    const sign = op === "-" ? -1 : 1;
    return (S) => {
      const a = argument(S);
      if (typeof a === "boolean") return sign * (a ? 1 : 0);
      if (!isNumber(a)) throw new SyntaxError(`Unknown operator "${op}" for ${typeName(a)}`);
      const result = sign * num(a);
      return isFloat(a) ? mkFloat(result) : mkInt(result);
    };
  }

  binary(node: Node, scope: Scope): Expr {
    const op = node.operator.value as string;
    const left = this.expr(node.left, scope);
    const right = this.expr(node.right, scope, op === "in" || op === "not in");
    switch (op) {
      case "and":
        return (S) => {
          const l = left(S);
          return truthy(l) ? right(S) : l;
        };
      case "or":
        return (S) => {
          const l = left(S);
          return truthy(l) ? l : right(S);
        };
      // Fast paths for the common string cases, which the general case would give the same result.
      case "==":
        return (S) => {
          const l = left(S);
          const r = right(S);
          return typeof l === "string" && typeof r === "string" ? l === r : looseEqual(l, r);
        };
      case "!=":
        return (S) => {
          const l = left(S);
          const r = right(S);
          return typeof l === "string" && typeof r === "string" ? l !== r : !looseEqual(l, r);
        };
      case "+":
      case "~":
        return (S) => {
          const l = left(S);
          const r = right(S);
          return typeof l === "string" && typeof r === "string" ? l + r : binaryOp(op, l, r);
        };
      case "in":
        return (S) => {
          const l = left(S);
          const r = right(S);
          return typeof l === "string" && typeof r === "string" ? r.includes(l) : binaryOp(op, l, r);
        };
      case "-":
      case "*":
      case "/":
      case "//":
      case "%":
      case "**":
      case "<":
      case ">":
      case "<=":
      case ">=":
      case "not in":
        return (S) => binaryOp(op, left(S), right(S));
      default:
        return refuse(`operator ${op}`);
    }
  }

  filter(node: Node, scope: Scope): Expr {
    const operand = this.expr(node.operand, scope);
    const f = node.filter;
    if (f.type === "Identifier") {
      const name = f.value as string;
      if (!IDENTIFIER_FILTERS.has(name)) refuse(`filter ${name}`);
      return (S) => identifierFilter(name, operand(S));
    }
    if (f.type !== "CallExpression" || f.callee.type !== "Identifier") refuse("filter call");
    const name = f.callee.value as string;
    const args = evalArgs(this.args(f.args, scope, name === "tojson"));
    switch (name) {
      case "tojson":
        return (S) => {
          const v = operand(S);
          const [, kw] = args(S);
          return toJSON(v, kw.size === 0 ? null : jsonOptions(kw), 0, true);
        };
      case "join":
        return (S) => {
          const v = operand(S);
          let values: unknown[];
          if (typeof v === "string") values = Array.from(v);
          else if (Array.isArray(v)) values = v.map(joinItem);
          else throw new Error(`Cannot apply filter "join" to type: ${typeName(v)}`);
          const [pos, kw] = args(S);
          const separator = pos.length > 0 ? pos[0] : kw.has("separator") ? kw.get("separator") : "";
          if (typeof separator !== "string") throw new Error("separator must be a string");
          return values.join(separator);
        };
      case "int":
      case "float":
        return (S) => {
          const v = operand(S);
          const [pos, kw] = args(S);
          const fallback = pos.length > 0 ? pos[0] : kw.has("default") ? kw.get("default") : name === "int" ? 0 : new JFloat(0);
          if (typeof v === "string") {
            const parsed = name === "int" ? parseInt(v, 10) : parseFloat(v);
            return isNaN(parsed) ? fallback : name === "int" ? mkInt(parsed) : mkFloat(parsed);
          }
          if (isNumber(v)) return v;
          if (typeof v === "boolean") return name === "int" ? (v ? 1 : 0) : new JFloat(v ? 1 : 0);
          throw new Error(`Cannot apply filter "${name}" to type: ${typeName(v)}`);
        };
      case "default":
        return (S) => {
          const v = operand(S);
          const [pos, kw] = args(S);
          const fallback = pos.length > 0 ? pos[0] : "";
          const flag = pos.length > 1 ? pos[1] : kw.has("boolean") ? kw.get("boolean") : false;
          if (typeof flag !== "boolean") throw new Error("`default` filter flag must be a boolean");
          return v === undefined || (flag && !truthy(v)) ? fallback : v;
        };
      default:
        return refuse(`filter ${name}()`);
    }
  }
}

function isExpression(node: Node): boolean {
  return [
    "MemberExpression",
    "CallExpression",
    "Identifier",
    "IntegerLiteral",
    "FloatLiteral",
    "StringLiteral",
    "ArrayLiteral",
    "TupleLiteral",
    "ObjectLiteral",
    "BinaryExpression",
    "FilterExpression",
    "SelectExpression",
    "TestExpression",
    "UnaryExpression",
    "Ternary",
  ].includes(node.type);
}

/** A block `set`'s value: the block's text. */
function blockValue(block: Block): Expr {
  return (S) => block(S);
}

function jsonOptions(kw: Map<string, unknown>): JsonOptions {
  const indent = kw.has("indent") ? kw.get("indent") : null;
  if (!(indent === null || isInt(indent))) throw new Error("If set, indent must be a number");
  const ensureAscii = kw.has("ensure_ascii") ? kw.get("ensure_ascii") : false;
  if (typeof ensureAscii !== "boolean") throw new Error("If set, ensure_ascii must be a boolean");
  const sortKeys = kw.has("sort_keys") ? kw.get("sort_keys") : false;
  if (typeof sortKeys !== "boolean") throw new Error("If set, sort_keys must be a boolean");
  const separatorsArg = kw.has("separators") ? kw.get("separators") : null;
  let separators: [string, string] | null = null;
  if (Array.isArray(separatorsArg)) {
    const [itemSep, keySep] = separatorsArg as unknown[];
    if (separatorsArg.length !== 2 || typeof itemSep !== "string" || typeof keySep !== "string") {
      throw new Error("separators must be a tuple of two strings");
    }
    separators = [itemSep, keySep];
  } else if (separatorsArg !== null) throw new Error("If set, separators must be a tuple of two strings");
  return { indent, ensureAscii, sortKeys, separators };
}

function stringMethod(name: string): ((s: string, args: unknown[]) => unknown) | undefined {
  // The library's strip/lstrip/rstrip take no characters: any arguments are evaluated and ignored.
  switch (name) {
    case "upper":
      return (s) => s.toUpperCase();
    case "lower":
      return (s) => s.toLowerCase();
    case "strip":
      return (s) => s.trim();
    case "title":
      return (s) => titleCase(s);
    case "capitalize":
      return (s) => s.charAt(0).toUpperCase() + s.slice(1);
    case "rstrip":
      return (s) => s.trimEnd();
    case "lstrip":
      return (s) => s.trimStart();
    case "startswith":
      return (s, args) => affix(s, args, false);
    case "endswith":
      return (s, args) => affix(s, args, true);
    case "split":
      return (s, args) => splitString(s, args);
    case "replace":
      return (s, args) => {
        if (args.length < 2) throw new Error("replace() requires at least two arguments");
        const [oldValue, newValue] = args;
        if (typeof oldValue !== "string" || typeof newValue !== "string") throw new Error("replace() arguments must be strings");
        const count = args.length > 2 ? args[2] : null;
        if (!(count === null || isInt(count))) throw new Error("replace() count argument must be a number or null");
        return replaceString(s, oldValue, newValue, count ?? undefined);
      };
    default:
      return undefined;
  }
}

function objectMethod(name: string, o: Record<string, unknown>, args: unknown[]): unknown {
  switch (name) {
    case "get": {
      const key = args[0];
      if (typeof key !== "string") throw new Error(`Object key must be a string: got ${typeName(key)}`);
      if (hasKey(o, key)) return o[key];
      return args.length > 1 ? args[1] : null;
    }
    case "items":
      return items(o);
    case "keys":
      return Object.keys(o);
    case "values":
      return Object.keys(o).map((k) => o[k]);
    default:
      return notFunction(undefined);
  }
}

/** evaluateBinaryExpression after `and`, `or`, `==` and `!=`, in the library's order of cases. */
function binaryOp(op: string, l: unknown, r: unknown): unknown {
  if (l === undefined || r === undefined) {
    if (r === undefined && (op === "in" || op === "not in")) return op === "not in";
    throw new Error(`Cannot perform operation ${op} on undefined values`);
  }
  if (l === null || r === null) throw new Error("Cannot perform operation on null values");
  if (op === "~") return rawString(l) + rawString(r);
  const lNumber = isNumber(l);
  const rNumber = isNumber(r);
  if (op === "**" && (lNumber || typeof l === "boolean") && (rNumber || typeof r === "boolean")) {
    const a = typeof l === "boolean" ? Number(l) : num(l);
    const b = typeof r === "boolean" ? Number(r) : num(r);
    if (a === 0 && b < 0) throw new Error("0.0 cannot be raised to a negative power");
    const result = a ** b;
    if (!Number.isFinite(result)) throw new Error("Exponentiation result is not a finite real number");
    return isFloat(l) || isFloat(r) || b < 0 ? mkFloat(result) : mkInt(result);
  }
  if (lNumber && rNumber) {
    const a = num(l);
    const b = num(r);
    const float = isFloat(l) || isFloat(r);
    switch (op) {
      case "+":
        return float ? mkFloat(a + b) : mkInt(a + b);
      case "-":
        return float ? mkFloat(a - b) : mkInt(a - b);
      case "*":
        return float ? mkFloat(a * b) : mkInt(a * b);
      case "/":
        return mkFloat(a / b);
      case "//":
        return float ? mkFloat(Math.floor(a / b)) : mkInt(Math.floor(a / b));
      case "%":
        return float ? mkFloat(a % b) : mkInt(a % b);
      case "<":
        return a < b;
      case ">":
        return a > b;
      case ">=":
        return a >= b;
      case "<=":
        return a <= b;
    }
  } else if (Array.isArray(l) && Array.isArray(r)) {
    if (op === "+") return l.concat(r);
  } else if (Array.isArray(r)) {
    if (op === "in") return contains(l, r);
    if (op === "not in") return !contains(l, r);
  }
  if ((typeof l === "string" || typeof r === "string") && op === "+") return rawString(l) + rawString(r);
  if (typeof l === "string" && (typeof r === "string" || isObject(r))) {
    if (op === "in") return contains(l, r);
    if (op === "not in") return !contains(l, r);
  }
  throw new SyntaxError(`Unknown operator "${op}" between ${typeName(l)} and ${typeName(r)}`);
}

/** The filters a value of one type takes by name alone (`x | length`), with the library's name for the type. */
interface FilterTable<T> {
  type: string;
  filters: ReadonlyMap<string, (v: T) => unknown>;
}

const ARRAY_FILTERS: FilterTable<unknown[]> = {
  type: "ArrayValue",
  filters: new Map<string, (v: unknown[]) => unknown>([
    ["list", (v) => v],
    // An empty array gives the library a raw JS undefined, which it then handles unevenly.
    ["first", (v) => (v.length > 0 ? v[0] : bail("first of an empty array"))],
    ["last", (v) => (v.length > 0 ? v[v.length - 1] : bail("last of an empty array"))],
    ["length", (v) => v.length],
    ["reverse", (v) => v.slice().reverse()],
    ["join", (v) => v.map(joinItem).join("")],
    ["string", (v) => toJSON(v, null, 0, false)],
  ]),
};

const STRING_FILTERS: FilterTable<string> = {
  type: "StringValue",
  filters: new Map<string, (v: string) => unknown>([
    ["length", (v) => v.length],
    ["upper", (v) => v.toUpperCase()],
    ["lower", (v) => v.toLowerCase()],
    ["title", (v) => titleCase(v)],
    ["capitalize", (v) => v.charAt(0).toUpperCase() + v.slice(1)],
    ["trim", (v) => v.trim()],
    ["join", (v) => v],
    ["string", (v) => v],
    [
      "int",
      (v) => {
        const parsed = parseInt(v, 10);
        return isNaN(parsed) ? 0 : mkInt(parsed);
      },
    ],
    [
      "float",
      (v) => {
        const parsed = parseFloat(v);
        return isNaN(parsed) ? new JFloat(0) : mkFloat(parsed);
      },
    ],
  ]),
};

const NUMBER_FILTERS: FilterTable<unknown> = {
  type: "NumericValue",
  filters: new Map<string, (v: unknown) => unknown>([
    ["abs", (v) => (isFloat(v) ? mkFloat(Math.abs(num(v))) : mkInt(Math.abs(num(v))))],
    ["int", (v) => mkInt(Math.floor(num(v)))],
    ["float", (v) => mkFloat(num(v))],
    ["string", (v) => output(v)],
  ]),
};

const OBJECT_FILTERS: FilterTable<Record<string, unknown>> = {
  type: "ObjectValue",
  filters: new Map<string, (v: Record<string, unknown>) => unknown>([
    ["items", (v) => items(v)],
    ["length", (v) => Object.keys(v).length],
    ["keys", (v) => Object.keys(v)],
    ["values", (v) => Object.keys(v).map((k) => v[k])],
  ]),
};

const BOOLEAN_FILTERS: FilterTable<boolean> = {
  type: "BooleanValue",
  filters: new Map<string, (v: boolean) => unknown>([
    ["bool", (v) => v],
    ["int", (v) => (v ? 1 : 0)],
    ["float", (v) => new JFloat(v ? 1 : 0)],
    ["string", (v) => (v ? "true" : "false")],
  ]),
};

/** The filters that compile by name alone: every type's, and safe and tojson, which take any value. */
const IDENTIFIER_FILTERS: ReadonlySet<string> = new Set([
  "safe",
  "tojson",
  ...[ARRAY_FILTERS, STRING_FILTERS, NUMBER_FILTERS, OBJECT_FILTERS, BOOLEAN_FILTERS].flatMap((table) => [...table.filters.keys()]),
]);

/** The library's applyFilter with an Identifier filter, by the operand's type. */
function identifierFilter(name: string, v: unknown): unknown {
  if (name === "safe") return v;
  if (name === "tojson") return toJSON(v, null, 0, true);
  if (Array.isArray(v)) return fromTable(ARRAY_FILTERS, name, v);
  if (typeof v === "string") return fromTable(STRING_FILTERS, name, v);
  if (isNumber(v)) return fromTable(NUMBER_FILTERS, name, v);
  if (isObject(v)) return fromTable(OBJECT_FILTERS, name, v);
  if (typeof v === "boolean") return fromTable(BOOLEAN_FILTERS, name, v);
  throw new Error(`Cannot apply filter "${name}" to type: ${typeName(v)}`);
}

/** `v | name` from its type's table; a filter the type lacks throws the library's error. */
function fromTable<T>(table: FilterTable<T>, name: string, v: T): unknown {
  const filter = table.filters.get(name);
  if (filter === undefined) throw new Error(`Unknown ${table.type} filter: ${name}`);
  return filter(v);
}

/** The compiled render of a parsed template (`new Template(source).parsed`); throws NotCompilable. */
function compileProgram(program: Node): (context: Record<string, unknown>) => string {
  const compiler = new Compiler();
  const body = compiler.statement(program, { depth: 0, names: null, parent: null });
  const frames = compiler.maxDepth + 1;
  return (context) => {
    const globals = Object.create(null) as Record<string, unknown>;
    for (const key of Object.keys(context)) globals[key] = context[key];
    const S: Frames = new Array(frames);
    S[0] = globals;
    return body(S);
  };
}

/** Whether the compiled render may take this context; otherwise the library renders it (and throws where it throws). */
function suitable(context: unknown): context is Record<string, unknown> {
  if (typeof context !== "object" || context === null || Array.isArray(context)) return false;
  const proto = Object.getPrototypeOf(context) as unknown;
  if (proto !== Object.prototype && proto !== null) return false;
  for (const key in context) {
    if (RESERVED.has(key) || !hasKey(context, key) || !isPlainData((context as Record<string, unknown>)[key])) return false;
  }
  return true;
}

export interface TemplateRenderer {
  render(context: Record<string, unknown>): string;
  /** True while the compiled render is in use; false when the template did not compile or a check found a difference. */
  readonly compiled: boolean;
  /** Why the library renders this template. */
  readonly reason?: string;
}

export interface CompileOptions {
  /** Told once, when a check finds the compiled render differs from the library's and the template switches to it. */
  onMismatch?: (message: string) => void;
  /** Tests only: replaces the compiled render, to exercise the checks. */
  compiledRenderForTest?: (context: Record<string, unknown>) => string;
}

/** Renders checked against the library: every one of the first CHECK_FIRST, then one in CHECK_EVERY. */
const CHECK_FIRST = 64;
const CHECK_EVERY = 256;

class GuardedRenderer implements TemplateRenderer {
  private renders = 0;
  private failure: string | undefined;

  constructor(
    private readonly library: Template,
    private readonly compiledRender: (context: Record<string, unknown>) => string,
    private readonly onMismatch: ((message: string) => void) | undefined,
  ) {}

  get compiled(): boolean {
    return this.failure === undefined;
  }

  get reason(): string | undefined {
    return this.failure;
  }

  render(context: Record<string, unknown>): string {
    if (this.failure !== undefined || !suitable(context)) return this.library.render(context);
    const n = ++this.renders;
    let text: string;
    try {
      text = this.compiledRender(context);
    } catch (err) {
      // The library's own render decides: it throws its own error where the template fails on this input.
      const expected = this.library.render(context);
      if (!(err instanceof Bail)) this.mismatch(`the compiled template threw (${describe(err)}) where the library renders`);
      return expected;
    }
    if (n <= CHECK_FIRST || n % CHECK_EVERY === 0) {
      let expected: string;
      try {
        expected = this.library.render(context);
      } catch (err) {
        this.mismatch(`the library throws (${describe(err)}) where the compiled template renders`);
        throw err;
      }
      if (expected !== text) {
        this.mismatch(`the compiled template renders different text (${firstDifference(expected, text)})`);
        return expected;
      }
    }
    return text;
  }

  private mismatch(message: string): void {
    this.failure = message;
    this.onMismatch?.(message);
  }
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function firstDifference(expected: string, actual: string): string {
  let i = 0;
  while (i < expected.length && expected[i] === actual[i]) i++;
  return `at character ${i}: library ${JSON.stringify(expected.slice(i, i + 40))}, compiled ${JSON.stringify(actual.slice(i, i + 40))}`;
}

/**
 * A chat template's renderer: compiled and checked against the library where the template compiles, the library
 * otherwise. Throws (like `new Template`) when the template does not parse.
 */
export function compileTemplate(source: string, options: CompileOptions = {}): TemplateRenderer {
  const library = new Template(source);
  let render: (context: Record<string, unknown>) => string;
  try {
    render = compileProgram(library.parsed);
  } catch (err) {
    const reason = err instanceof NotCompilable ? err.message : `compiler error: ${describe(err)}`;
    return { render: (context) => library.render(context), compiled: false, reason };
  }
  return new GuardedRenderer(library, options.compiledRenderForTest ?? render, options.onMismatch);
}

/**
 * The compiled render without the checks, or why the template does not compile: for tests that compare it with the
 * library directly.
 */
export function compileUnchecked(source: string): ((context: Record<string, unknown>) => string) | { reason: string } {
  try {
    return compileProgram(new Template(source).parsed);
  } catch (err) {
    return { reason: describe(err) };
  }
}
