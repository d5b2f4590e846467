/**
 * The structure picture's drawing list: primitives at a depth, each up to three layers
 * (outline, body, highlight) of SVG items, written back to front by the painter's algorithm
 * in thin depth slices — inside a slice outlines first, then bodies, then highlights, so tubes
 * and sticks join without seams — with consecutive items of one style merged into one path;
 * and the sphere gradients the primitives refer to.
 */
import { hexToRgb, mix, rgbHex, WHITE, type RGB } from "./shading.js";
import { r2 } from "./svg.js";

export interface Item { kind: "line" | "poly" | "circle"; attrs: string; d: string }
export interface Prim { z: number; layers: [Item[], Item[], Item[]] }

const P = (x: number, y: number) => `${r2(x)} ${r2(y)}`;
export const lineItem = (x1: number, y1: number, x2: number, y2: number, attrs: string): Item => ({ kind: "line", attrs, d: `M${P(x1, y1)}L${P(x2, y2)}` });
export const polyItem = (pts: Array<[number, number]>, attrs: string): Item => ({ kind: "poly", attrs, d: `M${pts.map(([x, y]) => P(x, y)).join("L")}Z` });
/** A body-layer circle (written as given, never merged). */
export const circlePrim = (z: number, svg: string): Prim => ({ z, layers: [[], [{ kind: "circle", attrs: "", d: svg }], []] });

/** Back to front in slices `slice` Å thick; within a slice layer by layer; consecutive identical styles merged into one path. */
export function emit(prims: Prim[], slice: number, group = false): string {
  prims.sort((a, b) => a.z - b.z);
  const out: string[] = [];
  let i = 0;
  while (i < prims.length) {
    const z0 = prims[i]!.z;
    let j = i;
    while (j < prims.length && prims[j]!.z - z0 <= slice) j++;
    for (let layer = 0; layer < 3; layer++) {
      if (group) emitGrouped(prims, i, j, layer as 0 | 1 | 2, out);
      else emitInOrder(prims, i, j, layer as 0 | 1 | 2, out);
    }
    i = j;
  }
  return out.join("");
}

/** One layer of prims[i, j) in order, runs of one style merged. */
function emitInOrder(prims: readonly Prim[], i: number, j: number, layer: 0 | 1 | 2, out: string[]): void {
  let curAttrs = "", curKind = "", buf = "";
  const flush = () => { if (buf) out.push(`<path d="${buf}" ${curAttrs}/>`); buf = ""; };
  for (let k = i; k < j; k++) {
    for (const it of prims[k]!.layers[layer]) {
      if (it.kind === "circle") { flush(); curAttrs = ""; out.push(it.d); continue; }
      if (it.attrs !== curAttrs || it.kind !== curKind) { flush(); curAttrs = it.attrs; curKind = it.kind; }
      buf += it.d;
    }
  }
  flush();
}

/** Big pictures: one path per style within a slice (order inside a thin slice matters little). */
function emitGrouped(prims: readonly Prim[], i: number, j: number, layer: 0 | 1 | 2, out: string[]): void {
  const byStyle = new Map<string, string[]>();
  for (let k = i; k < j; k++) for (const it of prims[k]!.layers[layer]) {
    if (it.kind === "circle") { out.push(it.d); continue; }
    const key = it.attrs;
    (byStyle.get(key) ?? byStyle.set(key, []).get(key)!).push(it.d);
  }
  for (const [attrs, ds] of byStyle) out.push(`<path d="${ds.join("")}" ${attrs}/>`);
}

/**
 * Sphere shading: a ball of ball-and-stick gets a strong highlight and dark rim; a surface
 * sphere a softer one, so that the packed spheres read as one surface rather than marbles.
 * Gradients are numbered in the order first asked for.
 */
export class Gradients {
  private readonly ids = new Map<string, string>();

  idFor(c: RGB, soft = false): string {
    const key = `${soft ? "s" : "b"}${rgbHex(c)}`;
    let id = this.ids.get(key);
    if (!id) { id = `g${this.ids.size}`; this.ids.set(key, id); }
    return id;
  }

  /** The `<defs>` of every gradient asked for, or nothing. */
  defs(): string {
    if (!this.ids.size) return "";
    return `<defs>${[...this.ids].map(([key, id]) => {
      const c = key.slice(1), rgb = hexToRgb(c);
      if (key[0] === "s") return `<radialGradient id="${id}" cx="0.5" cy="0.5" r="0.5" fx="0.38" fy="0.32"><stop offset="0" stop-color="${rgbHex(mix(rgb, WHITE, 0.35))}"/><stop offset="0.6" stop-color="${c}"/><stop offset="1" stop-color="${rgbHex(mix(rgb, [0, 0, 0], 0.3))}"/></radialGradient>`;
      return `<radialGradient id="${id}" cx="0.5" cy="0.5" r="0.5" fx="0.36" fy="0.3"><stop offset="0" stop-color="${rgbHex(mix(rgb, WHITE, 0.7))}"/><stop offset="0.5" stop-color="${c}"/><stop offset="1" stop-color="${rgbHex(mix(rgb, [0, 0, 0], 0.45))}"/></radialGradient>`;
    }).join("")}</defs>`;
  }
}
