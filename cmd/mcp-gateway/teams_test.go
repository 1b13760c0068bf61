package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// bearerTransport adds an API key to every request.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.key != "" {
		r.Header.Set("Authorization", "Bearer "+b.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connectAs(t *testing.T, url, era, key string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "team-host", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{key}}},
		&mcp.ClientSessionOptions{ProtocolVersion: era})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// TestTeamsEndToEnd: two teams with their own API keys and three
// upstreams; each team lists exactly its tools in both eras, hidden tools
// are unknown however they are named, and the upstream that owns them
// never sees a call.
func TestTeamsEndToEnd(t *testing.T) {
	var adminCalls atomic.Int64
	admin := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Stateless: true, Inspect: func(r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			adminCalls.Add(1)
		}
	}})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{
		stdioUpstream("alpha", "echo", nil),
		stdioUpstream("beta", "echo-legacy", nil),
		httpUpstream("admin", admin.URL),
	}
	cfg.Auth.Mode = config.AuthAPIKey
	cfg.Teams = []config.Team{
		{Name: "data", APIKeys: []string{"data-team-key-0123456789"}, Allow: []string{"alpha__*"}, Deny: []string{"alpha__exit"}},
		{Name: "ops", APIKeys: []string{"ops-team-key-0123456789"}, Allow: []string{"beta__echo", "admin__*"}},
	}
	url, _ := startGateway(t, cfg)

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// No key and a wrong key cannot connect at all.
			for _, key := range []string{"", "not-a-key"} {
				if _, err := connectAs(t, url, era, key); err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
					t.Errorf("connecting with key %q: err = %v, want 401 Unauthorized", key, err)
				}
			}
			data, err := connectAs(t, url, era, "data-team-key-0123456789")
			if err != nil {
				t.Fatal(err)
			}
			ops, err := connectAs(t, url, era, "ops-team-key-0123456789")
			if err != nil {
				t.Fatal(err)
			}
			names := func(cs *mcp.ClientSession) []string {
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, tool := range res.Tools {
					out = append(out, tool.Name)
				}
				return out
			}
			dataTools, opsTools := names(data), names(ops)
			for _, n := range dataTools {
				if !strings.HasPrefix(n, "alpha__") || n == "alpha__exit" {
					t.Errorf("data sees %s", n)
				}
			}
			if !slices.Contains(dataTools, "alpha__echo") {
				t.Errorf("data lacks alpha__echo: %v", dataTools)
			}
			if !slices.Contains(opsTools, "beta__echo") || !slices.Contains(opsTools, "admin__echo") || slices.ContainsFunc(opsTools, func(n string) bool { return strings.HasPrefix(n, "alpha__") }) {
				t.Errorf("ops sees %v", opsTools)
			}
			// data cannot reach admin's tools: not by exposed name, not by
			// the original name, not by a guessed prefix.
			before := adminCalls.Load()
			for _, name := range []string{"admin__echo", "echo", "admin__", "alpha__exit"} {
				_, err := data.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}})
				if err == nil || !strings.Contains(err.Error(), "Unknown tool: "+name) {
					t.Errorf("data calling %q: err = %v, want the unknown-tool error", name, err)
				}
			}
			if adminCalls.Load() != before {
				t.Error("a hidden call reached the admin upstream")
			}
			if got, err := callText(ctx, ops, "admin__echo", map[string]any{"text": "ops"}); err != nil || got != "ops" || adminCalls.Load() != before+1 {
				t.Errorf("ops calling admin__echo: %q, %v", got, err)
			}
		})
	}
}
