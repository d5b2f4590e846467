#!/usr/bin/env bash
# Test dependencies that are not npm packages: a real S3 server (MinIO) that checks SigV4
# signatures, built from its Go module and cached (DESIGN §10). Nothing is downloaded from
# outside the package registries: `go install` fetches the module through the Go proxy.
# Idempotent: does nothing when the binary is already in the cache.
set -euo pipefail

# Pinned: the pseudo-version `go install github.com/minio/minio@latest` resolved on 2026-11-21.
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"

CACHE_DIR="${OPERON_CACHE_DIR:-$HOME/.cache/operon}"
BIN_DIR="$CACHE_DIR/bin"
MINIO_BIN="$BIN_DIR/minio"

if [ -x "$MINIO_BIN" ]; then
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "test-deps: Go is required to build MinIO for the S3 tests (apt-get install golang-go, or https://go.dev/dl); then run: make test-deps" >&2
  exit 1
fi

mkdir -p "$BIN_DIR"
echo "test-deps: building MinIO $MINIO_VERSION into $MINIO_BIN (takes a few minutes, once)"
GOBIN="$BIN_DIR" go install "github.com/minio/minio@$MINIO_VERSION"
