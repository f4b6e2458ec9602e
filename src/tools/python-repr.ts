/**
 * Python's repr()/str() for the few value kinds verl formats into tool texts (f"{answer=} {reward=}",
 * json.dumps). Observation texts are tokens the policy trains on, so they must match verl's byte for byte.
 */

/** Python's `repr(float)`: shortest round-trip digits, fixed notation for exponents in [-4, 16), else `1e+16`. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return "nan";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  // toExponential() with no argument gives the shortest digits that round-trip, like Python's repr.
  const [mantissa, expText] = x.toExponential().split("e") as [string, string];
  const exponent = Number(expText);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    let text: string;
    if (exponent < 0) {
      text = "0." + "0".repeat(-exponent - 1) + digits;
    } else if (digits.length <= exponent + 1) {
      text = digits + "0".repeat(exponent + 1 - digits.length) + ".0";
    } else {
      text = digits.slice(0, exponent + 1) + "." + digits.slice(exponent + 1);
    }
    return sign + text;
  }
  const mant = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const expSign = exponent < 0 ? "-" : "+";
  return `${sign}${mant}e${expSign}${String(Math.abs(exponent)).padStart(2, "0")}`;
}

/** A number as Python shows it: an int when `isInt`, else a float (`1.0`, `0.5`). */
export function pyNumberRepr(x: number, isInt: boolean): string {
  return isInt && Number.isInteger(x) ? String(BigInt(x)) : pyFloatRepr(x);
}

const NON_PRINTABLE = /[\p{C}\p{Z}]/u;

/** Python's `repr(str)`: single quotes unless the text has `'` and no `"`, with Python's escapes. */
export function pyStrRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of s) {
    if (ch === quote || ch === "\\") out += "\\" + ch;
    else if (ch === "\t") out += "\\t";
    else if (ch === "\n") out += "\\n";
    else if (ch === "\r") out += "\\r";
    else if (ch !== " " && NON_PRINTABLE.test(ch)) out += escapeCodePoint(ch.codePointAt(0) as number);
    else out += ch;
  }
  return out + quote;
}

function escapeCodePoint(cp: number): string {
  if (cp < 0x100) return "\\x" + cp.toString(16).padStart(2, "0");
  if (cp < 0x10000) return "\\u" + cp.toString(16).padStart(4, "0");
  return "\\U" + cp.toString(16).padStart(8, "0");
}

/**
 * Python's `str(value)` for a JSON-decoded value. JSON numbers lose Python's int/float distinction in JS:
 * integral numbers print as ints ("18"), others as floats ("18.5"), so a JSON `18.0` prints as "18" here
 * where Python would print "18.0".
 */
export function pyStr(value: unknown): string {
  if (typeof value === "string") return value;
  return pyReprValue(value);
}

function pyReprValue(value: unknown): string {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number") return pyNumberRepr(value, Number.isInteger(value));
  if (typeof value === "string") return pyStrRepr(value);
  if (Array.isArray(value)) return "[" + value.map(pyReprValue).join(", ") + "]";
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).map(([k, v]) => `${pyStrRepr(k)}: ${pyReprValue(v)}`);
    return "{" + entries.join(", ") + "}";
  }
  return String(value);
}

/** Python's `json.dumps(obj)` defaults: `", "` and `": "` separators and ensure_ascii escapes. */
export function pyJsonDumps(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (typeof value === "boolean") return value ? "true" : "false";
  if (typeof value === "number") return Number.isInteger(value) ? String(value) : pyFloatRepr(value);
  if (typeof value === "string") {
    return JSON.stringify(value).replace(/[\u0080-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }
  if (Array.isArray(value)) return "[" + value.map(pyJsonDumps).join(", ") + "]";
  const entries = Object.entries(value as Record<string, unknown>).map(([k, v]) => `${pyJsonDumps(k)}: ${pyJsonDumps(v)}`);
  return "{" + entries.join(", ") + "}";
}
