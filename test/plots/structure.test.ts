import t from "tap";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ChartError, type Chart } from "../../plots/chart.js";
import { StructureOptions } from "../../plots/options.js";
import { structureChart } from "../../plots/structure.js";
import { parseStructure } from "../../plots/data/structure-file.js";
import { renderTask } from "../../media/charts/render-worker.js";
import { allText, colourCount, decodePng, elements, parseXml, type XmlElement } from "../support/images.js";

const FIX = join(import.meta.dirname, "..", "fixtures", "charts", "structure");
const VIEWERS = join(import.meta.dirname, "..", "fixtures", "viewers");
const read = (p: string) => readFileSync(p, "utf8");
const HPV_PDB = read(join(FIX, "1hpv.pdb"));
const HPV_CIF = read(join(FIX, "1hpv.cif"));
const TII_PDB = read(join(FIX, "1tii.pdb"));
const AF_PDB = read(join(FIX, "AF-Q9GZY4-F1-model_v1.CA.pdb"));
const frame = { width: 800, height: 800, source: "test.pdb" };

function render(text: string, opts: Record<string, unknown> = {}, format: "pdb" | "mmcif" = "pdb"): Chart {
  return structureChart(parseStructure(text, format), StructureOptions.parse(opts), frame);
}

// --- an independent reading of the fixtures ----------------------------------------------------

interface RefAtom { name: string; resName: string; chain: string; resSeq: number; iCode: string; x: number; y: number; z: number; b: number; element: string }

/** PDB: ATOM/HETATM of the first model, alternate location blank or A, by fixed columns. */
function pdbAtoms(text: string): RefAtom[] {
  const out: RefAtom[] = [];
  for (const line of text.split("\n")) {
    if (line.startsWith("ENDMDL") && out.length) break;
    if (!line.startsWith("ATOM  ") && !line.startsWith("HETATM")) continue;
    if (![" ", "A"].includes(line[16]!)) continue;
    out.push({
      name: line.slice(12, 16).trim(), resName: line.slice(17, 20).trim(), chain: line[21]!.trim(), resSeq: Number(line.slice(22, 26)), iCode: line[26]!.trim(),
      x: Number(line.slice(30, 38)), y: Number(line.slice(38, 46)), z: Number(line.slice(46, 54)), b: Number(line.slice(60, 66)), element: line.slice(76, 78).trim(),
    });
  }
  return out;
}

/** mmCIF as gemmi writes it: the _atom_site loop, one row per line, '' for an empty value. */
function cifAtoms(text: string): RefAtom[] {
  const lines = text.split("\n");
  const fields: string[] = [];
  let i = lines.findIndex((l) => l.startsWith("_atom_site.group_PDB"));
  while (lines[i]!.startsWith("_atom_site.")) fields.push(lines[i++]!.slice("_atom_site.".length));
  const f = (n: string) => fields.indexOf(n);
  const out: RefAtom[] = [];
  let model: string | undefined;
  for (; i < lines.length && /^(ATOM|HETATM) /.test(lines[i]!); i++) {
    const c = lines[i]!.match(/'[^']*'|"[^"]*"|\S+/g)!.map((v) => v.replace(/^(['"])(.*)\1$/, "$2"));
    if (c.length !== fields.length) throw new Error(`row ${i} has ${c.length} values`);
    model ??= c[f("pdbx_PDB_model_num")];
    if (c[f("pdbx_PDB_model_num")] !== model) continue;
    if (![".", "A"].includes(c[f("label_alt_id")]!)) continue;
    const ins = c[f("pdbx_PDB_ins_code")]!;
    out.push({
      name: c[f("label_atom_id")]!, resName: c[f("label_comp_id")]!, chain: c[f("auth_asym_id")]!, resSeq: Number(c[f("auth_seq_id")]), iCode: ins === "?" || ins === "." ? "" : ins,
      x: Number(c[f("Cartn_x")]), y: Number(c[f("Cartn_y")]), z: Number(c[f("Cartn_z")]), b: Number(c[f("B_iso_or_equiv")]), element: c[f("type_symbol")]!,
    });
  }
  return out;
}

const WATER = new Set(["HOH", "WAT", "DOD"]);
const resKey = (a: { chain: string; resSeq: number; iCode: string }) => `${a.chain}:${a.resSeq}${a.iCode}`;
const atomKey = (a: RefAtom) => `${resKey(a)} ${a.resName} ${a.name} ${a.x.toFixed(3)} ${a.y.toFixed(3)} ${a.z.toFixed(3)}`;

