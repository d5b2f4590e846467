# Operon — the two set-up commands are `make run` and `make test`; both install what they need.
SHELL := /bin/bash
NPM_STAMP := node_modules/.install-stamp

.PHONY: install build lint typecheck test run bench clean check-node

check-node:
	@command -v node >/dev/null || { echo "Node.js 20 or newer is required (apt-get install nodejs, or nodesource)"; exit 1; }
	@node -e 'const [M]=process.versions.node.split(".").map(Number); if (M < 20) { console.error("Node.js >= 20 required, found " + process.versions.node); process.exit(1) }'

$(NPM_STAMP): package.json package-lock.json | check-node
	npm ci --no-fund --no-audit
	@touch $(NPM_STAMP)

install: $(NPM_STAMP)

build: install
	npx tsc -p tsconfig.build.json
	@chmod +x dist/cli/main.js

lint: install
	npx eslint --max-warnings=0 .

typecheck: install
	npx tsc -p tsconfig.json

# Lint, type check and every tap test; ends with `N passed, N failed[, N skipped]`.
test: install
	node scripts/test.mjs

# Until the api-server lands, `make run` builds Operon and shows the CLI.
run: build
	@node dist/cli/main.js --help

bench: install
	npx tsx bench/validate.bench.ts

clean:
	rm -rf dist .tap node_modules
