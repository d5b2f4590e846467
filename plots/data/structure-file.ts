/**
 * PDB and mmCIF coordinate files → atoms and secondary structure, for the structure_3d chart.
 * Pure: text in, a `Structure` out. Only the first model is kept (NMR ensembles and
 * trajectories draw their first model; `models` says how many there were), and of
 * alternate locations only blank or `A`. Author numbering (auth_seq_id, auth_asym_id) is used
 * for mmCIF so that residue numbers and chains read the same as in the PDB format.
 */
import { ChartError } from "../chart.js";

export interface Atom {
  serial: number;
  name: string;
  /** Element symbol, capitalised as in the periodic table ("C", "Fe"). */
  element: string;
  resName: string;
  /** Chain identifier; "" when the file leaves it blank. */
  chain: string;
  resSeq: number;
  iCode: string;
  x: number;
  y: number;
  z: number;
  /** B-factor column (pLDDT in AlphaFold models). */
  b: number;
  hetero: boolean;
  altLoc: string;
}

export interface SecondaryStructure { kind: "helix" | "sheet"; chain: string; start: number; end: number }

export interface Structure {
  atoms: Atom[];
  secondary: SecondaryStructure[];
  title?: string;
  id?: string;
  /** How many models the file holds (only the first is in `atoms`). */
  models: number;
}

const WATER = new Set(["HOH", "WAT", "DOD", "H2O", "TIP", "TIP3", "SOL"]);
export const isWater = (resName: string) => WATER.has(resName);

/** Atoms of the first model (altLoc blank or A), secondary structure records, id and title. */
export function parseStructure(text: string, format: "pdb" | "mmcif"): Structure {
  const s = format === "pdb" ? parsePdb(text) : parseMmcif(text);
  if (s.atoms.length === 0) {
    throw new ChartError(format === "pdb"
      ? "the file has no ATOM or HETATM records: it does not look like a PDB coordinate file"
      : "the file has no _atom_site rows: it does not look like an mmCIF coordinate file");
  }
  return s;
}

const keepAlt = (alt: string) => alt === "" || alt === "A";

function elementSymbol(raw: string): string {
  const e = raw.replace(/[^A-Za-z]/g, "");
  return e ? e[0]!.toUpperCase() + e.slice(1).toLowerCase() : "";
}

const TWO_LETTER = new Set(["CL", "BR", "FE", "ZN", "MG", "MN", "CA", "NA", "CU", "CO", "NI", "CD", "HG", "SE", "LI", "AL", "SI", "CR", "GA", "AS", "RB", "SR", "AG", "SN", "CS", "BA", "PT", "AU", "PB", "YB", "GD", "IR", "OS", "RU", "RH", "PD", "MO", "TL"]);

/**
 * Element from a PDB atom name when columns 77–78 are blank: the name's first two columns
 * hold the element right-justified (" CA " is a carbon, "CA  " calcium, "1HG1" a hydrogen).
 */
function elementFromName(field: string): string {
  const f = field.padEnd(4);
  if (f[0] === " " || /\d/.test(f[0]!)) return elementSymbol(f[1]!);
  if (f.trim().length === 4 && f[0] === "H") return "H";
  return TWO_LETTER.has(f.slice(0, 2).toUpperCase()) ? elementSymbol(f.slice(0, 2)) : elementSymbol(f[0]!);
}

function parsePdb(text: string): Structure {
  const atoms: Atom[] = [];
  const secondary: SecondaryStructure[] = [];
  const title: string[] = [];
  let id: string | undefined;
  let models = 0;
  let done = false;
  for (const line of text.split(/\r?\n/)) {
    const rec = line.slice(0, 6);
    if (rec === "ATOM  " || rec === "HETATM") {
      if (done) continue;
      const altLoc = (line[16] ?? " ").trim();
      if (!keepAlt(altLoc)) continue;
      const x = parseFloat(line.slice(30, 38)), y = parseFloat(line.slice(38, 46)), z = parseFloat(line.slice(46, 54));
      if (!Number.isFinite(x) || !Number.isFinite(y) || !Number.isFinite(z)) continue;
      const nameField = line.slice(12, 16);
      const b = parseFloat(line.slice(60, 66));
      atoms.push({
        serial: parseInt(line.slice(6, 11), 10) || atoms.length + 1,
        name: nameField.trim(),
        element: elementSymbol(line.slice(76, 78)) || elementFromName(nameField),
        resName: line.slice(17, 20).trim(),
        chain: (line[21] ?? " ").trim(),
        resSeq: parseInt(line.slice(22, 26), 10) || 0,
        iCode: (line[26] ?? " ").trim(),
        x, y, z,
        b: Number.isFinite(b) ? b : 0,
        hetero: rec === "HETATM",
        altLoc,
      });
    } else if (rec === "MODEL ") {
      models++;
    } else if (rec === "ENDMDL") {
      if (atoms.length) done = true;
    } else if (rec === "HELIX ") {
      const start = parseInt(line.slice(21, 25), 10), end = parseInt(line.slice(33, 37), 10);
      if (Number.isFinite(start) && Number.isFinite(end)) secondary.push({ kind: "helix", chain: (line[19] ?? " ").trim(), start, end });
    } else if (rec === "SHEET ") {
      const start = parseInt(line.slice(22, 26), 10), end = parseInt(line.slice(33, 37), 10);
      if (Number.isFinite(start) && Number.isFinite(end)) secondary.push({ kind: "sheet", chain: (line[21] ?? " ").trim(), start, end });
    } else if (rec === "HEADER") {
      const code = line.slice(62, 66).trim();
      if (code) id = code;
    } else if (rec === "TITLE ") {
      title.push(line.slice(10).trim());
    }
  }
  const t = joinTitle(title);
  return { atoms, secondary, models: Math.max(1, models), ...(id ? { id } : {}), ...(t ? { title: t } : {}) };
}

