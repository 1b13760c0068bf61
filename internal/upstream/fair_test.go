package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// TestBreakerTimeoutNeedsSilence: a call that times out is evidence
// against the server only when the server sent nothing on the connection
// (no answer to any call, no notification, no request) between the
// call's sending and its timeout. One caller's slow tool, timing out
// while the server answers other calls, leaves the breaker closed; a
// server that stops answering everyone still opens it.
func TestBreakerTimeoutNeedsSilence(t *testing.T) {
	tests := []struct {
		name string
		// meanwhile runs while the slow calls wait (at 1s).
		meanwhile func(s *upstream.Supervised) error
		// slow answers the slow tool (default: never).
		slow func(http.ResponseWriter, *http.Request, *jsonrpc.Message)
		// host: the slow calls have a CallHandler, a host that never
		// answers what the server asks.
		host bool
		// silent: the server answers no probe after its handshake.
		silent   bool
		wantOpen bool
	}{
		{name: "silent server", silent: true, wantOpen: true},
		// Nobody else calls, but the server answers the probe sent when
		// each call timed out: one caller alone cannot open it either.
		{name: "one caller, probes answered"},
		{name: "another call answered", meanwhile: func(s *upstream.Supervised) error {
			_, err := s.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"fast"}`))
			return err
		}},
		{name: "another call answered with a JSON-RPC error", meanwhile: func(s *upstream.Supervised) error {
			_, err := s.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"rpcerror"}`))
			return err
		}},
		{name: "the slow call asks for input", slow: askThenHang},
		{name: "the slow call asks its host for input", slow: askThenHang, host: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slow := tt.slow
				if slow == nil {
					slow = answerNever
				}
				f := &rawServer{answer: func(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
					name, _ := jsonrpc.StringField(m.Params, "name")
					switch name {
					case "slow":
						slow(w, r, m)
					case "rpcerror":
						answerRPCError(w, r, m)
					default:
						writeResult(w, m.ID, `{"content":[]}`)
					}
				}}
				if tt.silent {
					f.discover = discoverOnce()
				}
				o := &upstream.SupervisedOptions{Options: memOptions(f), Breaker: upstream.BreakerOptions{Failures: 3, Cooldown: time.Minute}}
				o.Timeout = 10 * time.Second
				s, _ := startSupervised(t, o)
				defer s.Close()
				var wg sync.WaitGroup
				errs := make([]error, 5)
				for i := range errs {
					wg.Go(func() {
						ctx := context.Background()
						if tt.host {
							ctx = upstream.WithCallHandler(ctx, silentHost{})
						}
						_, errs[i] = s.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow"}`))
					})
				}
				if tt.meanwhile != nil {
					time.Sleep(time.Second)
					if err := tt.meanwhile(s); err != nil {
						t.Fatalf("the other call: %v", err)
					}
				}
				wg.Wait()
				for i, err := range errs {
					if !errors.Is(err, upstream.ErrTimeout) {
						t.Fatalf("slow call %d: %v, want ErrTimeout", i, err)
					}
				}
				synctest.Wait()
				got := s.State().Breaker
				if want := map[bool]upstream.BreakerState{true: upstream.BreakerOpen, false: upstream.BreakerClosed}[tt.wantOpen]; got != want {
					t.Fatalf("breaker %v after 5 timeouts, want %v", got, want)
				}
				if !tt.wantOpen {
					if _, err := s.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"fast"}`)); err != nil {
						t.Fatalf("a call after the timeouts: %v", err)
					}
				}
			})
		})
	}
}

// askThenHang sends an elicitation request on the call's response stream,
// then waits for the caller to go away: a server waiting for a host's
// input, not a dead one.
func askThenHang(w http.ResponseWriter, r *http.Request, m *jsonrpc.Message) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	req := jsonrpc.AppendRequest(nil, json.RawMessage(`"ask-`+strings.Trim(string(m.ID), `"`)+`"`), "elicitation/create", json.RawMessage(`{"message":"sure?","requestedSchema":{"type":"object"}}`))
	fmt.Fprintf(w, "event: message\ndata: %s\n\n", req)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

// silentHost is a host that never answers what a server asks it.
type silentHost struct{}

func (silentHost) Notify(*jsonrpc.Message) {}

func (silentHost) Request(ctx context.Context, req *jsonrpc.Message) *jsonrpc.Message {
	<-ctx.Done()
	return &jsonrpc.Message{Error: jsonrpc.NewError(jsonrpc.CodeInternalError, "no answer")}
}
