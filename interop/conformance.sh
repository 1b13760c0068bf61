#!/usr/bin/env bash
# conformance.sh: runs interop/conformance.mjs under the pinned Node 22 after
# making sure interop/setup.sh has run. All arguments go to conformance.mjs:
#
#   interop/conformance.sh direct-go                      # Go SDK server, directly
#   interop/conformance.sh run --label x --url http://127.0.0.1:8080/mcp
#   interop/conformance.sh gateway-go [--upstream stateful|stateless|stdio] [--gateway-cmd CMD]
#   interop/conformance.sh compare .results/direct.json .results/gateway.json
#   interop/conformance.sh ci                             # all of the above, exit 1 on regressions
#   interop/conformance.sh tasks [--gateway-cmd CMD]      # tasks scenarios via the gateway over task-fixtures.mjs
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$here/setup.sh"
exec "$here/node_modules/node/bin/node" "$here/conformance.mjs" "$@"
