package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// bearer adds an API key to every request of a host.
type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

// TestLogsCarryNoSecrets runs the serve command at debug level with the
// audit log on stderr, an upstream header and an upstream environment
// variable holding secrets, and API keys; it makes calls that succeed,
// fail, time out and are refused. No secret may appear in the output,
// and no host credential may reach an upstream.
func TestLogsCarryNoSecrets(t *testing.T) {
	const (
		headerSecret = "upstream-header-secret-7f3a"
		envSecret    = "upstream-env-secret-91bc"
		hostKey      = "host-api-key-secret-55de"
		wrongKey     = "wrong-api-key-secret-0c4e"
	)
	var authMu sync.Mutex
	var upstreamAuth []string
	remote := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{
		Server: mcptest.ServerOptions{Name: "remote", Versions: mcptest.LegacyVersions()},
		Inspect: func(r *http.Request) {
			authMu.Lock()
			defer authMu.Unlock()
			upstreamAuth = append(upstreamAuth, r.Header.Get("Authorization"))
		},
	})
	command, args, env := mcptest.StdioCommand("echo")
	env["API_TOKEN"] = envSecret
	path := writeConfig(t, map[string]any{
		"upstreams": []map[string]any{
			{"name": "local", "command": command, "args": args, "env": env, "timeout": "1s"},
			{"name": "remote", "url": remote.URL, "headers": map[string]string{"Authorization": "Bearer " + headerSecret}},
		},
		"teams":     []map[string]any{{"name": "data", "api_keys": []string{hostKey}}},
		"auth":      map[string]any{"mode": "api_key"},
		"telemetry": map[string]any{"log_level": "debug", "audit": map[string]any{"enabled": true, "arguments": "hash"}},
	})
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, stop := context.WithCancel(context.Background())
	logs := &mcptest.LogBuffer{}
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--config", path, "--listen", addr}, nil, io.Discard, logs)
	}()
	defer func() {
		stop()
		<-exited
		out := logs.String()
		for _, secret := range []string{headerSecret, envSecret, hostKey, wrongKey} {
			if strings.Contains(out, secret) {
				t.Errorf("the gateway's output holds the secret %q:\n%s", secret, out)
			}
		}
		if !strings.Contains(out, `"msg":"audit"`) {
			t.Errorf("no audit record in the output:\n%s", out)
		}
	}()
	waitReady(t, "http://"+addr+"/readyz")

	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: bearer{hostKey, http.DefaultTransport}}}
	cs, err := client.Connect(cctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: eras[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got, err := callText(cctx, cs, "local__getenv", map[string]any{"name": "API_TOKEN"}); err != nil || got != envSecret {
		t.Fatalf("the upstream's env: %q, %v", got, err) // it must get it, only the logs must not show it
	}
	if got, err := callText(cctx, cs, "remote__echo", map[string]any{"text": "hi"}); err != nil || got != "hi" {
		t.Fatalf("remote__echo: %q, %v", got, err)
	}
	_, _ = callText(cctx, cs, "local__block", map[string]any{"key": "k"}) // times out
	_, _ = callText(cctx, cs, "nope", nil)

	bad := mcp.NewClient(&mcp.Implementation{Name: "intruder", Version: "1"}, nil)
	if _, err := bad.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", HTTPClient: &http.Client{Transport: bearer{wrongKey, http.DefaultTransport}}}, nil); err == nil {
		t.Error("a wrong API key was accepted")
	}
	authMu.Lock()
	defer authMu.Unlock()
	for _, auth := range upstreamAuth {
		if auth != "Bearer "+headerSecret {
			t.Errorf("the upstream saw Authorization %q, want only its configured header", auth)
		}
	}
}
