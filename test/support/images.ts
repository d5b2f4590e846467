/**
 * Checks on the images the tests make (chart PNGs, browser screenshots), without trusting the
 * code that made them: a PNG decoder (chunks with their CRCs, the IDAT stream inflated and
 * unfiltered to RGBA pixels)
 * and a strict XML reader for SVG (every tag closed in order, attributes quoted, entities
 * known) that returns the element tree.
 */
import { inflateSync, crc32 } from "node:zlib";

export interface DecodedPng {
  width: number;
  height: number;
  /** width * height * 4 bytes, RGBA. */
  rgba: Uint8Array;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const CHANNELS: Record<number, number> = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 };

/**
 * Decodes an 8-bit non-interlaced PNG (grey, grey+alpha, RGB, RGBA or palette: what Chromium
 * and resvg write) to RGBA, checking every chunk's CRC and the inflated stream's length.
 */
export function decodePng(input: Uint8Array): DecodedPng {
  const buf = Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  if (buf.length < 8 || !buf.subarray(0, 8).equals(PNG_SIGNATURE)) throw new Error("not a PNG");
  let width = 0, height = 0, bitDepth = 0, colourType = 0, interlace = 0;
  let palette: Buffer | undefined;
  let trns: Buffer | undefined;
  const idat: Buffer[] = [];
  for (let off = 8; off + 8 <= buf.length;) {
    const len = buf.readUInt32BE(off);
    const type = buf.toString("latin1", off + 4, off + 8);
    const data = buf.subarray(off + 8, off + 8 + len);
    if (crc32(buf.subarray(off + 4, off + 8 + len)) !== buf.readUInt32BE(off + 8 + len)) throw new Error(`bad CRC in PNG chunk ${type}`);
    off += 12 + len;
    if (type === "IHDR") {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      bitDepth = data[8]!;
      colourType = data[9]!;
      interlace = data[12]!;
    } else if (type === "PLTE") palette = data;
    else if (type === "tRNS") trns = data;
    else if (type === "IDAT") idat.push(data);
    else if (type === "IEND") break;
  }
  if (bitDepth !== 8) throw new Error(`PNG bit depth ${bitDepth} not supported`);
  if (interlace !== 0) throw new Error("interlaced PNG not supported");
  const channels = CHANNELS[colourType];
  if (channels === undefined) throw new Error(`PNG colour type ${colourType} not supported`);
  if (colourType === 3 && !palette) throw new Error("palette PNG without PLTE");
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length !== height * (stride + 1)) throw new Error(`PNG data holds ${raw.length} bytes, expected ${height * (stride + 1)}`);
  const px = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    const src = y * (stride + 1) + 1;
    const dst = y * stride;
    for (let x = 0; x < stride; x++) {
      const v = raw[src + x]!;
      const a = x >= channels ? px[dst + x - channels]! : 0;
      const b = y > 0 ? px[dst - stride + x]! : 0;
      const c = x >= channels && y > 0 ? px[dst - stride + x - channels]! : 0;
      let pred: number;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) >> 1; break;
        case 4: {
          const p = a + b - c, pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
          pred = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: throw new Error(`PNG filter ${filter} not supported`);
      }
      px[dst + x] = (v + pred) & 0xff;
    }
  }
  const rgba = new Uint8Array(width * height * 4);
  for (let i = 0, n = width * height; i < n; i++) {
    const s = i * channels, d = i * 4;
    switch (colourType) {
      case 0: rgba[d] = rgba[d + 1] = rgba[d + 2] = px[s]!; rgba[d + 3] = 255; break;
      case 4: rgba[d] = rgba[d + 1] = rgba[d + 2] = px[s]!; rgba[d + 3] = px[s + 1]!; break;
      case 2: rgba[d] = px[s]!; rgba[d + 1] = px[s + 1]!; rgba[d + 2] = px[s + 2]!; rgba[d + 3] = 255; break;
      case 6: rgba[d] = px[s]!; rgba[d + 1] = px[s + 1]!; rgba[d + 2] = px[s + 2]!; rgba[d + 3] = px[s + 3]!; break;
      case 3: {
        const k = px[s]!;
        rgba[d] = palette![k * 3] ?? 0;
        rgba[d + 1] = palette![k * 3 + 1] ?? 0;
        rgba[d + 2] = palette![k * 3 + 2] ?? 0;
        rgba[d + 3] = trns?.[k] ?? 255;
        break;
      }
    }
  }
  return { width, height, rgba };
}

