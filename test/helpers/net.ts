import net from "node:net";
import { afterAll, beforeAll } from "vitest";

/**
 * A TCP server on 127.0.0.1 that counts the connections it accepts, for the describe block that calls this: code that
 * must not reach the host's network is pointed at `port`, and `connections()` must stay 0.
 */
export function countingServer(): { port: () => number; connections: () => number } {
  let server: net.Server;
  let port = 0;
  let connections = 0;
  beforeAll(async () => {
    server = net.createServer((socket) => {
      connections++;
      socket.end("hello");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { port: () => port, connections: () => connections };
}
