/**
 * A pathway map drawn: compartments, boxes and complexes; interactions with their GPML
 * arrowheads; gene boxes filled by fold change on a symmetric RdBu scale (grey when the gene
 * is not in the file, pale yellow without a fold change, a thick black border when
 * highlighted), metabolites and pathway links in their own styles, free labels in their GPML
 * colours darkened until they read; the title and the legend.
 */
import type { FileGenes } from "../data/gene-table.js";
import { fmt } from "../data/numbers.js";
import type { PathwayMatch } from "../data/pathway-match.js";
import type { Pathway, PathwayEdge, PathwayNode } from "../data/pathways.js";
import { M, legendLineHeight, nodeBox, type LegendEntry, type PathwayLayout } from "../layout/pathway.js";
import { shrinkText, SIZE } from "../layout/text.js";
import { colormap } from "./colours.js";
import { colorbar } from "./legend.js";
import { esc, r2, text } from "./svg.js";

const NEUTRAL = "#f6e3a1";
/** Gene boxes whose gene is not in the file: light grey, so that they never pass for a fold change near 0 (white on RdBu). */
const MISSING = "#e4e4e4";
const MISSING_STROKE = "#8c8c8c";
const MISSING_TEXT = "#4d4d4d";
const rdbu = colormap("RdBu");

const rgbOf = (c: string): [number, number, number] => {
  const m = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(c);
  if (m) return [+m[1]!, +m[2]!, +m[3]!];
  const h = /^#?([0-9a-f]{6})$/i.exec(c);
  if (h) { const v = parseInt(h[1]!, 16); return [v >> 16, (v >> 8) & 255, v & 255]; }
  return [255, 255, 255];
};
/** A GPML text colour darkened until it reads on white (luminance ≤ 110 of 255), hue kept. */
function readable(hex: string): string {
  let [r, g, b] = rgbOf(hex);
  const lum = () => 0.2126 * r + 0.7152 * g + 0.0722 * b;
  for (let i = 0; i < 20 && lum() > 110; i++) { r *= 0.85; g *= 0.85; b *= 0.85; }
  return `#${[r, g, b].map((v) => Math.round(v).toString(16).padStart(2, "0")).join("")}`;
}
const darkFill = (c: string) => { const [r, g, b] = rgbOf(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b < 120; };

function arrowHead(kind: string, x: number, y: number, dx: number, dy: number, a: number, color: string): string {
  const len = Math.hypot(dx, dy) || 1;
  const ux = dx / len, uy = dy / len, px = -uy, py = ux;
  const k = kind.toLowerCase();
  if (k === "line" || k === "") return "";
  if (k === "tbar" || k === "mim-inhibition") {
    const w = a * 0.8;
    return `<line x1="${r2(x + px * w)}" y1="${r2(y + py * w)}" x2="${r2(x - px * w)}" y2="${r2(y - py * w)}" stroke="${color}" stroke-width="1.6"/>`;
  }
  if (k === "mim-catalysis") return `<circle cx="${r2(x - ux * a * 0.45)}" cy="${r2(y - uy * a * 0.45)}" r="${r2(a * 0.45)}" fill="#fff" stroke="${color}" stroke-width="1"/>`;
  const bx = x - ux * a, by = y - uy * a, w = a * 0.45;
  const open = k === "mim-stimulation" || k === "mim-necessary-stimulation";
  return `<path d="M${r2(x)},${r2(y)}L${r2(bx + px * w)},${r2(by + py * w)}L${r2(bx - px * w)},${r2(by - py * w)}Z" fill="${open ? "#fff" : color}" stroke="${color}" stroke-width="${open ? 1 : 0.5}"/>`
    + (k === "mim-necessary-stimulation" ? `<line x1="${r2(bx - ux * 2 + px * w)}" y1="${r2(by - uy * 2 + py * w)}" x2="${r2(bx - ux * 2 - px * w)}" y2="${r2(by - uy * 2 - py * w)}" stroke="${color}" stroke-width="1"/>` : "");
}

const COMPARTMENTS = new Set(["mitochondria", "cell", "nucleus", "organelle", "endoplasmicreticulum", "endoplasmic reticulum", "golgiapparatus", "golgi apparatus", "sarcoplasmicreticulum", "extracellular region", "cytosol", "membrane", "cellularcomponent"]);

/** Compartments, boxes and complexes, with their labels. */
export function pathwayShapes(p: Pathway, lay: PathwayLayout): string {
  const { X, Y, s } = lay;
  const parts: string[] = [];
  for (const sh of p.shapes ?? []) {
    const x = X(sh.x - sh.w / 2), y = Y(sh.y - sh.h / 2), w = sh.w * s, h = sh.h * s;
    const st = sh.shape.toLowerCase();
    const stroke = sh.color ? `#${sh.color}` : "#9a9a9a";
    if (st === "complex") parts.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(6, h / 4))}" fill="#f1f1f1" stroke="#c4c4c4" stroke-width="0.8"/>`);
    else if (st === "oval" || st === "circle") parts.push(`<ellipse cx="${r2(x + w / 2)}" cy="${r2(y + h / 2)}" rx="${r2(w / 2)}" ry="${r2(h / 2)}" fill="none" stroke="${stroke}" stroke-width="0.8"/>`);
    else if (COMPARTMENTS.has(st)) parts.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(w, h) * 0.25)}" fill="#fbfbf7" stroke="${sh.color ? stroke : "#c0c0c0"}" stroke-width="${sh.thick ? 2.5 : 1.2}"/>`);
    else if (st === "rectangle" || st === "roundedrectangle" || st === "roundrectangle") parts.push(`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}"${st === "rectangle" ? "" : ` rx="${r2(Math.min(8, h / 4))}"`} fill="none" stroke="${stroke}" stroke-width="0.8"/>`);
    else continue;
    if (sh.label) { const f = shrinkText(sh.label, w - 4, Math.min(11, Math.max(7, 10 * s)), 6, true); if (f.text) parts.push(text(x + w / 2, y + h / 2, f.text, { size: f.size, anchor: "middle", baseline: "middle", weight: "bold", fill: "#555" })); }
  }
  return parts.join("");
}

