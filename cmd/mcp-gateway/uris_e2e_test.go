package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// readLog records the URIs of the resources/read requests a fake
// upstream received.
type readLog struct {
	mu   sync.Mutex
	uris []string
}

func (l *readLog) received(_ http.Header, body []byte) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			URI string `json:"uri"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "resources/read" {
		return
	}
	l.mu.Lock()
	l.uris = append(l.uris, msg.Params.URI)
	l.mu.Unlock()
}

func (l *readLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.uris)
}

func (l *readLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.uris[n:])
}

// TestCollidingResourceURIs: two upstreams (a legacy and a modern HTTP
// server) both list test://static/hello. For a host of each era, the
// first keeps the URI and the second's is listed as
// mcpgw://beta/test://static/hello; each reads from its own upstream,
// which hears test://static/hello (the contents come back under the URI
// read), and an update from each reaches a
// subscriber under the URI it subscribed by.
func TestCollidingResourceURIs(t *testing.T) {
	var alphaReads, betaReads readLog
	alpha := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Received: alphaReads.received,
		Server: mcptest.ServerOptions{Name: "alpha", Versions: mcptest.LegacyVersions()}})
	beta := mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Received: betaReads.received, Stateless: true,
		Server: mcptest.ServerOptions{Name: "beta", Versions: mcptest.ModernVersions()}})
	cfg := config.Default()
	cfg.Upstreams = []config.Upstream{httpUpstream("alpha", alpha.URL), httpUpstream("beta", beta.URL)}
	url, _ := startGateway(t, cfg)
	toucher := connect(t, url, eras[0])

	const hello, betaHello = "test://static/hello", "mcpgw://beta/test://static/hello"
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			h := newLiveHost(t, url, era, "host-"+era)
			var uris []string
			for r, err := range h.cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				uris = append(uris, r.URI)
			}
			for _, want := range []string{hello, betaHello} {
				if !slices.Contains(uris, want) {
					t.Errorf("resources/list lacks %s: %v", want, uris)
				}
			}
			var templates []string
			for rt, err := range h.cs.ResourceTemplates(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				templates = append(templates, rt.URITemplate)
			}
			for _, want := range []string{"test://items/{id}", "mcpgw://beta/test://items/{id}"} {
				if !slices.Contains(templates, want) {
					t.Errorf("resources/templates/list lacks %s: %v", want, templates)
				}
			}

			for _, tc := range []struct {
				uri, text      string
				reaches, other *readLog
				heard          string
			}{
				{hello, "hello", &alphaReads, &betaReads, hello},
				{betaHello, "hello", &betaReads, &alphaReads, hello},
				{"test://items/7", "item 7", &alphaReads, &betaReads, "test://items/7"},
				{"mcpgw://beta/test://items/7", "item 7", &betaReads, &alphaReads, "test://items/7"},
			} {
				n, m := tc.reaches.count(), tc.other.count()
				res, err := h.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: tc.uri})
				if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != tc.text || res.Contents[0].URI != tc.uri {
					t.Errorf("read %s = %+v, %v; want %q under the URI read", tc.uri, res, err, tc.text)
					continue
				}
				if got := tc.reaches.since(n); !slices.Equal(got, []string{tc.heard}) {
					t.Errorf("read %s: its upstream heard %q, want %q", tc.uri, got, tc.heard)
				}
				if got := tc.other.since(m); len(got) != 0 {
					t.Errorf("read %s: the other upstream heard %q", tc.uri, got)
				}
			}

			for _, uri := range []string{hello, betaHello} {
				if err := h.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
					t.Fatalf("subscribing to %s: %v", uri, err)
				}
				h.awaitListen(ctx, t, "the subscription to "+uri, func(n mcp.NotificationSubscriptions) bool {
					return slices.Contains(n.ResourceSubscriptions, uri)
				})
			}
			for _, tc := range []struct{ upstream, want string }{{"beta", betaHello}, {"alpha", hello}} {
				if _, err := callText(ctx, toucher, tc.upstream+"__touch", map[string]any{"uri": hello}); err != nil {
					t.Fatalf("%s__touch: %v", tc.upstream, err)
				}
				if got := await(ctx, t, h.updated, "the update from "+tc.upstream); got != tc.want {
					t.Errorf("%s's update of %s reached the host as %s, want %s", tc.upstream, hello, got, tc.want)
				}
			}
		})
	}
}
