/**
 * GPML (WikiPathways, CC0) → the compact collection the pathway_map chart ships
 * (data/wikipathways/pathways.json) and its identifier maps (data/wikipathways/ids.json).
 *
 *   npx tsx scripts/wikipathways/convert.ts <dir with WPnnn.gpml files> [out dir]
 *
 * The list of pathways, their organism and the wikipathways-database commit each GPML was
 * read at is `MANIFEST` below (data/wikipathways/README.md says the same). Kept from GPML:
 * DataNodes (label, type, centre/size, Xref), Labels, Interactions and GraphicalLines (their
 * points, routed orthogonally for Elbow connectors; ArrowHead; GraphRef ends), simple Shapes
 * and complexes (Group Style="Complex", drawn as their members' outline).
 */
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { buildIdMap, type IdMap, type Organism, type Pathway, type PathwayEdge, type PathwayNode, type PathwayShape } from "../../plots/data/pathways.js";

export const SOURCE = "https://github.com/wikipathways/wikipathways-database (pathways/WPnnn/WPnnn.gpml)";
export const LICENCE = "CC0 1.0 (WikiPathways content is in the public domain: https://www.wikipathways.org/about.html)";

/**
 * The shipped subset: id, organism, the wikipathways-database commit its GPML was read at, and
 * the GraphIds of elements left out (the diagram's own colour legend — "Activator / Inhibitor
 * of cell death" with red/blue sample lines — which would be wrong in a map that does not keep
 * interaction colours).
 */
export const MANIFEST: ReadonlyArray<{ id: string; organism: Organism; commit: string; omit?: readonly string[] }> = [
  { id: "WP254", organism: "human", commit: "09fa1d34e0f610af072b4254de66643048f17b5b", omit: ["f9109", "b9e", "bee", "b48e2", "idccbc6e3a", "bd2e0"] },
  { id: "WP197", organism: "human", commit: "0cea7fcbf4d95634b8dc740445483d7d156974a4" },
  { id: "WP408", organism: "human", commit: "25baea66eedf264287585a92517f14400f9c8157" },
  { id: "WP1254", organism: "mouse", commit: "2e08733fbee1ca901f1f2b2ebc3edaab3590dae0", omit: ["b9e", "bee", "idccbc6e3a", "bd2e0"] },
  { id: "WP434", organism: "mouse", commit: "2e08733fbee1ca901f1f2b2ebc3edaab3590dae0" },
];

/**
 * Old symbols some pathways still draw, and the current HGNC/MGI symbol a DE table will
 * carry (hand-curated from the symbols found on the shipped pathways).
 */
export const ALIASES: Readonly<Record<string, readonly string[]>> = {
  BIRC4: ["XIAP"], SC4MOL: ["MSMO1"], SC5DL: ["SC5D"], FRAP1: ["MTOR"],
  Birc4: ["Xiap"], Sc4mol: ["Msmo1"], Sc5d: ["Sc5dl"],
};

// ---- a small tolerant XML reader (elements, attributes, entities; no DTDs) ----------------
export interface XmlEl { name: string; attrs: Record<string, string>; children: XmlEl[]; text: string }

