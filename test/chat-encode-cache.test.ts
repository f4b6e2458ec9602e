import { describe, expect, it } from "vitest";
import { loadChatModel } from "../src/chat/index.js";
import { QWEN3_DIR } from "./helpers/qwen3.js";

describe("ChatModel.encode cache", () => {
  it("gives the same ids for a repeated long text, and callers cannot corrupt the cached copy", async () => {
    const model = await loadChatModel(QWEN3_DIR);
    const text = `<|im_start|>user\n${"How many eggs does Janet sell? ".repeat(20)}<|im_end|>\n`;
    const first = model.encode(text);
    first.push(-1);
    first[0] = -2;
    const second = model.encode(text);
    expect(second).toEqual(first.slice(0, -1).map((id, i) => (i === 0 ? second[0] : id)));
    expect(second[0]).not.toBe(-2);
    expect(model.decode(second)).toBe(text);
  });
});
