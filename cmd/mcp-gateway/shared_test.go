package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/state/redistest"
)

// sharedReplicas starts n gateways that share sessions through one real
// Redis, all in front of one legacy (2025-11-25) upstream, and a
// round-robin balancer in front of them with no affinity: each request
// goes to the next replica. It returns the balancer's URL and each
// replica's.
func sharedReplicas(t *testing.T, n int) (balancer string, replicas []string) {
	t.Helper()
	redis := redistest.Start(t)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "state.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	up := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}})
	var targets []*url.URL
	for range n {
		cfg := config.Default()
		cfg.Upstreams = []config.Upstream{relaying(httpUpstream("up", up.URL))}
		cfg.State = config.State{Store: config.StoreRedis, Redis: config.Redis{URL: redis.URL}, Key: config.Secret{File: keyFile}}
		u, _ := startGateway(t, cfg)
		replicas = append(replicas, u)
		target, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, target)
	}
	var next atomic.Uint64
	lb := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(targets[next.Add(1)%uint64(len(targets))])
			pr.Out.URL.Path = pr.In.URL.Path
			pr.Out.Host = pr.Out.URL.Host
		},
		FlushInterval: -1, // SSE streams pass at once
	}
	ts := httptest.NewServer(lb)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp", replicas
}

// TestSharedSessionsAnyReplica: behind a balancer without affinity,
// replicas that share state serve one legacy session on each request,
// relay an upstream's elicitation whose answer comes back on another
// replica, complete a modern host's retries of a call parked on another
// replica, and a DELETE on one ends the session on all.
func TestSharedSessionsAnyReplica(t *testing.T) {
	lb, replicas := sharedReplicas(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	legacy := newLiveHost(t, lb, eras[0], "Ada")
	for i := range 6 { // three requests on each replica
		text, isErr := toolResult(ctx, t, legacy.cs, "up__echo", map[string]any{"text": "hi"})
		if isErr || text != "hi" {
			t.Fatalf("legacy call %d through the balancer: %q (isError %v)", i, text, isErr)
		}
	}
	for i := range 4 {
		// The upstream's elicitation reaches the host on the request's
		// stream; its answer is POSTed, to the other replica half the
		// time.
		text, isErr := toolResult(ctx, t, legacy.cs, "up__elicit", map[string]any{"message": "name?"})
		if isErr || !strings.Contains(text, `"name":"Ada"`) {
			t.Fatalf("legacy elicitation %d: %q (isError %v)", i, text, isErr)
		}
	}

	modern := newLiveHost(t, lb, eras[1], "Grace")
	for i := range 4 {
		// Each call is parked on the replica it reached; its retry
		// reaches the other half the time.
		text, isErr := toolResult(ctx, t, modern.cs, "up__elicit", map[string]any{"message": "name?"})
		if isErr || !strings.Contains(text, `"name":"Grace"`) {
			t.Fatalf("modern elicitation %d: %q (isError %v)", i, text, isErr)
		}
	}

	sid := legacy.cs.ID()
	if err := legacy.cs.Close(); err != nil {
		t.Fatalf("DELETE: %v", err)
	}
	for i, r := range replicas {
		code, _, msg := postRaw(ctx, t, r, map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if code != http.StatusNotFound {
			t.Errorf("replica %d after the DELETE: %d %+v, want 404", i, code, msg)
		}
	}
}

// TestSharedSessionIDIsSealed: a session id made up, or sealed under
// another key, is not a session on any replica.
func TestSharedSessionIDIsSealed(t *testing.T) {
	_, replicas := sharedReplicas(t, 2)
	ctx := context.Background()
	for _, sid := range []string{"0123456789abcdef0123456789abcdef", "mcpgw1.AAAA", "mcpgw1." + strings.Repeat("A", 120)} {
		code, _, _ := postRaw(ctx, t, replicas[1], map[string]string{"Mcp-Session-Id": sid, "MCP-Protocol-Version": eras[0]},
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if code != http.StatusNotFound {
			t.Errorf("session id %q: %d, want 404", sid, code)
		}
	}
	// A genuine id from one replica works on the other.
	cs := connect(t, replicas[0], eras[0])
	code, _, msg := postRaw(ctx, t, replicas[1], map[string]string{"Mcp-Session-Id": cs.ID(), "MCP-Protocol-Version": eras[0]},
		`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if code != http.StatusOK || msg == nil || msg.Error != nil {
		t.Errorf("replica 1 with replica 0's session: %d %+v", code, msg)
	}
}