function svgOf(c: Chart): XmlElement { return parseXml(c.svg); }
const byClass = (root: XmlElement, cls: string) => [...elements(root)].find((e) => e.attrs.class === cls);
const legendTexts = (root: XmlElement) => [...elements(byClass(root, "legend")!)].filter((e) => e.name === "text").map(allText);
const col = (c: Chart, name: string) => { const i = c.data.header.indexOf(name); if (i < 0) throw new Error(`no column ${name}`); return i; };

// --- parsing ---------------------------------------------------------------------------------

t.test("PDB and mmCIF versions of a structure parse to the same atoms, chains and residues", async (t) => {
  for (const [name, pdbText, cifText] of [["1HPV", HPV_PDB, HPV_CIF], ["1A1P", read(join(VIEWERS, "1a1p.pdb")), read(join(VIEWERS, "1a1p.cif"))]] as const) {
    const refPdb = pdbAtoms(pdbText), refCif = cifAtoms(cifText);
    t.ok(refPdb.length > 100, `${name}: the fixture has atoms`);
    t.equal(refCif.length, refPdb.length, `${name}: the two files hold the same number of atoms`);
    const fromPdb = parseStructure(pdbText, "pdb"), fromCif = parseStructure(cifText, "mmcif");
    t.equal(fromPdb.atoms.length, refPdb.length, `${name}: PDB atoms`);
    t.equal(fromCif.atoms.length, refCif.length, `${name}: mmCIF atoms`);
    const chains = (as: Array<{ chain: string }>) => [...new Set(as.map((a) => a.chain))].sort();
    t.same(chains(fromPdb.atoms), chains(refPdb), `${name}: PDB chains`);
    t.same(chains(fromCif.atoms), chains(refPdb), `${name}: mmCIF chains are the PDB's`);
    const residues = (as: Array<{ chain: string; resSeq: number; iCode: string; resName: string }>) => [...new Set(as.map((a) => `${resKey(a)} ${a.resName}`))].sort();
    t.same(residues(fromPdb.atoms), residues(refPdb), `${name}: PDB residues`);
    t.same(residues(fromCif.atoms), residues(refPdb), `${name}: mmCIF residues are the PDB's`);
    // atom by atom: names, residues and coordinates agree (serial numbers may be renumbered)
    t.same(fromCif.atoms.map((a) => atomKey({ ...a, element: a.element })).sort(), refPdb.map(atomKey).sort(), `${name}: the same atoms at the same coordinates`);
    t.same(fromPdb.atoms.map((a) => a.b), refPdb.map((a) => a.b), `${name}: B-factors in file order`);
  }
  const hpv = parseStructure(HPV_PDB, "pdb");
  t.equal(hpv.id, "1HPV");
  const helices = HPV_PDB.split("\n").filter((l) => l.startsWith("HELIX ")).length, sheets = HPV_PDB.split("\n").filter((l) => l.startsWith("SHEET ")).length;
  t.equal(hpv.secondary.filter((s) => s.kind === "helix").length, helices, "HELIX records");
  t.equal(hpv.secondary.filter((s) => s.kind === "sheet").length, sheets, "SHEET records");
  t.equal(parseStructure(HPV_CIF, "mmcif").secondary.length, helices + sheets, "the mmCIF's _struct_conf and _struct_sheet_range");
});

t.test("a file with no atoms is a ChartError", async (t) => {
  const header = TII_PDB.split("\n").filter((l) => !/^(ATOM|HETATM)/.test(l)).join("\n");
  t.throws(() => parseStructure(header, "pdb"), ChartError);
  t.throws(() => parseStructure("data_EMPTY\n_entry.id EMPTY\n", "mmcif"), ChartError);
  const waterOnly = TII_PDB.split("\n").filter((l) => !/^(ATOM|HETATM)/.test(l) || l.slice(17, 20) === "HOH").join("\n");
  t.throws(() => render(waterOnly), ChartError, "only water: nothing to draw");
});

// --- drawing ---------------------------------------------------------------------------------