/** PDB TITLE continuation lines: a line ending in "-" continues the word. */
function joinTitle(parts: string[]): string {
  let out = "";
  for (const p of parts.filter(Boolean)) out += out === "" || out.endsWith("-") ? p : " " + p;
  return out.trim();
}

// --- mmCIF ---------------------------------------------------------------------------------

/** A CIF value: null for the unquoted placeholders `.` (inapplicable) and `?` (unknown). */
type Cell = string | null;
interface Table { fields: Map<string, number>; rows: Cell[][] }

const WANTED = new Set(["_atom_site", "_struct_conf", "_struct_sheet_range", "_entry", "_struct"]);

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;

/**
 * The CIF 1.1 tokens of `text`: bare words, 'single' and "double" quoted strings (a quote
 * closes only before white space), ;-delimited text fields, # comments skipped.
 */
function tokenize(text: string): { values: string[]; quoted: Uint8Array } {
  const values: string[] = [];
  const q: number[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (isSpace(c)) { i++; continue; }
    if (c === 35 /* # */) { const e = text.indexOf("\n", i); i = e < 0 ? n : e + 1; continue; }
    if (c === 59 /* ; */ && (i === 0 || text.charCodeAt(i - 1) === 10)) {
      let e = text.indexOf("\n;", i + 1);
      if (e < 0) e = n;
      values.push(text.slice(i + 1, e).replace(/\r?\n$/, "").trim());
      q.push(1);
      i = e + 2;
      continue;
    }
    if (c === 39 || c === 34) {
      let j = i + 1;
      while (j < n && !(text.charCodeAt(j) === c && (j + 1 >= n || isSpace(text.charCodeAt(j + 1))))) j++;
      values.push(text.slice(i + 1, j));
      q.push(1);
      i = j + 1;
      continue;
    }
    let j = i;
    while (j < n && !isSpace(text.charCodeAt(j))) j++;
    values.push(text.slice(i, j));
    q.push(0);
    i = j;
  }
  return { values, quoted: Uint8Array.from(q) };
}

function readCif(text: string): { tables: Map<string, Table>; block?: string } {
  const { values, quoted } = tokenize(text);
  const tables = new Map<string, Table>();
  let block: string | undefined;
  const cell = (k: number): Cell => (!quoted[k] && (values[k] === "." || values[k] === "?") ? null : values[k]!);
  const isKeyword = (k: number) => !quoted[k] && /^(_|loop_$|data_|save_|global_|stop_)/i.test(values[k]!);
  const split = (tag: string) => { const d = tag.indexOf("."); return d < 0 ? [tag, ""] as const : [tag.slice(0, d), tag.slice(d + 1)] as const; };
  let k = 0;
  while (k < values.length) {
    const v = values[k]!;
    if (!quoted[k] && v.toLowerCase().startsWith("data_")) { if (block === undefined) block = v.slice(5); k++; continue; }
    if (!quoted[k] && v.toLowerCase() === "loop_") {
      k++;
      const tags: string[] = [];
      while (k < values.length && !quoted[k] && values[k]!.startsWith("_")) tags.push(values[k++]!);
      const start = k;
      while (k < values.length && !isKeyword(k)) k++;
      if (!tags.length) continue;
      const [cat] = split(tags[0]!);
      if (!WANTED.has(cat.toLowerCase())) continue;
      const fields = new Map(tags.map((t, i) => [split(t)[1].toLowerCase(), i] as const));
      const rows: Cell[][] = [];
      for (let r = start; r + tags.length <= k; r += tags.length) {
        const row: Cell[] = new Array(tags.length);
        for (let f = 0; f < tags.length; f++) row[f] = cell(r + f);
        rows.push(row);
      }
      tables.set(cat.toLowerCase(), { fields, rows });
      continue;
    }
    if (!quoted[k] && v.startsWith("_")) {
      const [cat, field] = split(v);
      const val = k + 1 < values.length && !isKeyword(k + 1) ? cell(k + 1) : null;
      k += val === null && (k + 1 >= values.length || isKeyword(k + 1)) ? 1 : 2;
      const c = cat.toLowerCase();
      if (!WANTED.has(c)) continue;
      let t = tables.get(c);
      if (!t) { t = { fields: new Map(), rows: [[]] }; tables.set(c, t); }
      t.fields.set(field.toLowerCase(), t.rows[0]!.length);
      t.rows[0]!.push(val);
      continue;
    }
    k++;
  }
  return { tables, ...(block !== undefined ? { block } : {}) };
}

