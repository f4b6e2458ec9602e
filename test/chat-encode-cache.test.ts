import { describe, expect, it } from "vitest";
import { loadChatModel } from "../src/chat/index.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";

describe("ChatModel.encode cache", () => {
  it("gives the same ids for a repeated long text, and callers cannot corrupt the cached copy", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const text = `<|im_start|>user\n${"How many eggs does Janet sell? ".repeat(20)}<|im_end|>\n`;
    const reference = [...model.encode(text)];
    expect(model.decode(reference)).toBe(text);
    // The repeated call comes from the cache; mutating what it returned must not reach the next caller.
    const first = model.encode(text);
    expect(first).toEqual(reference);
    first.push(-1);
    first[0] = -2;
    const second = model.encode(text);
    expect(second).toEqual(reference);
    expect(model.decode(second)).toBe(text);
  });
});
