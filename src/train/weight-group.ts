/**
 * Forming the weight-update group for `update_weights.method: distributed`: the worker's rank 0 (rank 0) plus every
 * rank of every server, which SGLang joins through `/init_weights_update_group` and the worker through its
 * `init_weights_group` command, at the same time (each answers only once all have joined). What can be checked
 * without side effects is checked first (the endpoints exist, each server's ranks, the backend fits its device), so a
 * server that cannot take part costs a warning and a disk sync, not a rendezvous that waits for its timeout.
 */
import { randomUUID } from "node:crypto";
import net from "node:net";
import os from "node:os";
import type { AdminResult, SglangClient, UpdateWeightsResult } from "../engine/index.js";
import type { WorkerClient } from "./worker/index.js";


/** One server's ranks in the group: `ranks` (its tensor-parallel size) from `offset` on. */
export interface ServerRanks {
  server: string;
  ranks: number;
  offset: number;
  /** /server_info's `device` (`cuda`, `cpu`), when it says. */
  device: string | undefined;
}

export type Formed<T> = { ok: true; value: T } | { ok: false; reason: string };

/** A formed group: its name (what each bucket names) and the servers' ranks in it. */
export interface WeightGroup {
  name: string;
  servers: ServerRanks[];
}

export interface GroupSettings {
  masterAddress: string | null;
  masterPort: number;
  /** Seconds to join, and for each broadcast. */
  timeoutS: number;
}

/** Each server's ranks, read from /server_info (`tp_size`; SGLang's data parallelism is refused). */
export async function serverRanks(client: SglangClient): Promise<Formed<ServerRanks[]>> {
  const found: ServerRanks[] = [];
  let offset = 1;
  for (const server of client.workerUrls) {
    let info: Record<string, unknown>;
    try {
      info = await client.serverInfo(server);
    } catch (err) {
      return { ok: false, reason: `${server}/server_info failed: ${(err as Error).message}` };
    }
    const tp = positiveInt(info.tp_size) ?? 1;
    if ((positiveInt(info.dp_size) ?? 1) > 1) return { ok: false, reason: `${server} runs dp_size ${String(info.dp_size)}; one weight-update group per data-parallel replica is not supported` };
    found.push({ server, ranks: tp, offset, device: typeof info.device === "string" ? info.device : undefined });
    offset += tp;
  }
  return { ok: true, value: found };
}

/** Whether every server serves each of `paths`; the reason names the first that does not. */
export async function missingEndpoint(client: SglangClient, paths: string[]): Promise<string | undefined> {
  for (const path of paths) {
    for (const result of await client.hasPostEndpoint(path)) {
      if (!result.ok) return `${result.server}${path}: ${result.error.message}`;
      if (!result.value) return `${result.server} has no ${path} (HTTP 404)`;
    }
  }
  return undefined;
}

/**
 * Joins the worker and every server into one group; resolves with it, or why no group formed. The group's name is
 * the run's own: a long-lived SGLang server refuses a second group under a name it already has (an earlier run's).
 */
export async function formWeightGroup(worker: WorkerClient, client: SglangClient, settings: GroupSettings): Promise<Formed<WeightGroup>> {
  const missing = await missingEndpoint(client, ["/init_weights_update_group", "/update_weights_from_distributed"]);
  if (missing) return { ok: false, reason: missing };
  const ranks = await serverRanks(client);
  if (!ranks.ok) return ranks;
  const backend = worker.device?.startsWith("cuda") ? "nccl" : "gloo";
  const onCpu = ranks.value.find((r) => r.device === "cpu");
  if (backend === "nccl" && onCpu) return { ok: false, reason: `${onCpu.server} runs on the CPU and the trainer on a GPU: NCCL needs both on GPUs` };
  const masterAddress = settings.masterAddress ?? defaultMasterAddress(client.workerUrls);
  const masterPort = settings.masterPort || (await freePort(masterAddress));
  const worldSize = 1 + ranks.value.reduce((sum, r) => sum + r.ranks, 0);
  const offsets = new Map(ranks.value.map((r) => [r.server, r.offset]));
  const name = `agentrl-${randomUUID().slice(0, 8)}`;
  const [joined, servers] = await Promise.allSettled([
    worker.initWeightsGroup({
      master_address: masterAddress,
      master_port: masterPort,
      world_size: worldSize,
      group_name: name,
      backend,
      timeout_s: settings.timeoutS,
    }),
    client.initWeightsUpdateGroup({
      masterAddress,
      masterPort,
      worldSize,
      groupName: name,
      backend,
      rankOffset: (server) => offsets.get(server) ?? 1,
    }),
  ]);
  const failures = servers.status === "fulfilled" ? failedServers(servers.value) : [`the servers: ${String(servers.reason)}`];
  if (joined.status === "rejected") failures.unshift(`the worker: ${(joined.reason as Error).message}`);
  if (failures.length) return { ok: false, reason: `the group at ${masterAddress}:${masterPort} did not form (${failures.join("; ")})` };
  return { ok: true, value: { name, servers: ranks.value } };
}

/** `server: message` of every server whose weight call failed or answered success false. */
export function failedServers(results: AdminResult<UpdateWeightsResult>[]): string[] {
  return results.filter((r) => !r.ok || !r.value.success).map((r) => `${r.server}: ${r.ok ? r.value.message : r.error.message}`);
}

/** 127.0.0.1 when every server is on this machine; else the first external IPv4 address, which they can reach. */
export function defaultMasterAddress(servers: readonly string[]): string {
  const local = servers.every((s) => ["127.0.0.1", "localhost", "[::1]", "0.0.0.0"].includes(new URL(s).hostname));
  if (local) return "127.0.0.1";
  const external = Object.values(os.networkInterfaces()).flat().find((i) => i?.family === "IPv4" && !i.internal);
  return external?.address ?? "127.0.0.1";
}

/** A port free right now on `host` (the worker binds it a moment later). */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

function positiveInt(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value > 0 ? value : undefined;
}
