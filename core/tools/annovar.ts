/**
 * ANNOVAR: functional annotation of variants. Its licence forbids redistribution, so there
 * is no public image and no Debian package: the organization supplies its own image (set
 * by the operator's configuration) and the annotation databases, on a reference volume.
 */
import { z } from "zod";
import { hasReferences } from "../interpolate.js";
import { isReferenceUri, parseReferenceUri } from "../paths.js";
import { ANNOVAR_VOLUME, REFERENCE_ROOT } from "../references.js";
import { BuildError, type Params, type ToolDefinition } from "./types.js";
import { Stager, commonParams, extraArgs, invocation, oneOf, optEnum, optStr, out, outputPath, podResources, program, stem } from "./params.js";

const COMMANDS = ["table_annovar", "convert2annovar", "annotate_variation"] as const;
const BUILDS = ["hg19", "hg38", "mm10", "mm39"] as const;
const PROTOCOL = /^[A-Za-z0-9_.,]+$|\$\{/;
/**
 * Annotation databases are directories on a read-only reference volume: `database` names one
 * as `ref://<volume>/<dir>`, or by its bare name on the volume `annovar` (`humandb` is
 * `ref://annovar/humandb`, read at /ref/annovar/humandb) — never by a path of the host.
 */
const DATABASE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$/;
const DATABASE_HINT = `expected a database directory: ref://<volume>/<dir>, or the name of one on the "${ANNOVAR_VOLUME}" reference volume (letters, digits, _ . -), e.g. humandb for ${REFERENCE_ROOT}/${ANNOVAR_VOLUME}/humandb`;
const databaseSchema = () => z.string().min(1).superRefine((v, ctx) => {
  if (v.includes("${") && hasReferences(v)) return;
  if (isReferenceUri(v)) {
    const r = parseReferenceUri(v);
    if (!r.ok) ctx.addIssue({ code: "custom", message: r.reason });
  } else if (!DATABASE_NAME.test(v)) ctx.addIssue({ code: "custom", message: DATABASE_HINT });
});
/** The database directory as the tool reads it, recorded with the step's references. */
const database = (p: Params, s: Stager): string => {
  const v = optStr(p, "database") as string;
  if (!isReferenceUri(v) && !DATABASE_NAME.test(v)) throw new BuildError("database", `database: ${JSON.stringify(v.slice(0, 200))}: ${DATABASE_HINT}`);
  return s.reference("database", isReferenceUri(v) ? v : `ref://${ANNOVAR_VOLUME}/${v}`);
};

export const annovar: ToolDefinition = {
  id: "annovar",
  description: "ANNOVAR variant annotation (gene, region and filter annotations) from VCF or avinput files.",
  version: "2020-06-08",
  image: "operon.local/user-supplied/annovar:2020-06-08",
  imageNote: "ANNOVAR's licence forbids redistribution: build an image with the ANNOVAR scripts on PATH and name it in the step-pod configuration — `steps.tools.annovar.image` in the Helm chart's values, `tools.annovar.image` in the file OPERON_STEP_POD_CONFIG names; until then cluster mode refuses ANNOVAR steps. The annotation databases are read from a reference volume: `database` is `ref://<volume>/<dir>`, or a directory name on the volume `annovar` (e.g. `humandb` for /ref/annovar/humandb).",
  userSuppliedImage: true,
  // table_annovar reads whole annotation tables into memory.
  resources: podResources("1", "4Gi", "8Gi", "20Gi"),
  // Not installed here: ANNOVAR's scripts open their input as text (its documentation shows
  // uncompressed VCF and avinput only), so a compressed input is refused rather than misread.
  reads: { inputFile: "plain", inputFile2: "plain" },
  localExecutables: ["table_annovar.pl", "convert2annovar.pl", "annotate_variation.pl"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({
    ...commonParams("annovar", COMMANDS),
    database: databaseSchema().optional(),
    buildver: oneOf(BUILDS).optional(),
    protocol: z.string().regex(PROTOCOL, "expected comma-separated database names such as refGene,gnomad_exome").optional(),
    operation: z.string().regex(/^[gfr](,[gfr])*$|\$\{/, "expected comma-separated operations g, r or f").optional(),
    inputFormat: oneOf(["vcf4", "avinput"]).optional(),
  }),
  commands: {
    table_annovar: {
      description: "Annotate with several databases at once; outputs by position: the multianno table, the multianno VCF (for VCF input).",
      required: ["inputFile", "database", "protocol", "operation"],
      build(p, ctx) {
        const s = new Stager(p);
        const input = s.file("inputFile");
        const build = optEnum(p, "buildver", BUILDS) ?? "hg38";
        const prefix = outputPath(p, "outputFile", stem(input)).replace(/\.hg\d+_multianno\.txt$/, "");
        const vcf = (optEnum(p, "inputFormat", ["vcf4", "avinput"]) ?? (/\.vcf(\.gz)?$/i.test(input) ? "vcf4" : "avinput")) === "vcf4";
        return invocation(program(ctx, ["table_annovar.pl"]), [
          input, database(p, s), "-buildver", build, "-out", prefix, "-remove",
          "-protocol", optStr(p, "protocol") as string, "-operation", optStr(p, "operation") as string, "-nastring", ".",
          ...(vcf ? ["-vcfinput"] : []), ...extraArgs(p),
        ], s, [out(`${prefix}.${build}_multianno.txt`), ...(vcf ? [out(`${prefix}.${build}_multianno.vcf`)] : [])]);
      },
    },
    convert2annovar: {
      description: "Convert a VCF to ANNOVAR's avinput format.",
      required: ["inputFile"],
      build(p, ctx) {
        const s = new Stager(p);
        const input = s.file("inputFile");
        const o = outputPath(p, "outputFile", `${stem(input)}.avinput`);
        return invocation(program(ctx, ["convert2annovar.pl"]), ["-format", "vcf4", ...extraArgs(p), input, "-outfile", o], s, [out(o)]);
      },
    },
    annotate_variation: {
      description: "Gene-based annotation of an avinput file against one database (protocol, default refGene).",
      required: ["inputFile", "database"],
      build(p, ctx) {
        const s = new Stager(p);
        const input = s.file("inputFile");
        const build = optEnum(p, "buildver", BUILDS) ?? "hg38";
        const prefix = outputPath(p, "outputFile", stem(input));
        return invocation(program(ctx, ["annotate_variation.pl"]), [
          "-geneanno", "-dbtype", optStr(p, "protocol") ?? "refGene", "-buildver", build, "-out", prefix, ...extraArgs(p), input, database(p, s),
        ], s, [out(`${prefix}.variant_function`), out(`${prefix}.exonic_variant_function`)]);
      },
    },
  },
};
