/**
 * Where labels go: boxes and their overlaps, and the greedy placement that puts each point's
 * label beside it — never over another label, a drawn point or an obstacle such as a legend —
 * or leaves it out, plus the check that drops labels whose leader lines would cross others.
 * Painting the result is paint/labels.ts.
 */
import { SIZE, textWidth } from "./text.js";

export interface Box { x: number; y: number; w: number; h: number }
export const overlaps = (a: Box, b: Box, pad = 0) => a.x < b.x + b.w + pad && b.x < a.x + a.w + pad && a.y < b.y + b.h + pad && b.y < a.y + a.h + pad;

export interface LabelRequest { x: number; y: number; text: string; size?: number }
export interface PlacedLabel { text: string; x: number; y: number; anchor: "start" | "middle" | "end"; box: Box; leader?: { x1: number; y1: number; x2: number; y2: number } }

type Anchor = "start" | "middle" | "end";

/** The eight places around a point at distance `d` (left x or anchor x, top y, anchor) for a label `w` × `h`. */
function candidates(r: LabelRequest, d: number, h: number): Array<[number, number, Anchor]> {
  return [
    [r.x + d, r.y - d / 2 - h / 2, "start"], [r.x - d, r.y - d / 2 - h / 2, "end"], [r.x, r.y - d - h, "middle"], [r.x, r.y + d, "middle"],
    [r.x + d, r.y + d / 2 - h / 2, "start"], [r.x - d, r.y + d / 2 - h / 2, "end"], [r.x + d, r.y - h / 2, "start"], [r.x - d, r.y - h / 2, "end"],
  ];
}

/**
 * Labels for points, none overlapping another label, a drawn point or an obstacle (legend,
 * axes), all inside `bounds`. Greedy in the order given (most important first): the eight
 * positions around the point, then the same at growing distance with a leader line. A label
 * that finds no room is left out — the caller reports how many (the TSV lists them all).
 */
export function placeLabels(reqs: readonly LabelRequest[], bounds: Box, obstacles: readonly Box[] = [], pointRadius = 3): { placed: PlacedLabel[]; dropped: number } {
  const taken: Box[] = [...obstacles];
  const points: Box[] = reqs.map((r) => ({ x: r.x - pointRadius, y: r.y - pointRadius, w: 2 * pointRadius, h: 2 * pointRadius }));
  const placed: PlacedLabel[] = [];
  let dropped = 0;
  const inside = (b: Box) => b.x >= bounds.x && b.y >= bounds.y && b.x + b.w <= bounds.x + bounds.w && b.y + b.h <= bounds.y + bounds.h;
  const free = (box: Box) => inside(box) && !taken.some((t) => overlaps(box, t, 1)) && !points.some((p) => overlaps(box, p));
  for (const r of reqs) {
    const done = placeOne(r, pointRadius, free);
    if (done) { placed.push(done); taken.push(done.box); } else dropped++;
  }
  return { placed, dropped };
}

/** The first free place for one label, nearest first; undefined when there is none. */
function placeOne(r: LabelRequest, pointRadius: number, free: (b: Box) => boolean): PlacedLabel | undefined {
  const size = r.size ?? SIZE.label;
  const w = textWidth(r.text, size), h = size * 1.15;
  for (const dist of [4, 14, 26, 40, 56]) {
    for (const [ax, top, anchor] of candidates(r, dist + pointRadius, h)) {
      const left = anchor === "start" ? ax : anchor === "end" ? ax - w : ax - w / 2;
      const box = { x: left, y: top, w, h };
      if (!free(box)) continue;
      const leader = dist >= 14 ? { x1: r.x, y1: r.y, x2: Math.max(left, Math.min(left + w, r.x)), y2: Math.max(top, Math.min(top + h, r.y)) } : undefined;
      return { text: r.text, x: ax, y: top + h / 2, anchor, box, ...(leader ? { leader } : {}) };
    }
  }
  return undefined;
}

type Segment = { x1: number; y1: number; x2: number; y2: number };

/** Whether a segment passes through a box (Liang–Barsky clipping). */
function segmentHitsBox(s: Segment, b: Box): boolean {
  let t0 = 0, t1 = 1;
  const dx = s.x2 - s.x1, dy = s.y2 - s.y1;
  const edges: Array<[number, number]> = [[-dx, s.x1 - b.x], [dx, b.x + b.w - s.x1], [-dy, s.y1 - b.y], [dy, b.y + b.h - s.y1]];
  for (const [p, q] of edges) {
    if (p === 0) { if (q < 0) return false; continue; }
    const t = q / p;
    if (p < 0) { if (t > t1) return false; if (t > t0) t0 = t; } else { if (t < t0) return false; if (t < t1) t1 = t; }
  }
  return t0 < t1;
}

/** Whether two segments cross (touching ends do not count). */
function segmentsCross(a: Segment, b: Segment): boolean {
  const o = (ax: number, ay: number, bx: number, by: number, cx: number, cy: number) => Math.sign((bx - ax) * (cy - ay) - (by - ay) * (cx - ax));
  return o(a.x1, a.y1, a.x2, a.y2, b.x1, b.y1) * o(a.x1, a.y1, a.x2, a.y2, b.x2, b.y2) < 0
    && o(b.x1, b.y1, b.x2, b.y2, a.x1, a.y1) * o(b.x1, b.y1, b.x2, b.y2, a.x2, a.y2) < 0;
}

/**
 * The placed labels (most important first) whose leader line crosses no label or leader kept
 * before them, and whose text no kept leader crosses: in a tight cluster a leader drawn
 * through other names makes them unreadable, so such a label is left out instead.
 */
export function untangle(placed: readonly PlacedLabel[]): PlacedLabel[] {
  const kept: PlacedLabel[] = [];
  for (const l of placed) {
    const clash = kept.some((k) => (l.leader && (segmentHitsBox(l.leader, k.box) || (k.leader && segmentsCross(l.leader, k.leader))))
      || (k.leader && segmentHitsBox(k.leader, l.box)));
    if (!clash) kept.push(l);
  }
  return kept;
}
