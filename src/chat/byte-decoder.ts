/**
 * Decoding from precomputed per-token bytes, for tokenizers whose decoder is byte-level BPE (GPT-2, Qwen, Llama 3).
 *
 * Why: the rollout decodes every sampled turn several times (the turn's text, the parser's view, the record's segment
 * texts), and @huggingface/tokenizers decodes by joining the token strings, splitting them into code points and
 * looking each one up in an object, per call. Here each id's bytes are looked up once, at load, so a decode is one
 * table copy per id and one UTF-8 decode per run of ordinary tokens.
 *
 * Exact by construction: it follows the library's ByteLevel decode step by step (test/chat-byte-decoder.test.ts
 * compares the two on random ids): an id outside the vocabulary is the unknown token (nothing, when there is none);
 * skipSpecialTokens drops the tokens whose text is a special token's; an added token's text is copied as is and ends
 * the run of ordinary tokens before it; each run is UTF-8 decoded on its own, invalid bytes becoming U+FFFD; a
 * character outside the byte alphabet is byte 0, as the library's Uint8Array conversion makes it. Any other decoder
 * (Metaspace, WordPiece, a Sequence) gets no table: byteLevelDecoder returns undefined and the library decodes.
 */
import { byteStandIns } from "./byte-alphabet.js";

/**
 * GPT-2's bytes_to_unicode, reversed: for each UTF-16 code unit, the byte that printable stand-in character means,
 * or -1. Every stand-in is below U+0144, so a flat array is the fastest lookup.
 */
function unicodeToBytes(): Int16Array {
  const table = new Int16Array(0x10000).fill(-1);
  byteStandIns().forEach((standIn, byte) => (table[standIn.charCodeAt(0)] = byte));
  return table;
}

/** How an id decodes: its bytes, an added token's text, or nothing. */
const ORDINARY = 0;
const ADDED = 1;

export interface ByteDecoderSource {
  /** tokenizer.json's decoder and model sections (only their types and unk_token / end_of_word_suffix are read). */
  decoder: unknown;
  model: unknown;
  /** Every added token, as tokenizer.json lists them. */
  addedTokens: readonly { id: number; content: string; special?: boolean }[];
  /** Texts skipSpecialTokens drops: the special added tokens and tokenizer_config's additional_special_tokens. */
  specialTexts: ReadonlySet<string>;
  /** The library's id → token text (undefined past the vocabulary). */
  idToToken: (id: number) => string | undefined;
  /** One past the largest id the vocabulary (added tokens included) has. */
  vocabSize: number;
}

/** What the decode tables are built from (built at the first decode). */
type TableSource = Pick<ByteDecoderSource, "addedTokens" | "specialTexts" | "idToToken" | "vocabSize">;

export interface ByteDecoder {
  decode(ids: readonly number[], skipSpecialTokens: boolean): string;
  /** One token's bytes (an added token's text as UTF-8); undefined past the vocabulary. */
  bytes(id: number): Uint8Array | undefined;
}

/** A table decoder for a byte-level BPE tokenizer, or undefined when the tokenizer decodes some other way. */
export function byteLevelDecoder(source: ByteDecoderSource): ByteDecoder | undefined {
  const decoder = source.decoder as { type?: string } | null | undefined;
  const model = source.model as { type?: string; unk_token?: unknown; end_of_word_suffix?: unknown } | undefined;
  if (decoder?.type !== "ByteLevel" || model?.type !== "BPE") return undefined;
  // The library replaces an end-of-word suffix after decoding and turns unknown ids into the unk token's bytes;
  // neither is worth a second path here.
  if (model.end_of_word_suffix || model.unk_token) return undefined;
  // Only what the tables are built from is kept: `model` is the whole BPE section of tokenizer.json (Qwen3's 151,387
  // merges as as many arrays), which the garbage collector would mark at every full collection for the model's life.
  const { addedTokens, specialTexts, idToToken, vocabSize } = source;
  return new TableDecoder({ addedTokens, specialTexts, idToToken, vocabSize });
}