const decode = (s: string) => s.replace(/&(#x[0-9a-fA-F]+|#\d+|amp|lt|gt|quot|apos);/g, (_, e: string) =>
  e[0] === "#" ? String.fromCodePoint(e[1] === "x" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10))
    : ({ amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" } as Record<string, string>)[e]!);

export function parseXml(xml: string): XmlEl {
  const root: XmlEl = { name: "#root", attrs: {}, children: [], text: "" };
  const stack: XmlEl[] = [root];
  let i = 0;
  while (i < xml.length) {
    const lt = xml.indexOf("<", i);
    if (lt < 0) break;
    if (lt > i) stack[stack.length - 1]!.text += decode(xml.slice(i, lt));
    if (xml.startsWith("<!--", lt)) { const e = xml.indexOf("-->", lt); i = e < 0 ? xml.length : e + 3; continue; }
    if (xml.startsWith("<![CDATA[", lt)) { const e = xml.indexOf("]]>", lt); stack[stack.length - 1]!.text += xml.slice(lt + 9, e < 0 ? xml.length : e); i = e < 0 ? xml.length : e + 3; continue; }
    if (xml.startsWith("<?", lt) || xml.startsWith("<!", lt)) { const e = xml.indexOf(">", lt); i = e < 0 ? xml.length : e + 1; continue; }
    // find the tag's end, skipping quoted attribute values
    let j = lt + 1, q = "";
    for (; j < xml.length; j++) {
      const c = xml[j]!;
      if (q) { if (c === q) q = ""; } else if (c === '"' || c === "'") q = c; else if (c === ">") break;
    }
    const body = xml.slice(lt + 1, j);
    i = j + 1;
    if (body.startsWith("/")) {
      const name = body.slice(1).trim().replace(/^.*:/, "");
      for (let k = stack.length - 1; k > 0; k--) if (stack[k]!.name === name) { stack.length = k; break; }
      continue;
    }
    const selfClosing = body.endsWith("/");
    const m = /^([^\s/>]+)/.exec(body);
    if (!m) continue;
    const el: XmlEl = { name: m[1]!.replace(/^.*:/, ""), attrs: {}, children: [], text: "" };
    const re = /([^\s=/]+)\s*=\s*("([^"]*)"|'([^']*)')/g;
    let a: RegExpExecArray | null;
    while ((a = re.exec(body.slice(m[1]!.length)))) el.attrs[a[1]!.replace(/^.*:/, "")] = decode(a[3] ?? a[4] ?? "");
    stack[stack.length - 1]!.children.push(el);
    if (!selfClosing) stack.push(el);
  }
  return root;
}

const kids = (e: XmlEl, name: string) => e.children.filter((c) => c.name === name);
const kid = (e: XmlEl, name: string) => e.children.find((c) => c.name === name);
const num = (s: string | undefined, d = 0) => { const v = Number(s); return Number.isFinite(v) ? v : d; };
const r1 = (v: number) => Math.round(v * 10) / 10;

/** Orthogonal route through the given points (GPML Elbow connectors), first leg along the side the line leaves. */
function elbow(pts: Array<[number, number]>, startVertical: boolean): Array<[number, number]> {
  const out: Array<[number, number]> = [pts[0]!];
  let vertical = startVertical;
  for (let k = 1; k < pts.length; k++) {
    const [ax, ay] = out[out.length - 1]!;
    const [bx, by] = pts[k]!;
    if (ax !== bx && ay !== by) out.push(vertical ? [ax, by] : [bx, ay]);
    out.push([bx, by]);
    vertical = !vertical;
  }
  return out;
}

export function convertGpml(xml: string, id: string, organism: Organism, commit?: string, omit: readonly string[] = []): Pathway {
  const doc = parseXml(xml);
  const found = doc.children.find((c) => c.name === "Pathway");
  if (!found) throw new Error(`${id}: no <Pathway> element`);
  const skip = new Set(omit);
  const root: XmlEl = { ...found, children: found.children.filter((c) => !skip.has(c.attrs.GraphId ?? "")) };
  const nodes: PathwayNode[] = [];
  const shapes: PathwayShape[] = [];
  const edges: PathwayEdge[] = [];
  const boxes = new Map<string, { x: number; y: number; w: number; h: number }>();
  const members = new Map<string, string[]>();
  const geom = (g: XmlEl | undefined) => ({ x: r1(num(g?.attrs.CenterX)), y: r1(num(g?.attrs.CenterY)), w: r1(num(g?.attrs.Width)), h: r1(num(g?.attrs.Height)) });
  for (const el of root.children) {
    if (el.name !== "DataNode" && el.name !== "Label") continue;
    const g = kid(el, "Graphics");
    const box = geom(g);
    const gid = el.attrs.GraphId ?? `${el.name}${nodes.length}`;
    const type = el.name === "Label" ? "Label" : (el.attrs.Type ?? "Unknown");
    const x = kid(el, "Xref");
    const node: PathwayNode = { id: gid, label: (el.attrs.TextLabel ?? "").trim(), type, ...box, genes: [] };
    if (x && x.attrs.ID) node.xref = { db: x.attrs.Database ?? "", id: x.attrs.ID.trim() };
    if (g?.attrs.FontWeight === "Bold") node.bold = true;
    if (g?.attrs.FontSize) node.fontSize = num(g.attrs.FontSize, 10);
    if (g?.attrs.Color && /^[0-9a-fA-F]{6}$/.test(g.attrs.Color) && g.attrs.Color.toLowerCase() !== "000000") node.color = g.attrs.Color.toLowerCase();
    nodes.push(node);
    boxes.set(gid, box);
    if (el.attrs.GroupRef) members.set(el.attrs.GroupRef, [...(members.get(el.attrs.GroupRef) ?? []), gid]);
  }
  for (const el of kids(root, "Shape")) {
    const g = kid(el, "Graphics");
    const box = geom(g);
    const s: PathwayShape = { shape: g?.attrs.ShapeType ?? "Rectangle", ...box };
    if (el.attrs.TextLabel) s.label = el.attrs.TextLabel;
    if (g?.attrs.Color && /^[0-9a-fA-F]{6}$/.test(g.attrs.Color)) s.color = g.attrs.Color.toLowerCase();
    if (num(g?.attrs.LineThickness, 1) >= 2) s.thick = true;
    shapes.push(s);
    if (el.attrs.GraphId) boxes.set(el.attrs.GraphId, box);
  }
  // Groups: their box is the members' bounds (a GraphRef may point at a group's GraphId).
  const groupBox = (gidRef: string, seen = new Set<string>()): { x: number; y: number; w: number; h: number } | undefined => {
    if (seen.has(gidRef)) return undefined;
    seen.add(gidRef);
    const ms = (members.get(gidRef) ?? []).map((m) => boxes.get(m)).filter((b): b is NonNullable<typeof b> => !!b);
    if (!ms.length) return undefined;
    const x0 = Math.min(...ms.map((b) => b.x - b.w / 2)) - 4, x1 = Math.max(...ms.map((b) => b.x + b.w / 2)) + 4;
    const y0 = Math.min(...ms.map((b) => b.y - b.h / 2)) - 4, y1 = Math.max(...ms.map((b) => b.y + b.h / 2)) + 4;
    return { x: r1((x0 + x1) / 2), y: r1((y0 + y1) / 2), w: r1(x1 - x0), h: r1(y1 - y0) };
  };
  for (const el of kids(root, "Group")) {
    const b = groupBox(el.attrs.GroupId ?? "");
    if (!b) continue;
    if (el.attrs.GraphId) boxes.set(el.attrs.GraphId, b);
    if (el.attrs.Style === "Complex") shapes.push({ shape: "Complex", ...b });
  }
  for (const el of root.children) {
    if (el.name !== "Interaction" && el.name !== "GraphicalLine") continue;
    const g = kid(el, "Graphics");
    if (!g) continue;
    const pts = kids(g, "Point");
    if (pts.length < 2) continue;
    let poly: Array<[number, number]> = pts.map((p) => [r1(num(p.attrs.X)), r1(num(p.attrs.Y))]);
    if (g.attrs.ConnectorType === "Elbow") {
      const first = pts[0]!, b = first.attrs.GraphRef ? boxes.get(first.attrs.GraphRef) : undefined;
      const relY = first.attrs.RelY !== undefined ? Math.abs(num(first.attrs.RelY)) : undefined;
      const relX = first.attrs.RelX !== undefined ? Math.abs(num(first.attrs.RelX)) : undefined;
      const vertical = relY !== undefined && relX !== undefined ? relY >= relX
        : b ? Math.abs(Math.abs(poly[0]![1] - b.y) - b.h / 2) < Math.abs(Math.abs(poly[0]![0] - b.x) - b.w / 2) : false;
      poly = elbow(poly, vertical);
    }
    const last = pts[pts.length - 1]!;
    const e: PathwayEdge = { points: poly, arrow: el.name === "GraphicalLine" ? (last.attrs.ArrowHead ?? "Line") : (last.attrs.ArrowHead ?? "Line") };
    if (pts[0]!.attrs.GraphRef) e.from = pts[0]!.attrs.GraphRef;
    if (last.attrs.GraphRef) e.to = last.attrs.GraphRef;
    if (pts[0]!.attrs.ArrowHead) e.arrowStart = pts[0]!.attrs.ArrowHead;
    if (g.attrs.LineStyle === "Broken") e.dashed = true;
    edges.push(e);
  }
  const board = kid(root, "Graphics");
  const p: Pathway = {
    id, title: root.attrs.Name ?? id, organism,
    width: r1(num(board?.attrs.BoardWidth, 800)), height: r1(num(board?.attrs.BoardHeight, 600)),
    nodes, edges, shapes,
  };
  if (root.attrs.Version) p.revision = root.attrs.Version;
  if (commit) p.commit = commit;
  return p;
}

export function buildCollection(dir: string): { pathways: Pathway[]; ids: { human: IdMap; mouse: IdMap } } {
  const pathways = MANIFEST.map((m) => convertGpml(readFileSync(join(dir, `${m.id}.gpml`), "utf8"), m.id, m.organism, m.commit, m.omit));
  const ids = {
    human: buildIdMap(pathways.filter((p) => p.organism === "human"), ALIASES),
    mouse: buildIdMap(pathways.filter((p) => p.organism === "mouse"), ALIASES),
  };
  return { pathways, ids };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [dir, out = "data/wikipathways"] = process.argv.slice(2);
  if (!dir) { console.error("usage: tsx scripts/wikipathways/convert.ts <gpml dir> [out dir]"); process.exit(2); }
  const { pathways, ids } = buildCollection(dir);
  mkdirSync(out, { recursive: true });
  const release = `wikipathways-database GPML as of ${[...new Set(MANIFEST.map((m) => m.commit.slice(0, 12)))].join(", ")} (per-pathway commits in pathways.json)`;
  writeFileSync(join(out, "pathways.json"), JSON.stringify({ release, source: SOURCE, licence: LICENCE, pathways }) + "\n");
  writeFileSync(join(out, "ids.json"), JSON.stringify(ids) + "\n");
  for (const p of pathways) {
    const genes = new Set(p.nodes.flatMap((n) => n.genes));
    console.log(`${p.id}\t${p.organism}\t${p.revision ?? ""}\t${genes.size} genes\t${p.nodes.length} nodes\t${p.edges.length} edges\t${p.title}`);
  }
  console.log(`ids: human ${Object.keys(ids.human).length}, mouse ${Object.keys(ids.mouse).length}`);
}
