/**
 * The proxy bypass a child talking to agentrl on loopback needs. Python's HTTP clients (httpx under the openai SDK and
 * LangChain, requests) send every request through HTTP_PROXY / HTTPS_PROXY / ALL_PROXY when one is set, loopback
 * included unless NO_PROXY names it: on a cluster that sets a proxy for its nodes, an agent's requests to the gateway
 * on 127.0.0.1 went to the proxy and failed. (Node's fetch and undici ignore those variables.)
 */

const LOOPBACK = ["127.0.0.1", "localhost", "::1"];

/**
 * NO_PROXY and no_proxy for `env`: the hosts it already lists (either spelling), then the loopback addresses. Both
 * spellings get the whole list, since clients read either (urllib prefers the lowercase one).
 */
export function loopbackNoProxy(env: NodeJS.ProcessEnv): { NO_PROXY: string; no_proxy: string } {
  const listed = [env["no_proxy"], env["NO_PROXY"]].flatMap((value) => (value ?? "").split(","));
  const hosts = [...new Set([...listed.map((host) => host.trim()).filter(Boolean), ...LOOPBACK])].join(",");
  return { NO_PROXY: hosts, no_proxy: hosts };
}