/** Interactions: the routed polylines, dashed where GPML says so, with arrowheads at either end. */
export function pathwayEdges(p: Pathway, lay: PathwayLayout): string {
  const { X, Y, s } = lay;
  const edgeColor = "#4a4a4a";
  const a = Math.max(5, Math.min(9, 8 * s));
  const edgeSvg = (e: PathwayEdge) => {
    const pts = e.points.map(([x, y]) => [X(x), Y(y)] as [number, number]);
    if (pts.length < 2) return "";
    const out: string[] = [];
    const end = pts[pts.length - 1]!, prev = pts[pts.length - 2]!;
    const start = pts[0]!, next = pts[1]!;
    const d = pts.map(([x, y], i) => `${i ? "L" : "M"}${r2(x)},${r2(y)}`).join("");
    out.push(`<path d="${d}" fill="none" stroke="${edgeColor}" stroke-width="${r2(Math.max(0.8, Math.min(1.3, s)))}"${e.dashed ? ` stroke-dasharray="4 3"` : ""}/>`);
    out.push(arrowHead(e.arrow, end[0], end[1], end[0] - prev[0], end[1] - prev[1], a, edgeColor));
    if (e.arrowStart) out.push(arrowHead(e.arrowStart, start[0], start[1], start[0] - next[0], start[1] - next[1], a, edgeColor));
    return out.join("");
  };
  return `<g class="edges">${p.edges.map(edgeSvg).join("")}</g>`;
}

/** Nodes (boxes, metabolites, pathway links) and, above them, the free labels. */
export function pathwayNodes(p: Pathway, m: PathwayMatch, fg: FileGenes, lay: PathwayLayout): string {
  const nodeSvg: string[] = [];
  const labelSvg: string[] = [];
  for (const n of p.nodes) {
    if (!(n.w > 0 && n.h > 0)) continue;
    if (n.type === "Label") { if (n.label) labelSvg.push(freeLabel(n, lay)); continue; }
    if (n.type === "Metabolite") { nodeSvg.push(...metaboliteNode(n, lay)); continue; }
    if (n.type === "Pathway") { nodeSvg.push(...pathwayLinkNode(n, lay)); continue; }
    nodeSvg.push(...geneNode(n, m, fg, lay));
  }
  return `<g class="nodes">${nodeSvg.join("")}</g>` + `<g class="labels">${labelSvg.join("")}</g>`;
}

/** A GPML Label: its lines centred on the node, in its colour made readable. */
function freeLabel(n: PathwayNode, lay: PathwayLayout): string {
  const { w, cx, cy } = nodeBox(n, lay);
  const lines = n.label.split(/\n/).map((l) => l.trim()).filter(Boolean);
  const size0 = Math.min(13, Math.max(7, (n.fontSize ?? 10) * lay.s * 1.05));
  const fits = lines.map((l) => shrinkText(l, Math.max(w * 1.3, 30), size0, 6, !!n.bold));
  const size = Math.min(...fits.map((f) => f.size));
  const lh = size * 1.15;
  return fits.map((f, i) => text(cx, cy + (i - (fits.length - 1) / 2) * lh, f.text, { size, anchor: "middle", baseline: "middle", weight: n.bold ? "bold" : "normal", fill: n.color ? readable(n.color) : "#333" })).join("");
}

function metaboliteNode(n: PathwayNode, lay: PathwayLayout): string[] {
  const { x, y, w, h, cx, cy, maxFont } = nodeBox(n, lay);
  const out = [`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(4, h / 3))}" fill="#eef4fb" stroke="#5b8ac7" stroke-width="0.8"/>`];
  const f = shrinkText(n.label, w - 3, maxFont, 6);
  if (f.text) out.push(text(cx, cy, f.text, { size: f.size, anchor: "middle", baseline: "middle", fill: "#1f4e8c" }));
  return out;
}

