/**
 * A token record's per-token columns: ids, loss mask and behaviour logprobs, in typed arrays that grow by doubling.
 *
 * Why typed: a trajectory's record lives for its whole rollout, and as plain arrays its columns sat on the JS heap,
 * where every young-generation collection copied them (at 256 trajectories in flight, a sizeable part of what each
 * collection copies), and they were reallocated a few times a turn as they grew. A typed array's elements lie outside
 * the heap: the collector moves only its small header, and doubling keeps the reallocations to a handful per record.
 * Logprobs are float64, as the engine reports them, so nothing is rounded before the record is written.
 */
export class TokenColumns {
  private idValues: Int32Array;
  private maskValues: Uint8Array;
  private logprobValues: Float64Array;
  private size = 0;
  /** The first `idsTextCount` ids as JSON list items (`1,2,3`) in ASCII, extended as ids arrive (idsText). */
  private idsTextBytes = new Uint8Array(0);
  private idsTextEnd = 0;
  private idsTextCount = 0;

  constructor(capacity: number) {
    const room = Math.max(16, capacity);
    this.idValues = new Int32Array(room);
    this.maskValues = new Uint8Array(room);
    this.logprobValues = new Float64Array(room);
  }

  get length(): number {
    return this.size;
  }

  /** The last id, or undefined when there is none. */
  lastId(): number | undefined {
    return this.size > 0 ? this.idValues[this.size - 1] : undefined;
  }

  /** Appends `ids` with one mask value; a logprob per id when the mask is 1 (0 where none is given), else 0. */
  append(ids: ArrayLike<number>, maskValue: 0 | 1, logprobs: ArrayLike<number> | undefined): void {
    this.reserve(this.size + ids.length);
    const at = this.size;
    for (let i = 0; i < ids.length; i++) {
      this.idValues[at + i] = ids[i]!;
      this.maskValues[at + i] = maskValue;
      this.logprobValues[at + i] = maskValue === 1 ? (logprobs?.[i] ?? 0) : 0;
    }
    this.size += ids.length;
  }

  /** The ids so far, as a view: it does not follow later appends, and must not be written to. */
  ids(): Int32Array {
    return this.idValues.subarray(0, this.size);
  }

  /**
   * The ids as JSON list items, `1,2,3`, in ASCII bytes: what every request to the engine sends, as it sends it. Only
   * the ids appended since the last call are printed; printing the whole record for each request cost more than the
   * rest of the request body. Printed into bytes, not a string: `join(",")` of the ids cost about twice as much, and
   * the body's string then had to be encoded to bytes again for the socket. A view: valid until the next append.
   */
  idsText(): Uint8Array {
    if (this.idsTextCount < this.size) {
      // At most 11 bytes an id (a sign, 10 digits) and a comma.
      const needed = this.idsTextEnd + 12 * (this.size - this.idsTextCount);
      if (needed > this.idsTextBytes.length) this.idsTextBytes = grown(this.idsTextBytes, new Uint8Array(Math.max(needed, 2 * this.idsTextBytes.length)));
      let at = this.idsTextEnd;
      for (let i = this.idsTextCount; i < this.size; i++) {
        if (i > 0) this.idsTextBytes[at++] = COMMA;
        at = printInteger(this.idsTextBytes, at, this.idValues[i]!);
      }
      this.idsTextEnd = at;
      this.idsTextCount = this.size;
    }
    return this.idsTextBytes.subarray(0, this.idsTextEnd);
  }

  mask(): Uint8Array {
    return this.maskValues.subarray(0, this.size);
  }

  logprobs(): Float64Array {
    return this.logprobValues.subarray(0, this.size);
  }

  /** Plain arrays of a range of each column (the record a trajectory is written with). */
  idRange(start: number, end = this.size): number[] {
    return plainRange(this.idValues, start, Math.min(end, this.size), INTEGER_ZEROS);
  }

  maskRange(start: number, end = this.size): number[] {
    return plainRange(this.maskValues, start, Math.min(end, this.size), INTEGER_ZEROS);
  }

  logprobRange(start: number, end = this.size): number[] {
    return plainRange(this.logprobValues, start, Math.min(end, this.size), DOUBLE_ZEROS);
  }

  private reserve(needed: number): void {
    if (needed <= this.idValues.length) return;
    let room = this.idValues.length * 2;
    while (room < needed) room *= 2;
    this.idValues = grown(this.idValues, new Int32Array(room));
    this.maskValues = grown(this.maskValues, new Uint8Array(room));
    this.logprobValues = grown(this.logprobValues, new Float64Array(room));
  }
}

const COMMA = 0x2c;
const MINUS = 0x2d;
const ZERO = 0x30;

/** Writes `value` (an int32) in decimal ASCII at `at`; returns the index after its last digit. */
function printInteger(out: Uint8Array, at: number, value: number): number {
  if (value < 0) {
    out[at++] = MINUS;
    value = -value;
  }
  let digits = 1;
  for (let bound = 10; value >= bound && digits < 10; bound *= 10) digits++;
  const end = at + digits;
  for (let i = end - 1; i >= at; i--) {
    out[i] = ZERO + (value % 10);
    value = Math.floor(value / 10);
  }
  return end;
}

function grown<T extends Int32Array | Uint8Array | Float64Array>(from: T, to: T): T {
  to.set(from);
  return to;
}

/**
 * Zeros to slice plain arrays from, built by pushing so that V8 stores them packed: a slice of one is packed (as
 * integers, or as doubles) and has its final size at once. `new Array(n)` makes a holey array, which JSON.stringify
 * prints 2-3x slower; pushing grows the array a few times over; Array.from walks a typed array through its iterator.
 */
const ZEROS_LENGTH = 8192;
const INTEGER_ZEROS: number[] = [];
const DOUBLE_ZEROS: number[] = [];
for (let i = 0; i < ZEROS_LENGTH; i++) {
  INTEGER_ZEROS.push(0);
  DOUBLE_ZEROS.push(0.5);
}
DOUBLE_ZEROS.fill(0);

function plainRange(values: ArrayLike<number>, start: number, end: number, zeros: readonly number[]): number[] {
  const n = Math.max(0, end - start);
  if (n > zeros.length) {
    const out: number[] = [];
    for (let i = start; i < end; i++) out.push(values[i]!);
    return out;
  }
  const out = zeros.slice(0, n);
  for (let i = 0; i < n; i++) out[i] = values[start + i]!;
  return out;
}
