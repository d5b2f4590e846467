/**
 * The structure picture's legend, at the bottom in centred rows: what the colours mean under
 * `color_by` (pLDDT bands, the B-factor bar, the N→C rainbow, or the polymer chains as far as
 * two rows allow), then ligand carbons, the element colours used, and the highlight colour.
 */
import type { Molecule } from "../data/molecule.js";
import type { Box } from "../layout/labels.js";
import { legendRows } from "../layout/structure.js";
import { SIZE, textWidth } from "../layout/text.js";
import type { StructureOpts } from "../options.js";
import { colorbar } from "./legend.js";
import { CHAIN_COLORS, ELEMENT_COLORS, HIGHLIGHT, LIGAND_CARBON, OTHER_ELEMENT, PLDDT_BANDS, rainbow, type StructureColours } from "./structure-colours.js";
import { r2, text } from "./svg.js";

/** A legend entry: its width (with the gap after it) and how it draws at (x, top of its row). */
interface Entry { w: number; draw: (x: number, y0: number) => string }

const swatch = (color: string, label: string): Entry => ({
  w: 14 + textWidth(label, SIZE.legend) + 18,
  draw: (x: number, y0: number) => `<rect x="${r2(x)}" y="${r2(y0 + 8)}" width="10" height="10" fill="${color}" stroke="#333" stroke-width="0.4"/>` + text(x + 14, y0 + 13, label, { size: SIZE.legend, baseline: "middle" }),
});

/** The legend drawn in a picture W × H: its SVG, height and box (labels keep off it). */
export function structureLegend(mol: Molecule, colours: StructureColours, opts: StructureOpts, W: number, H: number): { svg: string; height: number; box: Box } {
  const items = [...colourEntries(colours, opts, W), ...otherEntries(mol, colours, opts)];
  const lay = legendRows(items.map((it) => it.w), W, H, opts.color_by === "bfactor");
  const parts: string[] = [];
  lay.rows.forEach((row, ri) => { for (const { item, x } of row) parts.push(items[item]!.draw(x, lay.y0[ri]!)); });
  return { svg: `<g class="legend">${parts.join("")}</g>`, height: lay.height, box: lay.box };
}

/** What the colours mean under color_by. */
function colourEntries(colours: StructureColours, opts: StructureOpts, W: number): Entry[] {
  const items: Entry[] = [];
  if (opts.color_by === "plddt") {
    items.push({ w: textWidth("pLDDT:", SIZE.legend, true) + 10, draw: (x, y0) => text(x, y0 + 13, "pLDDT:", { size: SIZE.legend, weight: "bold", baseline: "middle" }) });
    for (const b of PLDDT_BANDS) items.push(swatch(b.color, b.label));
  } else if (opts.color_by === "bfactor") {
    const w = 200;
    const { bLo, bHi } = colours;
    items.push({ w: w + 20, draw: (x, y0) => colorbar(colours.bMap, x, y0 + 14, w, 9, bLo, bHi > bLo ? bHi : bLo + 1e-9, "B-factor (Å²)") });
  } else if (colours.singleChain && colours.traceRes.length) {
    const w = 150;
    const label = "N-terminus → C-terminus";
    items.push({
      w: w + 14 + textWidth(label, SIZE.legend),
      draw: (x, y0) => `<g>${Array.from({ length: 30 }, (_, i) => `<rect x="${r2(x + (i * w) / 30)}" y="${r2(y0 + 8)}" width="${r2(w / 30 + 0.4)}" height="10" fill="${rainbow(i / 29)}"/>`).join("")}<rect x="${r2(x)}" y="${r2(y0 + 8)}" width="${w}" height="10" fill="none" stroke="#333" stroke-width="0.4"/></g>` + text(x + w + 8, y0 + 13, label, { size: SIZE.legend, baseline: "middle" }),
    });
  } else items.push(...chainEntries(colours, W));
  return items;
}

/** Polymer chains (a chain of only hetero groups is drawn in the ligand colour), as many as fit in two rows; the palette repeats after eight. */
function chainEntries(colours: StructureColours, W: number): Entry[] {
  const items: Entry[] = [];
  const polymerChains = [...colours.chainIndex.keys()];
  const avail = 2 * (W - 32) - 260;
  let used = 0, shown = 0;
  for (const c of polymerChains) {
    const it = swatch(CHAIN_COLORS[colours.chainPos.get(c)! % CHAIN_COLORS.length]!, `Chain ${c || "(blank)"}`);
    if (used + it.w > avail) break;
    items.push(it); used += it.w; shown++;
  }
  if (shown < polymerChains.length) {
    const more = `+${polymerChains.length - shown} more chains (colours repeat every ${CHAIN_COLORS.length})`;
    items.push({ w: textWidth(more, SIZE.legend) + 18, draw: (x, y0) => text(x, y0 + 13, more, { size: SIZE.legend, baseline: "middle", fill: "#555" }) });
  }
  return items;
}

/** Ligand carbons, the element colours used (in the Jmol order), and the highlight colour. */
function otherEntries(mol: Molecule, colours: StructureColours, opts: StructureOpts): Entry[] {
  const { atoms, residues } = mol;
  const style = opts.style;
  const ligandAtoms = residues.filter((r) => r.trace === undefined).flatMap((r) => r.atoms);
  const elementAtoms: number[] = [];
  if (style !== "surface") {
    if (opts.color_by === "chain") elementAtoms.push(...(style === "stick" ? atoms.map((_, i) => i) : ligandAtoms));
    elementAtoms.push(...mol.highlights.flatMap((h) => h.residues.flatMap((r) => r.atoms)));
  }
  const ELEMENT_ORDER = Object.keys(ELEMENT_COLORS);
  const legendElements = [...new Set(elementAtoms.map((i) => atoms[i]!.element).filter((e) => e !== "C" && e !== "H" && e !== "D"))]
    .map((e) => (e in ELEMENT_COLORS ? e : "other")).filter((e, i, all) => all.indexOf(e) === i)
    .sort((a, b) => (ELEMENT_ORDER.indexOf(a) + 1 || 99) - (ELEMENT_ORDER.indexOf(b) + 1 || 99));
  const items: Entry[] = [];
  if (opts.color_by === "chain" && ligandAtoms.length > 0) items.push(swatch(LIGAND_CARBON, style === "surface" ? "Ligand" : "Ligand carbon"));
  for (const e of legendElements) items.push(swatch(ELEMENT_COLORS[e] ?? OTHER_ELEMENT, e in ELEMENT_COLORS ? e : "Other element"));
  if (opts.highlight_residues.length) items.push(swatch(HIGHLIGHT, "Highlighted residue"));
  return items;
}
