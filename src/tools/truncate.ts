/**
 * verl's tool-response truncation (agent loop, `max_tool_response_length` in characters,
 * `tool_response_truncate_side`). Python slicing is reproduced exactly, including its edge: `s[-0:]` is the
 * whole string, so `right` with a limit of 0 and `middle` with a limit below 2 keep the whole text after the marker.
 */

export type TruncateSide = "left" | "right" | "middle";

export const DEFAULT_MAX_TOOL_RESPONSE_LENGTH = 256;
export const DEFAULT_TRUNCATE_SIDE: TruncateSide = "middle";

export function truncateToolResponse(text: string, maxLength: number, side: TruncateSide = DEFAULT_TRUNCATE_SIDE): string {
  // Python counts code points; only split into code points when the UTF-16 length could exceed the limit.
  if (text.length <= maxLength) return text;
  const points = Array.from(text);
  if (points.length <= maxLength) return text;
  const head = (n: number) => points.slice(0, n).join("");
  const tail = (n: number) => (n === 0 ? text : points.slice(points.length - n).join(""));
  if (side === "left") return head(maxLength) + "...(truncated)";
  if (side === "right") return "(truncated)..." + tail(maxLength);
  const half = Math.floor(maxLength / 2);
  return head(half) + "...(truncated)..." + tail(half);
}
