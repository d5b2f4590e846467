import t from "tap";
import fc from "fast-check";
import { buildDag } from "../../core/dag.js";
import type { Dag, DagNode } from "../../core/dag.js";

const n = (stepId: string, ...dependsOn: string[]): DagNode => ({ stepId, dependsOn });

// A diamond declared out of alphabetical order: ties must follow declaration order (c before b).
const diamond = [n("d", "b", "c"), n("c", "a"), n("b", "a"), n("a")];

interface BuildCase {
  name: string;
  nodes: DagNode[];
  ids: string[];
  deps: Record<string, string[]>;
  missing?: Array<{ stepId: string; dep: string; index: number }>;
  topo: string[] | undefined;
  cycles: string[][];
}

const buildCases: BuildCase[] = [
  { name: "linear chain", nodes: [n("c", "b"), n("b", "a"), { stepId: "a" }], ids: ["c", "b", "a"],
    deps: { a: [], b: ["a"], c: ["b"] }, topo: ["a", "b", "c"], cycles: [] },
  { name: "diamond", nodes: diamond, ids: ["d", "c", "b", "a"],
    deps: { a: [], b: ["a"], c: ["a"], d: ["b", "c"] }, topo: ["a", "c", "b", "d"], cycles: [] },
  { name: "independent steps keep declaration order", nodes: [n("z"), n("y"), n("x")], ids: ["z", "y", "x"],
    deps: { x: [], y: [], z: [] }, topo: ["z", "y", "x"], cycles: [] },
  { name: "duplicate stepIds: first occurrence wins", nodes: [n("a"), n("b", "a"), n("a", "b"), n("b", "zz")],
    ids: ["a", "b"], deps: { a: [], b: ["a"] }, missing: [], topo: ["a", "b"], cycles: [] },
  { name: "missing dependencies recorded with their index", nodes: [n("a"), n("b", "a", "ghost", "a", "zzz")],
    ids: ["a", "b"], deps: { a: [], b: ["a"] },
    missing: [{ stepId: "b", dep: "ghost", index: 1 }, { stepId: "b", dep: "zzz", index: 3 }], topo: ["a", "b"], cycles: [] },
  { name: "duplicate deps deduplicated in declared order", nodes: [n("a"), n("c"), n("b", "c", "a", "c", "a")],
    ids: ["a", "c", "b"], deps: { a: [], b: ["c", "a"], c: [] }, topo: ["a", "c", "b"], cycles: [] },
  { name: "dependency on a later-declared step", nodes: [n("a", "b"), n("b")], ids: ["a", "b"],
    deps: { a: ["b"], b: [] }, topo: ["b", "a"], cycles: [] },
  { name: "self-loop", nodes: [n("x"), n("a", "a")], ids: ["x", "a"], deps: { a: ["a"], x: [] }, topo: undefined, cycles: [["a"]] },
  { name: "2-cycle", nodes: [n("a", "b"), n("b", "a")], ids: ["a", "b"], deps: { a: ["b"], b: ["a"] }, topo: undefined, cycles: [["a", "b"]] },
  { name: "3-cycle", nodes: [n("a", "b"), n("b", "c"), n("c", "a")], ids: ["a", "b", "c"],
    deps: { a: ["b"], b: ["c"], c: ["a"] }, topo: undefined, cycles: [["a", "b", "c"]] },
  { name: "3-cycle starts at its earliest-declared member", nodes: [n("b", "c"), n("c", "a"), n("a", "b")], ids: ["b", "c", "a"],
    deps: { a: ["b"], b: ["c"], c: ["a"] }, topo: undefined, cycles: [["b", "c", "a"]] },
  { name: "shortest cycle through the first member", nodes: [n("a", "b", "c"), n("b", "c"), n("c", "a")], ids: ["a", "b", "c"],
    deps: { a: ["b", "c"], b: ["c"], c: ["a"] }, topo: undefined, cycles: [["a", "c"]] },
  // t is discovered first and leads into x<->y, yet p<->q is declared earlier and reported first.
  { name: "two disjoint cycles in declaration order of their first member",
    nodes: [n("t", "x"), n("p", "q"), n("x", "y"), n("q", "p"), n("y", "x")], ids: ["t", "p", "x", "q", "y"],
    deps: { t: ["x"], p: ["q"], x: ["y"], q: ["p"], y: ["x"] }, topo: undefined, cycles: [["p", "q"], ["x", "y"]] },
  { name: "cycle plus acyclic tail (tail not reported)",
    nodes: [n("e"), n("d", "c"), n("c", "a"), n("a", "b"), n("b", "a")], ids: ["e", "d", "c", "a", "b"],
    deps: { a: ["b"], b: ["a"], c: ["a"], d: ["c"], e: [] }, topo: undefined, cycles: [["a", "b"]] },
];

