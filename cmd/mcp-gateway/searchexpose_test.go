package main

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
)

// exposeHost is a Go SDK host with an API key that reports each
// notifications/tools/list_changed, and each acknowledged
// subscriptions/listen stream (a modern host's changes arrive there).
type exposeHost struct {
	cs      *mcp.ClientSession
	changed chan struct{}
	acks    chan mcp.NotificationSubscriptions
}

func newExposeHost(t *testing.T, url, era, key string) *exposeHost {
	t.Helper()
	h := &exposeHost{changed: make(chan struct{}, 64), acks: make(chan mcp.NotificationSubscriptions, 16)}
	client := mcp.NewClient(&mcp.Implementation{Name: "expose-e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { push(h.changed, struct{}{}) },
	})
	client.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "notifications/subscriptions/acknowledged" {
				if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok {
					push(h.acks, p.Notifications)
				}
			}
			return next(ctx, method, req)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearerTransport{key}}},
		&mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatalf("connecting in era %s: %v", era, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	h.cs = cs
	for era >= "2026-07-28" {
		// A change before the listen stream is acknowledged has nowhere
		// to go.
		select {
		case n := <-h.acks:
			if n.ToolsListChanged {
				return h
			}
		case <-ctx.Done():
			t.Fatalf("no subscriptions/listen stream acknowledged")
		}
	}
	return h
}

// TestExposeFoundBothEras: with search.expose_found, what a Go SDK host
// finds joins its own tools/list, announced with list_changed, and is
// called directly like any tool: per session for legacy hosts (another
// session of the same key does not see it), per identity for modern
// hosts (every host with the same key does, another key's does not);
// a tool the policy hides is never found nor listed.
func TestExposeFoundBothEras(t *testing.T) {
	const one, two = "red-key-one-0123456789", "red-key-two-0123456789"
	cfg := config.Default()
	cfg.Policy.Mode = config.ModeSearch
	cfg.Search.ExposeFound = true
	beta := stdioUpstream("beta", "echo-legacy", map[string]string{"WHO": "beta"})
	beta.Tools.Deny = []string{"getenv"}
	cfg.Upstreams = []config.Upstream{stdioUpstream("alpha", "echo", map[string]string{"WHO": "alpha"}), beta}
	cfg.Auth.Mode = config.AuthAPIKey
	cfg.Teams = []config.Team{{Name: "red", APIKeys: []string{one, two}}}
	url, _ := startGateway(t, cfg)

	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			modern := era >= "2026-07-28"
			a := newExposeHost(t, url, era, one)
			b := newExposeHost(t, url, era, one)
			c := newExposeHost(t, url, era, two)
			for _, h := range []*exposeHost{a, b, c} {
				if diff := cmp.Diff(searchTools, toolNames(ctx, t, h.cs, "before")); diff != "" {
					t.Fatalf("before any find (-want +got):\n%s", diff)
				}
			}

			got := find(ctx, t, a.cs, map[string]any{"query": "an environment variable", "limit": 20})
			if len(got) == 0 || got[0] != "alpha__getenv" || slices.Contains(got, "beta__getenv") {
				t.Fatalf("find: %v, want alpha__getenv first and never the hidden beta__getenv", got)
			}
			if slices.Contains(got, "beta__echo") {
				t.Fatalf("find: %v; the test needs a find without beta__echo, which the other key finds below", got)
			}
			want := append(slices.Clone(searchTools), slices.Sorted(slices.Values(got))...)
			await(ctx, t, a.changed, "the finder's tools/list_changed")
			if diff := cmp.Diff(want, toolNames(ctx, t, a.cs, "the finder")); diff != "" {
				t.Errorf("the finder's tools/list (-want +got):\n%s", diff)
			}
			if text, err := callText(ctx, a.cs, "alpha__getenv", map[string]any{"name": "WHO"}); err != nil || text != "alpha" {
				t.Errorf("a direct call of the exposed alpha__getenv = %q, %v", text, err)
			}
			if modern {
				// The same identity: the same list, and the notice.
				await(ctx, t, b.changed, "tools/list_changed on the same identity's other host")
				if diff := cmp.Diff(want, toolNames(ctx, t, b.cs, "the same identity")); diff != "" {
					t.Errorf("the same identity's tools/list (-want +got):\n%s", diff)
				}
			} else if diff := cmp.Diff(searchTools, toolNames(ctx, t, b.cs, "another session")); diff != "" {
				t.Errorf("another session of the same key lists (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(searchTools, toolNames(ctx, t, c.cs, "another key")); diff != "" {
				t.Errorf("another key lists (-want +got):\n%s", diff)
			}

			// The other key finds something else: only it hears.
			if got := find(ctx, t, c.cs, map[string]any{"query": "returns its text argument", "upstream": "beta", "limit": 1}); !cmp.Equal(got, []string{"beta__echo"}) {
				t.Fatalf("find echo in beta: %v", got)
			}
			await(ctx, t, c.changed, "the other key's tools/list_changed")
			if diff := cmp.Diff(append(slices.Clone(searchTools), "beta__echo"), toolNames(ctx, t, c.cs, "the other key")); diff != "" {
				t.Errorf("the other key's tools/list (-want +got):\n%s", diff)
			}
			// The finder's list is its own finds, whatever they were: the
			// other key's changed nothing of it.
			if diff := cmp.Diff(want, toolNames(ctx, t, a.cs, "the finder again")); diff != "" {
				t.Errorf("the other key's find changed the finder's list (-want +got):\n%s", diff)
			}
			select {
			case <-c.changed:
				t.Errorf("the other key heard of a list change that was not its own")
			default:
			}
		})
	}
}
