/**
 * The value semantics of @huggingface/jinja 0.5.x's interpreter, on plain JS values, for the compiled templates of
 * jinja-compile.ts. Each helper mirrors a piece of the library's dist/index.cjs (named in its comment); where the
 * library's behaviour depends on details this representation does not keep (object identity, JS's loose string
 * conversion of Maps and runtime-value arrays), the helper bails out (`Bail`) and that render goes to the library.
 *
 * The representation: a string is a StringValue, a boolean a BooleanValue, null a NullValue, undefined an
 * UndefinedValue (the library treats an unset variable and an undefined one alike), a plain array an ArrayValue, a
 * plain object an ObjectValue, a `Namespace` a NamespaceValue. A JS number is an IntegerValue when it is an integer and
 * a FloatValue otherwise, as convertToRuntimeValues decides; a FloatValue whose value is integral (the literal `1.0`,
 * `4 / 2`) is a `JFloat`, since it prints as "2.0" where the IntegerValue prints "2". An integer operation whose result
 * is not finite (the library keeps it an IntegerValue) bails.
 */

/** A render this code does not mirror exactly: the caller renders it with the library instead. */
export class Bail extends Error {}

export function bail(why: string): never {
  throw new Bail(why);
}

/** A FloatValue with an integral value. */
export class JFloat {
  constructor(readonly v: number) {}
}

/** A NamespaceValue: its entries in a null-prototype object (keys are identifiers, so insertion order is kept). */
export class Namespace {
  constructor(readonly v: Record<string, unknown>) {}
}

/** The loop's `break`/`continue`, thrown like the library's BreakControl/ContinueControl (without a stack). */
export const BREAK = { control: "break" };
export const CONTINUE = { control: "continue" };

const isEnumerableOwn = Object.prototype.propertyIsEnumerable;

/** An own enumerable key: what Object.entries put into the library's ObjectValue map. */
export function hasKey(o: object, k: string): boolean {
  return isEnumerableOwn.call(o, k);
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof JFloat) && !(v instanceof Namespace);
}

export function isInt(v: unknown): v is number {
  return typeof v === "number" && Number.isInteger(v);
}

export function isNumber(v: unknown): boolean {
  return typeof v === "number" || v instanceof JFloat;
}

export function isFloat(v: unknown): boolean {
  return v instanceof JFloat || (typeof v === "number" && !Number.isInteger(v));
}

export function num(v: unknown): number {
  return typeof v === "number" ? v : (v as JFloat).v;
}

export function mkFloat(x: number): number | JFloat {
  return Number.isInteger(x) ? new JFloat(x) : x;
}

export function mkInt(x: number): number {
  return Number.isInteger(x) ? x : bail(`integer result ${x}`);
}

/** The library's type names, for messages. */
export function typeName(v: unknown): string {
  if (v === undefined) return "UndefinedValue";
  if (v === null) return "NullValue";
  if (typeof v === "string") return "StringValue";
  if (typeof v === "boolean") return "BooleanValue";
  if (typeof v === "number") return Number.isInteger(v) ? "IntegerValue" : "FloatValue";
  if (v instanceof JFloat) return "FloatValue";
  if (v instanceof Namespace) return "NamespaceValue";
  if (Array.isArray(v)) return "ArrayValue";
  return "ObjectValue";
}

/** `__bool__`: empty strings, arrays and objects are false; a namespace (a Map to the library) is always true. */
export function truthy(v: unknown): boolean {
  if (typeof v === "string") return v.length > 0;
  if (typeof v === "boolean") return v;
  if (typeof v === "number") return !!v;
  if (v === null || v === undefined) return false;
  if (Array.isArray(v)) return v.length > 0;
  if (v instanceof JFloat) return v.v !== 0;
  if (v instanceof Namespace) return true;
  for (const k in v as object) if (hasKey(v as object, k)) return true;
  return false;
}

/** RuntimeValue.toString, as evaluateBlock appends an expression's value (null and undefined append nothing). */
export function output(v: unknown): string {
  if (typeof v === "string") return v;
  if (v === null || v === undefined) return "";
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (v instanceof JFloat) return floatString(v.v);
  return toJSON(v, null, 0, false);
}

/** FloatValue.toString. */
function floatString(x: number): string {
  if (Object.is(x, -0)) return "-0.0";
  return x % 1 === 0 ? x.toFixed(1) : x.toString();
}

