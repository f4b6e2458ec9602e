/**
 * A chat model's tokenizer and template, loaded offline from a Hugging Face model folder with @huggingface/tokenizers
 * and @huggingface/jinja (the code transformers.js uses; they render and tokenize like Python transformers).
 *
 * Besides encode/decode/render, this finds from the template itself the two facts a multi-turn rollout needs: the
 * token that ends an assistant turn (`<|im_end|>`, `<|eot_id|>`) and the "bridge" text the template writes after it
 * (Qwen's "\n"), which the engine never samples but which the next turn's prompt contains.
 */
import type { Tokenizer } from "@huggingface/tokenizers";
import { buildTokenizer, vocabSizeOf } from "./bpe-tables.js";
import { compileTemplate, type TemplateRenderer } from "./jinja-compile.js";
import { InputError } from "../errors.js";
import { readModelFiles, tokenText, type ChatTemplateSource, type ModelFiles } from "./files.js";
import { MemoMap } from "../memo-map.js";
import { addedTokenSplitter, encodeSegmented } from "./segmented-encode.js";
import { byteLevelDecoder, type ByteDecoder } from "./byte-decoder.js";
import { wordMemoEncoder } from "./word-encoder.js";
import { normalizeForTemplate, type ChatMessage, type ToolSchema } from "./messages.js";

export interface RenderOptions {
  tools?: readonly ToolSchema[];
  addGenerationPrompt?: boolean;
  /** Extra template variables, e.g. `{ enable_thinking: false }` for Qwen3. */
  templateKwargs?: Record<string, unknown>;
}

/** A text with its ids: a render kept with its encode (renderTokens). */
export interface EncodedText {
  readonly text: string;
  readonly ids: readonly number[];
}

/** Where an encoded text's last added token ends: the prefix through it, and how many of its ids that prefix has. */
interface AddedTokenCut {
  prefix: string;
  tokens: number;
}

export interface DecodeOptions {
  /** Drop tokens flagged `special` (control tokens such as `<|im_end|>`), as transformers' skip_special_tokens does. */
  skipSpecialTokens?: boolean;
}

const ENCODE_CACHE_ENTRIES = 4096;
const RENDER_CACHE_ENTRIES = 1024;
/** Conversations, not documents: longer renders are not kept. */
const RENDER_CACHE_MAX_CHARS = 65_536;

/** A content no real conversation contains, used to find where a rendered assistant message ends. */
export const ASSISTANT_MARKER = "agentrl-assistant-marker-7f3a";

export class ChatModel {
  readonly dir: string;
  readonly vocabSize: number;
  /**
   * Ids the engine may sample: config.json's vocab_size when it is larger (Qwen pads its embedding to 151,936 rows
   * past the tokenizer's 151,669 ids). A trained model all but never samples the padding, an untrained one does;
   * those ids decode to nothing, as in SGLang's detokenizer, and train like any other.
   */
  readonly embeddingSize: number;
  /** Ids that stop generation: generation_config.json `eos_token_id` plus tokenizer_config.json `eos_token`. */
  readonly eosTokenIds: readonly number[];
  /** The token the template closes an assistant message with. */
  readonly endOfTurnTokenId: number;
  readonly endOfTurnToken: string;
  /** What the template writes after the end-of-turn token of an assistant message (Qwen: "\n", Llama 3: ""). */
  readonly bridgeText: string;
  readonly bosToken: string | undefined;
  readonly eosToken: string | undefined;
  readonly chatTemplateFile: string;
  /** The template source, e.g. for src/parsers' `auto` format detection. */
  readonly chatTemplate: string;

