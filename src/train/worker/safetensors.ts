/**
 * The safetensors file format, enough for batches: an 8-byte little-endian header length, a JSON header
 * `{name: {dtype, shape, data_offsets: [begin, end]}}`, then the raw little-endian tensor bytes.
 * See https://github.com/huggingface/safetensors#format.
 */
import { readFile, rename, writeFile } from "node:fs/promises";
import { z } from "zod";
import { InputError } from "../../errors.js";

export type TensorData =
  | { dtype: "I64"; shape: number[]; data: BigInt64Array }
  | { dtype: "F32"; shape: number[]; data: Float32Array }
  | { dtype: "I32"; shape: number[]; data: Int32Array };

const BYTES: Record<TensorData["dtype"], number> = { I64: 8, F32: 4, I32: 4 };

/** Serialises tensors into one safetensors buffer. Offsets are aligned to 8 bytes so readers can map them. */
export function encodeSafetensors(tensors: Record<string, TensorData>): Buffer {
  const header: Record<string, unknown> = {};
  let offset = 0;
  const names = Object.keys(tensors).sort();
  for (const name of names) {
    const t = tensors[name]!;
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) {
      throw new Error(`tensor ${name}: shape [${t.shape.join(", ")}] holds ${count} values, data has ${t.data.length}`);
    }
    const size = count * BYTES[t.dtype];
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  let json = JSON.stringify(header);
  // Pad the header with spaces so the data starts 8-byte aligned, as the reference writer does.
  json += " ".repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const headerBytes = Buffer.from(json, "utf8");
  const out = Buffer.alloc(8 + headerBytes.length + offset);
  out.writeBigUInt64LE(BigInt(headerBytes.length), 0);
  headerBytes.copy(out, 8);
  let at = 8 + headerBytes.length;
  for (const name of names) {
    const t = tensors[name]!;
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    bytes.copy(out, at);
    at += bytes.length;
  }
  return out;
}

/** Writes next to the target and renames, so the worker never reads a half-written batch. */
export async function writeSafetensors(path: string, tensors: Record<string, TensorData>): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}`;
  await writeFile(tmp, encodeSafetensors(tensors));
  await rename(tmp, path);
}

const headerEntry = z.object({
  dtype: z.string(),
  shape: z.array(z.number().int().nonnegative()),
  data_offsets: z.tuple([z.number().int().nonnegative(), z.number().int().nonnegative()]),
});

/** Reads a safetensors file holding F32, I64 or I32 tensors (what the worker writes). */
export async function readSafetensors(path: string): Promise<Record<string, TensorData>> {
  const buf = await readFile(path);
  if (buf.length < 8) throw new InputError(`${path}: not a safetensors file (too short)`);
  const headerLength = Number(buf.readBigUInt64LE(0));
  if (8 + headerLength > buf.length) throw new InputError(`${path}: safetensors header length ${headerLength} exceeds the file`);
  let raw: unknown;
  try {
    raw = JSON.parse(buf.subarray(8, 8 + headerLength).toString("utf8"));
  } catch (err) {
    throw new InputError(`${path}: safetensors header is not JSON`, { cause: err });
  }
  const out: Record<string, TensorData> = {};
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    if (name === "__metadata__") continue;
    const parsed = headerEntry.safeParse(value);
    if (!parsed.success) throw new InputError(`${path}: tensor ${name}: bad header entry`);
    const { dtype, shape, data_offsets } = parsed.data;
    const start = 8 + headerLength + data_offsets[0];
    const end = 8 + headerLength + data_offsets[1];
    if (end > buf.length) throw new InputError(`${path}: tensor ${name} runs past the end of the file`);
    // Copy into a fresh, aligned buffer: typed arrays need aligned offsets.
    const bytes = new Uint8Array(buf.subarray(start, end)).buffer;
    if (dtype === "F32") out[name] = { dtype, shape, data: new Float32Array(bytes) };
    else if (dtype === "I64") out[name] = { dtype, shape, data: new BigInt64Array(bytes) };
    else if (dtype === "I32") out[name] = { dtype, shape, data: new Int32Array(bytes) };
    else throw new InputError(`${path}: tensor ${name} has dtype ${dtype}; only F32, I64 and I32 are read`);
  }
  return out;
}