/** How many distinct colours a PNG uses (a blank or single-colour image is a broken chart). */
export function colourCount(png: DecodedPng): number {
  const seen = new Set<number>();
  for (let i = 0; i < png.rgba.length; i += 4) {
    seen.add(((png.rgba[i]! << 16) | (png.rgba[i + 1]! << 8) | png.rgba[i + 2]!) >>> 0);
    if (seen.size > 5000) break;
  }
  return seen.size;
}

export interface XmlElement { name: string; attrs: Record<string, string>; children: XmlElement[]; text: string }

/** A strict reader for the XML our SVGs are: throws on anything malformed. */
export function parseXml(src: string): XmlElement {
  let i = 0;
  const s = src.replace(/^\ufeff/, "");
  const fail = (m: string): never => { throw new Error(`XML: ${m} at ${i}: ${JSON.stringify(s.slice(i, i + 40))}`); };
  const entity = (t: string) => t.replace(/&(#\d+|#x[0-9a-f]+|[a-z]+);|&/gi, (m, e: string | undefined) => {
    if (!e) return fail("bare &");
    if (e.startsWith("#x") || e.startsWith("#X")) return String.fromCodePoint(parseInt(e.slice(2), 16));
    if (e.startsWith("#")) return String.fromCodePoint(parseInt(e.slice(1), 10));
    const named: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
    return named[e] ?? fail(`unknown entity ${m}`);
  });
  const skipMisc = () => {
    for (;;) {
      while (/\s/.test(s[i] ?? "")) i++;
      if (s.startsWith("<?", i)) { const e = s.indexOf("?>", i); if (e < 0) fail("unclosed <?"); i = e + 2; continue; }
      if (s.startsWith("<!--", i)) { const e = s.indexOf("-->", i); if (e < 0) fail("unclosed comment"); i = e + 3; continue; }
      if (s.startsWith("<!DOCTYPE", i)) { const e = s.indexOf(">", i); i = e + 1; continue; }
      return;
    }
  };
  const element = (): XmlElement => {
    if (s[i] !== "<") fail("expected <");
    i++;
    const name = /^[A-Za-z_][\w:.-]*/.exec(s.slice(i, i + 100))?.[0] ?? fail("bad tag name");
    i += name.length;
    const attrs: Record<string, string> = {};
    for (;;) {
      const ws = /^\s*/.exec(s.slice(i, i + 1000))![0].length;
      i += ws;
      if (s.startsWith("/>", i)) { i += 2; return { name, attrs, children: [], text: "" }; }
      if (s[i] === ">") { i++; break; }
      if (!ws) fail("attributes must be separated by space");
      const an = /^[A-Za-z_][\w:.-]*/.exec(s.slice(i, i + 100))?.[0] ?? fail("bad attribute name");
      i += an.length;
      if (s[i] !== "=") fail("attribute without =");
      i++;
      const q = s[i];
      if (q !== '"' && q !== "'") fail("unquoted attribute");
      const end = s.indexOf(q!, i + 1);
      if (end < 0) fail("unclosed attribute");
      const v = s.slice(i + 1, end);
      if (v.includes("<")) fail("< in attribute");
      if (an in attrs) fail(`duplicate attribute ${an}`);
      attrs[an] = entity(v);
      i = end + 1;
    }
    const children: XmlElement[] = [];
    let text = "";
    for (;;) {
      if (i >= s.length) fail(`unclosed <${name}>`);
      if (s.startsWith("</", i)) {
        const close = `</${name}`;
        if (!s.startsWith(close, i)) fail(`expected ${close}>`);
        i += close.length;
        while (/\s/.test(s[i] ?? "")) i++;
        if (s[i] !== ">") fail("bad close tag");
        i++;
        return { name, attrs, children, text };
      }
      if (s.startsWith("<!--", i)) { const e = s.indexOf("-->", i); if (e < 0) fail("unclosed comment"); i = e + 3; continue; }
      if (s.startsWith("<![CDATA[", i)) { const e = s.indexOf("]]>", i); if (e < 0) fail("unclosed CDATA"); text += s.slice(i + 9, e); i = e + 3; continue; }
      if (s[i] === "<") { children.push(element()); continue; }
      const next = s.indexOf("<", i);
      const chunk = s.slice(i, next < 0 ? s.length : next);
      text += entity(chunk);
      i += chunk.length;
    }
  };
  skipMisc();
  const root = element();
  skipMisc();
  if (i !== s.length) fail("content after the root element");
  return root;
}

/** Every element of a tree, depth first. */
export function* elements(e: XmlElement): Generator<XmlElement> {
  yield e;
  for (const c of e.children) yield* elements(c);
}

/** All text of an element and its descendants. */
export const allText = (e: XmlElement): string => e.text + e.children.map(allText).join("");
