/**
 * Downloads GSM8K's two parquet files (`openai/gsm8k`, config `main`) from the Hugging Face hub with undici, into a
 * cache folder, with progress. HF_ENDPOINT overrides the hub address (mirrors, tests); HF_TOKEN is sent if set.
 */
import { createWriteStream, promises as fs } from "node:fs";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { Transform } from "node:stream";
import { request } from "undici";
import { ConnectionError, ServerError } from "../errors.js";
import { temporarySibling } from "./atomic.js";
import type { Split } from "./gsm8k.js";

export const GSM8K_REPO = "openai/gsm8k";

export function hubEndpoint(): string {
  return (process.env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
}

export function gsm8kCacheDir(): string {
  const base = process.env.AGENTRL_CACHE ?? path.join(os.homedir(), ".cache", "agentrl");
  return path.join(base, "datasets", "openai--gsm8k");
}

export interface DownloadProgress {
  file: string;
  received: number;
  total: number | undefined;
}

/** Returns the local folder holding `main/<split>-00000-of-00001.parquet` for each split, downloading what is missing. */
export async function downloadGsm8k(
  splits: readonly Split[],
  onProgress: (progress: DownloadProgress) => void = () => undefined,
): Promise<string> {
  const root = gsm8kCacheDir();
  for (const split of splits) {
    const relative = `main/${split}-00000-of-00001.parquet`;
    const target = path.join(root, relative);
    if (await fs.stat(target).then((s) => s.size > 0, () => false)) continue;
    await fs.mkdir(path.dirname(target), { recursive: true });
    const url = `${hubEndpoint()}/datasets/${GSM8K_REPO}/resolve/main/${relative}`;
    await downloadFile(url, target, (received, total) => onProgress({ file: relative, received, total }));
  }
  return root;
}

async function downloadFile(url: string, target: string, onBytes: (received: number, total?: number) => void) {
  const headers: Record<string, string> = { "user-agent": "agentrl" };
  if (process.env.HF_TOKEN) headers.authorization = `Bearer ${process.env.HF_TOKEN}`;
  let response;
  try {
    response = await request(url, { headers, headersTimeout: 30_000, bodyTimeout: 60_000 });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err as Error).name;
    throw new ConnectionError(`could not download ${url} (${code}): the machine looks offline`, {
      hint: "pass --input with a local copy of GSM8K (train.jsonl/test.jsonl or the HF parquet files), or set HF_ENDPOINT to a reachable mirror",
      cause: err,
    });
  }
  if (response.statusCode >= 300 && response.statusCode < 400 && response.headers.location) {
    await response.body.dump();
    const next = new URL(String(response.headers.location), url).toString();
    return downloadFile(next, target, onBytes);
  }
  if (response.statusCode !== 200) {
    const body = (await response.body.text()).slice(0, 200);
    throw new ServerError(`download of ${url} failed with HTTP ${response.statusCode}`, response.statusCode, body, {
      hint: "check the address (HF_ENDPOINT) and, for gated mirrors, HF_TOKEN",
    });
  }
  const length = Number(response.headers["content-length"]);
  const total = Number.isFinite(length) && length > 0 ? length : undefined;
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      received += chunk.length;
      onBytes(received, total);
      callback(null, chunk);
    },
  });
  // Download beside the target and rename, so an interrupted download never looks like a cached file.
  const temp = temporarySibling(target);
  try {
    await pipeline(response.body, counter, createWriteStream(temp));
    await fs.rename(temp, target);
  } catch (err) {
    await fs.rm(temp, { force: true });
    throw new ConnectionError(`download of ${url} was interrupted (${(err as Error).message})`, { cause: err });
  }
}
