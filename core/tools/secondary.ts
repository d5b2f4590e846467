/**
 * Secondary files (docs/pipelines.md#step-parameters): the index files that sit beside a primary file and travel
 * with it whenever the primary is staged into a step, from the workspace or an earlier step.
 */

const BY_SUFFIX: ReadonlyArray<[RegExp, readonly string[]]> = [
  [/\.bam$/i, [".bai", ".csi"]],
  [/\.cram$/i, [".crai"]],
  [/\.(vcf|bed|gff|gff3|gtf|bedgraph|txt|tsv|sam)\.gz$/i, [".tbi", ".csi"]],
  // GATK IndexFeatureFile on an uncompressed feature file
  [/\.(vcf|bed)$/i, [".idx"]],
  [/\.bcf$/i, [".csi"]],
  [/\.(fa|fasta|fna)(\.gz)?$/i, [
    ".fai", ".gzi",
    // bwa index
    ".amb", ".ann", ".bwt", ".pac", ".sa",
    // bowtie2-build and hisat2-build, with the reference path as the index prefix
    ".1.bt2", ".2.bt2", ".3.bt2", ".4.bt2", ".rev.1.bt2", ".rev.2.bt2",
    ".1.ht2", ".2.ht2", ".3.ht2", ".4.ht2", ".5.ht2", ".6.ht2", ".7.ht2", ".8.ht2",
    // minimap2 -d
    ".mmi",
  ]],
];

/**
 * Paths of the secondary files that may accompany `path` (they may or may not exist; the
 * stager brings those that do). `ref.fa` also brings `ref.dict` (Picard/GATK naming), and
 * `x.bam` also brings `x.bai` (the samtools `-o x.bai` / Picard naming).
 */
export function secondaryCandidates(path: string): string[] {
  const out: string[] = [];
  for (const [re, suffixes] of BY_SUFFIX) {
    if (!re.test(path)) continue;
    for (const s of suffixes) out.push(path + s);
    const m = /\.(fa|fasta|fna)(\.gz)?$/i.exec(path);
    if (m) out.push(path.slice(0, m.index) + ".dict");
    if (/\.bam$/i.test(path)) out.push(path.slice(0, -4) + ".bai");
    if (/\.cram$/i.test(path)) out.push(path.slice(0, -5) + ".crai");
  }
  return out;
}
