/**
 * ANNOVAR: functional annotation of variants. Its licence forbids redistribution, so there
 * is no public image and no Debian package: the organization supplies its own image (set
 * by the operator's configuration) and the annotation database directory (`database`).
 */
import { z } from "zod";
import { BuildError, type Params, type ToolDefinition } from "./types.js";
import { Stager, commonParams, extraArgs, invocation, oneOf, optEnum, optStr, out, outputPath, program, stem } from "./params.js";

const COMMANDS = ["table_annovar", "convert2annovar", "annotate_variation"] as const;
const BUILDS = ["hg19", "hg38", "mm10", "mm39"] as const;
const PROTOCOL = /^[A-Za-z0-9_.,]+$|\$\{/;
/**
 * Annotation databases are directories the operator mounts under this root (a volume in
 * cluster mode); a step names one by its directory name, never by a path of the host.
 */
export const ANNOVAR_DB_ROOT = "/data/annovar";
const DATABASE = /^[A-Za-z0-9_][A-Za-z0-9_.-]*$|\$\{/;
const database = (p: Params): string => {
  const v = optStr(p, "database") as string;
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(v) || v.includes("..")) throw new BuildError("database", `database: ${JSON.stringify(v.slice(0, 200))} must be the name of a database directory under ${ANNOVAR_DB_ROOT}`);
  return `${ANNOVAR_DB_ROOT}/${v}`;
};

export const annovar: ToolDefinition = {
  id: "annovar",
  description: "ANNOVAR variant annotation (gene, region and filter annotations) from VCF or avinput files.",
  version: "2020-06-08",
  image: "operon.local/user-supplied/annovar:2020-06-08",
  imageNote: "ANNOVAR's licence forbids redistribution: build an image containing the ANNOVAR scripts on PATH and set it in the operator configuration; mount the annotation databases and pass the directory name below /data/annovar as `database` (e.g. `humandb` for /data/annovar/humandb).",
  localExecutables: ["table_annovar.pl", "convert2annovar.pl", "annotate_variation.pl"],
  fileParams: ["inputFile", "inputFile2", "reference"],
  inputSchema: z.strictObject({
    ...commonParams("annovar", COMMANDS),
    database: z.string().regex(DATABASE, "expected the name of a database directory mounted under " + ANNOVAR_DB_ROOT + " (letters, digits, _ . -)").optional(),
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
          input, database(p), "-buildver", build, "-out", prefix, "-remove",
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
          "-geneanno", "-dbtype", optStr(p, "protocol") ?? "refGene", "-buildver", build, "-out", prefix, ...extraArgs(p), input, database(p),
        ], s, [out(`${prefix}.variant_function`), out(`${prefix}.exonic_variant_function`)]);
      },
    },
  },
};
