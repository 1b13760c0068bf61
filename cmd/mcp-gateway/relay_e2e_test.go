package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
)

// TestRelayDefault: with no relay key, a tool that elicits works for a
// host that declared elicitation, in both eras, on a shared and on a
// per-client HTTP upstream; relay: [] turns it off, and the host is
// never asked.
func TestRelayDefault(t *testing.T) {
	for _, session := range []config.SessionMode{config.SessionShared, config.SessionPerClient} {
		for _, relay := range [][]string{nil, {}} {
			name := string(session) + "/no relay key"
			if relay != nil {
				name = string(session) + "/relay: []"
			}
			t.Run(name, func(t *testing.T) {
				up := httpUpstream("up", mcptest.NewStreamableServer(t, &mcptest.HTTPOptions{Server: mcptest.ServerOptions{Versions: mcptest.LegacyVersions()}}).URL)
				up.Session, up.Relay = session, relay
				cfg := config.Default()
				cfg.Upstreams = []config.Upstream{up}
				url, _ := startGateway(t, cfg)
				for _, era := range eras {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					h := newLiveHost(t, url, era, "ada")
					text, err := callAll(ctx, h.cs, "up__elicit", map[string]any{"message": "name?"})
					asked := h.elicitations()
					if relay == nil {
						if err != nil || !strings.Contains(text, `"ada"`) || len(asked) != 1 {
							t.Errorf("%s host: %q, %v (asked %q), want the host's answer", era, text, err, asked)
						}
						continue
					}
					if len(asked) != 0 || strings.Contains(text, `"ada"`) {
						t.Errorf("%s host was asked %q (tool said %q) with relay: []", era, asked, text)
					}
				}
			})
		}
	}
}
