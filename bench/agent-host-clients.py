"""The Python agent host's HTTP clients: one connection pool shared by every trajectory in flight, against a pool per
trajectory (what worker/agentrl_worker/openai_agent_host.py gives each agent now), side by side in one run.

    .venv/bin/python bench/agent-host-clients.py [--concurrency 16,64,256] [--requests 2000] [--rounds 2]

`concurrency` agents run at once in this process, each an ``openai.AsyncOpenAI`` client making chat completions one
after the other, as an agent's turns are, against a stand-in gateway in a child process (Node's http server, a fixed
answer after 20 ms, as if the engine took that long). Each agent plays trajectories of 2 requests: with `per-trajectory`
it makes a fresh ``httpx.AsyncClient`` (TLS context shared, as the host does) for each and closes it after. Reported:
this process's CPU per request (every thread), and requests per second; medians over rounds, modes alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import ssl
import statistics
import subprocess
import sys
import time

import httpx
import openai

SERVER = r"""
const http = require("node:http");
const body = JSON.stringify({ id: "chatcmpl-1", object: "chat.completion", created: 1, model: "policy",
  choices: [{ index: 0, message: { role: "assistant", content: "The answer is 4. ".repeat(20) }, finish_reason: "stop" }],
  usage: { prompt_tokens: 300, completion_tokens: 100, total_tokens: 400 } });
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => setTimeout(() => {
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    res.end(body);
  }, 20));
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
"""

TURNS_PER_TRAJECTORY = 2
MESSAGES = [{"role": "system", "content": "You are a math expert. " * 20}, {"role": "user", "content": "What is 2 + 2? " * 10}]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run(base_url: str, mode: str, concurrency: int, requests: int) -> tuple[float, float]:
    tls = ssl.create_default_context()
    shared = httpx.AsyncClient(timeout=None, verify=tls, limits=httpx.Limits(max_connections=512, max_keepalive_connections=512))
    left = requests

    async def agent() -> None:
        nonlocal left
        while left > 0:
            own = None if mode == "shared" else httpx.AsyncClient(timeout=None, verify=tls)
            client = openai.AsyncOpenAI(base_url=base_url, api_key="key", max_retries=0, http_client=own or shared)
            for _ in range(TURNS_PER_TRAJECTORY):
                if left <= 0:
                    break
                left -= 1
                await client.chat.completions.create(model="policy", messages=MESSAGES)
            if own is not None:
                await own.aclose()

    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    await asyncio.gather(*(agent() for _ in range(concurrency)))
    cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
    await shared.aclose()
    return cpu / requests * 1000, requests / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", default="16,64,256")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    server = subprocess.Popen(["node", "-e", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        base_url = f"http://127.0.0.1:{port}/v1"
        asyncio.run(run(base_url, "shared", 16, 200))  # warm-up: imports, the first connections
        print("| agents in flight | shared pool: ms CPU / request | pool per trajectory | ratio | shared: req/s | per trajectory: req/s |")
        print("|---|---|---|---|---|---|")
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            results: dict[str, list[tuple[float, float]]] = {"shared": [], "per-trajectory": []}
            for round_index in range(args.rounds):
                modes = ["shared", "per-trajectory"] if round_index % 2 == 0 else ["per-trajectory", "shared"]
                for mode in modes:
                    results[mode].append(asyncio.run(run(base_url, mode, concurrency, args.requests)))
            shared_cpu = statistics.median(r[0] for r in results["shared"])
            own_cpu = statistics.median(r[0] for r in results["per-trajectory"])
            shared_rate = statistics.median(r[1] for r in results["shared"])
            own_rate = statistics.median(r[1] for r in results["per-trajectory"])
            print(f"| {concurrency} | {shared_cpu:.2f} | {own_cpu:.2f} | {own_cpu / shared_cpu:.2f} | {shared_rate:.0f} | {own_rate:.0f} |")
            sys.stdout.flush()
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
