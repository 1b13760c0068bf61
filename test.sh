#!/usr/bin/env bash
# The whole test suite. On a fresh machine it first installs the pinned npm
# test peers (reference servers, TypeScript SDK, conformance suites, Node 22)
# into interop/node_modules and builds the Go SDK's conformance server.
#
#   1. go vet
#   2. go test -race ./... (unit, end-to-end and interop tests), and the same
#      for interop/idp, the test OpenID Provider's own module, and
#      tools/image, which builds the container image and runs it, and
#      tools/helm, which lints and renders the Helm chart (charts/mcp-gateway)
#      and checks the manifests and the gateway.yaml it writes, and
#      tools/console, the operator console's browser tests in headless
#      Chromium (/usr/bin/chromium), whose screenshots are kept under
#      $ARTIFACTS (default artifacts/); the replica tests
#      (cmd/mcp-gateway/replicas_test.go) and internal/state's tests need
#      redis-server and haproxy, which .ci/run installs with chromium
#   3. search recall with the held-out half's floors (RECALL_HELDOUT=1), and
#      the differential fuzz target of the strict decoder, for 30 s
#   4. the interop harness's own tests
#   5. the conformance suites against the Go SDK conformance server directly
#      and through the gateway, once with a legacy upstream session and once
#      with a modern (stateless) upstream: any scenario that passes directly
#      but not through the gateway fails the run, except the live-traffic
#      scenarios listed in interop/live-traffic.txt; and once with an upstream
#      of each host's own era (matched), where nothing is excluded. The
#      gateway's config has no relay key: the defaults must pass.
#   6. the tasks-extension scenarios of conformance 0.2.x through the gateway
#      over a legacy (2025-11-25) task server, interop/task-fixtures.mjs, whose
#      task tools say taskSupport required, then optional: any failing check
#      fails the run, except those in interop/tasks-exclusions.txt
set -euo pipefail
cd "$(dirname "$0")"
# Files the tests keep (go test -artifacts): the console's screenshots.
ARTIFACTS="${ARTIFACTS:-$PWD/artifacts}"

echo "== setup: npm test peers, the Go SDK conformance server and the test IdP"
interop/setup.sh

echo "== go vet"
go vet ./...

echo "== go test -race"
# Tests that need the npm peers fail rather than skip.
MCP_GATEWAY_TEST_PEERS=require go test -race -count=1 ./...

echo "== go test: the test OpenID Provider (interop/idp, its own module)"
(cd interop/idp && GOWORK=off go vet ./... && GOWORK=off go test -race -count=1 ./...)

echo "== go test: the container image (tools/image, its own module)"
(cd tools/image && GOWORK=off go vet ./... && GOWORK=off go test -race -count=1 ./...)

echo "== go test: the Helm chart (tools/helm, its own module)"
(cd tools/helm && GOWORK=off go vet ./... && GOWORK=off go test -race -count=1 ./...)

echo "== go test: the operator console in headless Chromium (tools/console, its own module)"
mkdir -p "$ARTIFACTS"
(cd tools/console && GOWORK=off go vet ./... && MCP_GATEWAY_TEST_PEERS=require GOWORK=off go test -race -count=1 -artifacts -outputdir "$ARTIFACTS" ./...)

echo "== search recall: the held-out half's floors too (docs/context.md)"
RECALL_HELDOUT=1 go test ./internal/search -run '^TestRecall$' -count=1

echo "== fuzz: the strict decoder against encoding/json and a last-member-wins parser"
go test ./internal/jsonrpc -run '^$' -fuzz '^FuzzDecodeRequestDifferential$' -fuzztime 30s

echo "== interop harness tests"
interop/node_modules/node/bin/node --test interop/*.test.mjs

echo "== conformance: direct vs through the gateway"
mkdir -p bin
go build -o bin/mcp-gateway ./cmd/mcp-gateway
interop/conformance.sh ci --gateway-cmd bin/mcp-gateway --upstream stateful --work interop/.results/legacy-upstream
interop/conformance.sh ci --gateway-cmd bin/mcp-gateway --upstream stateless --work interop/.results/modern-upstream
interop/conformance.sh ci --gateway-cmd bin/mcp-gateway --upstream matched --work interop/.results/matched-upstream
echo "== conformance: the tasks scenarios through the gateway over a legacy task server"
interop/conformance.sh tasks --gateway-cmd bin/mcp-gateway --work interop/.results/tasks
interop/conformance.sh tasks --gateway-cmd bin/mcp-gateway --task-support optional --work interop/.results/tasks-optional
echo "== all tests passed"
