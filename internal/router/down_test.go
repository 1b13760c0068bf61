package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-gateway/mcp-gateway/internal/jsonrpc"
	"github.com/mcp-gateway/mcp-gateway/internal/upstream"
)

// TestSupervisedUpstreamStates plays a supervised client's states to the
// router: while the upstream restarts, has its breaker open, or has
// failed for good, its tools leave the list (hosts hear list_changed) and
// a call to one is answered at once, without reaching the upstream, with
// an isError result that says why and when it is retried; a new
// connection is listed again before its tools come back.
func TestSupervisedUpstreamStates(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("echo")}}
	other := &fakeUpstream{lists: map[string][]string{"tools/list": tools("echo")}}
	changed := make(chan string, 16)
	r := startRouter(t, Options{OnChange: func(c Change) { changed <- c.Method }}, map[string]*fakeUpstream{"up": up, "other": other}, "up", "other")
	drain := func() {
		for {
			select {
			case <-changed:
			default:
				return
			}
		}
	}
	drain()
	names := func() []string {
		return listNames(t, r.Dispatch(context.Background(), legacyCaller, request("tools/list", `{}`)), "tools")
	}
	callText := func(t *testing.T, name string) (string, bool) {
		t.Helper()
		reply := r.Dispatch(context.Background(), legacyCaller, request("tools/call", `{"name":"`+name+`"}`))
		if reply.Error != nil {
			t.Fatalf("%s: JSON-RPC error %v, want a tool result", name, reply.Error)
		}
		var res struct {
			Content []struct{ Text string }
			IsError bool
		}
		if err := json.Unmarshal(reply.Result, &res); err != nil || len(res.Content) == 0 {
			t.Fatalf("%s: result %s", name, reply.Result)
		}
		return res.Content[0].Text, res.IsError
	}
	expectChange := func(t *testing.T, what string) {
		t.Helper()
		select {
		case m := <-changed:
			if m != "notifications/tools/list_changed" {
				t.Errorf("%s: change %s", what, m)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no list_changed", what)
		}
	}
	callsBefore := len(up.recorded())
	retry := time.Now().Add(time.Minute)

	for _, tc := range []struct {
		name  string
		state upstream.State
		phase Phase
		says  []string
	}{
		{"restarting", upstream.State{Phase: upstream.Restarting, Err: errors.New("exit status 3"), RetryAt: retry},
			PhaseRestarting, []string{`"up" is restarting`, "retried at " + retry.UTC().Format(time.RFC3339)}},
		{"breaker open", upstream.State{Phase: upstream.Ready, Generation: 1, Breaker: upstream.BreakerOpen, RetryAt: retry},
			PhaseUnavailable, []string{`"up" is unavailable after repeated failures`, "retried at"}},
		{"failed", upstream.State{Phase: upstream.Failed, Err: errors.New("crash loop: 5 crashes")},
			PhaseFailed, []string{`"up" stopped after crashing repeatedly`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up.setState(tc.state)
			expectChange(t, "going down")
			if got := names(); slices.Contains(got, "up__echo") || !slices.Contains(got, "other__echo") {
				t.Errorf("tools while down: %v", got)
			}
			text, isError := callText(t, "up__echo")
			for _, want := range tc.says {
				if !isError || !strings.Contains(text, want) {
					t.Errorf("a call while down: %q (isError %v), want it to say %q", text, isError, want)
				}
			}
			if s := r.Status()[0]; s.State != tc.phase || s.Error == "" {
				t.Errorf("status %+v, want %s with its reason", s, tc.phase)
			}
			// Back: a new connection, with a tool more, is listed before
			// its tools return.
			up.mu.Lock()
			up.lists = map[string][]string{"tools/list": tools("echo", "added_"+strings.ReplaceAll(tc.name, " ", "_"))}
			up.mu.Unlock()
			u := r.upstreams()[0]
			u.mu.Lock()
			gen := u.listedGen
			u.mu.Unlock()
			if tc.phase != PhaseUnavailable {
				gen++ // a restart; a breaker closes on the same connection
			}
			up.setState(upstream.State{Phase: upstream.Ready, Generation: gen})
			expectChange(t, "coming back")
			got := names()
			if !slices.Contains(got, "up__echo") {
				t.Errorf("tools after coming back: %v", got)
			}
			if tc.phase != PhaseUnavailable && !slices.Contains(got, "up__added_"+strings.ReplaceAll(tc.name, " ", "_")) {
				t.Errorf("a new connection was not listed again: %v", got)
			}
			drain()
		})
	}
	if n := len(up.recorded()); n != callsBefore {
		t.Errorf("%d calls reached the upstream while it was down", n-callsBefore)
	}

	// A call the upstream client refuses for overload says so.
	up.answer = func(string, json.RawMessage) (*jsonrpc.Message, error) {
		return nil, fmt.Errorf("upstream %q: tools/call: %w", "up", upstream.ErrOverloaded)
	}
	if text, isError := callText(t, "up__echo"); !isError || !strings.Contains(text, `"up" is too busy`) {
		t.Errorf("an overloaded call: %q (isError %v)", text, isError)
	}

	// An answer over max_message_bytes says so, with the limit.
	up.answer = func(string, json.RawMessage) (*jsonrpc.Message, error) {
		return nil, fmt.Errorf("upstream %q: tools/call: %w", "up", &upstream.TooLargeError{Limit: 1234})
	}
	if text, isError := callText(t, "up__echo"); !isError || !strings.Contains(text, `server "up" exceeded its max_message_bytes limit (1234 bytes)`) {
		t.Errorf("an oversize answer: %q (isError %v)", text, isError)
	}
}

