/**
 * The step graph of a pipeline: built from `stepId`/`dependsOn`, it answers which steps may
 * start now (`candidates`), a deterministic topological order, every cycle, and which steps
 * a step transitively depends on. Pure and deterministic: results follow declaration order.
 */

export interface DagNode { stepId: string; dependsOn?: readonly string[] | undefined }

export interface Dag {
  /** Step ids in declaration order (duplicates keep their first occurrence). */
  readonly ids: readonly string[];
  /** Direct dependencies of a step that exist in the graph, in declared order, deduplicated. */
  deps(id: string): readonly string[];
  /** Declared dependencies that name no step. */
  readonly missing: ReadonlyArray<{ stepId: string; dep: string; index: number }>;
  /** One representative cycle per strongly connected component that contains a cycle. */
  cycles(): string[][];
  /** Kahn's order, ties broken by declaration order; undefined when the graph has a cycle. */
  topologicalOrder(): string[] | undefined;
  /** Steps not done and not active whose dependencies are all done, in declaration order. */
  candidates(done: ReadonlySet<string>, active?: ReadonlySet<string>): string[];
  /** Every step that `id` depends on, directly or transitively. */
  ancestors(id: string): ReadonlySet<string>;
  /** Every step that depends on `id`, directly or transitively. */
  descendants(id: string): ReadonlySet<string>;
}

export function buildDag(nodes: readonly DagNode[]): Dag {
  const ids: string[] = [];
  const order = new Map<string, number>();
  for (const n of nodes) {
    if (!order.has(n.stepId)) { order.set(n.stepId, ids.length); ids.push(n.stepId); }
  }
  const depMap = new Map<string, string[]>(ids.map((id) => [id, []]));
  const missing: Array<{ stepId: string; dep: string; index: number }> = [];
  const seenNode = new Set<string>();
  for (const n of nodes) {
    if (seenNode.has(n.stepId)) continue;
    seenNode.add(n.stepId);
    const list = depMap.get(n.stepId) as string[];
    (n.dependsOn ?? []).forEach((dep, index) => {
      if (!order.has(dep)) missing.push({ stepId: n.stepId, dep, index });
      else if (!list.includes(dep)) list.push(dep);
    });
  }
  const dependents = new Map<string, string[]>(ids.map((id) => [id, []]));
  for (const id of ids) for (const d of depMap.get(id) ?? []) dependents.get(d)?.push(id);

  const deps = (id: string): readonly string[] => depMap.get(id) ?? [];

  const ancestorCache = new Map<string, ReadonlySet<string>>();
  const reach = (start: string, next: (id: string) => readonly string[]): Set<string> => {
    const seen = new Set<string>();
    const stack = [...next(start)];
    while (stack.length) {
      const cur = stack.pop() as string;
      if (seen.has(cur)) continue;
      seen.add(cur);
      stack.push(...next(cur));
    }
    return seen;
  };

  const cycles = (): string[][] => {
    const result: string[][] = [];
    for (const scc of stronglyConnected(ids, deps)) {
      const members = new Set(scc);
      const first = scc.slice().sort((a, b) => (order.get(a) ?? 0) - (order.get(b) ?? 0))[0] as string;
      if (scc.length === 1 && !deps(first).includes(first)) continue;
      result.push(shortestCycle(first, members, deps));
    }
    return result.sort((a, b) => (order.get(a[0] as string) ?? 0) - (order.get(b[0] as string) ?? 0));
  };

  const topologicalOrder = (): string[] | undefined => {
    const remaining = new Map<string, number>();
    const ready: number[] = []; // declaration indices, kept sorted
    ids.forEach((id, i) => {
      const n = deps(id).length;
      remaining.set(id, n);
      if (n === 0) ready.push(i);
    });
    const out: string[] = [];
    while (ready.length) {
      const id = ids[ready.shift() as number] as string;
      out.push(id);
      for (const d of dependents.get(id) ?? []) {
        const left = (remaining.get(d) ?? 0) - 1;
        remaining.set(d, left);
        if (left === 0) {
          const idx = order.get(d) as number;
          let at = ready.length;
          while (at > 0 && (ready[at - 1] as number) > idx) at--;
          ready.splice(at, 0, idx);
        }
      }
    }
    return out.length === ids.length ? out : undefined;
  };

  const candidates = (done: ReadonlySet<string>, active: ReadonlySet<string> = new Set()): string[] =>
    ids.filter((id) => !done.has(id) && !active.has(id) && deps(id).every((d) => done.has(d)));

  return {
    ids,
    deps,
    missing,
    cycles,
    topologicalOrder,
    candidates,
    ancestors: (id) => {
      let a = ancestorCache.get(id);
      if (!a) { a = reach(id, deps); ancestorCache.set(id, a); }
      return a;
    },
    descendants: (id) => reach(id, (x) => dependents.get(x) ?? []),
  };
}

/** Tarjan's algorithm (iterative), components in discovery order. */
function stronglyConnected(ids: readonly string[], deps: (id: string) => readonly string[]): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const out: string[][] = [];
  let counter = 0;
  for (const root of ids) {
    if (index.has(root)) continue;
    const work: Array<{ id: string; next: number }> = [{ id: root, next: 0 }];
    index.set(root, counter); low.set(root, counter); counter++;
    stack.push(root); onStack.add(root);
    while (work.length) {
      const frame = work[work.length - 1] as { id: string; next: number };
      const ds = deps(frame.id);
      if (frame.next < ds.length) {
        const d = ds[frame.next++] as string;
        if (!index.has(d)) {
          index.set(d, counter); low.set(d, counter); counter++;
          stack.push(d); onStack.add(d);
          work.push({ id: d, next: 0 });
        } else if (onStack.has(d)) {
          low.set(frame.id, Math.min(low.get(frame.id) as number, index.get(d) as number));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.id, Math.min(low.get(parent.id) as number, low.get(frame.id) as number));
      if (low.get(frame.id) === index.get(frame.id)) {
        const comp: string[] = [];
        let x: string;
        do { x = stack.pop() as string; onStack.delete(x); comp.push(x); } while (x !== frame.id);
        out.push(comp);
      }
    }
  }
  return out;
}

/** Breadth-first search for the shortest path from `start` back to itself inside `members`. */
function shortestCycle(start: string, members: ReadonlySet<string>, deps: (id: string) => readonly string[]): string[] {
  const prev = new Map<string, string>();
  const queue = [start];
  const seen = new Set<string>();
  while (queue.length) {
    const cur = queue.shift() as string;
    for (const d of deps(cur)) {
      if (!members.has(d)) continue;
      if (d === start) {
        const path = [cur];
        while (path[0] !== start) path.unshift(prev.get(path[0] as string) as string);
        return path;
      }
      if (!seen.has(d)) { seen.add(d); prev.set(d, cur); queue.push(d); }
    }
  }
  return [start];
}
