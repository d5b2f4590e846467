/**
 * The controller loop's own faults: a failed read of a run in the run watch (a transient API
 * error) is reported through onError and never becomes an unhandled rejection, which would
 * stop the operator process.
 */
import t from "tap";
import { startController } from "../../engine/controller.js";
import { sleep, until } from "../support/wait.js";

t.test("a transient error reading a run in the watch is reported, never an unhandled rejection", async (t) => {
  const rejections: unknown[] = [];
  const onRejection = (e: unknown) => { rejections.push(e); };
  process.on("unhandledRejection", onRejection);
  t.teardown(() => { process.off("unhandledRejection", onRejection); });
  const errors: string[] = [];
  let notify: ((id: string) => void) | undefined;
  const ctl = startController({
    runs: { get: async () => { throw new Error("injected: connection reset"); }, list: async () => [], watch: (fn: (id: string) => void) => { notify = fn; return () => undefined; }, create: async () => undefined, update: async () => undefined } as never,
    executor: { submit: async () => undefined, observe: async () => new Map(), kill: async () => undefined, watch: () => () => undefined, logs: async () => undefined },
    reconcile: async () => ({}),
    onError: (id, e) => errors.push(`${id}: ${e instanceof Error ? e.message : String(e)}`),
  });
  await until("the watch to be registered", () => notify !== undefined);
  notify?.("run-x");
  await until("the error to be reported", () => errors.some((e) => /injected/.test(e)));
  await sleep(50);
  t.strictSame(rejections, [], "no unhandled rejection");
  await ctl.stop();
});