function pathwayLinkNode(n: PathwayNode, lay: PathwayLayout): string[] {
  const { x, y, w, h, cx, cy, maxFont } = nodeBox(n, lay);
  const out = [`<rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(6, h / 3))}" fill="#ffffff" stroke="#2e7d32" stroke-width="0.8" stroke-dasharray="3 2"/>`];
  const f = shrinkText(n.label, w - 4, maxFont, 6, true);
  if (f.text) out.push(text(cx, cy, f.text, { size: f.size, anchor: "middle", baseline: "middle", weight: "bold", fill: "#2e7d32" }));
  return out;
}

/** A gene product: filled by the file's fold change (or as missing / neutral), a tooltip with the file's values. */
function geneNode(n: PathwayNode, m: PathwayMatch, fg: FileGenes, lay: PathwayLayout): string[] {
  const { x, y, w, h, cx, cy, maxFont } = nodeBox(n, lay);
  const key = n.genes[0];
  const g = key ? fg.byKey.get(key) : undefined;
  const fill = !g ? MISSING : m.colorFc && g.fc !== undefined ? rdbu(Math.max(0, Math.min(1, (g.fc + m.lim) / (2 * m.lim)))) : NEUTRAL;
  const hl = key !== undefined && m.highlightKeys.has(key);
  const tip = g ? `${n.label}: ${g.raw}${g.fc !== undefined ? `, log2FC ${fmt(g.fc)}` : ""}${g.p !== undefined ? `, p ${fmt(g.p)}` : ""}` : n.label;
  const out = [`<g><title>${esc(tip)}</title><rect x="${r2(x)}" y="${r2(y)}" width="${r2(w)}" height="${r2(h)}" rx="${r2(Math.min(2.5, h / 5))}" fill="${fill}" stroke="${hl ? "#000" : g ? "#333" : MISSING_STROKE}" stroke-width="${hl ? 2.6 : 0.8}"/>`];
  const f = shrinkText(n.label, w - 3, maxFont, 6, hl);
  if (f.text) out.push(text(cx, cy, f.text, { size: f.size, anchor: "middle", baseline: "middle", fill: darkFill(fill) ? "#ffffff" : g || hl ? "#111" : MISSING_TEXT, weight: hl ? "bold" : "normal" }));
  out.push(`</g>`);
  return out;
}

/** Title and subtitle. */
export function pathwayTitle(lay: PathwayLayout): string {
  const { W, title: t, subtitle: st } = lay;
  return text(W / 2, M + t.size / 2 + 2, t.text, { size: t.size, anchor: "middle", baseline: "middle", weight: "bold" })
    + text(W / 2, M + t.size + 6 + st.size / 2 + 2, st.text, { size: st.size, anchor: "middle", baseline: "middle", fill: "#555" });
}

const BOX_STYLE: Record<NonNullable<LegendEntry["style"]>, { fill: string; stroke: string; sw: number; tc: string }> = {
  missing: { fill: MISSING, stroke: MISSING_STROKE, sw: 0.8, tc: "#222" },
  neutral: { fill: NEUTRAL, stroke: "#333", sw: 0.8, tc: "#222" },
  highlight: { fill: "#ffffff", stroke: "#000", sw: 2.6, tc: "#222" },
  metabolite: { fill: "#eef4fb", stroke: "#5b8ac7", sw: 0.8, tc: "#1f4e8c" },
};

/** The legend lines, centred, at the bottom. */
export function pathwayLegend(lay: PathwayLayout, lim: number): string {
  const parts: string[] = [];
  let ly = lay.H - M - lay.legendH + 6;
  for (const line of lay.legendLines) {
    const total = line.reduce((s2, it, i) => s2 + it.w + (i ? 18 : 0), 0);
    let lx = (lay.W - total) / 2;
    const hLine = legendLineHeight(line);
    for (const it of line) {
      if (it.kind === "box") {
        const st = BOX_STYLE[it.style!];
        const cy = ly + (hLine === 44 ? 21 : 10);
        parts.push(`<rect x="${r2(lx)}" y="${r2(cy - 7)}" width="26" height="14" rx="2" fill="${st.fill}" stroke="${st.stroke}" stroke-width="${st.sw}"/>`);
        parts.push(text(lx + 32, cy, it.label, { size: SIZE.legend, baseline: "middle", fill: st.tc }));
      } else {
        parts.push(colorbar(rdbu, lx, ly + 16, it.w, 10, -lim, lim, it.label));
        parts.push(text(lx + it.w / 2, ly + 30, "0", { anchor: "middle", baseline: "hanging" }));
      }
      lx += it.w + 18;
    }
    ly += hLine;
  }
  return parts.join("");
}
