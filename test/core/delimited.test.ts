import t from "tap";
import fc from "fast-check";
import {
  columnTypes, compareCells, DelimitedParser, detectDelimiter, filterRows, isMissing, parseTable, sortRows,
  type Delimiter,
} from "../../core/delimited.js";

/** Parses a text pushed in the given pieces. */
function parseChunks(delimiter: Delimiter, chunks: readonly string[]): string[][] {
  const p = new DelimitedParser(delimiter);
  const out: string[][] = [];
  for (const c of chunks) out.push(...p.push(c));
  out.push(...p.end());
  return out;
}

t.test("detectDelimiter picks the most consistent separator", async (t) => {
  for (const [sample, expected, why] of [
    ["a,b,c\n1,2,3\n4,5,6\n", ",", "plain CSV"],
    ["a\tb\tc\n1\t2\t3\n", "\t", "plain TSV"],
    ["a;b;c\n1,5;2,5;3\n", ";", "semicolon CSV with decimal commas"],
    ["a|b\n1|2\n", "|", "pipes"],
    ["a  b c\n1 2   3\n4\t5 6\n", " ", "whitespace runs"],
    ["a\tb,c\n1\t2,3\n", "\t", "tab wins a tie with comma"],
    ["name,description\nx,a long text\ny,more words here\n", ",", "comma beats spaces inside values"],
    ["\"a,b\"\tc\n\"1,2\"\t3\n\"4,5\"\t6\n", "\t", "quoted commas do not count"],
    ["a,\"x\ny\",c\n1,2,3\n", ",", "embedded newline inside quotes"],
    ["only\none\ncolumn\n", ",", "a single column gives ','"],
    ["", ",", "empty sample"],
    ["##fileformat=VCFv4.2\n##a,b,c,d,e\n#CHROM\tPOS\tID\nchr1\t10\trs1\nchr2\t20\trs2\n", "\t", "## and # lines are ignored"],
    ["#chrom\tstart\tend\n", "\t", "only a # header line"],
    ["a,b,c\n1,2,3\n4,5,6\n7,8", ",", "a last line cut off by the sample's end"],
    ["x,y\n1,2\n3,4\n5\n", ",", "one ragged row"],
  ] as const) t.equal(detectDelimiter(sample), expected, why);
});

t.test("DelimitedParser: RFC 4180 cases, whole and in every two-chunk split", async (t) => {
  const cases: Array<[string, Delimiter, string, string[][]]> = [
    ["quoted comma", ",", "a,\"b,c\",d\n", [["a", "b,c", "d"]]],
    ["escaped quotes", ",", "\"he said \"\"hi\"\"\",x\n", [["he said \"hi\"", "x"]]],
    ["embedded newline", ",", "\"line1\nline2\",z\nnext,row\n", [["line1\nline2", "z"], ["next", "row"]]],
    ["embedded CRLF kept", ",", "\"a\r\nb\",c\r\n", [["a\r\nb", "c"]]],
    ["CRLF line ends", ",", "a,b\r\nc,d\r\n", [["a", "b"], ["c", "d"]]],
    ["lone CR line ends", ",", "a,b\rc,d\r", [["a", "b"], ["c", "d"]]],
    ["BOM dropped", ",", "\ufeffid,name\n1,x\n", [["id", "name"], ["1", "x"]]],
    ["no final newline", ",", "a,b\nc,d", [["a", "b"], ["c", "d"]]],
    ["empty lines skipped", ",", "\na,b\n\n\r\nc,d\n\n", [["a", "b"], ["c", "d"]]],
    ["empty fields kept", ",", ",\na,,b,\n", [["", ""], ["a", "", "b", ""]]],
    ["quoted empty line is a record", ",", "\"\"\nx\n", [[""], ["x"]]],
    ["quote inside an unquoted field is literal", ",", "5\"3,a\"b\n", [["5\"3", "a\"b"]]],
    ["text after a closing quote kept", ",", "\"ab\"cd,e\n", [["abcd", "e"]]],
    ["TSV with commas and quotes", "\t", "a,b\t\"c\td\"\n", [["a,b", "c\td"]]],
    ["whitespace: runs of blanks", " ", "  a   b\t\tc  \n1 2 3\r\n\n   \n", [["a", "b", "c"], ["1", "2", "3"]]],
    ["whitespace: no quoting", " ", "\"a b\" c\n", [["\"a", "b\"", "c"]]],
    ["whitespace: BOM and no final newline", " ", "\ufeffx y\n1 2", [["x", "y"], ["1", "2"]]],
  ];
  for (const [name, delimiter, text, expected] of cases) {
    t.same(parseChunks(delimiter, [text]), expected, `${name}: whole`);
    for (let i = 0; i <= text.length; i++) {
      const got = parseChunks(delimiter, [text.slice(0, i), text.slice(i)]);
      if (JSON.stringify(got) !== JSON.stringify(expected)) {
        t.same(got, expected, `${name}: split at ${i}`);
        break;
      }
    }
  }
});

