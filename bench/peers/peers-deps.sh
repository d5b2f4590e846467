#!/usr/bin/env bash
# The peer systems of the cluster comparison (bench/peers/cluster.bench.ts, issue 19), built from
# their Go modules and cached outside the repository like the test binaries (scripts/test-deps.sh).
# Only `make bench-peers` runs this: `make test` never needs a peer.
#  - Argo Workflows' workflow-controller, a pinned v3 release. Its go.mod has a replace directive,
#    which `go install pkg@version` refuses, so a module of our own requires it with the same
#    replace. The CRDs come from the same module (manifests/base/crds/minimal: what Argo's own
#    install manifest applies).
#  - Tekton Pipelines' controller (cmd/controller), a pinned release, the same way (its CRDs from
#    config/300-crds; bench/peers/tekton.ts drops their conversion webhooks when it installs them:
#    no webhook runs here, nor anything else of Tekton).
# Prints nothing when everything is already built. Idempotent.
set -euo pipefail

ARGO_VERSION="v3.7.9"
# The newest Tekton release whose module zip the proxy serves (v1.16.0's it refuses).
TEKTON_VERSION="v1.15.0"

CACHE_DIR="${OPERON_CACHE_DIR:-$HOME/.cache/operon}"
ARGO_DIR="$CACHE_DIR/argo-workflows-$ARGO_VERSION"
TEKTON_DIR="$CACHE_DIR/tekton-pipeline-$TEKTON_VERSION"

# build_peer NAME MODULE VERSION PACKAGE BINARY DIR CRD_GLOB [LDFLAGS]: builds MODULE's PACKAGE at
# VERSION into DIR/BINARY and copies the module's CRDs (CRD_GLOB, relative to the module) into
# DIR/crds. A wrapper module requires MODULE with the go and replace directives of its go.mod.
build_peer() {
  local name="$1" mod="$2" version="$3" pkg="$4" bin="$5" dir="$6" crds="$7" ldflags="${8:-}"
  [ -x "$dir/$bin" ] && [ -d "$dir/crds" ] && return 0
  command -v go >/dev/null || { echo "peers-deps: Go is required to build $name $version" >&2; exit 1; }
  echo "peers-deps: building $name $version into $dir (about 10 minutes on 2 cores, once)"
  local work gomod goversion replaces src
  work="$(mktemp -d)"
  gomod="$(curl -fsSL "$(go env GOPROXY | cut -d, -f1)/$mod/@v/$version.mod")"
  goversion="$(printf '%s\n' "$gomod" | sed -nE 's#^go ([0-9.]+)$#\1#p')"
  replaces="$(printf '%s\n' "$gomod" | sed -nE 's#^replace (.+)$#replace \1#p')"
  printf 'module operon.dev/peer-bench\n\ngo %s\n\nrequire %s %s\n\n%s\n' "${goversion:-1.24}" "$mod" "$version" "$replaces" > "$work/go.mod"
  (cd "$work" && go get "$mod/$pkg@$version" >"$work/get.log" 2>&1) || { cat "$work/get.log" >&2; rm -rf "$work"; exit 1; }
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/crds"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$dir.tmp/$bin" "$mod/$pkg")
  src="$(cd "$work" && go list -m -f '{{.Dir}}' "$mod")"
  # shellcheck disable=SC2086 # the glob is meant to expand
  cp "$src"/$crds "$dir.tmp/crds/"
  chmod -R u+w "$dir.tmp"
  rm -rf "$dir" "$work" && mv "$dir.tmp" "$dir"
}

build_peer "Argo Workflows' workflow-controller" github.com/argoproj/argo-workflows/v3 "$ARGO_VERSION" cmd/workflow-controller workflow-controller \
  "$ARGO_DIR" "manifests/base/crds/minimal/argoproj.io_*.yaml" "-X github.com/argoproj/argo-workflows/v3.version=$ARGO_VERSION"
build_peer "Tekton Pipelines' controller" github.com/tektoncd/pipeline "$TEKTON_VERSION" cmd/controller controller \
  "$TEKTON_DIR" "config/300-crds/*.yaml"
