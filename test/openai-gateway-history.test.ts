/**
 * The keys the gateway matches a request's history on (src/gateway/history.ts): the same turn gives the same key
 * whatever the agent's key order or argument formatting, and different turns never share one.
 */
import { describe, expect, it } from "vitest";
import { canonical, messageKey } from "../src/gateway/history.js";

describe("gateway history keys", () => {
  it("canonical JSON is JSON.stringify's text with object keys sorted, at every depth", () => {
    const value = { b: [1, { z: "ü\n", a: null }, [true]], a: { d: 1.5, c: "\"q\"" }, skip: undefined };
    expect(canonical(value)).toBe('{"a":{"c":"\\"q\\"","d":1.5},"b":[1,{"a":null,"z":"ü\\n"},[true]]}');
    expect(JSON.parse(canonical(value))).toEqual(JSON.parse(JSON.stringify(value)));
    expect(canonical([undefined, "x"])).toBe(JSON.stringify([undefined, "x"]));
    expect(canonical("text")).toBe('"text"');
  });

  it("a turn's key ignores argument key order and formatting, and keeps role, text and calls apart", () => {
    const call = (args: string) => ({ role: "assistant" as const, content: "ok", tool_calls: [{ id: "a", type: "function" as const, function: { name: "f", arguments: args } }] });
    expect(messageKey(call('{"x": 1, "y": [2]}'))).toBe(messageKey(call('{"y":[2],"x":1}')));
    expect(messageKey(call('{"x": 1}'))).not.toBe(messageKey(call('{"x": 2}')));
    expect(messageKey({ role: "developer", content: "s" })).toBe(messageKey({ role: "system", content: "s" }));
    // Text that looks like the key's own separators cannot make two turns equal.
    const plain = { role: "assistant" as const, content: `\u0000[["f",{}]]\u0000ok` };
    expect(messageKey(plain)).not.toBe(messageKey({ role: "assistant", content: "ok", tool_calls: [{ id: "a", type: "function", function: { name: "f", arguments: "{}" } }] }));
    expect(messageKey({ role: "user", content: "a" })).not.toBe(messageKey({ role: "tool", content: "a" }));
  });
});
