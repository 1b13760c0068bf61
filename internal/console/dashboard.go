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
	maxRowsShown  = 200 // of each other list: cuts, quarantined, flagged
	// maxReviewBytes bounds the whole definitions and diffs one page
	// carries: a row past it is shown without them, and without a form.
	maxReviewBytes = 1 << 20
	maxCallsShown  = 50
	maxDescChars   = 300
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
	// QuarantinedMore and FlaggedMore count the rows not shown.
	QuarantinedMore, FlaggedMore int
	Calls                        []callRow
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
	// More and CutMore count the tools and cuts not shown; Cuts is how
	// many the limits cut.
	More, CutMore, Cuts int
}

type toolRow struct {
	Name, Upstream, Desc string
}

type pinRow struct {
	Kind, Name, Upstream, Reason, Detail, Diff, SHA256 string
	// Definition is the live definition whole: what approving accepts.
	// Without it (too large, or unreadable) the console offers no
	// approval: pin --check and pin --approve do it.
	Definition string
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
		row := viewRow{Key: v.Name, Team: team, Profile: profile, Mode: string(v.Mode), Tools: v.Tools, Tokens: v.Tokens, Listed: v.ListedTokens,
			Cut: v.Cut, Cuts: len(v.Cut)}
		if len(row.Cut) > maxRowsShown {
			row.Cut, row.CutMore = row.Cut[:maxRowsShown], len(row.Cut)-maxRowsShown
		}
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
		d.Quarantined, d.QuarantinedMore = pinRows(rep.Quarantined, true)
		d.Flagged, d.FlaggedMore = pinRows(rep.Flagged, false)
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

// pinRows is at most maxRowsShown rows of list, and how many more it
// holds. Rows to approve from (review) carry the whole diff and the
// whole definition (pin.Status.ReviewDiff, Definition), never the log's
// cut diff: an approval accepts what the page showed, all of it; up to
// maxReviewBytes in all, past which a row has neither, nor a form.
// Flagged rows (nothing to approve) carry the log's diff.
func pinRows(list []router.PinStatus, review bool) ([]pinRow, int) {
	more := max(len(list)-maxRowsShown, 0)
	list = list[:len(list)-more]
	rows := make([]pinRow, 0, len(list))
	budget := maxReviewBytes
	for _, st := range list {
		row := pinRow{Kind: string(st.Kind), Name: st.Name, Upstream: st.Upstream, Reason: string(st.Reason), Detail: clip(st.Detail, maxDescChars), Diff: st.Diff}
		if review {
			if n := len(st.ReviewDiff) + len(st.Definition); st.Definition != "" && n <= budget {
				budget -= n
				row.Diff, row.Definition, row.SHA256 = st.ReviewDiff, st.Definition, st.SHA256
			}
		}
		rows = append(rows, row)
	}
	return rows, more
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