/**
 * `value.toString()` of a runtime value's raw JS value, as `+` and `~` concatenate (not RuntimeValue.toString: a float
 * `2.0` concatenates as "2"). An array's raw value is a JS array of runtime values, joined with "," (each printed by
 * RuntimeValue.toString, where a NullValue prints "undefined"); an object's or a namespace's is a Map.
 */
export function rawString(v: unknown): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  if (v instanceof JFloat) return String(v.v);
  if (Array.isArray(v)) return v.map((x) => (x === null || x === undefined ? "undefined" : output(x))).join(",");
  if (typeof v === "object" && v !== null) return "[object Map]";
  return bail(`string of ${typeName(v)}`);
}

/** A runtime value's raw JS value, for `==` and `in` (which compare `.value`); null is a NullValue whose value is undefined. */
function raw(v: unknown): unknown {
  if (v === null) return undefined;
  if (v instanceof JFloat) return v.v;
  return v;
}

function isComposite(v: unknown): boolean {
  return typeof v === "object" && v !== null && !(v instanceof JFloat);
}

/** `left.value == right.value`: JS loose equality; arrays and objects compare by the library's object identity, which bails. */
export function looseEqual(a: unknown, b: unknown): boolean {
  const ca = isComposite(a);
  const cb = isComposite(b);
  if (ca || cb) {
    if ((ca && (b === null || b === undefined)) || (cb && (a === null || a === undefined))) return false;
    return bail("== on an array or object");
  }
  // eslint-disable-next-line eqeqeq
  return raw(a) == raw(b);
}

/** `in` / `not in` (evaluateBinaryExpression), after the undefined and null checks. */
export function contains(left: unknown, right: unknown): boolean {
  if (Array.isArray(right)) {
    if (isComposite(left)) return bail("`in` with an array or object on the left");
    const l = raw(left);
    for (const x of right) if (!isComposite(x) && raw(x) === l) return true;
    return false;
  }
  if (typeof left === "string" && typeof right === "string") return right.includes(left);
  if (typeof left === "string" && isObject(right)) return hasKey(right, left);
  throw new SyntaxError(`Unknown operator "in" between ${typeName(left)} and ${typeName(right)}`);
}

/** utils.ts `slice`. */
export function sliceArray<T>(array: readonly T[], start: number | undefined, stop: number | undefined, step = 1): T[] {
  const direction = Math.sign(step);
  if (direction >= 0) {
    start = (start ??= 0) < 0 ? Math.max(array.length + start, 0) : Math.min(start, array.length);
    stop = (stop ??= array.length) < 0 ? Math.max(array.length + stop, 0) : Math.min(stop, array.length);
  } else {
    start = (start ??= array.length - 1) < 0 ? Math.max(array.length + start, -1) : Math.min(start, array.length - 1);
    stop = (stop ??= -1) < -1 ? Math.max(array.length + stop, -1) : Math.min(stop, array.length - 1);
  }
  const result: T[] = [];
  for (let i = start; direction * i < direction * stop; i += step) result.push(array[i] as T);
  return result;
}

/** utils.ts `range`. */
export function range(start: number, stop?: number, step = 1): number[] {
  if (stop === undefined) {
    stop = start;
    start = 0;
  }
  if (step === 0) throw new Error("range() step must not be zero");
  const result: number[] = [];
  if (step > 0) for (let i = start; i < stop; i += step) result.push(i);
  else for (let i = start; i > stop; i += step) result.push(i);
  return result;
}

/** utils.ts `titleCase`. */
export function titleCase(value: string): string {
  return value.replace(/\b\w/g, (c) => c.toUpperCase());
}

/** utils.ts `strftime`. */
export function strftime(date: Date, format: string): string {
  const monthFormatterLong = new Intl.DateTimeFormat(undefined, { month: "long" });
  const monthFormatterShort = new Intl.DateTimeFormat(undefined, { month: "short" });
  const pad2 = (n: number) => (n < 10 ? "0" + n : n.toString());
  return format.replace(/%[YmdbBHM%]/g, (token) => {
    switch (token) {
      case "%Y":
        return date.getFullYear().toString();
      case "%m":
        return pad2(date.getMonth() + 1);
      case "%d":
        return pad2(date.getDate());
      case "%b":
        return monthFormatterShort.format(date);
      case "%B":
        return monthFormatterLong.format(date);
      case "%H":
        return pad2(date.getHours());
      case "%M":
        return pad2(date.getMinutes());
      case "%%":
        return "%";
      default:
        return token;
    }
  });
}

