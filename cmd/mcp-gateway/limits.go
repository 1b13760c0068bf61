package main

import (
	"cmp"
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/mcp-gateway/mcp-gateway/internal/config"
	"github.com/mcp-gateway/mcp-gateway/internal/router"
	"github.com/mcp-gateway/mcp-gateway/internal/telemetry"
)

// routerLimits translates the config's limits into the router's, by
// view. With auth mode none every caller is one identity, so the
// per-identity defaults (config.DefaultConcurrentCalls, DefaultStreams)
// apply only when callers authenticate: the single user keeps what it
// had. Limits are read at start; a reload keeps them, and a team it adds
// gets the top-level ones (the "" entries; the router falls back to them).
func routerLimits(cfg *config.Config, rec recorders) *router.Limits {
	authenticated := cfg.Auth.Mode != config.AuthNone
	quotas := func(id config.IdentityLimits) router.IdentityQuotas {
		q := router.IdentityQuotas{
			Rate:            router.Rate{Per: float64(id.Rate), Burst: config.BurstOf(id.Rate, id.Burst)},
			ConcurrentCalls: id.ConcurrentCalls,
			Sessions:        id.Sessions,
			Streams:         id.Streams,
		}
		if q.ConcurrentCalls == 0 && authenticated {
			q.ConcurrentCalls = config.DefaultConcurrentCalls
		}
		if q.Streams == 0 && authenticated {
			q.Streams = config.DefaultStreams
		}
		// Negative: no limit.
		q.ConcurrentCalls, q.Streams = max(q.ConcurrentCalls, 0), max(q.Streams, 0)
		if id.Rate == 0 {
			q.Rate = router.Rate{}
		}
		return q
	}
	team := func(t config.TeamLimits) router.Rate {
		if t.Rate == 0 {
			return router.Rate{}
		}
		return router.Rate{Per: float64(t.Rate), Burst: config.BurstOf(t.Rate, t.Burst)}
	}
	o := router.LimitsOptions{
		Identity: map[string]router.IdentityQuotas{},
		Team:     map[string]router.Rate{},
		Tools:    map[string]map[string]router.Rate{},
	}
	if in, err := telemetry.NewInstruments(cmp.Or(rec.tel, telemetry.Disabled()).Meter); err == nil {
		o.Rejected = func(limit string) {
			in.Rejections.Add(context.Background(), 1, metric.WithAttributes(telemetry.AttrLimit.String(limit)))
		}
	}
	id, tm := cfg.Limits.Effective(nil)
	o.Identity[""], o.Team[""] = quotas(id), team(tm)
	for _, t := range cfg.Teams {
		id, tm := cfg.Limits.Effective(t.Limits)
		o.Identity[t.Name], o.Team[t.Name] = quotas(id), team(tm)
	}
	for _, u := range cfg.Upstreams {
		for name, r := range u.Tools.Rates {
			if o.Tools[u.Name] == nil {
				o.Tools[u.Name] = map[string]router.Rate{}
			}
			o.Tools[u.Name][name] = router.Rate{Per: float64(r), Burst: config.BurstOf(r, 0)}
		}
	}
	return router.NewLimits(o)
}
