#!/usr/bin/env node
// The CLI bundled: dist/bundle/agentrl.mjs and the chunks it loads, made by esbuild from tsc's dist/ (npm run build).
//
// Why: Node 20 loads an ES module graph file by file, and `agentrl <command>` loads about 450 modules (agentrl's own,
// and its dependencies': zod and apache-arrow alone are about 230). That was most of a command's start-up, about
// 0.35 s of CPU before any work, paid by every command and every process a test starts; bench/cli-startup.mjs measures
// both side by side. Code splitting keeps what each command imports lazily (src/cli/commands) in its own chunks, so
// `agentrl --help` still reads only the table of contents.
//
// Left out and loaded from node_modules as before: parquet-wasm (it reads its .wasm file next to its own module) and
// the @huggingface packages (src/chat loads them with createRequire). The rollout's worker threads run tsc's
// dist/rollout/threads/worker.js. dist/ keeps tsc's files for them and for tests that import one module.
import { build } from "esbuild";
import { rmSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const outdir = path.join(root, "dist", "bundle");
rmSync(outdir, { recursive: true, force: true }); // chunk names carry hashes: no stale chunk stays behind
await build({
  entryPoints: { agentrl: path.join(root, "dist", "cli", "index.js") },
  outdir,
  outExtension: { ".js": ".mjs" },
  chunkNames: "chunks/[name]-[hash]",
  bundle: true,
  splitting: true,
  platform: "node",
  format: "esm",
  target: "node20",
  external: ["parquet-wasm", "@bokuweb/zstd-wasm", "@huggingface/*", "openai"],
  // Bundled CommonJS dependencies call require(); an ES module has none of its own.
  banner: { js: 'import { createRequire as __agentrlRequire } from "node:module"; const require = __agentrlRequire(import.meta.url);' },
  // Whitespace and syntax only: names stay, so a stack trace still reads.
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: "linked",
  logLevel: "warning",
});
