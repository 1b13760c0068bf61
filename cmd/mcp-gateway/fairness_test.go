package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// TestOneIdentityCannotStarveAnother: through one gateway with API keys,
// one identity's slow calls time out, one floods the session table and
// one floods requests, while another identity's session, calls and
// tools are untouched: the breaker stays closed (the upstream kept
// answering), the flood displaces only the flooder's sessions, and the
// request flood gets 429 with Retry-After.
func TestOneIdentityCannotStarveAnother(t *testing.T) {
	up := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	src := fmt.Sprintf(`
auth: {mode: api_key}
limits:
  max_sessions: 40
teams:
  - name: slow
    api_keys: [key-slow]
  - name: rated
    api_keys: [key-rated]
    limits: {per_identity: {rate: 5/s, burst: 5}}
  - name: good
    api_keys: [key-good]
upstreams:
  - name: up
    url: %s
    timeout: 1s
`, up.URL)
	cfg, err := config.Parse([]byte(src), "yaml", "", &config.LoadOptions{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	endpoint, g := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "good", Version: "1"}, nil)
	good, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{"key-good", http.DefaultTransport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	goodCall := func(what string) {
		t.Helper()
		if got, err := callText(ctx, good, "up__echo", map[string]any{"text": what}); err != nil || got != what {
			t.Errorf("the good identity's call %s: %q, %v", what, got, err)
		}
	}
	goodCall("before")

	// Slow calls of one identity time out while the upstream answers
	// another's: no evidence against the upstream.
	slowClient := mcp.NewClient(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	slow, err := slowClient.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearer{"key-slow", http.DefaultTransport}}},
		&mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			res, err := slow.CallTool(ctx, &mcp.CallToolParams{Name: "up__block", Arguments: map[string]any{"key": fmt.Sprint("k", i)}})
			if err != nil || !res.IsError {
				t.Errorf("a slow call: %v %+v, want an isError result at its timeout", err, res)
			}
		})
	}
	for i := 0; ; i++ {
		goodCall(fmt.Sprint("during ", i))
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(50 * time.Millisecond): // pace the good host's calls; not a timing claim
			continue
		}
		break
	}
	if s := statusOf(g, "up"); s.State != router.PhaseReady {
		t.Errorf("after one identity's slow calls the upstream is %s (%s), want ready", s.State, s.Error)
	}
	tools, err := good.ListTools(ctx, nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tl *mcp.Tool) bool { return tl.Name == "up__echo" }) {
		t.Errorf("the good identity's tools after another's slow calls: %v, %v", tools, err)
	}

	// A session flood of one identity, past max_sessions.
	for i := range 100 {
		code, _, _ := postRaw(ctx, t, endpoint, map[string]string{"Authorization": "Bearer key-slow", "MCP-Protocol-Version": "2025-11-25"},
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}`)
		if code != http.StatusOK {
			t.Fatalf("initialize %d of the flood: HTTP %d", i, code)
		}
	}
	goodCall("after the session flood")

	// A request flood of a rate-limited identity.
	limited := 0
	for range 30 {
		code, h, m := postRaw(ctx, t, endpoint, map[string]string{"Authorization": "Bearer key-rated", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
			`{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
		if code == http.StatusTooManyRequests {
			limited++
			if h.Get("Retry-After") == "" || m.Error == nil {
				t.Errorf("a 429 without Retry-After or an error: %v %+v", h, m)
			}
		}
	}
	if limited == 0 {
		t.Error("30 requests at once past a rate of 5/s: none refused")
	}
	goodCall("after the request flood")
}
