#!/usr/bin/env cwl-runner
# samtools index: the BAM is staged into the working directory so the .bai is written beside
# it; the output is the BAM with its .bai as a secondary file.
cwlVersion: v1.2
class: CommandLineTool
doc: Index a coordinate-sorted BAM.
baseCommand: [samtools, index]
requirements:
  InitialWorkDirRequirement:
    listing:
      - $(inputs.bam)
inputs:
  bam:
    type: File
    inputBinding:
      position: 1
      valueFrom: $(self.basename)
outputs:
  indexed:
    type: File
    outputBinding:
      glob: $(inputs.bam.basename)
    secondaryFiles: [.bai]
