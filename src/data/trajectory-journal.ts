/**
 * Lines of the parquet writer's crash journal (`FILE.parts/pending.jsonl`, and a part's own `pending-<part>.jsonl`
 * until the part is on disk): a trajectory as JSON, except that its token-length number lists are packed, base64 of
 * the little-endian values in the type the parquet file stores them in (`{"packed": "float32", "base64": "..."}`).
 *
 * Why: every finished trajectory is journaled before anything else, and JSON.stringify spends most of its time
 * printing logprobs as shortest round-trip decimals (about 20 of 31 µs for a 460-token response, 43 µs per 1,000
 * logprobs). Packed, the same line costs a fifth of that and is half the size. The parquet part stores int32 ids,
 * int8 masks and float32 logprobs, so packing in those types loses nothing the finished file keeps.
 *
 * User-facing `.jsonl` output stays plain JSON: only the journal is packed, and only the journal reader unpacks.
 */
import { InputError } from "../errors.js";
import type { Trajectory } from "./trajectory.js";

const PACKED_TYPES = {
  int32: Int32Array,
  int8: Int8Array,
  float32: Float32Array,
} as const;
type PackedType = keyof typeof PACKED_TYPES;
type NumberArray = InstanceType<(typeof PACKED_TYPES)[PackedType]>;

/** The list fields that grow with the trajectory, and the parquet column type of each (trajectory.ts). */
const PACKED_FIELDS = {
  prompt_ids: "int32",
  response_ids: "int32",
  response_mask: "int8",
  response_logprobs: "float32",
  trainer_logprobs: "float32",
} as const satisfies Record<string, PackedType>;
type PackedField = keyof typeof PACKED_FIELDS;

interface PackedList {
  packed: PackedType;
  base64: string;
}

// Typed arrays use the machine's byte order; the journal says little-endian, which every platform Node runs on is.
if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error("agentrl's trajectory journal needs a little-endian machine");

function unpack(list: unknown, field: string, place: string): unknown {
  if (list === null || typeof list !== "object" || Array.isArray(list) || !("packed" in list)) return list;
  const { packed, base64 } = list as Partial<PackedList>;
  const Typed = typeof packed === "string" ? PACKED_TYPES[packed as PackedType] : undefined;
  if (!Typed || typeof base64 !== "string") throw new InputError(`${place}: ${field}: not a packed number list`);
  const bytes = Buffer.from(base64, "base64");
  if (bytes.byteLength % Typed.BYTES_PER_ELEMENT !== 0) throw new InputError(`${place}: ${field}: packed ${packed} list cut short`);
  // Copied into its own buffer: a decoded Buffer may sit at an offset the typed array's alignment refuses.
  const typed = new Typed(bytes.byteLength / Typed.BYTES_PER_ELEMENT);
  new Uint8Array(typed.buffer).set(bytes);
  return Array.from(typed);
}

/** A trajectory's token-length lists as the parquet file stores them (int32 ids, int8 mask, float32 log-probs). */
export type PackedLists = { [F in PackedField]?: InstanceType<(typeof PACKED_TYPES)[(typeof PACKED_FIELDS)[F]]> };

/** One journal line (no newline). */
export function journalLine(trajectory: Trajectory): string {
  return journalEntry(trajectory).line;
}

/**
 * One journal line (no newline), and the typed arrays its lists were packed from: the parquet writer keeps those for
 * the part instead of the number arrays, which the garbage collector would otherwise copy at every scavenge until the
 * part is written (their bytes sit outside the JS heap).
 */
export function journalEntry(trajectory: Trajectory): { line: string; lists: PackedLists } {
  const record: Record<string, unknown> = { ...trajectory };
  const lists: Record<string, NumberArray> = {};
  for (const [field, type] of Object.entries(PACKED_FIELDS) as [PackedField, PackedType][]) {
    const values = trajectory[field];
    if (!Array.isArray(values)) continue;
    const typed = PACKED_TYPES[type].from(values);
    lists[field] = typed;
    record[field] = { packed: type, base64: Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength).toString("base64") };
  }
  return { line: JSON.stringify(record), lists: lists as PackedLists };
}

/** A parsed journal line with its packed lists back as number arrays, ready for the trajectory schema. */
export function unpackJournalRecord(value: unknown, place: string): unknown {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return value;
  const record = { ...(value as Record<string, unknown>) };
  for (const field of Object.keys(PACKED_FIELDS)) if (field in record) record[field] = unpack(record[field], field, place);
  return record;
}