function parseMmcif(text: string): Structure {
  const { tables, block } = readCif(text);
  const atoms: Atom[] = [];
  const site = tables.get("_atom_site");
  const modelNums = new Set<string>();
  if (site) {
    const col = (...names: string[]) => { for (const n of names) { const i = site.fields.get(n); if (i !== undefined) return i; } return -1; };
    const get = (row: Cell[], i: number): Cell => (i < 0 ? null : row[i] ?? null);
    const cGroup = col("group_pdb"), cId = col("id"), cType = col("type_symbol");
    const cAtomA = col("auth_atom_id"), cAtomL = col("label_atom_id"), cAlt = col("label_alt_id");
    const cCompA = col("auth_comp_id"), cCompL = col("label_comp_id");
    const cAsymA = col("auth_asym_id"), cAsymL = col("label_asym_id");
    const cSeqA = col("auth_seq_id"), cSeqL = col("label_seq_id"), cIns = col("pdbx_pdb_ins_code");
    const cX = col("cartn_x"), cY = col("cartn_y"), cZ = col("cartn_z"), cB = col("b_iso_or_equiv"), cModel = col("pdbx_pdb_model_num");
    let firstModel: Cell | undefined;
    for (const row of site.rows) {
      const model = get(row, cModel);
      modelNums.add(model ?? "");
      if (firstModel === undefined) firstModel = model;
      if (model !== firstModel) continue;
      const altLoc = get(row, cAlt) ?? "";
      if (!keepAlt(altLoc)) continue;
      const x = parseFloat(get(row, cX) ?? ""), y = parseFloat(get(row, cY) ?? ""), z = parseFloat(get(row, cZ) ?? "");
      if (!Number.isFinite(x) || !Number.isFinite(y) || !Number.isFinite(z)) continue;
      const name = get(row, cAtomA) ?? get(row, cAtomL) ?? "";
      const b = parseFloat(get(row, cB) ?? "");
      atoms.push({
        serial: parseInt(get(row, cId) ?? "", 10) || atoms.length + 1,
        name,
        element: elementSymbol(get(row, cType) ?? "") || elementFromName(name.length < 4 ? ` ${name}` : name),
        resName: get(row, cCompA) ?? get(row, cCompL) ?? "",
        chain: get(row, cAsymA) ?? get(row, cAsymL) ?? "",
        resSeq: parseInt(get(row, cSeqA) ?? get(row, cSeqL) ?? "", 10) || 0,
        iCode: get(row, cIns) ?? "",
        x, y, z,
        b: Number.isFinite(b) ? b : 0,
        hetero: (get(row, cGroup) ?? "").toUpperCase() === "HETATM",
        altLoc,
      });
    }
  }
  const secondary: SecondaryStructure[] = [];
  const ranges = (t: Table | undefined, kind: (row: Cell[]) => SecondaryStructure["kind"] | undefined) => {
    if (!t) return;
    const c = (n: string) => t.fields.get(n) ?? -1;
    const bA = c("beg_auth_asym_id"), bL = c("beg_label_asym_id"), bsA = c("beg_auth_seq_id"), bsL = c("beg_label_seq_id");
    const esA = c("end_auth_seq_id"), esL = c("end_label_seq_id");
    for (const row of t.rows) {
      const k = kind(row);
      if (!k) continue;
      const pick = (a: number, l: number) => (a >= 0 && row[a] != null ? row[a] : l >= 0 ? row[l] : null) ?? null;
      const start = parseInt(pick(bsA, bsL) ?? "", 10), end = parseInt(pick(esA, esL) ?? "", 10);
      if (Number.isFinite(start) && Number.isFinite(end)) secondary.push({ kind: k, chain: pick(bA, bL) ?? "", start, end });
    }
  };
  const conf = tables.get("_struct_conf");
  const confType = conf?.fields.get("conf_type_id") ?? -1;
  ranges(conf, (row) => {
    const type = (row[confType] ?? "").toUpperCase();
    return type.startsWith("HELX") ? "helix" : type.startsWith("STRN") ? "sheet" : undefined;
  });
  ranges(tables.get("_struct_sheet_range"), () => "sheet");
  const one = (cat: string, field: string) => { const t = tables.get(cat); const i = t?.fields.get(field); return i === undefined ? null : t!.rows[0]?.[i] ?? null; };
  const id = one("_entry", "id") ?? block ?? undefined;
  const title = one("_struct", "title")?.replace(/\s+/g, " ").trim();
  return { atoms, secondary, models: Math.max(1, modelNums.size), ...(id ? { id } : {}), ...(title ? { title } : {}) };
}
