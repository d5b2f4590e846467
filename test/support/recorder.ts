/**
 * Records what a watch shows of a kind of object, for tests that must say what an object
 * looked like before it went away, and in which order things happened: the last state of
 * each object, the resourceVersion (an etcd revision, one global order) of each state seen,
 * and the revision at which each object was deleted.
 */
import type { KubeClient } from "../../adapters/kubernetes/client.js";
import { Informer, type KubeObject } from "../../adapters/kubernetes/informer.js";

export interface Recorder<T extends KubeObject> {
  /** The last state seen of the object while it existed. */
  last(name: string): T | undefined;
  /** Every state seen, in order. */
  history(name: string): T[];
  /** The revision of the object's deletion, once seen. */
  deletedAt(name: string): number | undefined;
  /** Names of every object seen. */
  names(): string[];
  stop(): void;
}

export async function record<T extends KubeObject>(client: KubeClient, path: string, labelSelector?: string): Promise<Recorder<T>> {
  const states = new Map<string, T[]>();
  const deleted = new Map<string, number>();
  const informer: Informer<T> = new Informer<T>({
    client, path, ...(labelSelector ? { labelSelector } : {}),
    onChange: (obj) => {
      const name = obj.metadata.name;
      if (informer.get(name) === undefined) { deleted.set(name, Number(obj.metadata.resourceVersion)); return; }
      states.set(name, [...(states.get(name) ?? []), obj]);
    },
  });
  await informer.start();
  return {
    last: (name) => states.get(name)?.at(-1),
    history: (name) => states.get(name) ?? [],
    deletedAt: (name) => deleted.get(name),
    names: () => [...states.keys()],
    stop: () => informer.stop(),
  };
}