/** utils.ts `replace`. */
export function replaceString(str: string, oldvalue: string, newvalue: string, count: number | undefined): string {
  if (count === 0) return str;
  let remaining = count == null || count < 0 ? Infinity : count;
  const pattern = oldvalue.length === 0 ? new RegExp("(?=)", "gu") : new RegExp(oldvalue.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "gu");
  return str.replaceAll(pattern, (match) => {
    if (remaining > 0) {
      --remaining;
      return newvalue;
    }
    return match;
  });
}

/**
 * The string method `split(sep=None, maxsplit=-1)` (StringValue builtins). An argument given as an undefined value is
 * not a missing one: the library rejects it.
 */
export function splitString(s: string, args: readonly unknown[]): string[] {
  const sep = args.length > 0 ? args[0] : null;
  if (!(typeof sep === "string" || sep === null)) throw new Error("sep argument must be a string or null");
  const maxsplit = args.length > 1 ? args[1] : -1;
  if (!isInt(maxsplit)) throw new Error("maxsplit argument must be a number");
  let result: string[] = [];
  if (sep === null) {
    const text = s.trimStart();
    for (const { 0: match, index } of text.matchAll(/\S+/g)) {
      if (maxsplit !== -1 && result.length >= maxsplit && index !== undefined) {
        result.push(match + text.slice(index + match.length));
        break;
      }
      result.push(match);
    }
  } else {
    if (sep === "") throw new Error("empty separator");
    result = s.split(sep);
    if (maxsplit !== -1 && result.length > maxsplit) result.push(result.splice(maxsplit).join(sep));
  }
  return result;
}

/** `startswith`/`endswith` with a string or a tuple of strings. */
export function affix(s: string, args: unknown[], ends: boolean): boolean {
  const name = ends ? "endswith" : "startswith";
  if (args.length === 0) throw new Error(`${name}() requires at least one argument`);
  const pattern = args[0];
  if (typeof pattern === "string") return ends ? s.endsWith(pattern) : s.startsWith(pattern);
  if (Array.isArray(pattern)) {
    for (const item of pattern) {
      if (typeof item !== "string") throw new Error(`${name}() tuple elements must be strings`);
      if (ends ? s.endsWith(item) : s.startsWith(item)) return true;
    }
    return false;
  }
  throw new Error(`${name}() argument must be a string or tuple of strings`);
}

export interface JsonOptions {
  indent: number | null;
  ensureAscii: boolean;
  separators: [string, string] | null;
  sortKeys: boolean;
}

const NON_ASCII_CHARS = /[\x7f-\uffff]/g;
function makeAsciiSafe(str: string): string {
  return str.replace(NON_ASCII_CHARS, (char) => "\\u" + char.charCodeAt(0).toString(16).padStart(4, "0"));
}

/** Objects and arrays frozen by freezeTemplateValue, at every depth: their JSON cannot change. */
const deeplyFrozen = new WeakSet<object>();
/** Their `tojson` text, by convertUndefinedToNull. */
const frozenJson = [new WeakMap<object, string>(), new WeakMap<object, string>()] as const;

/**
 * Freezes `value` at every depth and returns it, so that the `tojson` filter prints it once for the run: a run's tool
 * schemas go into every prompt the template renders (and into the drift check's render of every trajectory), and
 * printing them again each time was ~1.5% of the rollout client's CPU on distinct conversations. Only plain data
 * (objects, arrays, strings, numbers, booleans, null) is frozen; anything else is left as it is and not cached.
 */
export function freezeTemplateValue<T>(value: T): T {
  freezeDeeply(value);
  return value;
}

/**
 * True when `value` and everything in it is plain data, now frozen. A value that contains itself (a YAML alias can
 * build one) is not JSON: it is left unfrozen, and `tojson` reports it as it would without freezing.
 */
