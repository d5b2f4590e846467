#!/usr/bin/env bash
# The peer systems of the cluster comparison (bench/peers/cluster.bench.ts, issue 19), built from
# their Go modules and cached outside the repository like the test binaries (scripts/test-deps.sh).
# Only `make bench-peers` runs this: `make test` never needs a peer.
#  - Argo Workflows' workflow-controller, a pinned v3 release. Its go.mod has a replace directive,
#    which `go install pkg@version` refuses, so a module of our own requires it with the same
#    replace. The CRDs come from the same module (manifests/base/crds/minimal: what Argo's own
#    install manifest applies).
# Prints nothing when everything is already built. Idempotent.
set -euo pipefail

ARGO_VERSION="v3.7.9"

CACHE_DIR="${OPERON_CACHE_DIR:-$HOME/.cache/operon}"
ARGO_DIR="$CACHE_DIR/argo-workflows-$ARGO_VERSION"

if [ ! -x "$ARGO_DIR/workflow-controller" ] || [ ! -d "$ARGO_DIR/crds" ]; then
  command -v go >/dev/null || { echo "peers-deps: Go is required to build Argo Workflows $ARGO_VERSION" >&2; exit 1; }
  echo "peers-deps: building Argo Workflows' workflow-controller $ARGO_VERSION into $ARGO_DIR (about 10 minutes on 2 cores, once)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  mod="github.com/argoproj/argo-workflows/v3"
  # The replace directives of Argo's own go.mod, copied into the wrapper module.
  replaces="$(curl -fsSL "$(go env GOPROXY | cut -d, -f1)/$mod/@v/$ARGO_VERSION.mod" | sed -nE 's#^replace (.+)$#replace \1#p')"
  printf 'module operon.dev/argo-bench\n\ngo 1.24.10\n\nrequire %s %s\n\n%s\n' "$mod" "$ARGO_VERSION" "$replaces" > "$work/go.mod"
  (cd "$work" && go get "$mod/cmd/workflow-controller@$ARGO_VERSION" >"$work/get.log" 2>&1) || { cat "$work/get.log" >&2; exit 1; }
  mkdir -p "$ARGO_DIR.tmp/crds"
  (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $mod.version=$ARGO_VERSION" \
    -o "$ARGO_DIR.tmp/workflow-controller" "$mod/cmd/workflow-controller")
  src="$(cd "$work" && go list -m -f '{{.Dir}}' "$mod")"
  cp "$src"/manifests/base/crds/minimal/argoproj.io_*.yaml "$ARGO_DIR.tmp/crds/"
  chmod -R u+w "$ARGO_DIR.tmp"
  rm -rf "$ARGO_DIR" && mv "$ARGO_DIR.tmp" "$ARGO_DIR"
fi