t.test("DelimitedParser.push returns only completed records", async (t) => {
  const p = new DelimitedParser(",");
  t.same(p.push("a,\"multi"), [], "nothing complete yet");
  t.same(p.push("\nline\",b\nc,"), [["a", "multi\nline", "b"]], "the quoted newline did not end the record");
  t.same(p.push("d\r"), [["c", "d"]], "a CR ends the record");
  t.same(p.push("\ne,f"), [], "the LF after the CR is not an empty record");
  t.same(p.end(), [["e", "f"]], "end flushes the last record");
  t.same(p.end(), [], "a second end has nothing left");
});

t.test("parseTable: headers, comments, ragged rows", async (t) => {
  const bed = parseTable("##track name=x\n#chrom\tstart\tend\nchr1\t10\t20\nchr2\t30\t40\n");
  t.same(bed, {
    delimiter: "\t", header: ["chrom", "start", "end"], headerDetected: true,
    rows: [["chr1", "10", "20"], ["chr2", "30", "40"]], comments: 1,
  }, "a # line with the data's column count is the header; ## is a comment");

  const vcf = parseTable("##fileformat=VCFv4.2\n##INFO=<ID=DP,Number=1,Type=Integer,Description=\"Depth\">\n#CHROM\tPOS\tID\tREF\nchr1\t100\trs1\tA\n");
  t.same([vcf.header, vcf.comments, vcf.rows.length], [["CHROM", "POS", "ID", "REF"], 2, 1], "VCF-style");

  const freeComment = parseTable("# produced by tool v1\ngene\tcount\nA\t1\nB\t2\n");
  t.same([freeComment.header, freeComment.comments, freeComment.rows], [["gene", "count"], 1, [["A", "1"], ["B", "2"]]],
    "a # line with another column count is a comment; the first record is the header");

  const csv = parseTable("\ufeffname,value,p\r\nx,1.5,0.01\r\ny,2,NA\r\n");
  t.same([csv.delimiter, csv.header, csv.headerDetected, csv.rows], [",", ["name", "value", "p"], true, [["x", "1.5", "0.01"], ["y", "2", "NA"]]],
    "text header over numeric columns, BOM and CRLF");

  const noHeader = parseTable("chr1\t10\t20\nchr2\t30\t40\n");
  t.same([noHeader.header, noHeader.headerDetected, noHeader.rows.length], [["column_1", "column_2", "column_3"], false, 2],
    "a first row with numbers is data");

  const allText = parseTable("first,last\nAda,Lovelace\nAlan,Turing\n");
  t.same([allText.header, allText.headerDetected, allText.rows.length], [["first", "last"], true, 2], "all text, unique first row: header");

  const repeated = parseTable("a,a\nb,c\n");
  t.same([repeated.header, repeated.headerDetected, repeated.rows.length], [["column_1", "column_2"], false, 2], "all text, repeated values: no header");

  const emptyName = parseTable("x,\nb,c\n");
  t.equal(emptyName.headerDetected, false, "all text with an empty value: no header");

  const rowNames = parseTable(",A,B\ng1,1,2\ng2,3,4\n");
  t.same([rowNames.header, rowNames.headerDetected], [["column_1", "A", "B"], true], "R row-name header: the empty name is generated");

  const ragged = parseTable("a,b,c\n1,2,3\n4,5\n6,7,8,9\n");
  t.same([ragged.header, ragged.rows], [["a", "b", "c", "column_4"], [["1", "2", "3", ""], ["4", "5", "", ""], ["6", "7", "8", "9"]]],
    "short rows padded, long rows kept, the extra column named");

  const spaces = parseTable("id  score\nr1  0.5\nr2  1e-5\n");
  t.same([spaces.delimiter, spaces.header, spaces.rows], [" ", ["id", "score"], [["r1", "0.5"], ["r2", "1e-5"]]], "whitespace table");

  const forced = parseTable("a;b\n1;2\n", { delimiter: "," });
  t.same([forced.delimiter, forced.header, forced.rows], [",", ["a;b"], [["1;2"]]], "a given delimiter is used as is");

  t.same(parseTable(""), { delimiter: ",", header: [], headerDetected: false, rows: [], comments: 0 }, "empty text");
});

