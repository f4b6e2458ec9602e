// The OpenAI-API agent of bench/gateway-overhead.mjs. Run as a command (`node gateway-agent.mjs`, once per trajectory,
// the row on stdin, OPENAI_BASE_URL and OPENAI_API_KEY in the environment) or as a JS function agent (the default
// export, in agentrl's process), it plays the built-in tool_agent's conversation over the gateway with node:http alone,
// its requests on one kept-alive connection as the SDKs send them, so a command's start-up stays cheap (fetch would
// load undici, about 30 ms of CPU more per agent). It offers the row's tools, runs calc_gsm8k_reward itself with the
// text of agentrl's built-in tool (so the record is the one tool_agent makes), and reports no reward: the reward
// function scores both loops alike.
import { readFileSync } from "node:fs";
import http from "node:http";
import { pathToFileURL } from "node:url";

/** The conversation: a chat completion, the tool's answer to each call, until a turn calls no tool. */
export async function converse(baseUrl, apiKey, row) {
  const url = new URL(`${baseUrl}/chat/completions`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const headers = { "content-type": "application/json", authorization: `Bearer ${apiKey}` };
  const complete = (request) =>
    new Promise((resolve, reject) => {
      const body = JSON.stringify(request);
      const req = http.request(url, { method: "POST", agent, headers: { ...headers, "content-length": Buffer.byteLength(body) } }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => (res.statusCode === 200 ? resolve(JSON.parse(text)) : reject(new Error(`HTTP ${res.statusCode}: ${text}`))));
      });
      req.on("error", reject);
      req.end(body);
    });
  const messages = [...row.messages];
  try {
    for (let turn = 0; turn < 4; turn++) {
      const { message } = (await complete({ model: "policy", messages, tools: row.tools })).choices[0];
      messages.push({ role: "assistant", content: message.content, ...(message.tool_calls ? { tool_calls: message.tool_calls } : {}) });
      if (!message.tool_calls?.length) break;
      for (const call of message.tool_calls) {
        const answer = String(JSON.parse(call.function.arguments).answer);
        const score = answer.replace(/,/g, "") === row.ground_truth ? "1.0" : "0.0";
        messages.push({ role: "tool", tool_call_id: call.id, content: `Current parsed answer='${answer}' reward=${score}` });
      }
    }
  } finally {
    agent.destroy();
  }
}

/** As a JS function agent: agentrl's ready client says where the gateway is. */
export default (client, row) => converse(client.baseURL, client.apiKey, row);

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const row = JSON.parse(readFileSync(0, "utf8"));
  if (process.argv[2] === "--load") {
    // bench/gateway-overhead.mjs's `loaded` loop: an agent's start-up and exit, with no gateway to talk to, as CPU load
    // beside a built-in run; its CPU is reported so the bench can show it matches the agents'.
    const cpu = process.cpuUsage();
    process.stdout.write(`${JSON.stringify({ messages: row.messages.length, cpuUs: cpu.user + cpu.system })}\n`);
  } else {
    await converse(process.env.OPENAI_BASE_URL, process.env.OPENAI_API_KEY, row);
  }
}
