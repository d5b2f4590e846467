#!/usr/bin/env cwl-runner
# samtools sort by coordinate into BAM.
cwlVersion: v1.2
class: CommandLineTool
doc: Sort alignments by coordinate.
baseCommand: [samtools, sort]
arguments:
  - prefix: -o
    valueFrom: $(inputs.alignments.nameroot).sorted.bam
    position: 0
inputs:
  alignments:
    type: File
    inputBinding: {position: 1}
outputs:
  sorted:
    type: File
    outputBinding:
      glob: $(inputs.alignments.nameroot).sorted.bam
