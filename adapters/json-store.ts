/**
 * JSON records in the object store: read, write, and read-modify-write with optimistic
 * concurrency (if-match on the etag). The service store, render jobs and viewer
 * preparations keep their small records this way.
 */
import { StoreError, type ObjectStore } from "../core/ports.js";

async function readJsonTagged<T>(store: ObjectStore, key: string): Promise<{ value: T; etag: string | undefined } | undefined> {
  try {
    const { body, info } = await store.get(key);
    const chunks: Buffer[] = [];
    for await (const c of body) chunks.push(Buffer.from(c));
    return { value: JSON.parse(Buffer.concat(chunks).toString("utf8")) as T, etag: info.etag };
  } catch (e) {
    if (e instanceof StoreError && e.code === "NotFound") return undefined;
    throw e;
  }
}

export async function readJson<T>(store: ObjectStore, key: string): Promise<T | undefined> {
  return (await readJsonTagged<T>(store, key))?.value;
}

/**
 * Read-modify-write of one JSON record with optimistic concurrency: the write only lands if
 * nobody changed the record since it was read (if-match on its etag); otherwise read again.
 * `change` returns undefined when there is nothing to write.
 */
export async function updateJson<T>(store: ObjectStore, key: string, change: (current: T) => T | undefined): Promise<T | undefined> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const cur = await readJsonTagged<T>(store, key);
    if (!cur) return undefined;
    const next = change(cur.value);
    if (next === undefined) return cur.value;
    try {
      await store.put(key, JSON.stringify(next, null, 2), { contentType: "application/json", ...(cur.etag ? { ifMatch: cur.etag } : {}) });
      return next;
    } catch (e) {
      if (!(e instanceof StoreError && e.code === "PreconditionFailed")) throw e;
    }
  }
  throw new Error(`${key}: too many concurrent updates`);
}

export const writeJson = (store: ObjectStore, key: string, value: unknown, ifNoneMatch?: boolean) =>
  store.put(key, JSON.stringify(value, null, 2), { contentType: "application/json", ...(ifNoneMatch ? { ifNoneMatch: "*" as const } : {}) });
