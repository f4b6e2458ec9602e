/**
 * The gateway's replies on the wire. A streamed turn is sent whole: the turn is sampled before its reply starts, so
 * its SSE events go out as one body (with its length) in one write, where a write per event cost the gateway a
 * syscall each and could wake the agent once per event.
 */
import type http from "node:http";

export function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** SSE events (each one ending in a blank line) as one `text/event-stream` body. */
export function sendEventStream(res: http.ServerResponse, events: readonly string[]): void {
  const text = events.join("");
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}
