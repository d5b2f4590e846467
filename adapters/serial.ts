/**
 * Per-key serialization for read-modify-write stores: operations on one key run one after
 * another in this process (different keys run concurrently). Both run stores use it, so an
 * update never reads a record that an earlier update of the same run is still writing.
 */
export function keyedSerializer(): <T>(key: string, fn: () => Promise<T>) => Promise<T> {
  const chains = new Map<string, Promise<unknown>>();
  return <T>(key: string, fn: () => Promise<T>): Promise<T> => {
    const prev = chains.get(key) ?? Promise.resolve();
    const next = prev.catch(() => undefined).then(fn);
    chains.set(key, next);
    void next.finally(() => { if (chains.get(key) === next) chains.delete(key); }).catch(() => undefined);
    return next;
  };
}
