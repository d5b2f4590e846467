# Operon — the two set-up commands are `make run` and `make test`; both install what they need.
SHELL := /bin/bash
NPM_STAMP := node_modules/.install-stamp

# Node.js 24 LTS for every target: the machine's own when new enough, else a pinned Node 24
# fetched once from the npm registry into ~/.cache/operon (scripts/node.sh).
NODE_BIN := $(shell bash scripts/node.sh)
ifeq ($(NODE_BIN),)
$(error could not provide Node.js 24: see the message above, or install Node.js 24 or newer)
endif
export PATH := $(NODE_BIN):$(PATH)

.PHONY: deps-gate install build lint typecheck test test-deps run bench bench-sandbox bench-viewers bench-charts bench-uploads clean check-node debian-tools crds chart-docs

# Debian's bioinformatics tools: the catalogue's local runtime in embedded mode and the tests,
# bubblewrap, the sandbox every embedded step runs in, and promtool (package prometheus), which checks both /metrics in the tests. Installed only when one is missing; needs root (or sudo) and apt-get.
DEBIAN_TOOLS := samtools bcftools tabix bwa bowtie2 hisat2 bedtools fastqc trimmomatic picard-tools minimap2 bubblewrap prometheus chromium fonts-dejavu-core
TOOL_BINARIES := bwrap samtools bcftools tabix bgzip bwa bowtie2 bowtie2-build hisat2 hisat2-build bedtools fastqc TrimmomaticPE TrimmomaticSE PicardCommandLine minimap2 wgsim promtool chromium

check-node:
	@node -e 'const [M]=process.versions.node.split(".").map(Number); if (M < 24) { console.error("Node.js >= 24 required, found " + process.versions.node); process.exit(1) }'

$(NPM_STAMP): package.json package-lock.json | check-node
	npm ci --no-fund --no-audit
	@touch $(NPM_STAMP)

install: $(NPM_STAMP)

debian-tools:
	@missing=""; for b in $(TOOL_BINARIES); do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages (missing:$$missing)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $(DEBIAN_TOOLS) >/dev/null; \
	fi

# The PipelineRun CRD, generated from the zod schemas in core/kubernetes/pipelinerun.ts (a test fails when stale).
crds: install
	npx tsx scripts/gen-crds.ts

# The Helm chart's values reference (charts/operon/README.md), generated from values.schema.json.
chart-docs: install
	npx tsx scripts/gen-values-doc.ts

# Test servers built from Go modules and cached (docs/testing.md#test-dependencies): MinIO for the S3 adapter tests,
# etcd + kube-apiserver + kubectl for the operator tests.
test-deps:
	@bash scripts/test-deps.sh

# dist/ is rebuilt only when a source changed (`./operon` calls this before each command).
SOURCES := $(shell find core plots engine media services wiring adapters assistant operator api-server cli -name '*.ts' 2>/dev/null) tsconfig.json tsconfig.build.json
dist/.build-stamp: $(NPM_STAMP) $(SOURCES)
	npx tsc -p tsconfig.build.json
	@chmod +x dist/cli/main.js
	@touch $@

build: dist/.build-stamp

lint: install
	npx eslint --max-warnings=0 .

typecheck: install
	npx tsc -p tsconfig.json

# The installed tree must match package.json and the lock file (invalid, missing or extraneous
# packages fail here in one line, before the long installs): docs/development.md#dependencies.
deps-gate: install
	@node scripts/check-deps.mjs

# Lint, type check and every tap test; ends with `N passed, N failed[, N skipped]`.
test: deps-gate debian-tools test-deps
	node scripts/test.mjs

# Embedded Operon: one process, filesystem storage under ./.operon (OPERON_DATA_DIR), steps
# run as local processes with Debian's tools. The first start creates organization
# "default", workspace "default" and an API key.
run: build debian-tools
	@node dist/cli/main.js serve

bench: build
	npx tsx bench/validate.bench.ts
	npx tsx bench/api.bench.ts
	npx tsx bench/engine.bench.ts
	npx tsx bench/cluster.bench.ts
	npx tsx bench/sandbox.bench.ts
	npx tsx bench/viewers.bench.ts
	npx tsx bench/mcp.bench.ts
	npx tsx bench/agent.bench.ts

# The step sandbox's cost and mounted against copied inputs (bench/RESULTS.md, section "sandbox").
bench-sandbox: build debian-tools
	npx tsx bench/sandbox.bench.ts

bench-viewers: build debian-tools
	npx tsx bench/viewers.bench.ts

# A 6 GiB upload by `./operon files upload` against Debian's `aws s3 cp` (to MinIO) and `cp` (to
# the same disk), and the api-server's RSS meanwhile (issue 30; bench/RESULTS.md, section
# "uploads"). Installs Debian's awscli when missing.
bench-uploads: build test-deps
	@test -x /usr/bin/aws || { \
	  echo "installing Debian packages: awscli"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends awscli >/dev/null; }
	npx tsx bench/upload.bench.ts

# Chart rendering (volcano 20,000 genes, Manhattan 1,000,000 SNPs, clustered heatmap 1,000 × 50)
# against Debian's matplotlib drawing the same points in the same run (bench/RESULTS.md, section
# "charts"). Installs python3-matplotlib, python3-scipy and python3-pandas when missing.
CHART_BENCH_PACKAGES := python3-matplotlib python3-scipy python3-pandas fonts-dejavu-core
bench-charts: install
	@dpkg -s $(CHART_BENCH_PACKAGES) >/dev/null 2>&1 || { \
	  echo "installing Debian packages: $(CHART_BENCH_PACKAGES)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $(CHART_BENCH_PACKAGES) >/dev/null; }
	npx tsx bench/charts.bench.ts

# Operon next to the systems users would pick instead (issue 19; bench/RESULTS.md, sections
# "peers-laptop" and "peers-cluster", and README's "Performance"). Laptop: the built-in bwa-align
# pipeline against the same commands as bench/peers/Snakefile and bench/peers/cwl/ under Debian's
# snakemake and cwltool, installed here when missing. Cluster: the operator against Argo
# Workflows' and Tekton Pipelines' controllers (built once from their Go modules by
# bench/peers/peers-deps.sh, cached outside the repository, never by `make test`) on the test
# control plane.
.PHONY: bench-peers
PEERS_LAPTOP_PACKAGES := snakemake cwltool
bench-peers: build debian-tools test-deps
	@bash bench/peers/peers-deps.sh
	@command -v snakemake >/dev/null && command -v cwltool >/dev/null || { \
	  echo "installing Debian packages: $(PEERS_LAPTOP_PACKAGES)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $(PEERS_LAPTOP_PACKAGES) >/dev/null; }
	npx tsx bench/peers/laptop.bench.ts
	npx tsx bench/peers/cluster.bench.ts

clean:
	rm -rf dist .tap node_modules