function freezeDeeply(value: unknown, ancestors: Set<object> = new Set()): boolean {
  if (value === null || typeof value !== "object") return typeof value !== "function" && typeof value !== "symbol" && typeof value !== "bigint";
  if (deeplyFrozen.has(value)) return true;
  if (ancestors.has(value)) return false;
  const proto = Object.getPrototypeOf(value);
  if (!Array.isArray(value) && proto !== Object.prototype && proto !== null) return false;
  ancestors.add(value);
  let plain = true;
  for (const item of Object.values(value)) if (!freezeDeeply(item, ancestors)) plain = false;
  ancestors.delete(value);
  if (!plain) return false;
  Object.freeze(value);
  deeplyFrozen.add(value);
  return true;
}

/**
 * toJSON without options: `, ` and `: ` separators, no indent (the `tojson` filter as chat templates use it on every
 * tool schema and tool call; the general function below builds arrays of parts for each level).
 */
function toJSONPlain(input: unknown, convertUndefinedToNull: boolean): string {
  if (typeof input === "object" && input !== null && deeplyFrozen.has(input)) {
    const cache = frozenJson[convertUndefinedToNull ? 1 : 0];
    let text = cache.get(input);
    if (text === undefined) {
      text = toJSONPlainUncached(input, convertUndefinedToNull);
      cache.set(input, text);
    }
    return text;
  }
  return toJSONPlainUncached(input, convertUndefinedToNull);
}

function toJSONPlainUncached(input: unknown, convertUndefinedToNull: boolean): string {
  if (typeof input === "string") return JSON.stringify(input);
  if (input === null) return "null";
  if (input === undefined) return convertUndefinedToNull ? "null" : "undefined";
  if (typeof input === "number" || typeof input === "boolean") return JSON.stringify(input);
  if (input instanceof JFloat) return JSON.stringify(input.v);
  if (typeof input !== "object") throw new Error(`Cannot convert to JSON: ${typeof input}`);
  if (Array.isArray(input)) {
    let out = "[";
    for (let i = 0; i < input.length; i++) out += (i > 0 ? ", " : "") + toJSONPlain(input[i], convertUndefinedToNull);
    return out + "]";
  }
  const object = input instanceof Namespace ? input.v : (input as Record<string, unknown>);
  let out = "{";
  let first = true;
  for (const key of Object.keys(object)) {
    out += (first ? "" : ", ") + JSON.stringify(key) + ": " + toJSONPlain(object[key], convertUndefinedToNull);
    first = false;
  }
  return out + "}";
}

/** runtime.ts `toJSON` (the `tojson` filter, and how arrays and objects print). */
export function toJSON(input: unknown, options: JsonOptions | null, depth: number, convertUndefinedToNull: boolean): string {
  if (options === null) return toJSONPlain(input, convertUndefinedToNull);
  const indent = options?.indent ?? null;
  const ensureAscii = options?.ensureAscii ?? false;
  const separators = options?.separators ?? null;
  let itemSeparator: string;
  let keySeparator: string;
  if (separators) [itemSeparator, keySeparator] = separators;
  else if (indent) {
    itemSeparator = ",";
    keySeparator = ": ";
  } else {
    itemSeparator = ", ";
    keySeparator = ": ";
  }
  if (input === null) return "null";
  if (input === undefined) return convertUndefinedToNull ? "null" : "undefined";
  if (typeof input === "number" || typeof input === "boolean") return JSON.stringify(input);
  if (input instanceof JFloat) return JSON.stringify(input.v);
  if (typeof input === "string") {
    const result = JSON.stringify(input);
    return ensureAscii ? makeAsciiSafe(result) : result;
  }
  if (typeof input !== "object") throw new Error(`Cannot convert to JSON: ${typeof input}`);
  const indentValue = indent ? " ".repeat(indent) : "";
  const basePadding = "\n" + indentValue.repeat(depth);
  const childrenPadding = basePadding + indentValue;
  if (Array.isArray(input)) {
    const core = input.map((x) => toJSON(x, options, depth + 1, convertUndefinedToNull));
    return indent && core.length > 0
      ? `[${childrenPadding}${core.join(`${itemSeparator}${childrenPadding}`)}${basePadding}]`
      : `[${core.join(itemSeparator)}]`;
  }
  const object = input instanceof Namespace ? input.v : (input as Record<string, unknown>);
  let keys = Object.keys(object);
  if (options?.sortKeys) keys = keys.sort((a, b) => a.localeCompare(b));
  const core = keys.map((key) => {
    let keyStr = JSON.stringify(key);
    if (ensureAscii) keyStr = makeAsciiSafe(keyStr);
    const v = `${keyStr}${keySeparator}${toJSON(object[key], options, depth + 1, convertUndefinedToNull)}`;
    return indent ? `${childrenPadding}${v}` : v;
  });
  return indent && core.length > 0 ? `{${core.join(itemSeparator)}${basePadding}}` : `{${core.join(itemSeparator)}}`;
}

