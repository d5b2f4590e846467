#!/usr/bin/env cwl-runner
# bwa mem on a read pair, read group ID and SM set to the sample name; SAM on stdout.
cwlVersion: v1.2
class: CommandLineTool
doc: Align paired-end reads with bwa mem.
baseCommand: [bwa, mem]
arguments:
  - prefix: -R
    valueFrom: "@RG\\tID:$(inputs.sample)\\tSM:$(inputs.sample)"
    position: 0
inputs:
  reference:
    type: File
    secondaryFiles: [.amb, .ann, .bwt, .pac, .sa]
    inputBinding: {position: 1}
  reads1:
    type: File
    inputBinding: {position: 2}
  reads2:
    type: File
    inputBinding: {position: 3}
  sample: string
stdout: $(inputs.sample).sam
outputs:
  sam:
    type: stdout
