package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/mcptest"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	goleak.VerifyTestMain(m)
}

// testCtx is the deadline every test waits under.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var gateway = upstream.Implementation{Name: "gateway-test", Version: "0.0.1"}

// stdioOptions returns options for the stdio fake called fake.
func stdioOptions(fake string) *upstream.Options {
	cmd, args, env := mcptest.StdioCommand(fake)
	return &upstream.Options{Name: fake, Command: cmd, Args: args, Env: env, ClientInfo: gateway}
}

// start creates and starts a Client, closing it when the test ends.
func start(t *testing.T, opts *upstream.Options) *upstream.Client {
	t.Helper()
	c := newClient(t, opts)
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

func newClient(t *testing.T, opts *upstream.Options) *upstream.Client {
	t.Helper()
	c, err := upstream.New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// callTool calls a tool and returns its first text content. A JSON-RPC
// error or a tool error fails the test.
func callTool(t *testing.T, ctx context.Context, c *upstream.Client, name string, args string) string {
	t.Helper()
	res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":`+args+`}`))
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	if res.Error != nil {
		t.Fatalf("call %s: JSON-RPC error %v", name, res.Error)
	}
	text, isErr := toolText(t, res)
	if isErr {
		t.Fatalf("call %s: tool error %q", name, text)
	}
	return text
}

func toolText(t *testing.T, res *jsonrpc.Message) (string, bool) {
	t.Helper()
	var r struct {
		Content []struct{ Text string } `json:"content"`
		IsError bool                    `json:"isError"`
	}
	if err := json.Unmarshal(res.Result, &r); err != nil {
		t.Fatalf("tool result %s: %v", res.Result, err)
	}
	if len(r.Content) == 0 {
		return "", r.IsError
	}
	return r.Content[0].Text, r.IsError
}

// logRecord is a log record with its attributes flattened.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu      *sync.Mutex
	records *[]logRecord
	changed *chan struct{}
	attrs   []slog.Attr
}

func newRecorder() *recorder {
	ch := make(chan struct{})
	return &recorder{mu: &sync.Mutex{}, records: &[]logRecord{}, changed: &ch}
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	for _, a := range r.attrs {
		lr.attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	*r.records = append(*r.records, lr)
	close(*r.changed)
	*r.changed = make(chan struct{})
	return nil
}

func (r *recorder) WithAttrs(as []slog.Attr) slog.Handler {
	c := *r
	c.attrs = append(append([]slog.Attr(nil), r.attrs...), as...)
	return &c
}

func (r *recorder) WithGroup(string) slog.Handler { return r }

func (r *recorder) all() []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logRecord(nil), *r.records...)
}

// wait returns the first record that satisfies ok, waiting for it until
// ctx is done.
func (r *recorder) wait(ctx context.Context, ok func(logRecord) bool) (logRecord, error) {
	for {
		r.mu.Lock()
		recs, changed := *r.records, *r.changed
		r.mu.Unlock()
		for _, rec := range recs {
			if ok(rec) {
				return rec, nil
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return logRecord{}, errors.New("no such log record")
		}
	}
}

func msgIs(msg string) func(logRecord) bool {
	return func(r logRecord) bool { return strings.Contains(r.msg, msg) }
}