t.test("columnTypes: numeric when ≥ 90% of the present cells are plain numbers", async (t) => {
  const col = (cells: string[]) => columnTypes(cells.map((c) => [c]), 1)[0];
  for (const [cells, expected, why] of [
    [["1", "-3.2", "1e-5", "+4", ".5", "7."], "number", "JS number syntax"],
    [["1", "NA", "", "NaN", ".", "-", "n/a", "2"], "number", "missing markers are ignored"],
    [[...Array(9).fill("1"), "x"], "number", "9 of 10 is 90%"],
    [[...Array(8).fill("1"), "x", "y"], "text", "8 of 10 is not"],
    [["1,234", "2,000"], "text", "thousands separators are text"],
    [["0x10", "Infinity", "1e999"], "text", "hex, Infinity and overflow are not numbers"],
    [["NA", ""], "text", "a column of missing cells"],
  ] as const) t.equal(col([...cells]), expected, why);
  t.same(columnTypes([["a", "1"], ["b"]], 3), ["text", "number", "text"], "short rows and columns past the rows");
  t.ok(isMissing(" NA ") && isMissing("nan") && !isMissing("0"), "isMissing");
});

t.test("sortRows: numbers numerically, missing cells last in both directions, stable", async (t) => {
  const rows = [["a", "10"], ["b", "NA"], ["c", "9"], ["d", ""], ["e", "-1.5"], ["f", "9"], ["g", "1e1"]];
  const ids = (rs: string[][]) => rs.map((r) => r[0]).join("");
  t.equal(ids(sortRows(rows, 1, "number", "asc")), "ecfagbd", "asc: 10 after 9, equal keys keep their order, NA and empty last");
  t.equal(ids(sortRows(rows, 1, "number", "desc")), "agcfebd", "desc: NA and empty still last, ties still stable");
  t.equal(ids(sortRows(rows, 1, "text", "asc")), "egcfabd", "text: natural order (9 before 10, 1e1 after -1.5)");
  t.equal(ids(rows), "abcdefg", "the input is not reordered");

  const genes = [["chr10"], ["chr2"], ["Chr1"], ["-"], ["chrX"]];
  t.same(sortRows(genes, 0, "text", "asc").map((r) => r[0]), ["Chr1", "chr2", "chr10", "chrX", "-"], "case-insensitive natural text order");
  t.same(sortRows(genes, 0, "text", "desc").map((r) => r[0]), ["chrX", "chr10", "chr2", "Chr1", "-"], "desc text, missing last");

  const mixed = [["x"], ["3"], ["1"]];
  t.same(sortRows(mixed, 0, "number", "asc").map((r) => r[0]), ["1", "3", "x"], "stray text after the numbers");

  t.ok(compareCells("9", "10", "number") < 0 && compareCells("10", "9", "number") > 0, "compareCells numeric");
  t.ok(compareCells("", "1", "number") > 0 && compareCells("1", "NA", "number") < 0 && compareCells("NA", "", "text") === 0, "compareCells missing last");
  t.ok(compareCells("b", "A", "text") > 0 && compareCells("a", "A", "text") !== 0, "compareCells text is case-insensitive, ties broken");
});

