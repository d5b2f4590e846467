#!/usr/bin/env bash
# Test dependencies that are not npm packages, built from their Go modules and cached outside
# the repository (docs/testing.md#test-dependencies). Nothing is downloaded from outside the package registries:
# `go` fetches every module through the Go module proxy.
#  - MinIO: a real S3 server that checks SigV4 signatures.
#  - etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kubectl, one release: a
#    real Kubernetes control plane for the operator tests (its Job controller creates the pods).
#    Skipped when KUBEBUILDER_ASSETS names a folder that has all five.
#  - kwok: simulated nodes for that control plane.
#  - helm 4 and helm 3: the chart's lint, template and install tests.
# Idempotent: does nothing for a binary already in the cache.
set -euo pipefail

# Pinned: the pseudo-version `go install github.com/minio/minio@latest` resolved on 2026-11-21.
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"
# Pinned Kubernetes release; its staging modules (k8s.io/api, …) are the matching v0.x.y, and
# etcd is the version that release's go.mod requires.
K8S_VERSION="v1.34.4"
ETCD_VERSION="v3.6.4"
# Pinned Helm (the chart tests: lint, template); `helm version` reports it through the ldflags.
HELM_VERSION="v4.3.1"
HELM3_VERSION="v3.19.0"
# Pinned kwok (sigs.k8s.io/kwok): its go.mod has no replace directives, so `go install` builds it.
KWOK_VERSION="v0.8.0"

CACHE_DIR="${OPERON_CACHE_DIR:-$HOME/.cache/operon}"
BIN_DIR="$CACHE_DIR/bin"
K8S_DIR="$CACHE_DIR/k8s-$K8S_VERSION"
HELM_DIR="$CACHE_DIR/helm-$HELM_VERSION"
HELM3_DIR="$CACHE_DIR/helm-$HELM3_VERSION"
KWOK_DIR="$CACHE_DIR/kwok-$KWOK_VERSION"

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    echo "test-deps: Go is required to build $1 for the tests (apt-get install golang-go, or https://go.dev/dl); then run: make test-deps" >&2
    exit 1
  fi
}

if [ ! -x "$BIN_DIR/minio" ]; then
  need_go MinIO
  mkdir -p "$BIN_DIR"
  echo "test-deps: building MinIO $MINIO_VERSION into $BIN_DIR/minio (takes a few minutes, once)"
  GOBIN="$BIN_DIR" go install "github.com/minio/minio@$MINIO_VERSION"
fi

K8S_BINARIES="etcd kube-apiserver kube-controller-manager kube-scheduler kubectl"
have_assets() { for b in $K8S_BINARIES; do [ -x "$1/$b" ] || return 1; done; }
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && have_assets "$KUBEBUILDER_ASSETS"; then
  :
elif ! have_assets "$K8S_DIR"; then
  need_go "Kubernetes $K8S_VERSION"
  missing=""; for b in $K8S_BINARIES; do [ -x "$K8S_DIR/$b" ] || missing="$missing $b"; done
  echo "test-deps: building$missing ($K8S_VERSION, etcd $ETCD_VERSION) into $K8S_DIR (about 15 minutes on 2 cores for all five, once)"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  staging="v0.${K8S_VERSION#v1.}"
  # k8s.io/kubernetes replaces its staging modules with ./staging/...; a module of our own
  # requires it and points the same replaces at the published staging modules.
  {
    echo "module operon.dev/k8s-test-binaries"
    echo
    echo "go 1.24.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    curl -fsSL "$(go env GOPROXY | cut -d, -f1)/k8s.io/kubernetes/@v/$K8S_VERSION.mod" \
      | sed -nE "s#^\s+(k8s.io/[a-z0-9-]+) => ./staging/src/.*#\t\1 => \1 $staging#p"
    echo ")"
  } > "$work/go.mod"
  (cd "$work" && go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >"$work/get.log" 2>&1) \
    || { cat "$work/get.log" >&2; exit 1; }
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
  done
  # Keep what is already built; build only the missing binaries, each into a temp name first.
  mkdir -p "$K8S_DIR"
  for b in $missing; do
    case "$b" in
      etcd) pkg=go.etcd.io/etcd/server/v3 ;;
      *) pkg="k8s.io/kubernetes/cmd/$b" ;;
    esac
    (cd "$work" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$K8S_DIR/.$b.tmp" "$pkg")
    mv "$K8S_DIR/.$b.tmp" "$K8S_DIR/$b"
  done
fi

# kwok: simulated nodes whose pods move through kwok's stages (the cluster tests' extra nodes).
if [ ! -x "$KWOK_DIR/kwok" ]; then
  need_go "kwok $KWOK_VERSION"
  echo "test-deps: building kwok $KWOK_VERSION into $KWOK_DIR (a few minutes, once)"
  mkdir -p "$KWOK_DIR.tmp"
  GOBIN="$KWOK_DIR.tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  rm -rf "$KWOK_DIR" && mv "$KWOK_DIR.tmp" "$KWOK_DIR"
fi

# Helm 3 as well as Helm 4: the chart must lint and template with both (users have both).
# Helm 3 takes the Kubernetes version it assumes without a cluster (`helm template`, `lint`)
# from ldflags, as its Makefile sets them from its client-go (v0.34 → 1.34); without them it
# assumes 1.20 and refuses the chart's kubeVersion. The stamp file marks a build that has them.
HELM3_KUBE_MINOR="34"
HELM3_STAMP="$HELM3_DIR/kube-1.$HELM3_KUBE_MINOR"
if [ ! -x "$HELM3_DIR/helm" ] || [ ! -e "$HELM3_STAMP" ]; then
  need_go "Helm $HELM3_VERSION"
  echo "test-deps: building helm $HELM3_VERSION into $HELM3_DIR (a few minutes, once)"
  mkdir -p "$HELM3_DIR.tmp"
  kube="-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$HELM3_KUBE_MINOR"
  kube="$kube -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$HELM3_KUBE_MINOR"
  GOBIN="$HELM3_DIR.tmp" CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM3_VERSION $kube" "helm.sh/helm/v3/cmd/helm@$HELM3_VERSION"
  touch "$HELM3_DIR.tmp/kube-1.$HELM3_KUBE_MINOR"
  rm -rf "$HELM3_DIR" && mv "$HELM3_DIR.tmp" "$HELM3_DIR"
fi

if [ ! -x "$HELM_DIR/helm" ]; then
  need_go "Helm $HELM_VERSION"
  echo "test-deps: building helm $HELM_VERSION into $HELM_DIR (a few minutes, once)"
  mkdir -p "$HELM_DIR.tmp"
  GOBIN="$HELM_DIR.tmp" CGO_ENABLED=0 go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
  rm -rf "$HELM_DIR" && mv "$HELM_DIR.tmp" "$HELM_DIR"
fi
