package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"time"
)

// Audit writes one JSON line per tools/call, prompts/get and
// resources/read: who called what, on which upstream, how it went, how
// long it took and how big the answer was. Arguments are left out, or
// given as a SHA-256 digest when asked for: they may hold anything.
type Audit struct {
	log           *slog.Logger
	hashArguments bool
}

// NewAudit writes audit records to w (a file, or stderr beside the logs).
func NewAudit(w io.Writer, hashArguments bool) *Audit {
	return &Audit{log: slog.New(slog.NewJSONHandler(w, nil)), hashArguments: hashArguments}
}

// AuditRecord is one audited request.
type AuditRecord struct {
	Method    string // tools/call, prompts/get, resources/read
	Name      string // the exposed tool or prompt name, or the URI
	Upstream  string // "" when no upstream was reached (unknown name)
	Original  string // the name the upstream knows
	Identity  string // the caller's key id, "" without authentication
	Team      string
	Session   string // the legacy session, "" for modern requests
	Protocol  string // the host's protocol version
	Duration  time.Duration
	Outcome   string // OutcomeOK, OutcomeToolError, OutcomeError, OutcomeCancelled
	ErrorCode int64  // the JSON-RPC error code, when Outcome is OutcomeError
	Bytes     int    // the size of the result or error
	Arguments json.RawMessage
}

// Record writes r.
func (a *Audit) Record(ctx context.Context, r AuditRecord) {
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("name", r.Name),
		slog.String("upstream", r.Upstream),
		slog.String("upstream_name", r.Original),
		slog.String("identity", r.Identity),
		slog.String("team", r.Team),
		slog.String("session", r.Session),
		slog.String("protocol_version", r.Protocol),
		slog.Float64("duration_ms", float64(r.Duration.Microseconds())/1000),
		slog.String("outcome", r.Outcome),
		slog.Int("result_bytes", r.Bytes),
	}
	if r.Outcome == OutcomeError {
		attrs = append(attrs, slog.Int64("error_code", r.ErrorCode))
	}
	if a.hashArguments && len(r.Arguments) > 0 {
		sum := sha256.Sum256(r.Arguments)
		attrs = append(attrs, slog.String("arguments_sha256", hex.EncodeToString(sum[:])))
	}
	a.log.LogAttrs(ctx, slog.LevelInfo, "audit", attrs...)
}
