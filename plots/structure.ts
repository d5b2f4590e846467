/**
 * structure_3d: a static picture of a PDB/mmCIF structure — cartoon, sticks or a van der
 * Waals surface — drawn in pure TypeScript as vector SVG.
 *
 * Why pure TypeScript: it needs no GPU and no browser, so it works the same in the api-server
 * worker in embedded and in cluster mode, draws true vector SVG (not a screenshot), and is
 * deterministic and fast. The other route — headless Chromium with software WebGL running
 * 3Dmol.js — was considered and not taken: it needs a browser in every worker, is slow to
 * start, and yields a bitmap.
 *
 * How: orthographic projection after orienting the molecule on its principal axes, the
 * painter's algorithm (primitives sorted back to front), depth cueing, and Lambert shading
 * with a small specular term from one fixed light. This module composes the steps:
 * data/structure-file.ts and data/molecule.ts → layout/structure.ts and layout/cartoon.ts →
 * paint/structure-*.ts, paint/depth-sort.ts and paint/shading.ts; and writes the TSV, one row
 * per residue drawn.
 */
import { ChartError, type Chart, type Frame } from "./chart.js";
import { assignSecondary, moleculeOf, traceSegments, type Residue } from "./data/molecule.js";
import { fmt } from "./data/numbers.js";
import type { Structure } from "./data/structure-file.js";
import { highlightLabels, orient, plotBox, project, residueAnchor, scaleBar, structureHeader, type Projection } from "./layout/structure.js";
import { SIZE } from "./layout/text.js";
import type { StructureOpts } from "./options.js";
import { circlePrim, emit, Gradients } from "./paint/depth-sort.js";
import { drawLabels } from "./paint/labels.js";
import { hexToRgb, rgbHex } from "./paint/shading.js";
import { cartoonPrims } from "./paint/structure-cartoon.js";
import { ELEMENT_COLORS, HIGHLIGHT, LIGAND_CARBON, OTHER_ELEMENT, plddtBand, StructureColours } from "./paint/structure-colours.js";
import { structureLegend } from "./paint/structure-legend.js";
import type { StructureScene } from "./paint/structure-scene.js";
import { stickPrims } from "./paint/structure-sticks.js";
import { surfacePrims } from "./paint/structure-surface.js";
import { r2, svgDocument, text } from "./paint/svg.js";

export function structureChart(s: Structure, opts: StructureOpts, frame: Frame): Chart {
  const W = frame.width, H = frame.height;
  const mol = moleculeOf(s, opts);
  const o = orient(mol, opts);
  // Secondary structure: the file's records, else an estimate from the Cα trace.
  const segs = traceSegments(mol.residues, o.pos);
  const ssSource = assignSecondary(s, mol.residues, segs, o.pos);
  const colours = new StructureColours(mol, opts);
  // Layout: title, subtitle, plot area, legend strip.
  const header = structureHeader(s, opts, frame);
  const legend = structureLegend(mol, colours, opts, W, H);
  const proj = project(o, plotBox(W, H, header.height, legend.height), opts);
  const sc: StructureScene = { mol, proj, colours, gradients: new Gradients(), prims: [], overlay: [] };
  const drawn = paintStyle(sc, segs, opts);
  highlightOverlay(sc, opts);
  const body = emit(sc.prims, drawn.slice, opts.style === "stick" && mol.atoms.length > 4000) + emit(sc.overlay, 1.0);
  const bar = scaleBar(proj);
  const { placed, dropped } = highlightLabels(mol, proj, drawn.visible, drawn.hidden, { x: 4, y: header.height, w: W - 8, h: H - header.height - legend.height - 4 }, [legend.box, bar.box]);
  const comments = drawn.comments;
  if (dropped) comments.push(`${dropped} highlighted residue label(s) found no free place and were left out (all are listed below)`);
  // Scale bar: orthographic, so one length holds everywhere.
  const { plot, scale } = proj;
  const scalebar = `<g class="scalebar"><line x1="${r2(plot.x)}" y1="${r2(bar.y)}" x2="${r2(plot.x + bar.angstrom * scale)}" y2="${r2(bar.y)}" stroke="#333" stroke-width="2"/>`
    + text(plot.x + (bar.angstrom * scale) / 2, bar.y + 4, `${bar.angstrom} Å`, { anchor: "middle", baseline: "hanging", size: SIZE.label }) + "</g>";
  const head = text(W / 2, 24, header.shownTitle, { size: SIZE.title, weight: "bold", anchor: "middle" })
    + (header.subtitle ? text(W / 2, 42, header.subtitle, { size: SIZE.tick, anchor: "middle", fill: "#555" }) : "");
  const svg = svgDocument(W, H, sc.gradients.defs() + head + `<g class="molecule" stroke-linejoin="round" fill="none">${body}</g>` + drawLabels(placed) + scalebar + legend.svg, header.title);
  const { columns, rows } = residueRows(sc, opts);
  comments.unshift(
    `${s.id ?? frame.source}${s.title ? `: ${s.title}` : ""}`,
    `style ${opts.style}; ${mol.atoms.length} atoms drawn in ${mol.residues.length} residues, chains ${colours.chains.map((c) => c || "(blank)").join(", ")}`,
    `orientation: principal axes of the atom coordinates (largest extent horizontal, second vertical), then rotate_x ${opts.rotate_x}°, rotate_y ${opts.rotate_y}°; orthographic, ${r2(scale)} px per Å`,
    ssSource,
  );
  comments.push(...closingComments(s, sc, opts));
  return { svg, width: W, height: H, data: { header: columns, rows, comments } };
}

