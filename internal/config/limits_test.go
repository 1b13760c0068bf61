package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLimitsDecode(t *testing.T) {
	src := `
upstreams:
  - name: search
    url: http://127.0.0.1:9000/mcp
    tools:
      rate: {search_Web: 2/s, slow: 30/m}
limits:
  max_sessions: 500
  session_idle_timeout: 5m
  per_identity: {rate: 10/s, burst: 20, concurrent_calls: 8, sessions: 50, streams: 4}
  team: {rate: 6000/m}
auth: {mode: api_key}
teams:
  - name: data
    api_keys: [k1]
    limits: {per_identity: {rate: 1/s}, team: {burst: 7}}
`
	c, err := Parse([]byte(src), "yaml", "", mapEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Limits{
		MaxSessions: 500, SessionIdleTimeout: 5 * time.Minute,
		PerIdentity: IdentityLimits{Rate: 10, Burst: 20, ConcurrentCalls: 8, Sessions: 50, Streams: 4},
		Team:        TeamLimits{Rate: 100},
	}
	if diff := cmp.Diff(want, c.Limits); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]Rate{"search_Web": 2, "slow": 0.5}, c.Upstreams[0].Tools.Rates); diff != "" {
		t.Errorf("tool rates (-want +got):\n%s", diff)
	}
	id, team := c.Limits.Effective(c.Teams[0].Limits)
	if diff := cmp.Diff(IdentityLimits{Rate: 1, ConcurrentCalls: 8, Sessions: 50, Streams: 4}, id); diff != "" {
		t.Errorf("the team's identity limits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(TeamLimits{Rate: 100, Burst: 7}, team); diff != "" {
		t.Errorf("the team's totals (-want +got):\n%s", diff)
	}
}

func TestLimitsProblems(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"bad rate", "limits: {per_identity: {rate: 10}}", "limits.per_identity.rate: must be N/s"},
		{"zero rate", "limits: {team: {rate: 0/s}}", "limits.team.rate: must be N/s"},
		{"bad unit", "limits: {per_identity: {rate: 5/d}}", "limits.per_identity.rate: must be N/s"},
		{"tool rate", "upstreams: [{name: a, url: 'http://x/mcp', tools: {rate: {t: fast}}}]", "upstreams[0].tools.rate.t: must be N/s"},
		{"negative sessions", "limits: {max_sessions: -1}", "limits.max_sessions: must be 0"},
		{"negative idle", "limits: {session_idle_timeout: -1s}", "limits.session_idle_timeout: must be 0"},
		{"negative burst", "limits: {per_identity: {burst: -1}}", "limits.per_identity.burst: must be 0"},
		{"negative per-identity sessions", "teams: [{name: a, limits: {per_identity: {sessions: -2}}}]", "teams[0].limits.per_identity.sessions: must be 0"},
		{"unknown key", "limits: {per_identity: {rps: 1}}", "limits.per_identity.rps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src), "yaml", "", mapEnv(nil))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}
