package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// TestPerClientSessions: with session: per-client each legacy host gets
// its own stdio process, which sees the host's own capabilities; with
// session: shared every host shares one process, which sees what relay
// declares.
func TestPerClientSessions(t *testing.T) {
	shared := stdioUpstream("shared", "echo-legacy", nil)
	shared.Relay = []string{"roots"}
	perClient := stdioUpstream("own", "echo-legacy", nil)
	perClient.Session = config.SessionPerClient
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{shared, perClient}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	connectWith := func(opts *mcp.ClientOptions) *mcp.ClientSession {
		client := mcp.NewClient(&mcp.Implementation{Name: "host", Version: "1"}, opts)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	sampler := connectWith(&mcp.ClientOptions{CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
		return &mcp.CreateMessageResult{}, nil
	}})
	plain := connectWith(&mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})

	caps := func(cs *mcp.ClientSession, tool string) string {
		t.Helper()
		got, err := callText(ctx, cs, tool, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// Shared: both hosts reach one process that saw the relayed roots
	// capability, whatever the hosts declared.
	if a, b := caps(sampler, "shared__capabilities"), caps(plain, "shared__capabilities"); a != b || !strings.Contains(a, "roots") || strings.Contains(a, "sampling") {
		t.Errorf("shared upstream saw %s and %s, want the relayed capabilities for both", a, b)
	}
	// Per-client: each host's own process saw the host's own capabilities.
	if got := caps(sampler, "own__capabilities"); !strings.Contains(got, "sampling") {
		t.Errorf("the sampling host's own session saw %s", got)
	}
	if got := caps(plain, "own__capabilities"); strings.Contains(got, "sampling") {
		t.Errorf("the plain host's own session saw %s", got)
	}

	// A host whose own process dies gets an error for the call that
	// killed it, and a new process for its next call.
	text, isError := toolResult(ctx, t, sampler, "own__exit", map[string]any{"code": 3})
	if !isError || !strings.Contains(text, `"own" is unavailable`) {
		t.Errorf("the call that ended the host's process: %q (isError %v)", text, isError)
	}
	if got := caps(sampler, "own__capabilities"); !strings.Contains(got, "sampling") {
		t.Errorf("the sampling host's new session saw %s", got)
	}
}

// TestPerClientSessionsPerIdentity: on a per-client upstream, two teams
// (and two keys of one team) never reach each other's upstream process
// or its state, in either era, though they declare the same capabilities;
// a host of one identity keeps reaching its own.
func TestPerClientSessionsPerIdentity(t *testing.T) {
	own := stdioUpstream("own", "echo", nil)
	own.Session = config.SessionPerClient
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{own}
	cfg.Auth.Mode = config.AuthAPIKey
	cfg.Teams = []config.Team{
		{Name: "a", APIKeys: []string{"team-a-key-one-0123456789", "team-a-key-two-0123456789"}, Allow: []string{"own__*"}},
		{Name: "b", APIKeys: []string{"team-b-key-0123456789"}, Allow: []string{"own__*"}},
	}
	url, _ := startGateway(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			host := func(key string) *mcp.ClientSession {
				cs, err := connectAs(t, url, era, key)
				if err != nil {
					t.Fatal(err)
				}
				return cs
			}
			a1, a2, b := host("team-a-key-one-0123456789"), host("team-a-key-two-0123456789"), host("team-b-key-0123456789")
			call := func(cs *mcp.ClientSession, tool, text string) string {
				t.Helper()
				got, err := callText(ctx, cs, tool, map[string]any{"text": text})
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			secret := "a1-secret-" + era
			if got := call(a1, "own__note", secret); !strings.Contains(got, secret) {
				t.Fatalf("a1's note: %q", got)
			}
			pids := map[string]string{}
			for name, cs := range map[string]*mcp.ClientSession{"a1": a1, "a2": a2, "b": b} {
				notes := call(cs, "own__note", "")
				if (name == "a1") != strings.Contains(notes, secret) {
					t.Errorf("%s's upstream process holds %q", name, notes)
				}
				pids[name] = call(cs, "own__pid", "")
			}
			if pids["a1"] == pids["a2"] || pids["a1"] == pids["b"] || pids["a2"] == pids["b"] {
				t.Errorf("upstream processes by identity: %v, want one each", pids)
			}
			if again := call(a1, "own__pid", ""); again != pids["a1"] {
				t.Errorf("a1 reached process %s, then %s", pids["a1"], again)
			}
		})
	}
}