t.test("every style draws valid SVG with a non-empty molecule", async (t) => {
  for (const [name, text] of [["1TII", TII_PDB], ["1HPV", HPV_PDB], ["AlphaFold CA", AF_PDB]] as const) {
    for (const style of ["cartoon", "stick", "surface"]) {
      for (const color_by of ["chain", "bfactor", ...(name === "1HPV" ? [] : ["plddt"])]) {
        const c = render(text, { style, color_by });
        const root = svgOf(c);
        const mol = byClass(root, "molecule")!;
        t.ok(mol, `${name} ${style} ${color_by}: a molecule group`);
        const shapes = [...elements(mol)].filter((e) => e.name === "path" || e.name === "circle");
        t.ok(shapes.length > 20, `${name} ${style} ${color_by}: ${shapes.length} shapes drawn`);
        const n = Number(root.attrs.width), h = Number(root.attrs.height);
        t.equal(n, 800); t.equal(h, 800);
      }
    }
  }
  // the PNG of the biggest one is a real picture
  const r = await renderTask({ type: "structure_3d", options: StructureOptions.parse({ style: "surface", scale: 1 }), frame: { ...frame, source: "1tii.pdb" }, format: "png", inputs: { primary: join(FIX, "1tii.pdb") }, workDir: "/tmp" });
  if (!r.ok) throw new Error(r.error);
  const png = decodePng(r.image);
  t.equal(png.width, 800);
  t.ok(colourCount(png) > 200, "shaded spheres give many colours");
});

t.test("colour by chain: one legend entry per polymer chain", async (t) => {
  for (const [name, text] of [["1TII", TII_PDB], ["1HPV", HPV_PDB]] as const) {
    const polymer = [...new Set(pdbAtoms(text).filter((a) => a.name === "CA" && !WATER.has(a.resName)).map((a) => a.chain))];
    t.ok(polymer.length >= 2, `${name}: ${polymer.length} chains`);
    for (const style of ["cartoon", "stick", "surface"]) {
      const c = render(text, { style });
      const chainEntries = legendTexts(svgOf(c)).filter((s) => s.startsWith("Chain "));
      t.same(chainEntries.sort(), polymer.map((ch) => `Chain ${ch}`).sort(), `${name} ${style}`);
    }
  }
  // 1HPV's inhibitor (blank chain) is a ligand, not a chain: it has its own entry
  t.ok(legendTexts(svgOf(render(HPV_PDB))).includes("Ligand carbon"));
  // sticks explain the element colours of the atoms they draw
  const stickLegend = legendTexts(svgOf(render(HPV_PDB, { style: "stick" })));
  for (const e of ["N", "O", "S"]) t.ok(stickLegend.includes(e), `element ${e} in the stick legend`);
});

t.test("pLDDT: AlphaFold's four bands and colours", async (t) => {
  const AF = { veryHigh: "#0053d6", confident: "#65cbf3", low: "#ffdb13", veryLow: "#ff7d45" };
  const ca = pdbAtoms(AF_PDB).filter((a) => a.name === "CA");
  const bandOf = (b: number) => (b > 90 ? AF.veryHigh : b > 70 ? AF.confident : b > 50 ? AF.low : AF.veryLow);
  // one residue of each band, read from the file
  const picks = [ca.find((a) => a.b > 90), ca.find((a) => a.b > 70 && a.b <= 90), ca.find((a) => a.b > 50 && a.b <= 70), ca.find((a) => a.b <= 50)];
  t.ok(picks.every(Boolean), "the model has residues in all four bands");
  for (const style of ["cartoon", "surface"]) {
    const c = render(AF_PDB, { color_by: "plddt", style });
    const [iNum, iCol, iVal] = [col(c, "residue_number"), col(c, "color"), col(c, "plddt")];
    for (const a of picks) {
      const row = c.data.rows.find((r) => r[iNum] === a!.resSeq)!;
      t.equal(row[iVal], a!.b, `residue ${a!.resSeq}: pLDDT ${a!.b}`);
      t.equal(String(row[iCol]).toLowerCase(), bandOf(a!.b), `residue ${a!.resSeq} (pLDDT ${a!.b}) in its band's colour`);
    }
    // every residue, counted independently per band
    const counts = Object.values(AF).map((hex) => ca.filter((a) => bandOf(a.b) === hex).length);
    t.same(Object.values(AF).map((hex) => c.data.rows.filter((r) => String(r[iCol]).toLowerCase() === hex).length), counts, `${style}: residues per band`);
    const legend = legendTexts(svgOf(c)).join(" | ");
    for (const label of ["Very high", "Confident", "Low", "Very low"]) t.match(legend, label);
  }
  // a crystal structure's B-factors above 100 are not pLDDT
  const maxB = Math.max(...pdbAtoms(HPV_PDB).map((a) => a.b));
  t.ok(maxB > 100);
  t.throws(() => render(HPV_PDB, { color_by: "plddt" }), ChartError);
});

