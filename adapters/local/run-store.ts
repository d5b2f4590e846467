/**
 * Embedded mode's RunStore: one JSON file per run under `<data dir>/runs/`, written to a
 * temporary file and renamed (atomic), with an in-process watch. Updates of one run are
 * serialized, so a read-modify-write never loses another's change.
 */
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { mkdir, readFile, readdir, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RunRecord, RunStore } from "../../core/ports.js";
import { keyedSerializer } from "../serial.js";

export function createLocalRunStore(dataDir: string): RunStore {
  const dir = join(dataDir, "runs");
  const tmp = join(dataDir, "tmp");
  const events = new EventEmitter();
  events.setMaxListeners(100);
  /** Operations on one run are serialized in this process. */
  const serial = keyedSerializer();
  const fileOf = (id: string) => {
    if (!/^run-[0-9a-z]{26}$/.test(id)) throw new Error(`not a run id: ${id}`);
    return join(dir, `${id}.json`);
  };

  async function write(run: RunRecord): Promise<void> {
    await mkdir(dir, { recursive: true });
    await mkdir(tmp, { recursive: true });
    const t = join(tmp, `${randomUUID()}.json`);
    await writeFile(t, JSON.stringify(run, null, 1));
    await rename(t, fileOf(run.id));
  }

  async function read(id: string): Promise<RunRecord | undefined> {
    try { return JSON.parse(await readFile(fileOf(id), "utf8")) as RunRecord; } catch { return undefined; }
  }

  return {
    create: (run) => serial(run.id, async () => {
      if (await read(run.id)) throw new Error(`run ${run.id} already exists`);
      await write(run);
      events.emit("change", run.id);
    }),
    get: (id) => (/^run-[0-9a-z]{26}$/.test(id) ? read(id) : Promise.resolve(undefined)),
    list: async ({ organization, workspace }) => {
      let names: string[];
      try { names = await readdir(dir); } catch { return []; }
      const runs = await Promise.all(names.filter((n) => n.endsWith(".json")).map((n) => read(n.slice(0, -5))));
      return runs.filter((r): r is RunRecord => r !== undefined && (organization === undefined || r.organization === organization) && (workspace === undefined || r.workspace === workspace))
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.id < b.id ? 1 : -1));
    },
    update: (id, change) => serial(id, async () => {
      const cur = await read(id);
      if (!cur) return undefined;
      const next = change(cur);
      if (!next) return cur;
      await write(next);
      events.emit("change", id);
      return next;
    }),
    watch: (fn) => {
      events.on("change", fn);
      return () => events.off("change", fn);
    },
  };
}