for (const c of buildCases) {
  t.test(`buildDag: ${c.name}`, async (t) => {
    const dag = buildDag(c.nodes);
    t.strictSame(dag.ids, c.ids, "ids");
    for (const [id, ds] of Object.entries(c.deps)) t.strictSame(dag.deps(id), ds, `deps(${id})`);
    t.strictSame(dag.missing, c.missing ?? [], "missing");
    t.strictSame(dag.topologicalOrder(), c.topo, "topologicalOrder");
    t.strictSame(dag.cycles(), c.cycles, "cycles");
    t.strictSame(dag.topologicalOrder(), c.topo, "topologicalOrder is repeatable");
  });
}

t.test("deps of an unknown id is empty; missing deps do not block candidates", async (t) => {
  const dag = buildDag([n("a", "ghost"), n("b", "a")]);
  t.strictSame(dag.deps("nope"), []);
  t.strictSame(dag.candidates(new Set()), ["a"]);
});

const candidateCases: Array<{ name: string; done: string[]; active?: string[]; expect: string[] }> = [
  { name: "nothing done", done: [], expect: ["a"] },
  { name: "root active", done: [], active: ["a"], expect: [] },
  { name: "root done", done: ["a"], expect: ["c", "b"] },
  { name: "root done, c active", done: ["a"], active: ["c"], expect: ["b"] },
  { name: "one branch done", done: ["a", "b"], expect: ["c"] },
  { name: "one branch done, other active", done: ["a", "b"], active: ["c"], expect: [] },
  { name: "both branches done", done: ["a", "b", "c"], expect: ["d"] },
  { name: "all done", done: ["a", "b", "c", "d"], expect: [] },
  { name: "done set with unrelated ids", done: ["a", "zz"], expect: ["c", "b"] },
];

for (const c of candidateCases) {
  t.test(`candidates on a diamond: ${c.name}`, async (t) => {
    const dag = buildDag(diamond);
    t.strictSame(dag.candidates(new Set(c.done), c.active ? new Set(c.active) : undefined), c.expect);
  });
}

const sorted = (s: ReadonlySet<string>): string[] => [...s].sort();

const reachCases: Array<{ name: string; nodes: DagNode[]; id: string; ancestors: string[]; descendants: string[] }> = [
  { name: "diamond sink", nodes: diamond, id: "d", ancestors: ["a", "b", "c"], descendants: [] },
  { name: "diamond source", nodes: diamond, id: "a", ancestors: [], descendants: ["b", "c", "d"] },
  { name: "diamond branch", nodes: diamond, id: "b", ancestors: ["a"], descendants: ["d"] },
  { name: "unknown id", nodes: diamond, id: "zz", ancestors: [], descendants: [] },
  { name: "self-loop includes itself", nodes: [n("a", "a"), n("b", "a")], id: "a", ancestors: ["a"], descendants: ["a", "b"] },
  { name: "cycle with tail", nodes: [n("a", "b"), n("b", "a"), n("c", "a"), n("d")], id: "b", ancestors: ["a", "b"], descendants: ["a", "b", "c"] },
];

for (const c of reachCases) {
  t.test(`ancestors/descendants: ${c.name}`, async (t) => {
    const dag = buildDag(c.nodes);
    t.strictSame(sorted(dag.ancestors(c.id)), c.ancestors, "ancestors");
    t.strictSame(sorted(dag.descendants(c.id)), c.descendants, "descendants");
  });
}

// ---- properties ------------------------------------------------------------------------

const id = (i: number): string => `s${i}`;

/** Arbitrary graphs: deps point anywhere (self, duplicates, and a missing "ghost" id included). */
const anyGraph = fc.integer({ min: 1, max: 15 }).chain((size) =>
  fc.array(fc.array(fc.nat({ max: size }), { maxLength: 4 }), { minLength: size, maxLength: size })
    .map((lists) => lists.map((ds, i): DagNode => ({ stepId: id(i), dependsOn: ds.map((d) => (d === size ? "ghost" : id(d))) }))));

/** Acyclic graphs whose declaration order is a random permutation of a hidden topological order. */
const acyclicGraph = fc.integer({ min: 1, max: 15 }).chain((size) =>
  fc.tuple(
    fc.shuffledSubarray([...Array(size).keys()], { minLength: size, maxLength: size }),
    fc.array(fc.array(fc.nat({ max: 1_000 }), { maxLength: 4 }), { minLength: size, maxLength: size }),
  ).map(([perm, picks]) => perm.map((node, rank): DagNode => ({
    stepId: id(node),
    dependsOn: rank === 0 ? [] : (picks[rank] ?? []).map((p) => id(perm[p % rank] as number)),
  }))));

const graphs = fc.oneof(anyGraph, acyclicGraph);
const runs = { numRuns: 200 };

/** Repeatedly starts every candidate and marks it done; returns the set of steps that finished. */
function drain(dag: Dag): Set<string> {
  const done = new Set<string>();
  for (;;) {
    const next = dag.candidates(done);
    if (next.length === 0) return done;
    for (const x of next) done.add(x);
  }
}

