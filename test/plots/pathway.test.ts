import t from "tap";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ChartError, type Chart } from "../../plots/chart.js";
import { PathwayOptions } from "../../plots/options.js";
import { pathwayChart } from "../../plots/pathway.js";
import { enrichment, hypergeometricSf } from "../../plots/data/enrichment.js";
import { geneKeyOf, normalizeId, type PathwayCollection } from "../../plots/data/pathways.js";
import { parseTable } from "../../core/delimited.js";
import { loadPathways } from "../../media/charts/pathways.js";
import { convertGpml, parseXml } from "../../scripts/wikipathways/convert.js";

const FIX = join(import.meta.dirname, "..", "fixtures", "charts", "pathway");
const frame = { width: 1100, height: 800, source: "test.csv" };

function render(c: PathwayCollection, header: string[], rows: string[][], opts: Record<string, unknown> = {}): Chart {
  const sink = pathwayChart(header, PathwayOptions.parse(opts), frame, c);
  for (const r of rows) sink.row(r);
  return sink.finish();
}

// exact hypergeometric tail with BigInt binomial coefficients (independent of the code under test)
function binom(n: number, k: number): bigint {
  if (k < 0 || k > n) return 0n;
  let r = 1n;
  for (let i = 1; i <= k; i++) r = (r * BigInt(n - k + i)) / BigInt(i);
  return r;
}
function exactSf(k: number, N: number, K: number, n: number): number {
  let num = 0n;
  for (let i = k; i <= Math.min(K, n); i++) num += binom(K, i) * binom(N - K, n - i);
  const den = binom(N, n);
  // scale so that tiny tails keep their digits
  const SCALE = 10n ** 60n;
  const q = (num * SCALE) / den;
  return Number(q) / 1e60 || Number(num) / Number(den);
}

