package router

import (
	"testing"

	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// TestLogKeysAreTelemetrys: the router's log keys are the shared ones,
// so that a log search for upstream="x" finds the router's lines too.
func TestLogKeysAreTelemetrys(t *testing.T) {
	for _, k := range []struct{ router, telemetry string }{
		{keyUpstream, telemetry.KeyUpstream},
		{keySession, telemetry.KeySession},
		{keyMethod, telemetry.KeyMethod},
		{keyErr, telemetry.KeyErr},
		{keyTeam, telemetry.KeyTeam},
	} {
		if k.router != k.telemetry {
			t.Errorf("router log key %q, telemetry's %q", k.router, k.telemetry)
		}
	}
}