/** The molecule in the style asked for: its primitives, the slice thickness they are sorted in, what shows (surface), and the TSV's words. */
function paintStyle(sc: StructureScene, segs: Residue[][], opts: StructureOpts): { slice: number; visible?: Set<number>; hidden: Set<Residue>; comments: string[] } {
  const { atoms, residues } = sc.mol;
  const n = atoms.length;
  /** Surface: highlighted residues that barely show; drawn dashed on top and labelled "(hidden)". */
  const hidden = new Set<Residue>();
  if (opts.style === "cartoon") {
    const residuesN = sc.colours.traceRes.length;
    const samples = Math.max(3, Math.min(8, Math.round(5000 / Math.max(1, residuesN))));
    for (const seg of segs) cartoonPrims(sc, seg, samples);
    const others = residues.filter((r) => r.trace === undefined).flatMap((r) => r.atoms);
    stickPrims(sc, others, { radius: 0.16, colorOf: (i) => sc.colours.atomColor(i, opts.color_by === "chain" ? LIGAND_CARBON : undefined), ballRadius: 0.32 }, sc.prims);
    if (residuesN === 0 && others.length === 0) throw new ChartError("no protein or nucleic-acid chain and no ligand to draw as a cartoon");
    return { slice: 0.35, hidden, comments: [`cartoon: spline through Cα (P for nucleic acids), ${samples} samples per residue; helices as ribbons, strands as arrows, loops as tubes; ligands and other hetero groups as ball-and-stick`] };
  }
  if (opts.style === "stick") {
    stickPrims(sc, atoms.map((_, i) => i), { radius: 0.2, colorOf: (i) => sc.colours.atomColor(i), merge: n > 4000 }, sc.prims);
    return { slice: 1.0, hidden, comments: ["sticks: bonds from covalent radii (distance < r1 + r2 + 0.45 Å), each half coloured by its atom"] };
  }
  const visible = surfacePrims(sc, hidden);
  const comments = [`van der Waals surface: every atom a sphere of its van der Waals radius (Bondi); ${visible.size} of ${n} atoms visible and drawn`];
  if (hidden.size) comments.push(`${hidden.size} highlighted residue(s) hidden behind the surface from this view: drawn dashed on top and labelled "(hidden)"`);
  return { slice: 0, visible, hidden, comments };
}

