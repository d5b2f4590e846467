/**
 * The layer below the path normalizer, for every ObjectStore adapter: a key (or listing
 * prefix) that is not already normalized is refused with StoreError "InvalidKey" before the
 * store is asked anything, whichever route, step or stager produced it. S3 would take
 * `a/../b` as a literal key, and a filesystem would resolve it: neither may happen.
 */
import { checkStoreKey } from "../core/paths.js";
import { StoreError, type ObjectStore } from "../core/ports.js";

export function checkedKey(key: string): string {
  const why = checkStoreKey(key);
  if (why) throw new StoreError("InvalidKey", `invalid storage key: ${why}`);
  return key;
}

/** The same store, refusing unnormalized keys in every call that takes one. */
export function guardKeys(store: ObjectStore): ObjectStore {
  const guarded: ObjectStore = {
    put: async (key, body, options) => store.put(checkedKey(key), body, options),
    get: async (key, range) => store.get(checkedKey(key), range),
    head: async (key) => store.head(checkedKey(key)),
    list: async (prefix, options) => store.list(prefix === "" ? prefix : checkedKey(prefix), options),
    delete: async (key) => store.delete(checkedKey(key)),
    describe: async (key, info) => store.describe(checkedKey(key), info),
    presignGet: async (key, options) => store.presignGet(checkedKey(key), options),
    presignPut: async (key, options) => store.presignPut(checkedKey(key), options),
    ping: () => store.ping(),
    ...(store.reusablePresignedPuts ? { reusablePresignedPuts: true } : {}),
  };
  const { version, localPath } = store;
  if (version) guarded.version = () => version.call(store);
  if (localPath) guarded.localPath = (key) => localPath.call(store, checkedKey(key));
  return guarded;
}
