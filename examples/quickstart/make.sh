#!/usr/bin/env bash
# Regenerates this folder's reference and reads, byte for byte (see SOURCE.md).
# Usage: examples/quickstart/make.sh [lambda_virus.fa]
# The argument defaults to test/fixtures/viewers/lambda_virus.fa, the unchanged copy of
# Debian bowtie2-examples' lambda phage genome. Needs Debian's samtools (samtools, wgsim).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source_fa=$(realpath "${1:-$here/../../test/fixtures/viewers/lambda_virus.fa}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The reference: bases 1-5000 of NC_001416.1, 60 per line, under a short name.
cp "$source_fa" "$tmp/lambda.fa"
samtools faidx "$tmp/lambda.fa"
samtools faidx -n 60 "$tmp/lambda.fa" 'gi|9626243|ref|NC_001416.1|:1-5000' \
  | sed '1s/.*/>NC_001416.1_1-5000 Enterobacteria phage lambda, bases 1-5000 of RefSeq NC_001416.1/' \
  > "$here/ref.fa"

# 200 read pairs of 70 bases, fragments of 300 +/- 30, 1% sequencing errors, seed 27.
wgsim -S 27 -N 200 -1 70 -2 70 -d 300 -s 30 -e 0.01 -r 0.001 -R 0.15 \
  "$here/ref.fa" "$here/reads_R1.fastq" "$here/reads_R2.fastq" > "$tmp/wgsim.txt"
