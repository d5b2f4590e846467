// Baseline for bench/api.bench.ts: a bare Fastify hello-world, same framework, same machine.
import Fastify from "fastify";
const app = Fastify({ logger: false });
app.get("/", async () => ({ hello: "world" }));
await app.listen({ port: Number(process.env.PORT), host: "127.0.0.1" });
process.stdout.write("ready\n");
