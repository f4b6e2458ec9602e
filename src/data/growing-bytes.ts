/** A byte buffer that grows by doubling; `bytes` may be longer than `length`, the part in use. */
export class GrowingBytes {
  bytes: Buffer;
  length = 0;
  constructor(capacity = 64) {
    this.bytes = Buffer.allocUnsafe(capacity);
  }
  /** Room for `extra` more bytes. */
  ensure(extra: number): void {
    const needed = this.length + extra;
    if (needed <= this.bytes.length) return;
    const grown = Buffer.allocUnsafe(Math.max(needed, this.bytes.length * 2));
    this.bytes.copy(grown, 0, 0, this.length);
    this.bytes = grown;
  }
  push(value: number): void {
    this.ensure(1);
    this.bytes[this.length++] = value;
  }
  append(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    this.bytes.set(bytes, this.length);
    this.length += bytes.length;
  }
  /** An unsigned LEB128 varint (thrift's compact protocol, parquet's RLE run headers); `value` ≥ 0, below 2^53. */
  varint(value: number): void {
    let v = value;
    while (v >= 0x80) {
      this.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.push(v);
  }
  view(): Buffer {
    return this.bytes.subarray(0, this.length);
  }
}