  private readonly tokenizer: Tokenizer;
  /** Encodings of the text between added tokens. */
  private readonly pieceCache = new MemoMap<string, number[]>(ENCODE_CACHE_ENTRIES);
  /** Rendered texts by (tools, messages, options), and their ids once asked for (renderTokens). */
  private readonly renderCache = new MemoMap<string, { text: string; ids?: readonly number[] }>(RENDER_CACHE_ENTRIES);
  /** encodeTail's cut of each known text it was given (null: none usable). */
  private readonly cuts = new WeakMap<EncodedText, AddedTokenCut | null>();
  /** A short key per tool list (see toolsKey). */
  private readonly toolsKeys = new WeakMap<readonly ToolSchema[], string>();
  private readonly toolsKeysByJson = new Map<string, string>();
  /** Finds added tokens in text, when splitting there is exact for this tokenizer (segmented-encode.ts). */
  private readonly addedTokenSplitter: RegExp | undefined;
  /** Compiled to closures where the template allows (jinja-compile.ts), checked against @huggingface/jinja. */
  private readonly template: TemplateRenderer;
  private readonly addedIds: ReadonlySet<number>;
  private readonly controlIds: ReadonlySet<number>;
  private readonly specialTokenVars: Record<string, string>;
  /** Encodes a piece free of added tokens: through the word memo where that is exact (word-encoder.ts). */
  private readonly encodePiece: (piece: string) => number[];
  /** Byte-level BPE tokenizers decode from a table (byte-decoder.ts); others through the library. */
  private readonly byteDecoder: ByteDecoder | undefined;
  /** Template variables of every render (the constructor's). */
  readonly templateKwargs: Readonly<Record<string, unknown>>;

  /**
   * `templateKwargs`: template variables every render of this model gets (a run's data.apply_chat_template_kwargs,
   * `{enable_thinking: false}`); a render's own options add to them and win.
   */
  constructor(
    files: ModelFiles,
    { templateKwargs = {} }: { templateKwargs?: Record<string, unknown> } = {},
  ) {
    this.templateKwargs = templateKwargs;
    this.dir = files.dir;
    this.chatTemplateFile = files.chatTemplateFile;
    this.chatTemplate = files.chatTemplate;
    try {
      this.tokenizer = buildTokenizer(files.tokenizerJson, files.tokenizerConfig);
    } catch (err) {
      throw new InputError(`${files.dir}/tokenizer.json: the tokenizer cannot be built (${(err as Error).message})`, {
        cause: err,
      });
    }
    this.template = loadTemplate(files);

    // Added tokens are atomic: the tokenizer never splits them. Those flagged `special` are the control tokens that
    // skip_special_tokens removes. tokenizer_config.json's added_tokens_decoder may refine the flags.
    const added = new Map<number, boolean>();
    for (const token of files.tokenizerJson.added_tokens) added.set(token.id, token.special ?? false);
    for (const [id, entry] of Object.entries(files.tokenizerConfig.added_tokens_decoder ?? {})) {
      added.set(Number(id), entry.special ?? added.get(Number(id)) ?? false);
    }
    this.addedIds = new Set(added.keys());
    this.addedTokenSplitter = addedTokenSplitter(files.tokenizerJson);
    // The memo encodes pieces free of added tokens: only where the splitter takes them out first.
    const memo = this.addedTokenSplitter ? wordMemoEncoder(this.tokenizer, files.tokenizerJson) : undefined;
    this.encodePiece = memo ?? ((piece) => this.tokenizer.encode(piece, { add_special_tokens: false }).ids);
    this.controlIds = new Set([...added].filter(([, special]) => special).map(([id]) => id));

    this.vocabSize = vocabSizeOf(this.tokenizer);
    this.embeddingSize = Math.max(this.vocabSize, files.embeddingRows ?? 0);
    this.byteDecoder = byteLevelDecoder({
      decoder: files.tokenizerJson.decoder,
      model: files.tokenizerJson.model,
      addedTokens: files.tokenizerJson.added_tokens,
      specialTexts: new Set([
        ...files.tokenizerJson.added_tokens.filter((t) => t.special).map((t) => t.content),
        // The library compares token texts with whatever the list holds; only strings can match.
        ...[files.tokenizerConfig.additional_special_tokens ?? []].flat().filter((t): t is string => typeof t === "string"),
      ]),
      idToToken: (id) => this.tokenizer.id_to_token(id),
      vocabSize: this.vocabSize,
    });

    const config = files.tokenizerConfig;
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.specialTokenVars = {};
    for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"] as const) {
      const text = tokenText(config[key]);
      if (text !== undefined) this.specialTokenVars[key] = text;
    }