/** Strict XML well-formedness: balanced tags, quoted attributes, no raw < or stray & in text or values. */
function xmlProblems(xml: string): { bad: string; open: string[] } {
  const stack: string[] = [];
  const re = /<(\/?)([A-Za-z_][\w:.-]*)((?:\s+[A-Za-z_][\w:.-]*="[^"<]*")*)\s*(\/?)>|<\?xml[^>]*\?>/g;
  let last = 0, m: RegExpExecArray | null, bad = "";
  const checkText = (s: string) => { if (/</.test(s) || /&(?!(amp|lt|gt|quot|#39|#x[0-9a-fA-F]+|#\d+);)/.test(s)) bad ||= s.slice(0, 80); };
  while ((m = re.exec(xml))) {
    checkText(xml.slice(last, m.index));
    last = re.lastIndex;
    if (!m[2]) continue;
    for (const v of (m[3] ?? "").matchAll(/="([^"]*)"/g)) checkText(v[1]!);
    if (m[1]) { if (stack.pop() !== m[2]) bad ||= `unbalanced </${m[2]}>`; } else if (!m[4]) stack.push(m[2]);
  }
  checkText(xml.slice(last));
  return { bad, open: stack };
}

/** The fill of the legend swatch drawn just before the legend text `label`. */
function legendFill(svg: string, label: string): string | undefined {
  const at = svg.indexOf(`>${label}</text>`);
  const before = svg.slice(0, at);
  const m = [...before.matchAll(/<rect [^>]*fill="([^"]+)"[^>]*\/>/g)];
  return m.length ? m[m.length - 1]![1] : undefined;
}

const MOUSE_DE = join(FIX, "mouse-apoptosis-de.tsv");
const DESEQ2 = join(import.meta.dirname, "..", "fixtures", "charts", "deseq2");
const stripVersion = (id: string) => id.replace(/\.\d+$/, "");
const rgbOf = (s: string) => s.match(/\d+/g)!.map(Number);

t.test("hypergeometricSf matches exact BigInt sums", async (t) => {
  const cases: Array<[number, number, number, number]> = [
    [0, 50, 10, 5], [1, 50, 10, 5], [3, 50, 10, 5], [5, 50, 10, 5], [6, 50, 10, 5],
    [12, 200, 30, 40], [20, 200, 20, 20], [36, 133, 87, 37], [2, 133, 33, 37], [10, 2000, 60, 150], [25, 2000, 60, 150],
    [7, 60, 59, 8], [0, 0, 0, 0],
  ];
  for (const [k, N, K, n] of cases) {
    const want = exactSf(k, N, K, n);
    const got = hypergeometricSf(k, N, K, n);
    t.ok(Math.abs(got - want) <= 1e-9 * Math.max(want, 1e-300), `P(X≥${k}; N=${N}, K=${K}, n=${n}) = ${got} vs exact ${want}`);
  }
  t.equal(hypergeometricSf(0, 10, 3, 4), 1);
  t.equal(hypergeometricSf(4, 10, 3, 4), 0, "more successes than K cannot happen");
  t.throws(() => hypergeometricSf(1, 10, 11, 2), RangeError);
});

t.test("the shipped collection loads, and its maps cover every gene node by label and by Xref", async (t) => {
  const c = await loadPathways();
  t.ok(c.pathways.length >= 3, `${c.pathways.length} pathways`);
  t.match(c.licence, /CC0/);
  for (const p of c.pathways) {
    const ids = c.ids[p.organism];
    for (const n of p.nodes) {
      if (!n.genes.length) continue;
      t.equal(geneKeyOf(ids, n.label), n.genes[0], `${p.id} ${n.label} by label`);
      if (n.xref?.id) t.equal(geneKeyOf(ids, n.xref.id), n.genes[0], `${p.id} ${n.label} by ${n.xref.db} ${n.xref.id}`);
    }
  }
  t.equal(normalizeId(" ensg00000116044.15 "), "ENSG00000116044");
  t.equal(normalizeId("ncbigene:842"), "842");
});

t.test("the converter reads GPML: nodes, Xrefs, groups as GraphRef targets, elbow routing, anchors", async (t) => {
  const gpml = `<?xml version="1.0"?><Pathway xmlns="http://pathvisio.org/GPML/2013a" Name="Tiny &amp; test" Version="WP1_r1" Organism="Homo sapiens">
  <Graphics BoardWidth="300" BoardHeight="200"/>
  <DataNode TextLabel="CASP9" GraphId="a" Type="GeneProduct" GroupRef="g1"><Graphics CenterX="50" CenterY="50" Width="60" Height="20"/><Xref Database="Entrez Gene" ID="842"/></DataNode>
  <DataNode TextLabel="APAF1" GraphId="b" Type="GeneProduct" GroupRef="g1"><Graphics CenterX="50" CenterY="70" Width="60" Height="20"/><Xref Database="Entrez Gene" ID="317"/></DataNode>
  <DataNode TextLabel="ATP" GraphId="m" Type="Metabolite"><Graphics CenterX="200" CenterY="150" Width="40" Height="20"/><Xref Database="HMDB" ID="HMDB0000538"/></DataNode>
  <Label TextLabel="two&#xA;lines" GraphId="l"><Graphics CenterX="250" CenterY="20" Width="60" Height="30" FontWeight="Bold" FontSize="12"/></Label>
  <Interaction GraphId="i"><Graphics ConnectorType="Elbow"><Point X="80" Y="60" GraphRef="gg" RelX="1" RelY="0"/><Point X="200" Y="140" GraphRef="m" RelX="0" RelY="-1" ArrowHead="mim-conversion"/><Anchor Position="0.5" GraphId="an"/></Graphics></Interaction>
  <Group GroupId="g1" GraphId="gg" Style="Complex"/>
  </Pathway>`;
  const p = convertGpml(gpml, "WP1", "human", "abc");
  t.equal(p.title, "Tiny & test");
  t.equal(p.revision, "WP1_r1");
  t.same(p.nodes.map((n) => [n.id, n.type, n.xref?.id]), [["a", "GeneProduct", "842"], ["b", "GeneProduct", "317"], ["m", "Metabolite", "HMDB0000538"], ["l", "Label", undefined]]);
  t.equal(p.nodes[3]!.label, "two\nlines");
  t.equal(p.nodes[3]!.bold, true);
  t.equal(p.edges.length, 1);
  t.same(p.edges[0]!.points, [[80, 60], [200, 60], [200, 140]], "horizontal first (leaves the right side), then down");
  t.equal(p.edges[0]!.from, "gg");
  t.equal(p.edges[0]!.arrow, "mim-conversion");
  const complex = p.shapes!.find((s) => s.shape === "Complex")!;
  t.same([complex.x, complex.y, complex.w, complex.h], [50, 60, 68, 48], "the complex's outline is its members' bounds + 4");
  t.equal(parseXml("<a x='1'><b/>t&lt;</a>").children[0]!.text, "t<");
  t.same(convertGpml(gpml, "WP1", "human", "abc", ["l", "i"]).nodes.map((n) => n.id), ["a", "b", "m"], "elements named in omit are left out");
  t.equal(convertGpml(gpml, "WP1", "human", "abc", ["l", "i"]).edges.length, 0);
});

t.test("without pathway_id the pathway most enriched for a gene list wins", async (t) => {
  const c = await loadPathways();
  const target = c.pathways.find((p) => p.id === "WP408")!;
  const genes = [...new Set(target.nodes.filter((n) => n.genes.length).map((n) => n.label))].slice(0, 12);
  // a one-column list without a header line: the first gene is data too
  const chart = render(c, [genes[0]!], genes.slice(1).map((g) => [g]));
  t.match(chart.svg, /<title>WP408 Oxidative stress response \(human\)<\/title>/);
  const best = chart.data.comments.find((l) => l.startsWith("best-enriched pathway:"))!;
  t.match(best, /WP408/);
  // independent: N = all human pathway genes, K = WP408's genes, n = k = 12
  const universe = new Set(c.pathways.filter((p) => p.organism === "human").flatMap((p) => p.nodes.flatMap((n) => n.genes)));
  const K = new Set(target.nodes.flatMap((n) => n.genes)).size;
  const want = exactSf(12, universe.size, K, 12);
  const got = Number(/p = ([0-9.e−-]+)/.exec(best)![1]!.replace("−", "-"));
  t.ok(Math.abs(got - want) / want < 0.01, `reported p ${got} ≈ exact ${want}`);
  const r = enrichment(c, "human", new Set(genes.map((g) => geneKeyOf(c.ids.human, g)!)), universe);
  t.equal(r[0]!.id, "WP408");
  t.equal(r[0]!.k, 12);
  // TSV: one row per gene box drawn; 12 of them carry a file gene
  const geneBoxes = target.nodes.filter((n) => n.genes.length).length;
  t.equal(chart.data.rows.length, geneBoxes);
  t.equal(chart.data.rows.filter((row) => row[3] !== "").length, target.nodes.filter((n) => n.genes.length && genes.map((g) => g.toUpperCase()).includes(n.genes[0]!)).length);
});

t.test("genes match by symbol (any case), Entrez id, Ensembl id with version, and a current symbol for an old label", async (t) => {
  const c = await loadPathways();
  const header = ["gene_id", "log2FoldChange", "padj"];
  const rows = [["ENSG00000116044.15", "2.5", "0.001"], ["3162", "-1.25", "0.02"], ["sod2", "0.5", "0.5"], ["NOT_A_GENE", "9", "0.0001"]];
  const chart = render(c, header, rows, { pathway_id: "WP408" });
  const row = (label: string) => chart.data.rows.find((r) => r[0] === label)!;
  t.same(row("NFE2L2").slice(3, 6), ["ENSG00000116044.15", 2.5, 0.001], "Ensembl with version");
  t.same(row("HMOX1").slice(3, 6), ["3162", -1.25, 0.02], "Entrez");
  t.same(row("SOD2").slice(3, 6), ["sod2", 0.5, 0.5], "symbol in lower case");
  t.same(row("CAT").slice(3, 6), ["", "", ""], "not in the file");
  t.ok(chart.data.comments.some((l) => l === "not on any shipped human pathway: 1 rows"));
  t.ok(chart.data.comments.some((l) => l.startsWith("matched: 3 of")));
  // colours: NFE2L2 red (positive), HMOX1 blue (negative), CAT white
  const fillOf = (label: string) => new RegExp(`<title>${label}[^<]*</title><rect [^>]*fill="([^"]+)"`).exec(chart.svg)?.[1];
  const rgb = (s: string) => s.match(/\d+/g)!.map(Number);
  const [r1, , b1] = rgb(fillOf("NFE2L2")!);
  const [r2, , b2] = rgb(fillOf("HMOX1")!);
  t.ok(r1! > b1!, "positive fold change is red");
  t.ok(b2! > r2!, "negative fold change is blue");
  t.equal(fillOf("CAT"), legendFill(chart.svg, "not in the file"), "a gene not in the file has the legend's 'not in the file' fill");
  t.not(legendFill(chart.svg, "not in the file"), "#ffffff", "which is not white (the middle of the fold-change scale)");

  const xiap = render(c, ["gene_name"], [["XIAP"], ["CASP9"]], { pathway_id: "WP254", highlight_genes: ["CASP9", "GAPDH"] });
  t.equal(xiap.data.rows.find((r) => r[0] === "BIRC4")![3], "XIAP", "current symbol XIAP finds the BIRC4 box");
  t.equal(xiap.data.rows.find((r) => r[0] === "CASP9")![6], "yes");
  t.match(xiap.svg, /<title>CASP9[^<]*<\/title><rect [^>]*stroke-width="2.6"/, "highlighted box gets a thick outline");
  t.ok(xiap.data.comments.includes("highlight_genes not on this pathway: GAPDH"));
});

t.test("an unknown pathway id is the user's mistake and lists the shipped ids", async (t) => {
  const c = await loadPathways();
  let err: unknown;
  try { render(c, ["gene"], [["TP53"]], { pathway_id: "WP99999" }); } catch (e) { err = e; }
  t.ok(err instanceof ChartError, "a ChartError");
  t.match((err as Error).message, /WP99999/);
  for (const p of c.pathways.filter((x) => x.organism === "human")) t.ok((err as Error).message.includes(`${p.id} (${p.title})`), `lists ${p.id}`);
  t.throws(() => render(c, ["gene", "padj"], [["TP53", "0.9"]]), ChartError, "nothing significant: no pathway can be chosen");
  t.throws(() => render(c, ["gene"], [["TP53"]], { gene_col: "symbol" }), /column "symbol" \(option gene_col\)/);
});

t.test("a DE table: apoptosis chosen, well-formed SVG, TSV of every gene box", async (t) => {
  const c = await loadPathways();
  const tab = parseTable(readFileSync(join(FIX, "apoptosis-de.csv"), "utf8"));
  const chart = render(c, tab.header, tab.rows);
  const x = xmlProblems(chart.svg);
  t.equal(x.bad, "", "no malformed text, value or tag");
  t.same(x.open, [], "every element closed");
  t.not(xmlProblems(chart.svg.replace("</g>", "")).open.length, 0, "the checker does catch an unclosed element");
  t.match(chart.svg, /<title>WP254 Apoptosis \(human\)<\/title>/);
  const wp = c.pathways.find((p) => p.id === "WP254")!;
  t.equal(chart.data.rows.length, wp.nodes.filter((n) => n.genes.length).length, "one row per gene box");
  // matched rows carry the file's own values
  const fileFc = new Map(tab.rows.map((r) => [r[0]!, Number(r[2])]));
  for (const r of chart.data.rows) if (r[3] !== "") t.equal(r[4], fileFc.get(String(r[3])), `${r[0]} fold change from the file`);
  const sig = tab.rows.filter((r) => Number(r[6]) < 0.05).length;
  t.ok(chart.data.comments.some((l) => l.startsWith(`significant genes: ${sig} with padj < 0.05`)), "significant count");
  t.ok(chart.data.comments.some((l) => l.startsWith("next: WP")), "the next two pathways are named");
  t.ok(chart.data.comments.some((l) => l.includes("NA/empty/non-numeric") || l.startsWith("not on any shipped")), "unmatched rows counted");
  t.match(chart.svg, /log2 fold change/);
});

t.test("mouse: a DESeq2 table keyed by ENSMUSG ids (some with a version) picks the mouse Apoptosis pathway and colours its boxes", async (t) => {
  const c = await loadPathways();
  const tab = parseTable(readFileSync(MOUSE_DE, "utf8"));
  const chart = render(c, tab.header, tab.rows);
  t.match(chart.svg, /<title>WP1254 Apoptosis \(mouse\)<\/title>/);
  const ensmusg = tab.rows.filter((r) => /^ENSMUSG\d+/.test(r[0]!)).length;
  t.ok(chart.data.comments.includes(`organism: mouse (${ensmusg} ENSMUSG identifiers)`), "organism detected from the ENSMUSG prefix, every row counted");
  t.equal(xmlProblems(chart.svg).bad, "");
  t.same(xmlProblems(chart.svg).open, []);
  // independent: the file's rows by version-less Ensembl id, and the pathway's gene boxes by their GPML Xref
  const byId = new Map(tab.rows.map((r) => [stripVersion(r[0]!), r]));
  const wp = c.pathways.find((p) => p.id === "WP1254")!;
  t.equal(wp.organism, "mouse");
  const boxes = wp.nodes.filter((n) => n.type === "GeneProduct" && (n.xref?.id || n.label));
  t.equal(chart.data.rows.length, boxes.length, "one TSV row per gene box");
  const inFile = boxes.filter((n) => n.xref?.id && byId.has(n.xref.id));
  t.ok(inFile.length >= 30, `${inFile.length} boxes carry an Ensembl id that is in the file`);
  t.equal(chart.data.rows.filter((r) => r[3] !== "").length, inFile.length, "exactly those boxes are matched");
  for (const n of inFile) {
    const row = chart.data.rows.find((r) => r[2] === `Ensembl:${n.xref!.id}` && r[0] === n.label)!;
    const want = byId.get(n.xref!.id)!;
    t.equal(row[3], want[0], `${n.label}: the file's own identifier ${want[0]}`);
    t.equal(row[4], Number(want[2]), `${n.label}: log2FoldChange from the file`);
    t.equal(row[5], Number(want[6]), `${n.label}: padj from the file`);
  }
  // colours: strong changes are red / blue, genes not in the file have the legend's grey
  const fills = new Map<string, string[]>();
  for (const m of chart.svg.matchAll(/<title>([^<:]+)(?::[^<]*)?<\/title><rect [^>]*fill="([^"]+)"/g)) fills.set(m[1]!, [...(fills.get(m[1]!) ?? []), m[2]!]);
  const missing = legendFill(chart.svg, "not in the file")!;
  let red = 0, blue = 0;
  for (const n of inFile) {
    const fc = Number(byId.get(n.xref!.id)![2]);
    for (const f of fills.get(n.label)!) {
      const [r, , b] = rgbOf(f);
      if (fc > 1) { t.ok(r! > b! + 40, `${n.label} (log2FC ${fc}) is red: ${f}`); red++; }
      if (fc < -1) { t.ok(b! > r! + 40, `${n.label} (log2FC ${fc}) is blue: ${f}`); blue++; }
    }
  }
  t.ok(red >= 10 && blue >= 5, `${red} red and ${blue} blue boxes`);
  for (const n of boxes.filter((b) => !(b.xref?.id && byId.has(b.xref.id)))) for (const f of fills.get(n.label) ?? []) t.equal(f, missing, `${n.label} not in the file: grey`);
  const sig = tab.rows.filter((r) => Number(r[6]) < 0.05).length;
  t.ok(chart.data.comments.some((l) => l.startsWith(`significant genes: ${sig} with padj < 0.05`)), `${sig} significant genes counted`);
  t.ok(chart.data.comments.includes(`not on any shipped mouse pathway: ${tab.rows.length - inFile.filter((n, i, a) => a.findIndex((m) => m.xref!.id === n.xref!.id) === i).length} rows`));
  const hl = render(c, tab.header, tab.rows, { highlight_genes: ["Casp3", "ENSMUSG00000057329", "Gapdh"] });
  t.equal(hl.data.rows.find((r) => r[0] === "Casp3")![6], "yes", "highlight by mouse symbol");
  t.equal(hl.data.rows.find((r) => r[0] === "Bcl2")![6], "yes", "highlight by ENSMUSG id");
  t.ok(hl.data.comments.includes("highlight_genes not on this pathway: Gapdh"));
});

t.test("mouse: the chosen pathway's hypergeometric p-value equals an exact computation over the shipped mouse genes", async (t) => {
  const c = await loadPathways();
  const tab = parseTable(readFileSync(MOUSE_DE, "utf8"));
  // fewer than 200 rows: the universe is every gene on the shipped mouse pathways
  const rows = tab.rows.slice(-120);
  const chart = render(c, tab.header, rows);
  // independent: a gene on a pathway is its Xref id, or its label when it has none
  const geneOf = (n: { type: string; label: string; xref?: { id: string } }) => n.type === "GeneProduct" || n.type === "Protein" || n.type === "Rna" ? (n.xref?.id || n.label.toUpperCase()) : undefined;
  const mouse = c.pathways.filter((p) => p.organism === "mouse");
  t.ok(mouse.length >= 2, `${mouse.length} mouse pathways shipped`);
  const genesOf = (p: (typeof mouse)[number]) => new Set(p.nodes.map(geneOf).filter((g): g is string => !!g));
  const universe = new Set(mouse.flatMap((p) => [...genesOf(p)]));
  const sig = new Set(rows.filter((r) => Number(r[6]) < 0.05).map((r) => stripVersion(r[0]!)).filter((g) => universe.has(g)));
  const best = mouse.map((p) => {
    const g = genesOf(p);
    const k = [...sig].filter((x) => g.has(x)).length;
    return { id: p.id, k, p: exactSf(k, universe.size, g.size, sig.size) };
  }).sort((a, b) => a.p - b.p)[0]!;
  t.equal(best.id, "WP1254");
  t.ok(best.p < 0.01 && best.p > 0, `exact p = ${best.p}`);
  const line = chart.data.comments.find((l) => l.startsWith("best-enriched pathway:"))!;
  t.match(line, new RegExp(`WP1254 Apoptosis: p = .* \\(${best.k} of ${genesOf(mouse.find((p) => p.id === "WP1254")!).size} pathway genes significant\\)`));
  const got = Number(/p = ([0-9.e−-]+)/.exec(line)![1]!.replace("−", "-"));
  t.ok(Math.abs(got - best.p) / best.p < 0.005, `reported p ${got} ≈ exact ${best.p}`);
  t.ok(chart.data.comments.some((l) => l.includes(`(N = ${universe.size}), significant in it n = ${sig.size}`)), `N = ${universe.size}, n = ${sig.size}`);
  const r = enrichment(c, "mouse", new Set([...sig].map((g) => geneKeyOf(c.ids.mouse, g)!)), new Set([...universe].map((g) => geneKeyOf(c.ids.mouse, g)!)));
  t.ok(Math.abs(r[0]!.p - best.p) <= 1e-9 * best.p, "enrichment() to 1e-9");
});

t.test("mouse: genes match by Entrez id and by symbol as mouse tables write them", async (t) => {
  const c = await loadPathways();
  const tca = c.pathways.find((p) => p.id === "WP434")!;
  t.equal(tca.organism, "mouse");
  const entrez = tca.nodes.filter((n) => n.xref?.db === "Entrez Gene").slice(0, 8);
  const chart = render(c, ["entrez_id", "logFC"], entrez.map((n, i) => [n.xref!.id, String(i % 2 ? -1.5 : 1.5)]), { organism: "mouse" });
  t.match(chart.svg, /<title>WP434 TCA cycle \(mouse\)<\/title>/);
  for (const n of entrez) t.equal(chart.data.rows.find((r) => r[0] === n.label)![3], n.xref!.id, `${n.label} by Entrez ${n.xref!.id}`);
  const sym = render(c, ["gene"], [["Sdha"], ["Sdhb"], ["Cs"], ["Aco2"]]);
  t.ok(sym.data.comments.some((l) => l.startsWith("organism: mouse")), "Sdha-style symbols are mouse");
  t.match(sym.svg, /WP434 TCA cycle \(mouse\)/);
});

t.test("organism detection", async (t) => {
  const c = await loadPathways();
  const organismOf = (header: string[], rows: string[][], opts = {}) => render(c, header, rows, opts).data.comments.find((l) => l.startsWith("organism: "))!;
  // real nf-core DESeq2 results keyed by upper-cased mouse gene names (RIKEN clones among them)
  const l1 = parseTable(readFileSync(join(DESEQ2, "nfcore-L1_L10.deseq2.results.head.tsv"), "utf8"));
  const riken = l1.rows.filter((r) => /RIK$|^GM\d+$/i.test(r[0]!)).length;
  t.ok(riken >= 2, `${riken} RIKEN/Gm names in the file`);
  t.match(organismOf(l1.header, l1.rows), new RegExp(`^organism: mouse \\(${riken} RIKEN/Gm mouse gene names`));
  t.match(organismOf(l1.header, l1.rows, { organism: "human" }), /^organism: human \(given\)/, "the option wins");
  const hum = parseTable(readFileSync(join(FIX, "apoptosis-de.csv"), "utf8"));
  t.match(organismOf(hum.header, hum.rows), /^organism: human/, "HGNC symbols");
  t.match(organismOf(["gene"], [["Casp3"], ["Bax"], ["Bcl2"]]), /^organism: mouse/, "mouse-cased symbols");
  const ensg = c.pathways.filter((p) => p.organism === "human").flatMap((p) => p.nodes).filter((n) => /^ENSG\d+$/.test(n.xref?.id ?? "")).slice(0, 2).map((n) => [n.xref!.id]);
  t.equal(ensg.length, 2);
  t.match(organismOf(["gene_id"], [ensg[0]!, [`${ensg[1]![0]}.7`]]), /^organism: human \(2 ENSG/, "ENSG ids");
});

t.test("mouse: an unknown pathway id and a file with no pathway gene are ChartErrors that say what is shipped", async (t) => {
  const c = await loadPathways();
  const tab = parseTable(readFileSync(MOUSE_DE, "utf8"));
  const mouse = c.pathways.filter((p) => p.organism === "mouse");
  let err: unknown;
  try { render(c, tab.header, tab.rows, { pathway_id: "WP99999" }); } catch (e) { err = e; }
  t.ok(err instanceof ChartError);
  for (const p of mouse) t.ok((err as Error).message.includes(`${p.id} (${p.title})`), `lists ${p.id} (${p.title})`);
  t.notOk((err as Error).message.includes("WP254 "), "and no human pathway");
  t.throws(() => render(c, tab.header, tab.rows, { pathway_id: "WP254" }), /WP254 is not among the shipped mouse pathways \(it is a human pathway: set organism to human\)/);
  // real nf-core results whose genes are on none of the shipped pathways
  const real = parseTable(readFileSync(join(DESEQ2, "nfcore-SRP254919.salmon.merged.deseq2.results.head.tsv"), "utf8"));
  err = undefined;
  try { render(c, real.header, real.rows); } catch (e) { err = e; }
  t.ok(err instanceof ChartError, "a ChartError");
  t.match((err as Error).message, new RegExp(`^none of the file's ${real.rows.length} gene identifiers \\(column "gene_id", e\\.g\\. ${real.rows[0]![0]}`));
  for (const p of mouse) t.ok((err as Error).message.includes(`${p.id} ${p.title}`), `names ${p.id}`);
  t.throws(() => render(c, real.header, real.rows, { pathway_id: "WP1254" }), /none of the file's/, "also when the pathway is named");
});
