/**
 * A TCP proxy in front of a server (the kube-apiserver) whose connections the test can
 * freeze: `pause()` stops forwarding bytes on every open connection and holds new ones
 * (accepted, never forwarded) — no error, no close, just silence, as a partitioned network
 * or a hung load balancer looks to a client — and `resume()` lets everything flow again.
 * `cut()` destroys every connection.
 */
import { connect, createServer, type Socket } from "node:net";

export interface TcpProxy {
  /** `https://127.0.0.1:<port>` (the target's scheme). */
  url: string;
  port: number;
  paused(): boolean;
  pause(): void;
  resume(): void;
  cut(): void;
  /** Connections open now (forwarded or held). */
  connections(): number;
  close(): Promise<void>;
}

interface Pair { client: Socket; upstream?: Socket }

export async function startTcpProxy(target: string): Promise<TcpProxy> {
  const to = new URL(target);
  const pairs = new Set<Pair>();
  let paused = false;

  const flow = (p: Pair) => {
    if (!p.upstream) {
      const upstream = connect(Number(to.port), to.hostname);
      p.upstream = upstream;
      const end = () => { pairs.delete(p); p.client.destroy(); upstream.destroy(); };
      upstream.on("close", end);
      upstream.on("error", end);
    }
    p.client.pipe(p.upstream);
    p.upstream.pipe(p.client);
    p.client.resume();
    p.upstream.resume();
  };
  const freeze = (p: Pair) => {
    p.client.unpipe();
    p.upstream?.unpipe();
    p.client.pause();
    p.upstream?.pause();
  };

  const server = createServer((client) => {
    const p: Pair = { client };
    pairs.add(p);
    const end = () => { pairs.delete(p); client.destroy(); p.upstream?.destroy(); };
    client.on("close", end);
    client.on("error", end);
    if (paused) client.pause(); // held: accepted, nothing forwarded until resume
    else flow(p);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;

  return {
    url: `${to.protocol}//127.0.0.1:${port}`,
    port,
    paused: () => paused,
    pause() {
      paused = true;
      for (const p of pairs) freeze(p);
    },
    resume() {
      paused = false;
      for (const p of pairs) flow(p);
    },
    cut() {
      for (const p of pairs) { p.client.destroy(); p.upstream?.destroy(); }
      pairs.clear();
    },
    connections: () => pairs.size,
    async close() {
      for (const p of pairs) { p.client.destroy(); p.upstream?.destroy(); }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