    const configFile = `${files.dir}/tokenizer_config.json`;
    const eos = new Set<number>();
    const fromGeneration = files.generationConfig?.eos_token_id;
    for (const id of fromGeneration === undefined || fromGeneration === null ? [] : [fromGeneration].flat()) eos.add(id);
    if (this.eosToken !== undefined) {
      const id = this.tokenizer.token_to_id(this.eosToken);
      if (id === undefined) throw new InputError(`${configFile}: eos_token: "${this.eosToken}" is not in the vocabulary`);
      eos.add(id);
    }

    this.endOfTurnTokenId = this.findEndOfTurnToken(configFile);
    this.endOfTurnToken = this.idToToken(this.endOfTurnTokenId) ?? "";
    if (eos.size === 0) eos.add(this.endOfTurnTokenId);
    this.eosTokenIds = [...eos];
    this.bridgeText = this.findBridge();
  }

  /**
   * Token ids of `text`, with no BOS/EOS or other special tokens added. `remember: false` for a text whose new pieces
   * will not come again (the drift check's sampled turns): known pieces still come from the cache.
   */
  encode(text: string, { remember = true }: { remember?: boolean } = {}): number[] {
    // A rollout encodes the same pieces over and over (system prompt with tools, the question, the generation
    // prompt); the tokenizer is the client's largest CPU cost (bench/rollout-overhead.mjs), so pieces are cached.
    return encodeSegmented(
      text,
      this.addedTokenSplitter,
      (content) => this.tokenizer.token_to_id(content)!,
      this.encodePiece,
      this.pieceCache,
      remember,
    );
  }

  decode(ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return ""; // the library rejects an empty list
    if (this.byteDecoder) return this.byteDecoder.decode(ids, options.skipSpecialTokens ?? false);
    return this.decodeWithLibrary(ids, options);
  }

  /** The library's decode, which the table decoder reproduces (test/chat-byte-decoder.test.ts compares the two). */
  decodeWithLibrary(ids: readonly number[], options: DecodeOptions = {}): string {
    if (ids.length === 0) return "";
    // Decode without the library's cleanup so that decode(encode(text)) == text, as the model saw it.
    return this.tokenizer.decode([...ids], {
      skip_special_tokens: options.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  /**
   * One token's bytes as the model wrote them: a byte-level token may hold part of a character, which its decoded text
   * shows as U+FFFD. Without a byte table (not a byte-level BPE), the UTF-8 of its decoded text.
   */
  tokenBytes(id: number): number[] {
    const bytes = this.byteDecoder?.bytes(id) ?? Buffer.from(this.decode([id]), "utf8");
    return [...bytes];
  }

  tokenToId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }

  idToToken(id: number): string | undefined {
    return this.tokenizer.id_to_token(id);
  }

  /**
   * True for atomic added tokens, whether flagged `special` or not (Qwen's `<tool_call>` is an added token with
   * `special: false`). This is the meaning src/parsers' TokenVocab needs to tell a delimiter token from the same
   * characters spelled by ordinary pieces.
   */
  isSpecialId(id: number): boolean {
    return this.addedIds.has(id);
  }

  /** The text of every added token (`<|im_end|>`, `<tool_call>`, …), e.g. for src/parsers' `auto` detection. */
  addedTokens(): string[] {
    return [...this.addedIds].map((id) => this.idToToken(id)).filter((token): token is string => token !== undefined);
  }

  /** True for tokens flagged `special` (the ones skipSpecialTokens drops): `<|im_end|>`, `<|eot_id|>`. */
  isControlTokenId(id: number): boolean {
    return this.controlIds.has(id);
  }

  /** True for the end-of-turn token and every EOS id: a sampled turn that ends with one of these is closed. */
  endsTurn(id: number): boolean {
    return id === this.endOfTurnTokenId || this.eosTokenIds.includes(id);
  }

  /** Renders messages exactly as the model's template does. Template errors are runtime failures of this input. */
  render(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    return this.cachedRender(messages, options).text;
  }

  /**
   * render() without the render cache, for a text rendered once: the drift check's whole conversation, which differs
   * from every other trajectory's. Its cache key (the conversation's JSON) would cost more to build and look up than
   * the lookup ever saves, and its entry would push out renders that recur (prompts, the tools' system block).
   */
  renderOnce(messages: readonly ChatMessage[], options: RenderOptions = {}): string {
    return this.renderUncached(messages, options);
  }

  /**
   * encode(render(messages)), kept with the render: the n samples of a prompt start from the same prompt, and the
   * encode, not only the render, is then done once.
   */
  renderTokens(messages: readonly ChatMessage[], options: RenderOptions = {}): EncodedText {
    const entry = this.cachedRender(messages, options);
    entry.ids ??= this.encode(entry.text);
    return entry as EncodedText;
  }

  /**
   * encode(text) for a text that starts as `known` does (a conversation's render starts with its prompt's), in two
   * parts: how many of `known`'s first ids it starts with (through `known`'s last added token; 0 where no cut
   * applies), and the ids of the rest, the only part encoded, so the long system prompt is neither scanned nor looked
   * up again. encode(text) is `known.ids.slice(0, reused)` then `tail`: exact because encode splits at added tokens
   * and encodes the text on either side independently (segmented-encode.ts); a text that does not start so is
   * encoded whole. The caller that holds those first ids already (the drift check: the record opens with the
   * prompt's) need not copy them.
   */
  encodeTail(known: EncodedText, text: string, options: { remember?: boolean } = {}): { reused: number; tail: number[] } {
    const cut = this.cutOf(known);
    if (cut === null || !text.startsWith(cut.prefix)) return { reused: 0, tail: this.encode(text, options) };
    return { reused: cut.tokens, tail: this.encode(text.slice(cut.prefix.length), options) };
  }

  private cutOf(known: EncodedText): AddedTokenCut | null {
    let cut = this.cuts.get(known);
    if (cut === undefined) {
      cut = this.findCut(known);
      this.cuts.set(known, cut);
    }
    return cut;
  }

  /**
   * The last added token of `known`, when splitting there is exact in any continuation: the tokenizer splits at
   * added tokens (addedTokenSplitter), and no longer added token contains this one, so no match in another
   * continuation can start before it and run past it.
   */
  private findCut(known: EncodedText): AddedTokenCut | null {
    if (!this.addedTokenSplitter) return null;
    let index = known.ids.length - 1;
    while (index >= 0 && !this.addedIds.has(known.ids[index]!)) index -= 1;
    if (index < 0) return null;
    const token = this.idToToken(known.ids[index]!);
    if (token === undefined || token.length === 0) return null;
    for (const id of this.addedIds) {
      const other = this.idToToken(id);
      if (other !== undefined && other !== token && other.includes(token)) return null;
    }
    const at = known.text.lastIndexOf(token);
    if (at < 0) return null;
    return { prefix: known.text.slice(0, at + token.length), tokens: index + 1 };
  }

  private cachedRender(messages: readonly ChatMessage[], options: RenderOptions): { text: string; ids?: readonly number[] } {
    // Rollouts render the same conversations again and again (a prompt for each of its n samples, the same tool
    // result's delta, the drift check); the template engine is the client's largest CPU cost after the tokenizer.
    const key = `${this.toolsKey(options.tools)}\u0000${JSON.stringify([messages, options.addGenerationPrompt ?? false, options.templateKwargs ?? null])}`;
    const cached = this.renderCache.get(key);
    if (cached !== undefined) return cached;
    const entry = { text: this.renderUncached(messages, options) };
    if (entry.text.length <= RENDER_CACHE_MAX_CHARS) this.renderCache.set(key, entry);
    return entry;
  }

  /**
   * Tool lists are long and, within a run, the same array every time: each array's JSON is computed once and named
   * by a short number, the same for every array of that JSON. Keys stay short, so a cache lookup does not hash the
   * tool schemas again on every render.
   */
  private toolsKey(tools: readonly ToolSchema[] | undefined): string {
    if (!tools || tools.length === 0) return "";
    let key = this.toolsKeys.get(tools);
    if (key === undefined) {
      const json = JSON.stringify(tools);
      key = this.toolsKeysByJson.get(json);
      if (key === undefined) {
        key = `t${this.toolsKeysByJson.size}`;
        this.toolsKeysByJson.set(json, key);
      }
      this.toolsKeys.set(tools, key);
    }
    return key;
  }

  private renderUncached(messages: readonly ChatMessage[], options: RenderOptions): string {
    const context: Record<string, unknown> = {
      ...this.specialTokenVars,
      ...this.templateKwargs,
      ...options.templateKwargs,
      messages: normalizeForTemplate(messages),
      add_generation_prompt: options.addGenerationPrompt ?? false,
    };
    if (options.tools && options.tools.length > 0) context.tools = options.tools;
    try {
      return this.template.render(context);
    } catch (err) {
      // The template (or the messages given to it) is input the user must fix: exit 2, naming the file.
      throw new InputError(`${this.chatTemplateFile}: the chat template failed to render: ${(err as Error).message}`, {
        hint: "check the template with: agentrl template --model DIR --messages FILE",
        cause: err,
      });
    }
  }

  /**
   * The end-of-turn token is the first added token the template writes after an assistant message's content. That
   * works for any template without a table of model names; the EOS token is the fallback for templates that will not
   * render this probe.
   */
  private findEndOfTurnToken(configFile: string): number {
    try {
      const text = this.render(probeConversation());
      const at = text.lastIndexOf(ASSISTANT_MARKER);
      if (at >= 0) {
        const tail = this.encode(text.slice(at + ASSISTANT_MARKER.length));
        const first = tail.find((id) => this.addedIds.has(id));
        if (first !== undefined) return first;
      }
    } catch {
      // Fall through to the EOS token.
    }
    const id = this.eosToken === undefined ? undefined : this.tokenizer.token_to_id(this.eosToken);
    if (id === undefined) {
      throw new InputError(`${configFile}: eos_token: missing, and the chat template closes no assistant turn with a token`);
    }
    return id;
  }

  /** The text after the end-of-turn token when an assistant message is the last one rendered. */
  private findBridge(): string {
    try {
      const text = this.render(probeConversation());
      const at = text.lastIndexOf(ASSISTANT_MARKER);
      const end = at < 0 ? -1 : text.indexOf(this.endOfTurnToken, at);
      return end < 0 ? "" : text.slice(end + this.endOfTurnToken.length);
    } catch {
      return "";
    }
  }
}

/** The folder's template, compiled and checked (jinja-compile.ts); a template that does not parse is the user's to fix. */
function loadTemplate(files: ModelFiles): TemplateRenderer {
  // The callback lives as long as the model: it keeps the file's name, not `files`, whose parsed tokenizer.json
  // (Qwen3's 151,387 merges as as many arrays) the garbage collector would otherwise mark at every full collection.
  const { chatTemplateFile } = files;
  try {
    return compileTemplate(files.chatTemplate, {
      // The render itself is the library's from then on, so only speed is lost; say it once, for a bug report.
      onMismatch: (message) =>
        process.stderr.write(`warning: ${chatTemplateFile}: the compiled chat template renders with @huggingface/jinja from now on: ${message}\n`),
    });
  } catch (err) {
    throw new InputError(`${chatTemplateFile}: chat_template does not parse (${(err as Error).message})`, {
      cause: err,
    });
  }
}

/**
 * A fixed conversation ending in an assistant message with the marker as content. It has no system message, so it
 * renders with templates that reject one; a template's default system prompt lands before the marker, where it does
 * not matter.
 */
export function probeConversation(assistant: Partial<ChatMessage> = {}): ChatMessage[] {
  return [
    { role: "user", content: "I am a user." },
    { role: "assistant", content: ASSISTANT_MARKER, ...assistant },
  ];
}

/** `chatTemplate` replaces the folder's own template (verl's custom_chat_template). */
export async function loadChatModel(dir: string, options: { templateKwargs?: Record<string, unknown>; chatTemplate?: ChatTemplateSource } = {}): Promise<ChatModel> {
  return new ChatModel(await readModelFiles(dir, options.chatTemplate), options);
}