/** Highlighted residues on top: ball-and-stick, carbons in the highlight colour; a CA-only residue still gets a visible ball. */
function highlightOverlay(sc: StructureScene, opts: StructureOpts): void {
  const { atoms, highlights } = sc.mol;
  const hlAtoms = highlights.flatMap((h) => h.residues.flatMap((r) => r.atoms));
  if (!hlAtoms.length || opts.style === "surface") return;
  const stick = opts.style === "stick";
  const colorOf = (i: number) => (atoms[i]!.element === "C" ? HIGHLIGHT : ELEMENT_COLORS[atoms[i]!.element] ?? OTHER_ELEMENT);
  stickPrims(sc, [...new Set(hlAtoms)], { radius: stick ? 0.34 : 0.24, colorOf, ballRadius: stick ? 0 : 0.34 }, sc.overlay);
  const { pos, SX, SY, scale } = sc.proj;
  for (const h of highlights) for (const r of h.residues) if (r.atoms.length === 1) {
    const p = pos(r.atoms[0]!);
    sc.overlay.push(circlePrim(p[2] + 1, `<circle cx="${r2(SX(p[0]))}" cy="${r2(SY(p[1]))}" r="${r2(Math.max(4, 0.9 * scale))}" fill="url(#${sc.gradients.idFor(hexToRgb(HIGHLIGHT))})"/>`));
  }
}

/** The TSV: one row per residue drawn, with its colour, value and where its Cα (P; else its centre) is drawn. */
function residueRows(sc: StructureScene, opts: StructureOpts): { columns: string[]; rows: Array<Array<string | number>> } {
  const { residues } = sc.mol;
  const { colours } = sc;
  const proj: Projection = sc.proj;
  const drawnResidues = residues.filter((r) => opts.style !== "cartoon" || r.trace !== undefined || r.atoms.length > 0);
  const valueHeader = opts.color_by === "bfactor" ? "b_factor" : opts.color_by === "plddt" ? "plddt" : "chain_color";
  const columns = ["chain", "residue_number", "residue_name", "secondary_structure", valueHeader, ...(opts.color_by === "plddt" ? ["plddt_band"] : []), "color", "highlighted", "x_px", "y_px"];
  const rows = drawnResidues.map((r) => {
    const p = residueAnchor(r, proj.pos);
    const v = colours.residueValue(r);
    const ss = r.kind === "protein" ? r.ss : r.kind === "nucleic" ? "nucleotide" : "ligand";
    const col = colours.residueColor(r);
    const value: string | number = opts.color_by === "chain" ? (r.kind === "ligand" ? "ligand" : colours.singleChain ? "rainbow N→C" : `chain ${r.chain || "(blank)"}`) : +v.toFixed(2);
    return [r.chain, r.iCode ? `${r.resSeq}${r.iCode}` : r.resSeq, r.resName, ss, value, ...(opts.color_by === "plddt" ? [plddtBand(v)] : []), rgbHex(hexToRgb(col)), r.highlighted ? "yes" : "no", r2(proj.SX(p[0])), r2(proj.SY(p[1]))];
  });
  return { columns, rows };
}

/** The TSV's last comments: models, atoms left out, the colour scheme, partial highlights, the x/y columns. */
function closingComments(s: Structure, sc: StructureScene, opts: StructureOpts): string[] {
  const { waters, hydrogens, partial } = sc.mol;
  const { bLo, bHi, singleChain } = sc.colours;
  const comments: string[] = [];
  if (s.models > 1) comments.push(`the file holds ${s.models} models; the first is drawn`);
  if (waters) comments.push(`${waters} water atom(s) not drawn`);
  if (hydrogens && hydrogens < s.atoms.length - waters) comments.push(`${hydrogens} hydrogen atom(s) not drawn`);
  if (opts.color_by === "bfactor") comments.push(bHi > bLo ? `B-factor colour scale (viridis) from ${fmt(bLo)} to ${fmt(bHi)} Å²` : `every atom has B-factor ${fmt(bLo)}: one colour`);
  if (opts.color_by === "plddt") comments.push("pLDDT bands (AlphaFold DB): > 90 very high #0053D6; 70–90 confident #65CBF3; 50–70 low #FFDB13; ≤ 50 very low #FF7D45; values read from the B-factor column");
  if (opts.color_by === "chain") comments.push(singleChain ? "one chain: coloured as a rainbow from the N-terminus (blue) to the C-terminus (red)" : "coloured by chain");
  for (const p of partial) comments.push(`highlight ${p}`);
  comments.push("x_px, y_px: where the residue's Cα (P; else its centre) is drawn in the SVG");
  return comments;
}
