/**
 * Embedded mode's RunStore: one JSON file per run under `<data dir>/runs/`, written to a
 * temporary file and renamed (atomic), with an in-process watch. Updates of one run are
 * serialized, so a read-modify-write never loses another's change.
 *
 * Listings of an organization or workspace read only the runs they return: each run also
 * has an empty index file `<data dir>/runs-index/_<org>/_<workspace>/<createdAt>~<id>`
 * (segments URI-encoded), written before the run itself and never changed (a run's
 * organization, workspace and creation time do not change), so a page is found from file
 * names alone and then only its runs are read. An index entry whose run is missing (a crash
 * between the two writes) is skipped. Runs stored before the index existed are indexed once,
 * on the first listing (`runs-index/.complete` marks it done).
 */
import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import { mkdir, readFile, readdir, rename, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { RunListFilter, RunPosition, RunRecord, RunStore } from "../../core/ports.js";
import { compareRunPositions, matchesRunFilter } from "../../core/run-order.js";
import { keyedSerializer } from "../serial.js";

import { RUN_ID } from "../../core/ids.js";
/** Runs read at once while filling a page. */
const READ_BATCH = 100;

export function createLocalRunStore(dataDir: string): RunStore {
  const dir = join(dataDir, "runs");
  const indexDir = join(dataDir, "runs-index");
  const tmp = join(dataDir, "tmp");
  const events = new EventEmitter();
  events.setMaxListeners(100);
  /** Operations on one run are serialized in this process. */
  const serial = keyedSerializer();
  const fileOf = (id: string) => {
    if (!RUN_ID.test(id)) throw new Error(`not a run id: ${id}`);
    return join(dir, `${id}.json`);
  };
  /** Any string as one path segment (never `.`, `..` or empty). */
  const segment = (s: string) => `_${encodeURIComponent(s)}`;
  const entryDir = (organization: string, workspace: string) => join(indexDir, segment(organization), segment(workspace));
  const entryName = (run: RunPosition) => `${encodeURIComponent(run.createdAt)}~${run.id}`;
  const parseEntry = (name: string): RunPosition | undefined => {
    const cut = name.lastIndexOf("~");
    const id = name.slice(cut + 1);
    if (cut < 0 || !RUN_ID.test(id)) return undefined;
    try { return { createdAt: decodeURIComponent(name.slice(0, cut)), id }; } catch { return undefined; }
  };

  async function write(run: RunRecord): Promise<void> {
    await mkdir(dir, { recursive: true });
    await mkdir(tmp, { recursive: true });
    const t = join(tmp, `${randomUUID()}.json`);
    await writeFile(t, JSON.stringify(run, null, 1));
    await rename(t, fileOf(run.id));
  }

  async function writeEntry(run: RunRecord): Promise<void> {
    const d = entryDir(run.organization, run.workspace);
    await mkdir(d, { recursive: true });
    await writeFile(join(d, entryName(run)), "");
  }

  async function read(id: string): Promise<RunRecord | undefined> {
    try { return JSON.parse(await readFile(fileOf(id), "utf8")) as RunRecord; } catch { return undefined; }
  }

  const names = async (path: string): Promise<string[]> => {
    try { return await readdir(path); } catch { return []; }
  };

  /** Indexes runs stored before the index existed; once per data dir. */
  let indexed: Promise<void> | undefined;
  function ensureIndexed(): Promise<void> {
    indexed ??= (async () => {
      const marker = join(indexDir, ".complete");
      if (await stat(marker).then(() => true, () => false)) return;
      for (const n of await names(dir)) {
        if (!n.endsWith(".json") || !RUN_ID.test(n.slice(0, -5))) continue;
        const run = await read(n.slice(0, -5));
        if (run) await writeEntry(run);
      }
      await mkdir(indexDir, { recursive: true });
      await writeFile(marker, "");
    })().catch((e: unknown) => { indexed = undefined; throw e; });
    return indexed;
  }

  /**
   * Runs queued or running, by id: filled by one scan of the runs (the first count), kept up
   * to date by this store's own writes; a run leaves it once finished (a final status never
   * changes), so it holds only the runs in progress. The scan reads each run serialized with
   * its writes, so a write during the scan is never undone by a stale read.
   */
  const unfinished = new Map<string, "queued" | "running">();
  const note = (run: RunRecord) => {
    if (run.status === "queued" || run.status === "running") unfinished.set(run.id, run.status);
    else unfinished.delete(run.id);
  };
  let scanned: Promise<void> | undefined;
  function ensureScanned(): Promise<void> {
    scanned ??= (async () => {
      const ids = (await names(dir)).filter((n) => n.endsWith(".json") && RUN_ID.test(n.slice(0, -5))).map((n) => n.slice(0, -5));
      for (let i = 0; i < ids.length; i += READ_BATCH) {
        await Promise.all(ids.slice(i, i + READ_BATCH).map((id) => serial(id, async () => { const run = await read(id); if (run) note(run); })));
      }
    })().catch((e: unknown) => { scanned = undefined; throw e; });
    return scanned;
  }

  /** Every run, read whole: only for the operator's resync (no organization given). */
  async function listEverything(filter: RunListFilter): Promise<RunRecord[]> {
    const runs = await Promise.all((await names(dir)).filter((n) => n.endsWith(".json") && RUN_ID.test(n.slice(0, -5))).map((n) => read(n.slice(0, -5))));
    const out = runs.filter((r): r is RunRecord => r !== undefined && matchesRunFilter(r, filter)).sort(compareRunPositions);
    return filter.limit === undefined ? out : out.slice(0, filter.limit);
  }

  async function listIndexed(organization: string, filter: RunListFilter): Promise<RunRecord[]> {
    await ensureIndexed();
    const orgDir = join(indexDir, segment(organization));
    const workspaces = filter.workspace !== undefined ? [segment(filter.workspace)] : await names(orgDir);
    const positions: RunPosition[] = [];
    for (const ws of workspaces) {
      for (const n of await names(join(orgDir, ws))) {
        const p = parseEntry(n);
        if (p && (filter.after === undefined || compareRunPositions(p, filter.after) > 0)) positions.push(p);
      }
    }
    positions.sort(compareRunPositions);
    const limit = filter.limit ?? Number.POSITIVE_INFINITY;
    const out: RunRecord[] = [];
    for (let i = 0; i < positions.length && out.length < limit;) {
      // Without a status filter every entry read is returned (but for a missing run).
      const want = filter.status === undefined ? Math.min(limit - out.length, READ_BATCH) : READ_BATCH;
      const batch = positions.slice(i, i + want);
      i += batch.length;
      for (const run of await Promise.all(batch.map((p) => read(p.id)))) {
        if (run && out.length < limit && matchesRunFilter(run, { ...filter, organization })) out.push(run);
      }
    }
    return out;
  }

  return {
    create: (run) => serial(run.id, async () => {
      if (await read(run.id)) throw new Error(`run ${run.id} already exists`);
      await writeEntry(run);
      await write(run);
      note(run);
      events.emit("change", run.id);
    }),
    get: (id) => (RUN_ID.test(id) ? read(id) : Promise.resolve(undefined)),
    list: (filter) => (filter.organization === undefined ? listEverything(filter) : listIndexed(filter.organization, filter)),
    update: (id, change) => serial(id, async () => {
      const cur = await read(id);
      if (!cur) return undefined;
      const next = change(cur);
      if (!next) return cur;
      await write(next);
      note(next);
      events.emit("change", id);
      return next;
    }),
    countActive: async () => {
      await ensureScanned();
      let queued = 0;
      for (const status of unfinished.values()) if (status === "queued") queued++;
      return { queued, running: unfinished.size - queued };
    },
    watch: (fn) => {
      events.on("change", fn);
      return () => events.off("change", fn);
    },
  };
}
