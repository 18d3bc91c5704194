#!/usr/bin/env bash
# Install the real Toxiproxy server, pinned, into the project's tool folder.
#
# Usage: scripts/install_toxiproxy.sh [TOOLDIR]
#   TOOLDIR defaults to <repo root>/.faultload/tools.
# Idempotent: does nothing if TOOLDIR/toxiproxy-server already reports the pinned
# version. Builds from the Go module (no release download needed); GOPATH and
# GOCACHE stay at go's defaults (outside the repo); the build output goes to a
# temporary GOBIN and is moved into place only when complete.
# Env: GO=/path/to/go to choose the toolchain.
# Exit codes: 0 installed or already present, 2 go missing, 1 build failed.
set -euo pipefail

VERSION="2.12.0"
MODULE="github.com/Shopify/toxiproxy/v2"
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(cd "$script_dir/.." && pwd)"
tooldir="${1:-$repo_root/.faultload/tools}"
target="$tooldir/toxiproxy-server"

if [[ -x "$target" ]] && "$target" --version 2>/dev/null | grep -q "$VERSION"; then
  echo "toxiproxy-server $VERSION already at $target"
  exit 0
fi

# GO may name the go binary explicitly; else PATH, else the usual /usr/local/go.
GO="${GO:-$(command -v go || true)}"
if [[ -z "$GO" && -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go; fi
if [[ -z "$GO" || ! -x "$GO" ]]; then
  echo "install_toxiproxy: 'go' not found; install Go (https://go.dev/dl/) or put a toxiproxy-server $VERSION binary (release or ghcr.io/shopify/toxiproxy:$VERSION image) at $target" >&2
  exit 2
fi

mkdir -p "$tooldir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "building toxiproxy-server $VERSION with $("$GO" version) ..."
GOBIN="$tmp" GOFLAGS="${GOFLAGS:-} -buildvcs=false" "$GO" install \
  -ldflags "-X $MODULE.Version=$VERSION" "$MODULE/cmd/server@v$VERSION"
mv -f "$tmp/server" "$target.partial"
mv -f "$target.partial" "$target"
"$target" --version
echo "installed $target"