t.test("filterRows: substrings, column terms and numeric comparisons", async (t) => {
  const header = ["gene", "log2FC", "padj", "Note"];
  const rows = [
    ["BRCA1", "2.5", "0.001", "DNA repair"],
    ["TP53", "-1.2", "0.04", "tumor suppressor"],
    ["brca2", "0.3", "0.5", "DNA repair"],
    ["MYC", "5", "NA", "oncogene, brca-like"],
  ];
  const ids = (q: string) => filterRows(rows, q, header).map((r) => r[0]);
  for (const [query, expected] of [
    ["", ["BRCA1", "TP53", "brca2", "MYC"]],
    ["   ", ["BRCA1", "TP53", "brca2", "MYC"]],
    ["brca", ["BRCA1", "brca2", "MYC"]],
    ["gene:brca", ["BRCA1", "brca2"]],
    ["GENE:BRCA", ["BRCA1", "brca2"]],
    ["note:repair", ["BRCA1", "brca2"]],
    ["padj<=0.04", ["BRCA1", "TP53"]],
    ["padj<0.04", ["BRCA1"]],
    ["log2FC>0", ["BRCA1", "brca2", "MYC"]],
    ["log2FC>=5", ["MYC"]],
    ["log2FC=5", ["MYC"]],
    ["log2FC=5.0", ["MYC"]],
    ["gene=tp53", ["TP53"]],
    ["gene!=tp53", ["BRCA1", "brca2", "MYC"]],
    ["brca log2FC>1", ["BRCA1", "MYC"]],
    ["\"dna repair\"", ["BRCA1", "brca2"]],
    ["note:\"DNA repair\" padj<0.1", ["BRCA1"]],
    ["nosuch:x", []],
    ["oncogene,", ["MYC"]],
    ["padj>abc", []],
  ] as const) t.same(ids(query), expected, JSON.stringify(query));
  t.same(filterRows(rows, "gene:brca").map((r) => r[0]), [], "without a header, column terms are plain substrings");
  t.same(filterRows([["a:b"]], "a:b").length, 1, "a term naming no column is a plain substring");
});

/** RFC 4180 serialization: quote a field when it needs it (or when it is a row's only, empty, field). */
function toCsv(rows: string[][], crlf: boolean): string {
  const quote = (f: string, only: boolean) => (/[",\r\n]/.test(f) || (only && f === "") || f.startsWith("\ufeff") ? `"${f.replaceAll("\"", "\"\"")}"` : f);
  return rows.map((r) => r.map((f) => quote(f, r.length === 1)).join(",")).join(crlf ? "\r\n" : "\n") + (crlf ? "\r\n" : "\n");
}

t.test("property: RFC 4180 CSV round-trips through the parser in any chunking", async (t) => {
  const cell = fc.string({ unit: fc.constantFrom("a", "b", "Z", "1", " ", ",", "\"", "\n", "\r", "\t", ";", "é", "\ufeff"), maxLength: 8 });
  const table = fc.integer({ min: 1, max: 5 }).chain((width) => fc.array(fc.array(cell, { minLength: width, maxLength: width }), { minLength: 1, maxLength: 8 }));
  fc.assert(fc.property(table, fc.boolean(), fc.array(fc.nat(), { maxLength: 6 }), (rows, crlf, cuts) => {
    const text = toCsv(rows, crlf);
    const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
    const chunks: string[] = [];
    let prev = 0;
    for (const p of points) { chunks.push(text.slice(prev, p)); prev = p; }
    chunks.push(text.slice(prev));
    return JSON.stringify(parseChunks(",", chunks)) === JSON.stringify(rows);
  }), { numRuns: 500 });
  t.pass("held");
});
