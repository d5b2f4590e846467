/**
 * Checks on the images the chart tests make, without trusting the code that made them: a
 * PNG decoder (chunks with their CRCs, the IDAT stream inflated and unfiltered to pixels)
 * and a strict XML reader for SVG (every tag closed in order, attributes quoted, entities
 * known) that returns the element tree.
 */
import { inflateSync, crc32 } from "node:zlib";

export interface Png { width: number; height: number; channels: number; pixels: Uint8Array }

/** Decodes an 8-bit RGB/RGBA/grey PNG (non-interlaced), checking every chunk's CRC. */
export function decodePng(buf: Uint8Array): Png {
  const b = Buffer.from(buf);
  if (b.subarray(0, 8).toString("hex") !== "89504e470d0a1a0a") throw new Error("not a PNG signature");
  let off = 8, width = 0, height = 0, channels = 0;
  const idat: Buffer[] = [];
  for (;;) {
    const len = b.readUInt32BE(off), type = b.toString("latin1", off + 4, off + 8);
    const data = b.subarray(off + 8, off + 8 + len);
    if (crc32(b.subarray(off + 4, off + 8 + len)) !== b.readUInt32BE(off + 8 + len)) throw new Error(`bad CRC in ${type}`);
    if (type === "IHDR") {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      const depth = data[8], color = data[9], interlace = data[12];
      if (depth !== 8 || interlace !== 0) throw new Error(`unsupported PNG depth ${depth} interlace ${interlace}`);
      channels = ({ 0: 1, 2: 3, 4: 2, 6: 4 } as Record<number, number>)[color ?? -1] ?? 0;
      if (!channels) throw new Error(`unsupported PNG colour type ${color}`);
    } else if (type === "IDAT") idat.push(data);
    else if (type === "IEND") break;
    off += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  if (raw.length !== height * (stride + 1)) throw new Error(`IDAT holds ${raw.length} bytes, expected ${height * (stride + 1)}`);
  const px = new Uint8Array(height * stride);
  for (let y = 0; y < height; y++) {
    const f = raw[y * (stride + 1)]!;
    for (let x = 0; x < stride; x++) {
      const v = raw[y * (stride + 1) + 1 + x]!;
      const a = x >= channels ? px[y * stride + x - channels]! : 0;
      const up = y > 0 ? px[(y - 1) * stride + x]! : 0;
      const c = x >= channels && y > 0 ? px[(y - 1) * stride + x - channels]! : 0;
      let p: number;
      switch (f) {
        case 0: p = 0; break;
        case 1: p = a; break;
        case 2: p = up; break;
        case 3: p = (a + up) >> 1; break;
        case 4: { const q = a + up - c, pa = Math.abs(q - a), pb = Math.abs(q - up), pc = Math.abs(q - c); p = pa <= pb && pa <= pc ? a : pb <= pc ? up : c; break; }
        default: throw new Error(`bad filter ${f}`);
      }
      px[y * stride + x] = (v + p) & 255;
    }
  }
  return { width, height, channels, pixels: px };
}

/** How many distinct colours a PNG uses (a blank or single-colour image is a broken chart). */
export function colourCount(png: Png): number {
  const seen = new Set<number>();
  for (let i = 0; i < png.pixels.length; i += png.channels) {
    let v = 0;
    for (let c = 0; c < Math.min(3, png.channels); c++) v = v * 256 + png.pixels[i + c]!;
    seen.add(v);
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