t.test("highlighted residues are marked and labelled", async (t) => {
  const ref = pdbAtoms(HPV_PDB);
  const nameOf = (chain: string, n: number) => ref.find((a) => a.chain === chain && a.resSeq === n)!.resName;
  for (const style of ["cartoon", "stick", "surface"]) {
    const c = render(HPV_PDB, { style, highlight_residues: ["A:25", "B:25", "A:47-50"] });
    const texts = [...elements(svgOf(c))].filter((e) => e.name === "text").map(allText);
    t.ok(texts.some((s) => s.startsWith(`${nameOf("A", 25)} A25`)), `${style}: A25 labelled with its residue name (${nameOf("A", 25)})`);
    t.ok(texts.some((s) => s.startsWith(`${nameOf("B", 25)} B25`)), `${style}: B25 labelled`);
    t.ok(texts.some((s) => s.startsWith("A47–50")), `${style}: the range labelled once`);
    const [iCh, iNum, iHl] = [col(c, "chain"), col(c, "residue_number"), col(c, "highlighted")];
    const hl = c.data.rows.filter((r) => r[iHl] === "yes").map((r) => `${r[iCh]}:${r[iNum]}`).sort();
    t.same(hl, ["A:25", "A:47", "A:48", "A:49", "A:50", "B:25"].sort(), `${style}: the TSV marks exactly the highlighted residues`);
    t.match(legendTexts(svgOf(c)).join(" "), "Highlighted residue");
  }
  t.throws(() => render(HPV_PDB, { highlight_residues: ["A:500"] }), { name: "ChartError", message: /A:500/ });
  t.throws(() => render(HPV_PDB, { highlight_residues: ["Z:5"] }), { name: "ChartError", message: /Z:5.*chain Z/ });
});

t.test("the TSV rows are the residues drawn", async (t) => {
  const ref = pdbAtoms(TII_PDB).filter((a) => !WATER.has(a.resName));
  const residues = [...new Set(ref.map((a) => `${resKey(a)} ${a.resName}`))].sort();
  for (const style of ["cartoon", "surface"]) {
    const c = render(TII_PDB, { style });
    const [iCh, iNum, iName, iX, iY] = [col(c, "chain"), col(c, "residue_number"), col(c, "residue_name"), col(c, "x_px"), col(c, "y_px")];
    t.same(c.data.rows.map((r) => `${r[iCh]}:${r[iNum]} ${r[iName]}`).sort(), residues, `${style}: one row per residue (no water)`);
    t.ok(c.data.rows.every((r) => Number(r[iX]) > 0 && Number(r[iX]) < frame.width && Number(r[iY]) > 0 && Number(r[iY]) < frame.height), "every residue drawn inside the image");
  }
  const c = render(TII_PDB, { color_by: "bfactor" });
  const [iCh, iNum, iB] = [col(c, "chain"), col(c, "residue_number"), col(c, "b_factor")];
  const caB = new Map(ref.filter((a) => a.name === "CA").map((a) => [`${a.chain}:${a.resSeq}`, a.b]));
  t.ok(c.data.rows.filter((r) => caB.has(`${r[iCh]}:${r[iNum]}`)).every((r) => r[iB] === caB.get(`${r[iCh]}:${r[iNum]}`)), "a residue's B-factor is its Cα's");
});

t.test("rotation changes the projection", async (t) => {
  const at = (c: Chart) => { const [iX, iY] = [col(c, "x_px"), col(c, "y_px")]; return c.data.rows.map((r) => [Number(r[iX]), Number(r[iY])] as const); };
  const base = at(render(HPV_PDB));
  const y180 = at(render(HPV_PDB, { rotate_y: 180 }));
  const x180 = at(render(HPV_PDB, { rotate_x: 180 }));
  const y90 = at(render(HPV_PDB, { rotate_y: 90 }));
  // 180° about the vertical axis mirrors x about the centre and keeps y (orthographic)
  const sx = base[0]![0] + y180[0]![0];
  t.ok(base.every((p, i) => Math.abs(p[0] + y180[i]![0] - sx) < 0.05 && Math.abs(p[1] - y180[i]![1]) < 0.05), "rotate_y 180: x mirrored, y kept");
  const sy = base[0]![1] + x180[0]![1];
  t.ok(base.every((p, i) => Math.abs(p[1] + x180[i]![1] - sy) < 0.05 && Math.abs(p[0] - x180[i]![0]) < 0.05), "rotate_x 180: y mirrored, x kept");
  const moved = base.filter((p, i) => Math.hypot(p[0] - y90[i]![0], p[1] - y90[i]![1]) > 5).length;
  t.ok(moved > base.length * 0.8, `rotate_y 90 moves most residues (${moved} of ${base.length})`);
  t.not(render(HPV_PDB, { rotate_y: 90 }).svg, render(HPV_PDB).svg);
});
