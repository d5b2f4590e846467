#!/usr/bin/env cwl-runner
# bwa index: the reference is staged writable (a copy) so its index files are written beside it,
# and the output is the reference with .amb .ann .bwt .pac .sa as secondary files.
cwlVersion: v1.2
class: CommandLineTool
doc: Build the bwa FM-index of a reference FASTA.
baseCommand: [bwa, index]
requirements:
  InitialWorkDirRequirement:
    listing:
      - entry: $(inputs.reference)
        writable: true
inputs:
  reference:
    type: File
    inputBinding:
      position: 1
      valueFrom: $(self.basename)
outputs:
  indexed:
    type: File
    outputBinding:
      glob: $(inputs.reference.basename)
    secondaryFiles: [.amb, .ann, .bwt, .pac, .sa]
