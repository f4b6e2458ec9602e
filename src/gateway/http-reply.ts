/**
 * The gateway's replies on the wire. A streamed turn is sent whole: the turn is sampled before its reply starts, so
 * its SSE events go out as one body (with its length) in one write, where a write per event cost the gateway a
 * syscall each and could wake the agent once per event.
 */
import type http from "node:http";

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * An error in OpenAI's shape, with `x-should-retry: false`: the official SDKs retry a 408, 409, 429 or 5xx twice by
 * default, with backoff, unless the answer says not to, and nothing the gateway refuses goes through on a retry (a
 * trajectory that has ended stays ended; the engine client has already retried what it could). An unchanged agent
 * then sees the error at once instead of after a second or more of backoff and two more refusals.
 */
export function sendError(res: http.ServerResponse, status: number, body: unknown): void {
  sendJson(res, status, body, { "x-should-retry": "false" });
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