/** What a decode looks up, per id. */
interface DecodeTables {
  /** Bytes of id i: bytes.subarray(offsets[i], offsets[i + 1]). */
  offsets: Int32Array;
  bytes: Uint8Array;
  kind: Uint8Array;
  special: Uint8Array;
  addedText: Map<number, string>;
}

/** Every id's bytes, kind and special flag: about 25 ms for Qwen3's 151,669 ids. */
function buildTables(source: TableSource): DecodeTables {
  const n = source.vocabSize;
  const toByte = unicodeToBytes();
  const addedContents = new Set(source.addedTokens.map((t) => t.content));
  const offsets = new Int32Array(n + 1);
  const kind = new Uint8Array(n);
  const special = new Uint8Array(n);
  const addedText = new Map<number, string>();
  const tokens: (string | undefined)[] = [];
  let units = 0;
  for (let id = 0; id < n; id++) {
    const token = source.idToToken(id);
    tokens.push(token);
    units += token?.length ?? 0;
  }
  // At most one byte per UTF-16 code unit: a stand-in character is one unit, and a code point outside the
  // alphabet (two units when astral) is one byte 0.
  const bytes = new Uint8Array(units);
  let at = 0;
  for (let id = 0; id < n; id++) {
    offsets[id] = at;
    const token = tokens[id];
    if (token === undefined) continue;
    if (source.specialTexts.has(token)) special[id] = 1;
    if (addedContents.has(token)) {
      kind[id] = ADDED;
      addedText.set(id, token);
      continue;
    }
    for (let i = 0; i < token.length; i++) {
      const unit = token.charCodeAt(i);
      // A surrogate pair is one code point, which the library maps (to byte 0) once.
      if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < token.length) {
        const next = token.charCodeAt(i + 1);
        if (next >= 0xdc00 && next <= 0xdfff) i++;
        bytes[at++] = 0;
        continue;
      }
      const byte = toByte[unit]!;
      bytes[at++] = byte < 0 ? 0 : byte;
    }
  }
  offsets[n] = at;
  return { offsets, bytes: bytes.subarray(0, at), kind, special, addedText };
}

/** Builds its tables at the first decode, not at load: a rollout's first request needs none and goes out sooner. */
class TableDecoder implements ByteDecoder {
  private tables: DecodeTables | undefined;
  /** Scratch space for one run of ordinary tokens, grown as needed. */
  /** A Buffer: its utf8 toString is cheaper per call than TextDecoder, and replaces bad bytes the same way. */
  private scratch = Buffer.allocUnsafe(4096);

  constructor(private readonly source: TableSource) {}

  decode(ids: readonly number[], skipSpecialTokens: boolean): string {
    let text = "";
    let length = 0;
    const { offsets, bytes, kind, special, addedText } = (this.tables ??= buildTables(this.source));
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const idKind = kind[id];
      // Past the vocabulary (an embedding's padding rows) there is no token, and no unk token: nothing.
      if (idKind === undefined) continue;
      if (skipSpecialTokens && special[id] === 1) continue;
      if (idKind === ADDED) {
        if (length > 0) text += this.flush(length);
        length = 0;
        text += addedText.get(id)!;
        continue;
      }
      const from = offsets[id]!;
      const to = offsets[id + 1]!;
      if (length + to - from > this.scratch.length) this.grow(length + to - from);
      // A byte loop: tokens are a few bytes, and a subarray per token was the decoder's main allocation.
      const scratch = this.scratch;
      for (let at = from; at < to; at++) scratch[length++] = bytes[at]!;
    }
    return length > 0 ? text + this.flush(length) : text;
  }

  bytes(id: number): Uint8Array | undefined {
    const { offsets, bytes, kind, addedText } = (this.tables ??= buildTables(this.source));
    if (kind[id] === undefined) return undefined;
    if (kind[id] === ADDED) return Buffer.from(addedText.get(id)!, "utf8");
    return bytes.subarray(offsets[id]!, offsets[id + 1]!);
  }

  private flush(length: number): string {
    return this.scratch.toString("utf8", 0, length);
  }

  private grow(needed: number): void {
    const next = Buffer.allocUnsafe(Math.max(needed, this.scratch.length * 2));
    this.scratch.copy(next);
    this.scratch = next;
  }
}