t.test("property: candidates respect dependencies, done and active", async (t) => {
  fc.assert(fc.property(graphs, fc.infiniteStream(fc.nat({ max: 2 })), (nodes, coins) => {
    const dag = buildDag(nodes);
    const done = new Set<string>();
    const active = new Set<string>();
    for (const x of dag.ids) { const c = coins.next().value as number; if (c === 1) done.add(x); else if (c === 2) active.add(x); }
    const cands = dag.candidates(done, active);
    for (const x of cands) {
      if (done.has(x) || active.has(x)) return false;
      if (!dag.deps(x).every((d) => done.has(d))) return false;
    }
    // Completeness: every eligible step is offered, in declaration order.
    const eligible = dag.ids.filter((x) => !done.has(x) && !active.has(x) && dag.deps(x).every((d) => done.has(d)));
    return JSON.stringify(cands) === JSON.stringify(eligible);
  }), runs);
  t.pass("candidates property held");
});

t.test("property: draining candidates finishes exactly when a topological order exists", async (t) => {
  fc.assert(fc.property(graphs, (nodes) => {
    const dag = buildDag(nodes);
    const finished = drain(dag).size === dag.ids.length;
    return finished === (dag.topologicalOrder() !== undefined);
  }), runs);
  t.pass("drain property held");
});

t.test("property: cycles() is empty iff topologicalOrder() is defined", async (t) => {
  fc.assert(fc.property(graphs, (nodes) => {
    const dag = buildDag(nodes);
    return (dag.cycles().length === 0) === (dag.topologicalOrder() !== undefined);
  }), runs);
  t.pass("cycles/topo property held");
});

t.test("property: every reported cycle is a real, simple cycle", async (t) => {
  fc.assert(fc.property(graphs, (nodes) => {
    const dag = buildDag(nodes);
    for (const cyc of dag.cycles()) {
      if (cyc.length === 0 || new Set(cyc).size !== cyc.length) return false;
      for (let i = 0; i < cyc.length; i++) {
        const from = cyc[i] as string;
        const to = cyc[(i + 1) % cyc.length] as string;
        if (!dag.deps(from).includes(to)) return false;
      }
    }
    return true;
  }), runs);
  t.pass("cycle validity property held");
});

t.test("property: stalled steps are explained by reported cycles, one per cyclic SCC", async (t) => {
  fc.assert(fc.property(graphs, (nodes) => {
    const dag = buildDag(nodes);
    const anc = new Map(dag.ids.map((x) => [x, dag.ancestors(x)]));
    const sameScc = (x: string, y: string): boolean => x === y || (!!anc.get(x)?.has(y) && !!anc.get(y)?.has(x));
    const cycles = dag.cycles();
    const inCyclicScc = new Set(dag.ids.filter((x) => cycles.some((c) => sameScc(x, c[0] as string))));
    // Each reported cycle lies in one SCC, starts at its earliest-declared member, and no SCC is reported twice.
    for (const [i, c] of cycles.entries()) {
      const head = c[0] as string;
      if (!c.every((m) => sameScc(m, head))) return false;
      const scc = dag.ids.filter((x) => sameScc(x, head));
      if (scc[0] !== head) return false;
      if (cycles.some((o, j) => j !== i && sameScc(o[0] as string, head))) return false;
      if (i > 0 && dag.ids.indexOf(head) < dag.ids.indexOf(cycles[i - 1]?.[0] as string)) return false;
    }
    // Every self-reaching step is in the SCC of a reported cycle.
    for (const x of dag.ids) if (anc.get(x)?.has(x) && !inCyclicScc.has(x)) return false;
    // Every stalled step lies in, or depends on, a cyclic SCC; steps that finished never do.
    const done = drain(dag);
    for (const x of dag.ids) {
      const blocked = inCyclicScc.has(x) || [...(anc.get(x) ?? [])].some((a) => inCyclicScc.has(a));
      if (blocked === done.has(x)) return false;
    }
    return true;
  }), runs);
  t.pass("stall explanation property held");
});

t.test("property: topologicalOrder lists every id once, each after its deps", async (t) => {
  fc.assert(fc.property(graphs, (nodes) => {
    const dag = buildDag(nodes);
    const order = dag.topologicalOrder();
    if (order === undefined) return true;
    if (order.length !== dag.ids.length || new Set(order).size !== order.length) return false;
    if (!dag.ids.every((x) => order.includes(x))) return false;
    const pos = new Map(order.map((x, i) => [x, i]));
    return order.every((x, i) => dag.deps(x).every((d) => (pos.get(d) as number) < i));
  }), runs);
  t.pass("topological order property held");
});

t.test("property: acyclic graphs always have a topological order", async (t) => {
  fc.assert(fc.property(acyclicGraph, (nodes) => buildDag(nodes).topologicalOrder() !== undefined), runs);
  t.pass("acyclic property held");
});
