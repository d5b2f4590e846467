#!/usr/bin/env cwl-runner
# samtools flagstat of an indexed BAM; the counts on stdout.
cwlVersion: v1.2
class: CommandLineTool
doc: Count the alignments by SAM flag.
baseCommand: [samtools, flagstat]
inputs:
  bam:
    type: File
    secondaryFiles: [.bai]
    inputBinding: {position: 1}
stdout: $(inputs.bam.nameroot).flagstat.txt
outputs:
  flagstat:
    type: stdout
