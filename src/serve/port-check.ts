/**
 * Checks that a port is free before agentrl starts a server on it. An engine loads its model before it binds its
 * port, and meanwhile a server that already listens there would answer the /health agentrl polls: agentrl would
 * report the wrong server as ready, and the engine would die on the bind later. A busy port is the user's to fix
 * (another --port, or stop the other server), so it exits 2 like any other bad flag.
 */
import net from "node:net";
import { UsageError } from "../errors.js";

/** Binds host:port for an instant and lets it go; throws a UsageError naming the port when that is refused. */
export async function assertPortFree(host: string, port: number, what = "the engine"): Promise<void> {
  const refusal = await new Promise<NodeJS.ErrnoException | undefined>((resolve) => {
    const probe = net.createServer();
    probe.once("error", (err: NodeJS.ErrnoException) => resolve(err));
    probe.listen({ host, port }, () => probe.close(() => resolve(undefined)));
  });
  if (refusal === undefined) return;
  const where = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  if (refusal.code === "EADDRINUSE") {
    throw new UsageError(`cannot start ${what} on ${where}: something already listens on port ${port}`, {
      hint: "stop that server or choose another --port (agentrl serve --port 0 picks a free one)",
    });
  }
  // EACCES (a port below 1024), EADDRNOTAVAIL (a --host that is not this machine's), ENOTFOUND (an unknown name):
  // the engine would fail the same way after loading its model, so say it now.
  throw new UsageError(`cannot start ${what} on ${where}: ${refusal.code ?? refusal.message}`, {
    hint: refusal.code === "EACCES" ? "ports below 1024 need privileges; choose another --port" : "check --host and --port",
  });
}
