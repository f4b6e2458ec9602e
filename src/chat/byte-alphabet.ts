/**
 * GPT-2's bytes_to_unicode, which byte-level BPE tokenizers (GPT-2, Qwen, Llama 3) share: each byte's printable
 * stand-in character. Printable Latin-1 bytes stand for themselves; the rest take U+0100 onwards, in byte order.
 */
export function byteStandIns(): string[] {
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  const table: string[] = new Array(256);
  let shifted = 0;
  for (let b = 0; b < 256; b++) table[b] = String.fromCharCode(printable(b) ? b : 256 + shifted++);
  return table;
}
