package router

import "log/slog"

// Log attribute keys, the same as the other packages' (telemetry.Key*,
// which a test holds these to): the router records nothing else of
// telemetry's, which wraps it from outside (DESIGN.md, section 5).
const (
	keyUpstream = "upstream"
	keySession  = "session"
	keyMethod   = "method"
	keyErr      = "err"
	keyTeam     = "team"
)

// discardLogs returns l, or a logger that drops everything when l is nil.
func discardLogs(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
