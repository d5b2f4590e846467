#!/usr/bin/env cwl-runner
# The peers bench's pipeline for cwltool (bench/peers/laptop.bench.ts): the same five commands
# as Operon's built-in `bwa-align` pipeline and bench/peers/Snakefile, with the same arguments.
# Run: `cwltool --no-container --outdir OUT bwa-align.cwl job.yml` (job: reference, reads1,
# reads2, sample). --no-container: no Docker engine on the bench machine, so each tool is the
# machine's own (Debian's) bwa and samtools, as for Operon's embedded mode and Snakemake.
cwlVersion: v1.2
class: Workflow
doc: BWA-MEM paired-end alignment, sorted and indexed BAM, flagstat.
inputs:
  reference: File
  reads1: File
  reads2: File
  sample:
    type: string
    default: sample
outputs:
  bam:
    type: File
    outputSource: index_bam/indexed
  flagstat_txt:
    type: File
    outputSource: flagstat/flagstat
steps:
  index_reference:
    run: bwa-index.cwl
    in:
      reference: reference
    out: [indexed]
  align:
    run: bwa-mem.cwl
    in:
      reference: index_reference/indexed
      reads1: reads1
      reads2: reads2
      sample: sample
    out: [sam]
  sort:
    run: samtools-sort.cwl
    in:
      alignments: align/sam
    out: [sorted]
  index_bam:
    run: samtools-index.cwl
    in:
      bam: sort/sorted
    out: [indexed]
  flagstat:
    run: samtools-flagstat.cwl
    in:
      bam: index_bam/indexed
    out: [flagstat]
