/**
 * The layer below the path normalizer, for every ObjectStore adapter: a key (or listing
 * prefix) that is not already normalized is refused with StoreError "InvalidKey" before the
 * store is asked anything, whichever route, step or stager produced it. S3 would take
 * `a/../b` as a literal key, and a filesystem would resolve it: neither may happen.
 */
import { checkStoreKey } from "../core/paths.js";
import { StoreError, type MultipartUploads, type ObjectStore } from "../core/ports.js";

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
  const { version, localPath, multipart } = store;
  if (version) guarded.version = () => version.call(store);
  if (localPath) guarded.localPath = (key) => localPath.call(store, checkedKey(key));
  if (multipart) return { ...guarded, multipart: guardMultipart(multipart) };
  return guarded;
}

/** The same multipart uploads, refusing unnormalized keys in every call that takes one (putPart only when the store has it). */
function guardMultipart(m: MultipartUploads): MultipartUploads {
  const guarded: MultipartUploads = {
    create: async (key, o) => m.create(checkedKey(key), o),
    presignPart: async (key, uploadId, partNumber, o) => m.presignPart(checkedKey(key), uploadId, partNumber, o),
    listParts: async (key, uploadId) => m.listParts(checkedKey(key), uploadId),
    complete: async (key, uploadId, parts) => m.complete(checkedKey(key), uploadId, parts),
    abort: async (key, uploadId) => m.abort(checkedKey(key), uploadId),
    listOpen: async (before, limit) => m.listOpen(before, limit),
  };
  const { putPart } = m;
  if (putPart) guarded.putPart = async (key, uploadId, partNumber, body, o) => putPart.call(m, checkedKey(key), uploadId, partNumber, body, o);
  return guarded;
}
