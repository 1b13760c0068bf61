package console

import (
	"encoding/json"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/policy"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
)

// What a dashboard shows at most: the rest is counted.
const (
	maxToolsShown = 200
	maxCallsShown = 50
	maxDescChars  = 300
	maxDiffChars  = 8000
)

// dashboard is what the live part of the page shows one visitor.
type dashboard struct {
	Path       string
	CSRF       string
	Who        whoRow
	Flash      string
	FlashError bool
	Upstreams  []upstreamRow
	Views      []viewRow
	// Pinning is on; Quarantined and Flagged are shown to admins only.
	Pinning     bool
	CanApprove  bool
	Quarantined []pinRow
	Flagged     []pinRow
	Calls       []callRow
}

type whoRow struct {
	// Auth is false without authentication (no login, no logout).
	Auth  bool
	Team  string
	Key   string
	Admin bool
}

type upstreamRow struct {
	Name, Key, Transport, State, Class string
	Era, Protocol                      string
	Breaker                            string
	Tools, Prompts                     int
	Restarts                           uint64
	Required                           bool
	// Error and RetryAt are shown to admins only: an upstream's error
	// may name internal addresses.
	Error, Since, RetryAt string
}

type viewRow struct {
	Key, Team, Profile string
	Mode               string
	Tools, Tokens      int
	Listed             int
	Cut                []policy.Cut
	ToolList           []toolRow
	More               int
}

type toolRow struct {
	Name, Upstream, Desc string
}

type pinRow struct {
	Kind, Name, Upstream, Reason, Detail, Diff, SHA256 string
}

type callRow struct {
	At, View, Identity, Tool, Upstream, Duration, Outcome string
}

// stateClass is how an upstream's row is coloured: ok (serving), warn
// (serving, but a list failed; or starting), down (not serving).
func stateClass(p router.Phase) string {
	switch p {
	case router.PhaseReady:
		return "state-ok"
	case router.PhaseDegraded, router.PhaseStarting:
		return "state-warn"
	}
	return "state-down"
}

// dashboard gathers what s may see now.
func (c *Console) dashboard(s *session) dashboard {
	who, admin := c.snapshot(s)
	auth := s.token != ""
	d := dashboard{Path: c.opts.Path, CSRF: s.csrf, Who: whoRow{Auth: auth, Team: who.Team, Key: who.Key, Admin: admin}}
	src := c.opts.Source

	// Views: an admin's are all; anyone else's are its team's (its
	// view and its profiles').
	behind := map[string]bool{} // upstreams behind the views shown
	for _, v := range src.Views() {
		team, profile := policy.SplitViewKey(v.Name)
		if !admin && team != who.Team {
			continue
		}
		row := viewRow{Key: v.Name, Team: team, Profile: profile, Mode: string(v.Mode), Tools: v.Tools, Tokens: v.Tokens, Listed: v.ListedTokens, Cut: v.Cut}
		if info, ok := src.Tools(v.Name); ok {
			for i, t := range info.Tools {
				behind[t.Upstream] = true
				if i >= maxToolsShown {
					row.More++
					continue
				}
				row.ToolList = append(row.ToolList, toolRow{Name: t.Name, Upstream: t.Upstream, Desc: clip(description(t.Definition), maxDescChars)})
			}
		}
		d.Views = append(d.Views, row)
	}

	for _, u := range src.Status() {
		if !admin && !behind[u.Name] {
			continue
		}
		row := upstreamRow{Name: u.Name, Key: u.Key, Transport: u.Transport, State: string(u.State), Class: stateClass(u.State),
			Era: u.Era, Protocol: u.Protocol, Tools: u.Tools, Prompts: u.Prompts, Restarts: u.Restarts, Required: u.Required, Breaker: "–"}
		switch u.State {
		case router.PhaseUnavailable:
			row.Breaker = "open"
		case router.PhaseReady, router.PhaseDegraded:
			row.Breaker = "closed"
		}
		if admin {
			row.Error = clip(u.Error, maxDescChars)
			if !u.Since.IsZero() {
				row.Since = u.Since.UTC().Format(time.RFC3339)
			}
			if u.RetryAt != nil {
				row.RetryAt = u.RetryAt.UTC().Format(time.RFC3339)
			}
		}
		d.Upstreams = append(d.Upstreams, row)
	}

	if rep, on := src.Pinning(); on && admin {
		d.Pinning, d.CanApprove = true, c.opts.Approve != nil
		for _, st := range rep.Quarantined {
			d.Quarantined = append(d.Quarantined, pinRowOf(st))
		}
		for _, st := range rep.Flagged {
			d.Flagged = append(d.Flagged, pinRowOf(st))
		}
	}

	if c.opts.Calls != nil {
		keep := func(call *Call) bool { return admin || call.Principal == who.ID && who.ID != "" }
		for _, call := range c.opts.Calls.Recent(maxCallsShown, keep) {
			row := callRow{At: call.At.UTC().Format("15:04:05.000"), View: call.View, Tool: call.Tool, Upstream: call.Upstream,
				Duration: call.Duration.Round(100 * time.Microsecond).String(), Outcome: call.Outcome}
			if admin {
				row.Identity = call.Identity
			}
			d.Calls = append(d.Calls, row)
		}
	}
	return d
}

func pinRowOf(st router.PinStatus) pinRow {
	return pinRow{Kind: string(st.Kind), Name: st.Name, Upstream: st.Upstream, Reason: string(st.Reason),
		Detail: clip(st.Detail, maxDescChars), Diff: clip(st.Diff, maxDiffChars), SHA256: st.SHA256}
}

// description is a definition's description as hosts see it.
func description(def json.RawMessage) string {
	d, _ := jsonrpc.StringField(def, "description")
	return d
}

// clip cuts s to at most n characters, marking the cut.
func clip(s string, n int) string {
	count := 0
	for i := range s {
		if count == n {
			return s[:i] + "…"
		}
		count++
	}
	return s
}