const STRING_METHODS = new Set(["upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip", "startswith", "endswith", "split", "replace"]);
const OBJECT_METHODS = new Set(["get", "items", "keys", "values", "dictsort"]);

/**
 * `object.name` (evaluateMemberExpression with a string property). A builtin method read without calling it would be
 * a FunctionValue; that bails.
 */
export function getAttr(o: unknown, k: string): unknown {
  if (typeof o === "object" && o !== null) {
    if (Array.isArray(o)) return k === "length" ? o.length : undefined;
    if (o instanceof JFloat) return undefined;
    if (o instanceof Namespace) return hasKey(o.v, k) ? o.v[k] : undefined;
    if (hasKey(o, k)) return (o as Record<string, unknown>)[k];
    if (OBJECT_METHODS.has(k)) bail(`method ${k} as a value`);
    return undefined;
  }
  if (typeof o === "string") {
    if (k === "length") return o.length;
    if (STRING_METHODS.has(k)) bail(`method ${k} as a value`);
  }
  return undefined;
}

/** `object[key]` (evaluateMemberExpression, computed, not a slice). */
export function getItem(o: unknown, k: unknown): unknown {
  if (typeof k === "string") return getAttr(o, k);
  const attributes = isObject(o) || o instanceof Namespace;
  if (isInt(k) && !attributes) {
    if (Array.isArray(o)) return o.at(k);
    if (typeof o === "string") return o.at(k);
  }
  throw new Error(`Cannot access property with non-string: got ${typeName(k)}`);
}

/** evaluateSliceExpression. */
export function getSlice(o: unknown, start: unknown, stop: unknown, step: unknown): unknown {
  const check = (v: unknown, what: string): number | undefined => {
    if (v === undefined || isInt(v)) return v;
    throw new Error(`Slice ${what} must be numeric or undefined`);
  };
  if (Array.isArray(o)) return sliceArray(o, check(start, "start"), check(stop, "stop"), check(step, "step"));
  if (typeof o === "string") return sliceArray(Array.from(o), check(start, "start"), check(stop, "stop"), check(step, "step")).join("");
  throw new Error("Slice object must be an array or string");
}

/** The `join` filter's `x.value` of each item: only primitives have a raw value that joins the same way here. */
export function joinItem(x: unknown): unknown {
  if (x === null || x === undefined) return undefined;
  if (x instanceof JFloat) return x.v;
  if (typeof x === "object") return bail("join of an array or object");
  return x;
}

/** Own enumerable entries of an ObjectValue, as `items()` gives them: fresh [key, value] arrays. */
export function items(o: Record<string, unknown>): unknown[][] {
  return Object.keys(o).map((k) => [k, o[k]]);
}

/**
 * The context must be what convertToRuntimeValues maps one-to-one onto this representation: strings, numbers,
 * booleans, null, undefined, dense plain arrays and plain objects. Anything else (a function, a class instance, a Map,
 * a sparse array, deep nesting) renders with the library.
 */
export function isPlainData(v: unknown, depth = 0): boolean {
  switch (typeof v) {
    case "string":
    case "number":
    case "boolean":
    case "undefined":
      return true;
    case "object": {
      if (v === null) return true;
      if (depth > 64) return false;
      if (Array.isArray(v)) {
        if (Object.getPrototypeOf(v) !== Array.prototype) return false;
        for (let i = 0; i < v.length; i++) {
          if (!(i in v) || !isPlainData(v[i], depth + 1)) return false;
        }
        return true;
      }
      const proto = Object.getPrototypeOf(v) as unknown;
      if (proto !== Object.prototype && proto !== null) return false;
      for (const k in v) {
        if (!hasKey(v, k) || !isPlainData((v as Record<string, unknown>)[k], depth + 1)) return false;
      }
      return true;
    }
    default:
      return false;
  }
}
