/**
 * The doctor's HTTP: one request, its status and body as data. Unlike the rollout client it never retries and never
 * throws on an HTTP status, because the checks judge the answers themselves (a 404 means "endpoint missing").
 */
export type HttpAnswer =
  | { ok: true; status: number; text: string; json: unknown }
  | { ok: false; error: string };

export async function request(
  base: string,
  method: "GET" | "POST",
  route: string,
  options: { body?: unknown; apiKey?: string; timeoutMs: number },
): Promise<HttpAnswer> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined) headers["content-type"] = "application/json";
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  try {
    const response = await fetch(`${base.replace(/\/+$/, "")}${route}`, {
      method,
      headers,
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { ok: true, status: response.status, text, json };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const reason = (err as Error).name === "TimeoutError" ? `no answer within ${options.timeoutMs / 1000} s` : (cause?.code ?? cause?.message ?? (err as Error).message);
    return { ok: false, error: reason };
  }
}

/** The server's own error message from SGLang's `{"error": {"message"}}`, FastAPI's shapes, or the raw text. */
export function serverMessage(answer: { text: string; json: unknown }): string {
  const json = answer.json as { error?: unknown; message?: unknown; detail?: unknown } | undefined;
  const error = json?.error as { message?: unknown } | string | undefined;
  if (typeof error === "object" && error && typeof error.message === "string") return error.message;
  if (typeof error === "string") return error;
  if (typeof json?.message === "string") return json.message;
  if (typeof json?.detail === "string") return json.detail;
  return answer.text.slice(0, 300);
}