// TestStatusFollowsUpstreamState: the router keeps no phase of its own.
// Its view of an upstream follows the client's state alone (and its own
// listing of that connection): when the state changes, even without the
// callback that normally reports it, Status says so at once.
func TestStatusFollowsUpstreamState(t *testing.T) {
	up := &fakeUpstream{lists: map[string][]string{"tools/list": tools("echo")}}
	r := startRouter(t, Options{}, map[string]*fakeUpstream{"up": up}, "up")
	retry := time.Now().Add(time.Minute).Truncate(time.Second)
	for _, tt := range []struct {
		name     string
		state    upstream.State
		phase    Phase
		err      string
		retry    bool
		restarts uint64
	}{
		{"listed", upstream.State{Phase: upstream.Ready, Generation: 1}, PhaseReady, "", false, 0},
		{"breaker open", upstream.State{Phase: upstream.Ready, Generation: 1, Breaker: upstream.BreakerOpen, RetryAt: retry}, PhaseUnavailable, "circuit breaker open", true, 0},
		{"restarting", upstream.State{Phase: upstream.Restarting, Err: errors.New("exit status 2"), RetryAt: retry}, PhaseRestarting, "exit status 2", true, 0},
		{"a new connection, not listed yet", upstream.State{Phase: upstream.Ready, Generation: 3}, PhaseRestarting, "", false, 2},
		{"failed", upstream.State{Phase: upstream.Failed, Err: errors.New("crash loop")}, PhaseFailed, "crash loop", false, 0},
		{"stopped", upstream.State{Phase: upstream.Stopped}, PhaseStopped, "", false, 0},
		{"starting", upstream.State{Phase: upstream.Starting}, PhaseStarting, "", false, 0},
		{"listed again", upstream.State{Phase: upstream.Ready, Generation: 1}, PhaseReady, "", false, 0},
	} {
		up.mu.Lock()
		up.state = tt.state // no callback
		up.mu.Unlock()
		s := r.Status()[0]
		if s.State != tt.phase || !strings.Contains(s.Error, tt.err) || (s.RetryAt != nil) != tt.retry || s.Restarts != tt.restarts {
			t.Errorf("%s: status %+v, want %s, error %q, retry_at %v, %d restarts", tt.name, s, tt.phase, tt.err, tt.retry, tt.restarts)
		}
		if s.RetryAt != nil && !s.RetryAt.Equal(retry) {
			t.Errorf("%s: retry_at %v, want %v", tt.name, s.RetryAt, retry)
		}
	}
}

// startListing starts a router over one upstream with the tool, and
// returns once its first start returned and its listing (generation 1)
// waits at the fake's listGate.
func startListing(t *testing.T, tool string) (*fakeUpstream, *Router) {
	t.Helper()
	up := &fakeUpstream{capabilities: `{"tools":{}}`, lists: map[string][]string{"tools/list": tools(tool)},
		listGate: make(chan struct{}), listEntered: make(chan struct{}, 1)}
	r, err := New(&Options{ListWait: -1, Upstreams: []UpstreamConfig{{Name: "up", Connect: up.connect, Timeout: 5 * time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	r.Start(context.Background())
	t.Cleanup(func() { _ = r.Close() })
	<-up.listEntered
	return up, r
}

// TestFirstConnectionListedOnce: a supervised client reports its first
// connection Ready on its own goroutine, which may be after the first
// start returned and while it is being listed: it is listed once.
func TestFirstConnectionListedOnce(t *testing.T) {
	up, r := startListing(t, "echo")
	up.setState(upstream.State{Phase: upstream.Ready, Generation: 1}) // the late report
	close(up.listGate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait() // (nothing else runs on a router without per-client upstreams)
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.lists_ != 1 {
		t.Errorf("the first connection was listed %d times, want once", up.lists_)
	}
}

// TestStaleListingDiscarded: the lists of a connection that a newer one
// replaced while they were being fetched do not overwrite the newer
// connection's catalog; a listing that changes nothing leaves the
// upstream's since as it was.
func TestStaleListingDiscarded(t *testing.T) {
	up, r := startListing(t, "old")
	// Meanwhile generation 2 connected and was listed.
	u := r.upstreams()[0]
	up.mu.Lock()
	up.state = upstream.State{Phase: upstream.Ready, Generation: 2}
	up.mu.Unlock()
	u.mu.Lock()
	u.listedGen, u.listedAt, u.tools = 2, time.Now(), []json.RawMessage{json.RawMessage(tools("new")[0])}
	u.mu.Unlock()
	close(up.listGate)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitStarted(ctx); err != nil {
		t.Fatal(err)
	}
	r.rebuild()
	if got := listNames(t, r.Dispatch(ctx, legacyCaller, request("tools/list", `{}`)), "tools"); !slices.Equal(got, []string{"up__new"}) {
		t.Errorf("tools %v, want the newer connection's", got)
	}

	since := r.Status()[0].Since
	r.refresh(ctx, u)
	if s := r.Status()[0]; !s.Since.Equal(since) || s.State != PhaseReady {
		t.Errorf("a listing that changed nothing: %s since %v, want ready since %v", s.State, s.Since, since)
	}
}
