// Package telemetry builds the gateway's logger and holds the attribute
// keys that every package logs with, so that one field has one name
// across the gateway's logs.
//
// Logs are JSON lines on stderr (log/slog) with a constant message and
// the data in attributes. The OpenTelemetry tracer and meter (otel.go),
// the instruments (metrics.go) and the audit log (audit.go) are built
// here too, and passed in to the packages that record them: nothing in the
// gateway reads a global logger, tracer or meter.
package telemetry

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Attribute keys shared by every package.
const (
	KeyUpstream = "upstream"
	KeySession  = "session"
	KeyMethod   = "method"
	KeyTool     = "tool"
	KeyErr      = "err"
	KeyEra      = "era"
	KeyTeam     = "team"
)

// ParseLevel maps a config log level (debug, info, warn, error) to slog's.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q (want debug, info, warn or error)", s)
}

// NewLogger returns a JSON logger writing to w at the given level.
// Durations are written as Go durations ("2.5s"), not as nanoseconds.
func NewLogger(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: readableDuration}))
}

// readableDuration writes a time.Duration attribute as its String form:
// slog's JSON handler writes the integer nanoseconds, which nobody reads
// at a glance.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// Discard returns l, or a logger that drops everything when l is nil, so
// that a nil *slog.Logger in an Options struct means "no logs".
func Discard(l *slog.Logger) *slog.Logger {
	if l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
